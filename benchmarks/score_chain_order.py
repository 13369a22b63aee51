"""Does a score plan's chain do better with its weak skills played last? Side by side, one finished run.

    python -m benchmarks.score_chain_order --runs runs --run-id crafter_score-20261127-114336-d277 --episodes 50
    python -m benchmarks.score_chain_order ... --last eat_cow,defeat_zombie,wake_up,defeat_skeleton

Reads the run's final state from its checkpoint (RUNS/checkpoints.sqlite) and its settings, takes the skills
the executor would (`nodes.executor.chain_skills`), and plays the chain twice on the same `--episodes` validation
seeds (never the held-out ones): in the plan's order, and in the order held-out play uses
(`nodes.executor.score_play_order`: the skills that met the target in plan order, then the others, the
likeliest first, each after what it needs). With `--last A,B,...` it plays a third order: held-out play's
with those subtasks moved to its end, in that order (what a plan that lists them last would play; a subtask
that needs one of them would not come before it in such a plan). Prints each order and its Crafter score
with the 95% bootstrap interval and where its episodes ended most often, then the achievements whose rates
differ between the first two orders.
"""
from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from unittest import mock

from benchmarks.finished_runs import final_state
from envs.seeds import validation_seeds
from envs.tasks import TASKS
from graph.settings import SettingsError, load_run_settings
from nodes import executor

TOP_ENDINGS = 3  # the most frequent (skill, how) endings printed per order


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("runs"), help="the runs folder holding checkpoints.sqlite")
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--episodes", type=int, default=50, help="validation seeds each order plays")
    parser.add_argument("--last", default="", help="comma-separated subtasks to play last, in a third order")
    args = parser.parse_args()
    if args.episodes < 1:
        raise SystemExit("--episodes must be 1 or more")
    last = [name.strip() for name in args.last.split(",") if name.strip()]
    state = final_state(args.runs, args.run_id)
    if state.get("task") not in TASKS or not TASKS[state["task"]].is_score or not state.get("plan"):
        raise SystemExit(f"run {args.run_id!r} is not a score plan's run (task {state.get('task')!r}): only a score "
                         "plan's chain is reordered")
    try:
        settings = load_run_settings(args.runs, args.run_id)
    except SettingsError as exc:
        raise SystemExit(str(exc)) from None
    not_planned = [name for name in last if name not in {sub["name"] for sub in state["plan"]}]
    if not_planned:
        raise SystemExit(f"--last names subtasks not in the run's plan: {', '.join(not_planned)}")
    skills = executor.chain_skills(state, settings.skill_threshold)
    worlds = validation_seeds(args.episodes)
    results = {}
    held_out_order = executor.score_play_order

    def with_last(names, *rest):
        order = held_out_order(names, *rest)
        return [i for i in order if names[i] not in last] + sorted(
            (i for i in order if names[i] in last), key=lambda i: last.index(names[i]))

    orders = {"plan order": lambda names, *_: list(range(len(names))), "weak skills last": None}
    if last:
        orders[f"{', '.join(last)} last"] = with_last
    for label, order in orders.items():
        with contextlib.nullcontext() if order is None else mock.patch.object(executor, "score_play_order", order):
            r = executor.evaluate_chain(state["task"], state["plan"], skills, len(worlds), 0, record=False,
                                        max_steps=settings.eval_max_steps, worlds=worlds,
                                        target=settings.target_success)
        if not r.get("ran"):
            raise SystemExit(f"{label}: the chain did not run ({r.get('reason')})")
        results[label] = r
        low, high = r["crafter_score_ci95"]
        print(f"{label}: Crafter score {r['crafter_score']:.1f} [{low:.1f}-{high:.1f}] over {r['episodes']} "
              f"validation seeds {worlds[0]}..{worlds[-1]}")
        print("  order: " + ", ".join(step.split(":")[0] for step in r["chain"]))
        ended = sum(row["episodes"] for row in r["ended"])
        often = "; ".join(f"{row['subtask']} {row['how']} {row['episodes']}" for row in r["ended"][:TOP_ENDINGS])
        print(f"  {ended} episodes ended before the chain's last skill" + (f"; most often: {often}" if often else ""))
    before, after = (results[k]["achievement_rates"] for k in ("plan order", "weak skills last"))
    moved = [f"{a} {before[a]:.0f}% -> {after[a]:.0f}%" for a in sorted(before) if before[a] != after[a]]
    print("achievements that moved: " + ("; ".join(moved) if moved else "none"))


if __name__ == "__main__":
    main()
