"""Finished runs' final chains on more held-out seeds, side by side and paired.

    python -m benchmarks.held_out --episodes 200 runs/collect_diamond-20261128-180938-89d6 OTHER_RUN_FOLDER ...

A run's own held-out evaluation plays `--eval-episodes` seeds (50 by default); two runs 10 points apart on 50
seeds are often within chance. This plays each finished run's chain again, as its executor would
(`nodes.executor.chain_skills`), on the first `--episodes` held-out seeds (its own evaluation's seeds come
first), and prints each run's rate with its 95% interval and where its episodes stopped (a score plan: its
Crafter score). Every run after the first is set against the first on the same seeds (McNemar's exact test; a
score: the paired bootstrap interval of the difference), so put the baseline (e.g. the offline expert's run)
first. Nothing here feeds back into a run: it measures finished ones, the way `graph.run
--eval-episodes N` would have at the end. A run folder is RUNS/RUN_ID; its checkpoint is RUNS/checkpoints.sqlite.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.finished_runs import final_state
from envs.score import bootstrap_score_difference
from envs.seeds import eval_seeds
from envs.tasks import TASKS
from graph.settings import SettingsError, load_run_settings
from nodes import executor
from rl.stats import mcnemar_exact


def play(run: Path, episodes: int) -> tuple[str, dict[str, Any]]:
    """The run's task and its chain's result on the first `episodes` held-out seeds; a clear exit otherwise."""
    state = final_state(run.parent, run.name)
    task = state.get("task")
    if task not in TASKS or not state.get("plan"):
        raise SystemExit(f"{run}: no plan to play (task {task!r})")
    try:
        settings = load_run_settings(run.parent, run.name)
    except SettingsError as exc:
        raise SystemExit(str(exc)) from None
    skills = executor.chain_skills(state, settings.skill_threshold)
    result = executor.evaluate_chain(task, state["plan"], skills, episodes, 0, record=False,
                                     max_steps=settings.eval_max_steps, worlds=eval_seeds(episodes),
                                     target=settings.target_success)
    if not result.get("ran"):
        raise SystemExit(f"{run}: the chain did not run ({result.get('reason')})")
    return task, result


def describe(run: Path, result: dict[str, Any]) -> str:
    if "crafter_score" in result:
        low, high = result["crafter_score_ci95"]
        return f"{run.name}: Crafter score {result['crafter_score']:.1f} [{low:.1f}-{high:.1f}]"
    low, high = result["ci95"]
    reached = ", ".join(f"{name} {n}" for name, n in (result.get("reached") or {}).items())
    return (f"{run.name}: {result['success_rate']:.1%} ({result['successes']}/{result['episodes']}) "
            f"[{low:.0%}-{high:.0%}]\n  reached: {reached}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (RUNS/RUN_ID), the baseline first")
    parser.add_argument("--episodes", type=int, default=200, help="held-out seeds each run plays (default 200)")
    parser.add_argument("--json", type=Path, help="also write each run's outcomes per seed, reach and endings here")
    args = parser.parse_args()
    if args.episodes < 1:
        raise SystemExit("--episodes must be 1 or more")
    tasks: set[str] = set()
    results: list[dict[str, Any]] = []
    for run in args.runs:
        task, result = play(run, args.episodes)
        tasks.add(task)
        if len(tasks) > 1:
            raise SystemExit(f"{run}: task {task!r}; the runs before it played {sorted(tasks - {task})}")
        results.append(result)
        if args.json:
            keep = ("success_rate", "successes", "episodes", "ci95", "outcomes", "reached", "endings", "crafter_score",
                    "crafter_score_ci95", "achievements")
            dump = {str(r): {k: res.get(k) for k in keep} for r, res in zip(args.runs, results)}
            args.json.write_text(json.dumps(dump, indent=1))
        print(describe(run, result), flush=True)
        if len(results) > 1 and "crafter_score" in result:
            diff, low, high = bootstrap_score_difference(result["achievements"], results[0]["achievements"])
            print(f"  against {args.runs[0].name}: {diff:+.1f} [{low:+.1f}, {high:+.1f}] (paired bootstrap)",
                  flush=True)
        elif len(results) > 1:
            test = mcnemar_exact(results[0]["outcomes"], result["outcomes"])
            print(f"  against {args.runs[0].name}: only it {test['only_b']}, only the baseline {test['only_a']}, "
                  f"both {test['both']}, neither {test['neither']}; McNemar p = {test['p_value']:.3f}", flush=True)


if __name__ == "__main__":
    main()
