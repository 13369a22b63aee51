"""Correctness check of rl.ppo against cleanrl's published CartPole-v1 result.

cleanrl's ppo.py with its defaults (lr 2.5e-4 annealed, 4 envs x 128 steps, gamma .99, lambda .95,
4 minibatches x 4 epochs, clip .2, ent .01, vf .5, grad norm .5) reaches an episodic return of about
490 after 500k steps. Our PPO with the same settings must reach a mean of at least 475.

    python -m benchmarks.cartpole_check [--total-steps 500000] [--seed 1] [--device auto]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time

from rl.ppo import PPOSettings
from rl.training import train

TARGET = 475.0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--total-steps", type=int, default=500_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="auto", help="auto (the GPU when there is one), cpu or cuda")
    args = p.parse_args(argv)
    settings = PPOSettings(seed=args.seed, total_steps=args.total_steps, window=100, progress="log", log_every=100,
                           run_dir=tempfile.mkdtemp(prefix="cartpole_check_"), device=args.device)
    start = time.time()
    result = train(settings, "CartPole-v1")
    final = result.final_mean_return
    best = max(r["mean_return"] for r in result.curve if r["mean_return"] == r["mean_return"])
    print(f"CartPole-v1, cleanrl default settings, device {args.device}, {result.steps_used:,} steps in "
          f"{time.time() - start:.0f} s ({result.steps_used / result.wall_time_s:.0f} steps/s)")
    print(f"mean episodic return, last 100 episodes: {final:.1f}  (best moving mean {best:.1f}; "
          f"target >= {TARGET:.0f}, cleanrl ~490)")
    print(f"run folder: {result.run_dir}")
    ok = final is not None and final >= TARGET
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
