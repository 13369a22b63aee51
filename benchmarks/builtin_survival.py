"""Would a finished run's chain do better with a built-in the model rewrote? Side by side, paired.

    python -m benchmarks.builtin_survival --runs runs --run-id collect_diamond-20261127-151031-0e10 --episodes 50
    python -m benchmarks.builtin_survival ... --function collect_drink

A model that rewrites `stay_alive` (or another built-in every skill plays) changes the whole chain, and its
code tests judge the rewrite on the few seeds of a repair round. This reads the run's final state from its
checkpoint, takes the skills the executor would (`nodes.executor.chain_skills`), and plays the chain twice on
the same `--episodes` validation seeds (never the held-out ones): as the run kept it, and with every
top-level definition of `--function` the model wrote dropped, so that the built-in plays in its place (a
copy nested inside a learned skill's `play_` action stays). Prints both rates (Crafter scores for a score
plan) with their 95% intervals and, for a chain task, McNemar's exact test on the paired seeds. A run
whose skills define no such function (the expert's) plays once, as kept: the baseline on the same seeds.
"""
from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks.finished_runs import final_state
from envs.seeds import validation_seeds
from envs.tasks import TASKS
from graph.settings import SettingsError, load_run_settings
from nodes import executor
from nodes.skills.pool import definitions
from prompts.fewshot import BUILTIN_ACTIONS
from rl.stats import mcnemar_exact


def without(skills: Mapping[str, Any], function: str) -> tuple[dict[str, Any], int]:
    """The skills with every definition of `function` left out of their programs, and how many there were."""
    out, dropped = {}, 0
    for name, record in skills.items():
        sources = []
        for source in record.get("sources") or []:
            parts = definitions(source)
            dropped += function in parts
            sources.append("\n\n\n".join(text for key, text in parts.items() if key != function))
        out[name] = {**record, "sources": sources}
    return out, dropped


def _line(label: str, r: dict[str, Any], score: bool, worlds: list[int]) -> str:
    if score:
        low, high = r["crafter_score_ci95"]
        return f"{label}: Crafter score {r['crafter_score']:.1f} [{low:.1f}-{high:.1f}]"
    low, high = r["ci95"]
    return (f"{label}: {r['success_rate']:.0%} ({r['successes']}/{r['episodes']}) [{low:.0%}-{high:.0%}] over "
            f"validation seeds {worlds[0]}..{worlds[-1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("runs"), help="the runs folder holding checkpoints.sqlite")
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--function", default="stay_alive", choices=BUILTIN_ACTIONS,
                        help="the built-in to play in place of the model's rewrites")
    parser.add_argument("--episodes", type=int, default=50, help="validation seeds each version plays")
    args = parser.parse_args()
    if args.episodes < 1:
        raise SystemExit("--episodes must be 1 or more")
    state = final_state(args.runs, args.run_id)
    if state.get("task") not in TASKS or not state.get("plan"):
        raise SystemExit(f"run {args.run_id!r} has no plan to play (task {state.get('task')!r})")
    try:
        settings = load_run_settings(args.runs, args.run_id)
    except SettingsError as exc:
        raise SystemExit(str(exc)) from None
    kept = executor.chain_skills(state, settings.skill_threshold)
    builtin, dropped = without(kept, args.function)
    score = TASKS[state["task"]].is_score
    worlds = validation_seeds(args.episodes)
    versions = [(f"as kept (the model's {args.function})" if dropped else
                 f"as kept (no {args.function} of the run's own: the built-in plays)", kept)]
    if dropped:
        versions.append((f"the built-in {args.function} ({dropped} definition{'s' if dropped > 1 else ''} dropped)",
                         builtin))
    results = {}
    for label, skills in versions:
        try:
            r = executor.evaluate_chain(state["task"], state["plan"], skills, len(worlds), 0, record=False,
                                        max_steps=settings.eval_max_steps, worlds=worlds,
                                        target=settings.target_success)
        except ValueError as exc:  # a program that no longer loads without the dropped definition
            raise SystemExit(f"{label}: the chain could not run: {exc}") from None
        if not r.get("ran"):
            raise SystemExit(f"{label}: the chain did not run ({r.get('reason')})")
        results[label] = r
        print(_line(label, r, score, worlds))
    if dropped and not score:
        a, b = (r["outcomes"] for r in results.values())
        test = mcnemar_exact(b, a)
        print(f"paired: the built-in alone {test['only_a']}, the model's alone {test['only_b']}, both "
              f"{test['both']}, neither {test['neither']}; McNemar p = {test['p_value']:.3f}")


if __name__ == "__main__":
    main()
