"""What the sandbox costs a code test, new tree against an old checkout, side by side in one run.

    .venv/bin/python benchmarks/sandbox_overhead.py [--old PATH] [--repeats 5] [--gap 1.0]
                                                    [--ppo-steps 8192] [--ppo-modes sync,actors] [--ppo-rounds 2]

PATH is a checkout of an older commit (e.g. `git worktree add /tmp/rlgpt-old 8f2834f`, the commit
before the `sandbox` package). Each tree is measured in its own subprocesses (this interpreter, with
cwd and PYTHONPATH set to the tree), so the two sets of imports never mix; each subprocess prints its
numbers as JSON and this driver prints the table.

(a) start-up: `run_code` of a one-step coded action (`yield "noop"`, max_steps=1), from the call to
    its return. Cold: the first call in a fresh process (one fresh process per repeat). Warm: later
    calls in the same process, after a pause of --gap seconds (a model's turn between two code
    tests; the new sandbox starts a spare process ahead), and back to back (no pause).
(b) one 300-step code test of a simple walker (bounces off obstacles, hits adjacent zombies), and
    the cost per step: (its time - the warm start-up) / steps.
(c) steps/s of a loop of coded-action calls (50 steps each) of the same walker, loaded once:
    through `sandbox.AgentCode` (new tree) and in-process `envs.coded.execute` (both trees), with
    `env.step` alone as the ceiling. Only the calls are timed, not the resets between episodes; the
    three take turns (3 rounds of 1,000 steps each) so that a busy moment on the machine hits all alike.
    The sandbox's round trip per step is 1/(AgentCode rate) - 1/(in-process rate).

(d) PPO with the offline expert's coded actions for collect_diamond in its action head (4 envs, cleanrl
    defaults, --ppo-steps steps, symbolic obs), steps/s in each vector mode of --ppo-modes: the new tree
    serves every env's coded actions from a sandbox process; the old one ran them in-process. The trees
    take turns for --ppo-rounds rounds and each figure is its best round (the machine may be shared).

If the new tree's `tools.run_code` cannot run (it is being migrated), (a) and (b) measure instead
CrafterEnv(...) + reset + `AgentCode([src])` + one `execute`, and the table says so.
No timing here is asserted anywhere; the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NEW_ROOT = os.path.dirname(HERE)
MARK = "@@sandbox_overhead "
PPO_TASK = "collect_diamond"
TASK = "collect_wood"
NOOP = 'def main(game):\n    yield "noop"\n'
# Alternating move_left/move_right alone dies to zombies within ~150-250 steps on every seed tried;
# this walker keeps moving, so seed 1 lasts the 300 steps (in both trees).
WALK = '''def main(game):
    moves = ["move_left", "move_up", "move_right", "move_down"]
    k = 0
    while True:
        if (yield from game.defend()):
            continue
        before = game.pos
        yield moves[k % 4]
        if game.pos == before:
            k += 1
'''
WALK_STEPS = 300
CALL_STEPS = 50
LOOP_STEPS = 3000
ROUNDS = 3


# ---------------------------------------------------------------------------------------------
# worker: runs inside one tree
# ---------------------------------------------------------------------------------------------

class Tester:
    """One code test in this tree: `run_code`, or (new tree, run_code broken) AgentCode + CrafterEnv."""

    def __init__(self, tree: str, seed: int):
        self.seed = seed
        self.has_sandbox = os.path.isdir(os.path.join(tree, "sandbox"))
        self.mode = "run_code"
        self.problem = None
        start = time.perf_counter()
        try:
            from tools.run_code import run_code
            self._run_code = run_code
        except Exception as exc:  # noqa: BLE001 - a tree in the middle of a migration
            if not self.has_sandbox:
                raise
            self.problem = f"import tools.run_code failed: {type(exc).__name__}: {exc}"
            self._use_agent_code()
        self.import_s = time.perf_counter() - start

    def _use_agent_code(self) -> None:
        from envs.crafter_env import CrafterEnv  # noqa: F401 - imported before any timing
        from sandbox import AgentCode  # noqa: F401
        self.mode = "AgentCode"

    def test(self, code: str, max_steps: int, seed: int | None = None) -> tuple[float, int]:
        """(seconds from call to return, steps the code took)."""
        seed = self.seed if seed is None else seed
        if self.mode == "run_code":
            start = time.perf_counter()
            report = self._run_code(code, task=TASK, seed=seed, max_steps=max_steps)
            elapsed = time.perf_counter() - start
            if report.ok:
                return elapsed, report.steps
            self.problem = f"run_code returned an error: {getattr(report, 'error', report)}"
            if not self.has_sandbox:
                raise SystemExit(self.problem)
            self._use_agent_code()  # and measure this call again that way
        from envs.crafter_env import CrafterEnv
        from sandbox import AgentCode

        start = time.perf_counter()
        env = CrafterEnv(TASK, obs_kind="symbolic", max_steps=max_steps)
        env.reset(seed=seed)
        with AgentCode([code]) as agent:
            outcome = agent.execute(env, "main", max_steps=max_steps)
        elapsed = time.perf_counter() - start
        if outcome.error:
            raise SystemExit(f"AgentCode run failed: {outcome.error}")
        return elapsed, outcome.steps


def _trusted_action(source: str):
    """The walker as a trusted, in-process coded action (plain exec: this is our own source)."""
    from envs.coded import as_coded_action

    namespace: dict = {}
    exec(compile(source, "<benchmark>", "exec"), namespace)  # noqa: S102 - the benchmark's own code
    return as_coded_action(namespace["main"], source=source)


class _Loop:
    """Steps/s of one way of stepping, summed over rounds; only the calls are timed, not the resets."""

    def __init__(self, run_call, seed: int):
        from envs.crafter_env import CrafterEnv

        self.run_call, self.seed = run_call, seed
        self.env = CrafterEnv(TASK, obs_kind="symbolic")
        self.env.reset(seed=seed)
        self.steps, self.busy = 0, 0.0

    def run(self, steps: int) -> None:
        goal = self.steps + steps
        while self.steps < goal:
            start = time.perf_counter()
            done, taken = self.run_call(self.env)
            self.busy += time.perf_counter() - start
            self.steps += taken
            if done or taken == 0:
                self.seed += 1
                self.env.reset(seed=self.seed)

    @property
    def rate(self) -> float:
        return self.steps / self.busy


def _coded_call(execute_call):
    def run_call(env):
        outcome = execute_call(env)
        if outcome.error:
            raise SystemExit(f"call loop failed: {outcome.error}")
        return outcome.terminated or outcome.truncated, outcome.steps
    return run_call


def _env_step_call(env):
    cycle = [env.primitive_actions.index(a) for a in ("move_left", "move_up", "move_right", "move_down")]
    for i in range(CALL_STEPS):
        _, _, terminated, truncated, _ = env.step(cycle[i % 4])
        if terminated or truncated:
            return True, i + 1
    return False, CALL_STEPS


def _loops(seed: int, agent) -> dict[str, float]:
    """(c): the ways of stepping take turns, ROUNDS times, so that a busy moment hits them alike."""
    from envs.coded import execute

    action = _trusted_action(WALK)
    loops = {"inprocess_sps": _Loop(_coded_call(lambda env: execute(env, action, max_steps=CALL_STEPS)), seed),
             "env_sps": _Loop(_env_step_call, seed)}
    if agent is not None:
        loops["agentcode_sps"] = _Loop(_coded_call(lambda env: agent.execute(env, "main", max_steps=CALL_STEPS)), seed)
    for _ in range(ROUNDS):
        for loop in loops.values():
            loop.run(LOOP_STEPS // ROUNDS)
    return {key: loop.rate for key, loop in loops.items()}


def _sandbox_part(repeats: int, gap: float, seed: int) -> float:
    """The sandbox's share of a warm start-up: AgentCode([src]) + one execute + close, the env made first."""
    from envs.crafter_env import CrafterEnv
    from sandbox import AgentCode

    times = []
    for _ in range(repeats):
        env = CrafterEnv(TASK, obs_kind="symbolic", max_steps=1)
        env.reset(seed=seed)
        time.sleep(gap)
        start = time.perf_counter()
        with AgentCode([NOOP]) as agent:
            agent.execute(env, "main", max_steps=1)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def ppo_worker(mode: str, steps: int) -> dict:
    """Steps/s of one PPO training with the expert's coded actions in the head, in this tree."""
    import tempfile

    import torch

    from graph.evaluation.coded import coded_actions_for
    from rl.config import RLConfig

    try:
        from rl.training import train  # the new tree
    except ImportError:
        from rl.ppo import train  # type: ignore[attr-defined,no-redef]  # the old tree

    torch.set_num_threads(1)
    cfg = RLConfig(task=PPO_TASK, max_episode_steps=1000, coded_actions=list(coded_actions_for(PPO_TASK).values()))
    settings = cfg.ppo_settings(total_steps=steps, num_envs=4, vector_mode=mode, progress="none",
                                run_dir=tempfile.mkdtemp(prefix="sandbox_overhead_ppo_"))
    result = train(settings, cfg)
    return {"ppo_sps": result.steps_used / result.wall_time_s, "ppo_steps": result.steps_used,
            "coded_calls": sum(result.coded_action_counts.values())}


