"""Does a training learn more when its episodes start where the chain stands? Side by side, one run.

    python -m benchmarks.chain_starts --task collect_iron --train-steps 20000 --episodes 100

The graph runs the task with the offline rule-based expert. Its critic moves `--task` itself to RL after its
first code test (the code stays in the policy's action head, as after a move on the numbers).
Three arms, the same code tests for the earlier subtasks in each (a graph run replays the same):
- `fresh`: the training's episodes start in fresh worlds, with `reach_<task>` (the chain so far, one coded
  action) in the head, as before;
- `chain`: they start from the moments saved where the earlier subtasks' code tests succeeded
  (nodes.starts);
- `code`: no training; the expert's code for the task.
Each arm's chain (its last policy in place of the task's skill) is then played on the same `--episodes`
validation seeds (never the held-out ones), and the arms are compared pair by pair (McNemar's exact test).
Prints per arm: env steps spent, each training's steps and own rate, and the chain's success with its 95%
Wilson interval.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

from envs.seeds import validation_seeds
from envs.tasks import get_task
from graph.builder import build_graph, run_config, run_context, start_state
from graph.evaluation.heldout import policy_skill
from nodes.attempt.results import judged_rate
from nodes.executor import evaluate_chain
from nodes.models.expert import ExpertModel
from nodes.schemas import Critique
from nodes.settings import RunSettings
from rl.stats import mcnemar_exact, wilson_interval


class LearnsTheTask(ExpertModel):
    """The expert, except that its critic moves the task's own subtask to RL after its first code test,
    whatever it measured: the code then stays in the policy's head, as after a move on the numbers."""

    def __init__(self, task: str) -> None:
        super().__init__()
        self.task = task
        self.moved = False

    def _critique(self, c):
        if c["subtask"] == self.task and c["sub_action"]["kind"] == "code" and not self.moved:
            self.moved = True
            return Critique(sub_action=c["sub_action"]["name"], verdict="move", move_to="rl",
                            success_rate=judged_rate(c["result"]), feedback="benchmark: learn it")
        return super()._critique(c)


def run_arm(arm: str, task: str, train_steps: int, out: Path) -> dict[str, Any]:
    settings = RunSettings(task=task, budget_steps=10 * train_steps + 200_000, train_steps=train_steps, test_episodes=8,
                           eval_episodes=1, max_outer_iters=2, max_inner_iters=1, out_dir=out, run_id=arm,
                           skills_dir=out / arm / "skills")  # each arm earns its own skills: none is reused
    model = ExpertModel() if arm == "code" else LearnsTheTask(task)
    started = time.time()
    if arm == "fresh":  # no saved moment is ever offered: episodes start in fresh worlds, reach_<task> in the head
        with mock.patch("nodes.fast.chain_starts", lambda state, subtask: []):
            final = build_graph().invoke(start_state(settings), config=run_config(settings),
                                         context=run_context(settings, model))
    else:
        final = build_graph().invoke(start_state(settings), config=run_config(settings),
                                     context=run_context(settings, model))
    trainings = [r for r in final["results"] if r["kind"] == "rl" and r["subtask"] == task]
    return {"final": final, "trainings": trainings, "wall_s": time.time() - started}


def chain_outcomes(final: dict, task: str, training: dict | None, worlds: list[int]) -> dict[str, Any]:
    """The run's chain on `worlds`: its skills for the subtasks before `task`, then the trained policy (an RL
    arm) or its kept skill (the code arm)."""
    skills = dict(final["skills"])
    if training is not None:
        if not training.get("policy_path"):
            raise RuntimeError(f"the training of {task} saved no policy: {training.get('errors')}")
        skills[task] = policy_skill(training["policy_path"])
    return evaluate_chain(final["task"], final["plan"], skills, len(worlds), 0, record=False, worlds=worlds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="collect_iron", help="the subtask to learn (a tech-tree task)")
    parser.add_argument("--train-steps", type=int, default=20_000)
    parser.add_argument("--episodes", type=int, default=100, help="validation seeds each arm's chain plays")
    parser.add_argument("--arms", default="fresh,chain,code")
    parser.add_argument("--decision-steps", default=None,
                        help="the trainings' decision_steps ('none': every call runs until it returns; default: the "
                             "graph's, nodes.fast.GRAPH_DECISION_STEPS)")
    parser.add_argument("--out", default=None, help="run folder (default: a temporary one)")
    args = parser.parse_args()
    task = get_task(args.task).name
    if args.decision_steps is not None:
        import nodes.fast

        nodes.fast.GRAPH_DECISION_STEPS = None if args.decision_steps == "none" else int(args.decision_steps)
    out = Path(args.out or tempfile.mkdtemp(prefix="chain_starts_"))
    worlds = validation_seeds(args.episodes)
    rows: dict[str, dict[str, Any]] = {}
    for arm in args.arms.split(","):
        print(f"[{arm}] graph run of {task} ...", flush=True)
        run = run_arm(arm, task, args.train_steps, out)
        trainings = run["trainings"]
        held = chain_outcomes(run["final"], task, trainings[-1] if trainings else None, worlds)  # the last policy
        rows[arm] = {"steps": run["final"]["env_steps_spent"], "successes": held["successes"],
                     "outcomes": held["outcomes"]}
        low, high = wilson_interval(held["successes"], len(worlds))
        trained = "; ".join(f"{t['steps']:,} steps: {t['success_rate']:.0%} ({t['rate_source']}"
                            + (f", {t['stopped_early']}" if t.get("stopped_early") else "") + ")" for t in trainings)
        print(f"[{arm}] env steps {rows[arm]['steps']:,}; trainings: {trained or 'none'}; the chain on "
              f"{len(worlds)} validation seeds: {held['successes']}/{len(worlds)} = "
              f"{held['successes'] / len(worlds):.1%} [{low:.1%}-{high:.1%}]; {run['wall_s']:.0f} s", flush=True)
    names = list(rows)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            test = mcnemar_exact(rows[a]["outcomes"], rows[b]["outcomes"])
            print(f"{a} vs {b}: only {a} {test['only_a']}, only {b} {test['only_b']}, p = {test['p_value']:.3f}")
    print(f"run folders under {out}")


if __name__ == "__main__":
    main()
