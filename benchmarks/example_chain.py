"""How often the hand-written example code gets a wood pickaxe, run through `run_code_in_env`.

    python benchmarks/example_chain.py [--seeds 10]

Each seed is a fresh sandboxed episode of the `make_wood_pickaxe` task running the example chain
(collect wood, place a table, make a wood pickaxe, exploring when nothing useful is known).
"""

from __future__ import annotations

import argparse
import time

from envs.seeds import train_seeds
from prompts.fewshot import combined_source
from tools.run_code import run_code

CHAIN = ["collect_wood", "place_table", "make_wood_pickaxe", "explore", "obtain_wood_pickaxe"]
NEEDED = ("collect_wood", "place_table", "make_wood_pickaxe")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--max-steps", type=int, default=1500)
    args = parser.parse_args()
    source = combined_source(CHAIN)
    wins, steps, start = 0, 0, time.perf_counter()
    print(f"{'seed':>5} {'ok':>4} {'steps':>6}  achievements")
    for seed in train_seeds(args.seeds):
        report = run_code(source, task="make_wood_pickaxe", seed=seed, max_steps=args.max_steps,
                          action="obtain_wood_pickaxe")
        won = all(a in report.achievements_unlocked for a in NEEDED)
        wins += won
        steps += report.steps
        print(f"{seed:>5} {'yes' if won else 'no':>4} {report.steps:>6}  "
              f"{', '.join(report.achievements_unlocked) or report.error}")
    print(f"wood + table + wood pickaxe on {wins}/{args.seeds} seeds; {steps} environment steps in all; "
          f"{time.perf_counter() - start:.1f} s wall")


if __name__ == "__main__":
    main()