def _check_tree(tree: str) -> None:
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != os.path.realpath(HERE)]
    import envs

    here = os.path.realpath(os.path.dirname(envs.__file__))
    if not here.startswith(os.path.realpath(tree) + os.sep):
        raise SystemExit(f"imports came from {here}, not from {tree}")


def worker(part: str, tree: str, repeats: int, gap: float, seed: int) -> dict:
    _check_tree(tree)
    tester = Tester(tree, seed)
    result: dict = {"import_s": tester.import_s}
    cold, _ = tester.test(NOOP, 1)
    result["cold_s"] = cold
    if part == "full":
        warm, back_to_back, walks = [], [], []
        for _ in range(repeats):
            time.sleep(gap)
            warm.append(tester.test(NOOP, 1)[0])
        for _ in range(repeats):
            back_to_back.append(tester.test(NOOP, 1)[0])
        for _ in range(min(3, repeats)):
            time.sleep(gap)
            walks.append(tester.test(WALK, WALK_STEPS, seed=seed))
        result.update(warm_s=statistics.median(warm), warm_runs=warm, back_to_back_s=statistics.median(back_to_back),
                      walk_s=statistics.median(w[0] for w in walks), walk_steps=walks[0][1])
        if tester.has_sandbox:
            result["sandbox_warm_s"] = _sandbox_part(repeats, gap, seed)

        from envs.crafter_env import CrafterEnv

        CrafterEnv(TASK, obs_kind="symbolic", max_steps=WALK_STEPS).reset(seed=seed)  # first one: lazy set-up
        start = time.perf_counter()
        CrafterEnv(TASK, obs_kind="symbolic", max_steps=WALK_STEPS).reset(seed=seed)
        result["env_make_s"] = time.perf_counter() - start
        if tester.has_sandbox:
            from sandbox import AgentCode

            with AgentCode([WALK]) as agent:
                result.update(_loops(seed, agent))
                result["layers"] = {k: (v is True) for k, v in agent.layers.items()}
        else:
            result.update(_loops(seed, None))
    result.update(mode=tester.mode, problem=tester.problem)
    return result


