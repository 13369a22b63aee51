"""Environment steps per second on one core: symbolic vs pixel observations, with and without resets.

    python benchmarks/env_throughput.py [--steps 5000]

"with resets" runs short episodes (100 steps), so world generation is part of the cost;
"without resets" steps one long episode. Both kinds are measured side by side in one run.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from envs.crafter_env import CrafterEnv


def measure(obs_kind: str, steps: int, episode_len: int | None) -> float:
    env = CrafterEnv("collect_diamond", obs_kind=obs_kind, reward="crafter",
                     max_steps=episode_len or 10_000)
    rng = np.random.default_rng(0)
    actions = rng.integers(0, env.action_space.n, size=steps)
    env.reset(seed=0)
    seed = 0
    start = time.perf_counter()
    for a in actions:
        _, _, terminated, truncated, _ = env.step(int(a))
        if terminated or truncated:
            seed += 1
            env.reset(seed=seed)
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=5000, help="steps per measurement")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core, as the issue asks
    rows = []
    for label, episode_len in (("without resets", None), ("with resets (100-step episodes)", 100)):
        sym = measure("symbolic", args.steps, episode_len)
        pix = measure("pixels", args.steps, episode_len)
        rows.append((label, sym, pix))
    print(f"{'setting':<34}{'symbolic steps/s':>18}{'pixels steps/s':>16}{'ratio':>8}")
    for label, sym, pix in rows:
        print(f"{label:<34}{sym:>18.0f}{pix:>16.0f}{sym / pix:>7.2f}x")


if __name__ == "__main__":
    main()
