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
import sqlite3
from pathlib import Path
from typing import Any

from benchmarks.finished_runs import final_state
from envs.score import bootstrap_score_difference
from envs.seeds import eval_seeds
from envs.tasks import TASKS
from graph.settings import SettingsError, load_run_settings
from nodes import executor
from rl.stats import mcnemar_exact


def load(run: Path) -> tuple[dict[str, Any], Any]:
    """A finished run's final state and settings; a clear exit when the folder holds no finished run."""
    try:
        state = final_state(run.parent, run.name)
        settings = load_run_settings(run.parent, run.name)
    except SettingsError as exc:
        raise SystemExit(str(exc)) from None
    except sqlite3.DatabaseError as exc:
        raise SystemExit(f"{run}: its checkpoint {run.parent / 'checkpoints.sqlite'} cannot be read ({exc})") from None
    task = state.get("task")
    if task not in TASKS:
        raise SystemExit(f"{run}: the run's task {task!r} is not one this project knows")
    if not state.get("plan"):
        raise SystemExit(f"{run}: the run has no plan to play")
    if state.get("report") is None:
        raise SystemExit(f"{run}: the run has not finished (resume it first: python -m graph.run --resume "
                         f"{run.name} --out {run.parent})")
    return state, settings


def play(run: Path, state: dict[str, Any], settings: Any, episodes: int) -> dict[str, Any]:
    """The run's chain on the first `episodes` held-out seeds, played as its executor plays it (its seed, step
    limit and target); a clear exit where it cannot be played."""
    skills = executor.chain_skills(state, settings.skill_threshold)
    try:
        result = executor.evaluate_chain(state["task"], state["plan"], skills, episodes, settings.seed,
                                         record=False, max_steps=settings.eval_max_steps,
                                         worlds=eval_seeds(episodes), target=settings.target_success)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:  # a skill whose files moved or do not load
        raise SystemExit(f"{run}: the chain could not be played: {exc}") from None
    if not result.get("ran"):
        raise SystemExit(f"{run}: the chain did not run ({result.get('reason')})")
    return result


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
    if len(set(args.runs)) < len(args.runs):
        raise SystemExit("a run is given twice: give each run folder once")
    loaded = [load(run) for run in args.runs]  # every run checked before any is played
    tasks = {state["task"] for state, _ in loaded}
    if len(tasks) > 1:
        raise SystemExit(f"the runs are of different tasks ({', '.join(sorted(tasks))}): they are compared on "
                         "one task's seeds")
    limits = {settings.eval_max_steps for _, settings in loaded}
    if len(limits) > 1:
        print(f"note: the runs' episode limits differ ({', '.join(map(str, sorted(limits, key=str)))}); "
              "each plays with its own", flush=True)
    results: list[dict[str, Any]] = []
    for run, (state, settings) in zip(args.runs, loaded, strict=True):
        result = play(run, state, settings, args.episodes)
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