# ---------------------------------------------------------------------------------------------
# driver
# ---------------------------------------------------------------------------------------------

def _run_worker(part: str, tree: str, args, extra: tuple[str, ...] = ()) -> dict:
    env = dict(os.environ, PYTHONPATH=tree)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", part, "--tree", tree,
           "--repeats", str(args.repeats), "--gap", str(args.gap), "--seed", str(args.seed),
           "--ppo-steps", str(args.ppo_steps), *extra]
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"the worker for {tree} ({part}) failed (exit {proc.returncode}):\n"
                         f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len(MARK):])


def measure(trees: dict[str, str], args) -> dict[str, dict]:
    """One full worker per tree, then the extra cold starts with the trees taking turns."""
    results = {}
    for name, tree in trees.items():
        print(f"measuring {name} tree ({tree}) ...", flush=True)
        results[name] = _run_worker("full", tree, args)
        results[name]["cold_runs"] = [results[name]["cold_s"]]
    print(f"cold starts ({args.repeats - 1} more per tree) ...", flush=True)
    for _ in range(args.repeats - 1):
        for name, tree in trees.items():
            results[name]["cold_runs"].append(_run_worker("cold", tree, args)["cold_s"])
    for result in results.values():
        result["cold_s"] = statistics.median(result["cold_runs"])
    modes = [m for m in args.ppo_modes.split(",") if m] if args.ppo_steps else []
    for round_ in range(args.ppo_rounds if modes else 0):
        for mode in modes:
            for name, tree in trees.items():
                print(f"PPO with coded actions, {mode}, {name} tree, round {round_ + 1} ...", flush=True)
                out = _run_worker("ppo", tree, args, ("--ppo-mode", mode))
                runs = results[name].setdefault(f"ppo_{mode}_runs", [])
                runs.append(out["ppo_sps"])
                results[name][f"ppo_{mode}_sps"] = max(runs)
                results[name][f"ppo_{mode}_calls"] = out["coded_calls"]
    return results


