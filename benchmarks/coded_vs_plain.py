"""Plain PPO against PPO with the example coded actions in its action head, same step budget.

For each task, both agents train for the same number of primitive environment steps (coded-action
steps included), then play held-out evaluation seeds. Prints the final training success rate, the
held-out success rate with its 95% Wilson interval, and how often each coded action was chosen.

    python -m benchmarks.coded_vs_plain [--tasks collect_wood place_table] [--budget 10000] [--episodes 20]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from rl.config import RLConfig
from rl.evaluate import evaluate_policy
from rl.training import train

EXAMPLES = Path(__file__).resolve().parents[1] / "prompts" / "examples"
CODED = ("collect_wood", "place_table", "explore")


def example_sources(names=CODED) -> list[str]:
    missing = [n for n in names if not (EXAMPLES / f"{n}.py").exists()]
    if missing:
        raise SystemExit(f"missing example coded actions in {EXAMPLES}: {', '.join(missing)}")
    return [(EXAMPLES / f"{n}.py").read_text() for n in names]


def run(task: str, coded: list[str], budget: int, episodes: int, max_steps: int, seed: int) -> dict:
    cfg = RLConfig(task=task, coded_actions=coded, max_episode_steps=max_steps)
    settings = cfg.ppo_settings(total_steps=budget, seed=seed, progress="none",
                                run_dir=tempfile.mkdtemp(prefix=f"cvp_{task}_"))
    result = train(settings, cfg)
    ev = evaluate_policy(result.policy_path, episodes=episodes)
    return {"train": result, "eval": ev}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", nargs="+", default=["collect_wood", "place_table"])
    p.add_argument("--budget", type=int, default=10_000, help="primitive steps per training run")
    p.add_argument("--episodes", type=int, default=20, help="held-out evaluation episodes per agent")
    p.add_argument("--max-episode-steps", type=int, default=300)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    coded = example_sources()
    print(f"budget {args.budget:,} primitive steps per run, episodes capped at {args.max_episode_steps} steps, "
          f"{args.episodes} held-out episodes each; coded actions: {', '.join(CODED)}\n")
    for task in args.tasks:
        for label, sources in (("plain PPO", []), ("PPO + coded", coded)):
            out = run(task, sources, args.budget, args.episodes, args.max_episode_steps, args.seed)
            tr, ev = out["train"], out["eval"]
            train_sr = "-" if tr.final_train_success_rate is None else f"{tr.final_train_success_rate:.2f}"
            calls = ", ".join(f"{k} {v}" for k, v in tr.coded_action_counts.items()) or "-"
            print(f"{task:13s} {label:12s} steps {tr.steps_used:6,d}  train success {train_sr:>4s}  "
                  f"held-out {ev.success_rate:.2f} [{ev.ci_low:.2f}, {ev.ci_high:.2f}] "
                  f"({ev.successes}/{ev.episodes})  {tr.wall_time_s:5.0f} s  calls: {calls}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