def _fmt(value, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "ms":
        return f"{value * 1000:.1f}"
    if kind == "sps":
        return f"{value:,.0f}"
    return str(value)


def report(results: dict[str, dict], args) -> None:
    names = list(results)
    rows = [
        ("(a) start-up, cold: 1st call in a fresh process", "ms", "cold_s"),
        (f"(a) start-up, warm: after a {args.gap:g} s pause", "ms", "warm_s"),
        ("(a) start-up, warm: back to back", "ms", "back_to_back_s"),
        ("(a) warm, sandbox part: AgentCode+execute+close", "ms", "sandbox_warm_s"),
        (f"(b) {WALK_STEPS}-step code test (walker, seed {args.seed})", "ms", "walk_s"),
        ("(b) steps it took", "", "walk_steps"),
        ("(b) per step: (test - warm start-up) / steps", "ms", "per_step_s"),
        (f"(c) AgentCode call loop ({CALL_STEPS}-step calls)", "steps/s", "agentcode_sps"),
        ("(c) in-process envs.coded.execute", "steps/s", "inprocess_sps"),
        ("(c) round trip per step: 1/AgentCode - 1/in-process", "ms", "round_trip_s"),
        *[(f"(d) PPO + coded actions, {m}, best of {args.ppo_rounds}", "steps/s", f"ppo_{m}_sps")
          for m in (args.ppo_modes.split(",") if args.ppo_steps else [])],
        *[(f"(d) coded calls in the {m} training", "", f"ppo_{m}_calls")
          for m in (args.ppo_modes.split(",") if args.ppo_steps else [])],
        ("(ref) env.step alone", "steps/s", "env_sps"),
        ("(ref) CrafterEnv(...) + reset", "ms", "env_make_s"),
        ("(ref) parent's import of tools.run_code", "ms", "import_s"),
    ]
    for r in results.values():
        steps = r.get("walk_steps") or 0
        r["per_step_s"] = (r["walk_s"] - r["warm_s"]) / steps if steps else None
        if r.get("agentcode_sps"):
            r["round_trip_s"] = 1 / r["agentcode_sps"] - 1 / r["inprocess_sps"]
    label_w = max(len(label) for label, _, _ in rows) + 2
    print(f"\n{'':{label_w}}{'unit':>8}" + "".join(f"{n:>12}" for n in names))
    for label, unit, key in rows:
        cells = []
        for n in names:
            value = results[n].get(key)
            if key in ("agentcode_sps", "round_trip_s") and n == "old":
                value = None
            cells.append(_fmt(value, "ms" if unit == "ms" else ("sps" if unit == "steps/s" else "")))
        print(f"{label:{label_w}}{unit:>8}" + "".join(f"{c:>12}" for c in cells))
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"repeats {args.repeats}; cold runs (ms): "
          + "; ".join(f"{n} " + ", ".join(f"{c * 1000:.0f}" for c in r["cold_runs"]) for n, r in results.items())
          + "; warm runs (ms): "
          + "; ".join(f"{n} " + ", ".join(f"{c * 1000:.0f}" for c in r["warm_runs"]) for n, r in results.items()))
    new = results["new"]
    if new.get("layers"):
        on = [k for k, v in new["layers"].items() if v]
        off = [k for k, v in new["layers"].items() if not v]
        print(f"new sandbox layers on: {', '.join(on) or 'none'}" + (f"; missing: {', '.join(off)}" if off else ""))
    for n, r in results.items():
        if r.get("mode") != "run_code":
            print(f"NOTE: {n}: (a) and (b) measured with CrafterEnv + reset + AgentCode([src]) + one execute, "
                  f"not run_code ({r.get('problem')})")
    old = results.get("old")
    old_text = f"{old['warm_s'] * 1000:.0f} ms" if old else "n/a (no --old)"
    print(f"code-test start-up: new warm {new['warm_s'] * 1000:.0f} ms, new cold {new['cold_s'] * 1000:.0f} ms, "
          f"old {old_text} (target <= 150 ms)")
    if old and args.ppo_steps:
        ratios = ", ".join(f"{m} {new[f'ppo_{m}_sps'] / old[f'ppo_{m}_sps']:.2f}x" for m in args.ppo_modes.split(","))
        print(f"PPO with coded actions, new / old steps/s: {ratios} (target >= 0.7x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", default=None, help="a checkout of the old commit (e.g. /tmp/rlgpt-old)")
    parser.add_argument("--repeats", type=int, default=5, help="samples per median (default 5)")
    parser.add_argument("--gap", type=float, default=1.0, help="pause before each warm call, seconds")
    parser.add_argument("--seed", type=int, default=1, help="world seed of the code tests")
    parser.add_argument("--ppo-steps", type=int, default=8192, help="steps of each PPO training in (d); 0 skips (d)")
    parser.add_argument("--ppo-modes", default="sync,actors", help="vector modes measured in (d)")
    parser.add_argument("--ppo-rounds", type=int, default=2, help="rounds of (d); each figure is its best")
    parser.add_argument("--worker", choices=("full", "cold", "ppo"), help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)
    parser.add_argument("--ppo-mode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.worker == "ppo":
        _check_tree(os.path.abspath(args.tree))
        print(MARK + json.dumps(ppo_worker(args.ppo_mode, args.ppo_steps)), flush=True)
        return
    if args.worker:
        result = worker(args.worker, os.path.abspath(args.tree), args.repeats, args.gap, args.seed)
        print(MARK + json.dumps(result), flush=True)
        return
    trees = {"new": NEW_ROOT}
    if args.old:
        old = os.path.abspath(args.old)
        if not os.path.isdir(os.path.join(old, "envs")):
            parser.error(f"--old {old}: not a checkout of this project")
        trees["old"] = old
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    results = measure(trees, args)
    report(results, args)
    print(f"(benchmark took {time.perf_counter() - started:.0f} s; 1-min load average {load_before:.2f} "
          f"before, {os.getloadavg()[0]:.2f} after)")


if __name__ == "__main__":
    main()
