"""Throughput on one symbolic Crafter setup: raw env steps/s, our PPO's training steps/s (sync, batched and
async vector envs), and stable-baselines3 PPO's training steps/s with the same env stack, network and settings.

Targets (issue 3): ours >= 0.7x raw and >= 1.5x stable-baselines3.

    python -m benchmarks.ppo_throughput [--task collect_diamond] [--steps 8192] [--num-envs 4] [--repeats 2]
                                        [--modes sync,batched,async]

The default task never succeeds by chance, so episodes run to their step limit and the figures measure
stepping and learning rather than world generation at resets.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import torch

from rl.config import RLConfig
from rl.env_factory import CrafterFactory
from rl.ppo import PPOSettings, train


def warm_up_imports() -> None:
    """Import what each trainer pulls in lazily (torch's compile stack via Adam, TensorBoard, SB3), so no
    measurement pays a one-time import that the next one gets for free."""
    import torch.utils.tensorboard  # noqa: F401

    torch.optim.Adam(torch.nn.Linear(2, 2).parameters())
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        pass


def raw_steps_per_s(factory, steps: int) -> float:
    env = factory()
    rng = np.random.default_rng(0)
    env.reset()
    n_actions = env.action_space.n
    start = time.perf_counter()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(int(rng.integers(n_actions)))
        if term or trunc:
            env.reset()
    return steps / (time.perf_counter() - start)


def ours_steps_per_s(cfg: RLConfig, steps: int, num_envs: int, mode: str) -> float:
    settings = cfg.ppo_settings(total_steps=steps, num_envs=num_envs, vector_mode=mode, progress="none",
                                run_dir=tempfile.mkdtemp(prefix="ppo_tp_"))
    result = train(settings, cfg)
    return result.steps_used / result.wall_time_s  # from the first reset to the last update


def _KeepOneThread():
    """Gives SB3 the same guard our trainer has: Crafter's world generation (numba/OpenMP) resets torch's
    thread count, which would slow SB3's updates for a reason unrelated to SB3 itself."""
    from stable_baselines3.common.callbacks import BaseCallback

    class KeepOneThread(BaseCallback):
        def _on_step(self) -> bool:
            if torch.get_num_threads() != 1:
                torch.set_num_threads(1)
            return True

    return KeepOneThread()


def sb3_steps_per_s(cfg: RLConfig, steps: int, num_envs: int) -> float | None:
    try:
        from stable_baselines3 import PPO
        from stable_baselines3.common.vec_env import DummyVecEnv
    except ImportError:
        print("stable-baselines3 is not installed (pip install -e '.[dev]'): skipping its figure")
        return None
    s = PPOSettings()
    payload = cfg.model_dump_json()
    venv = DummyVecEnv([CrafterFactory(payload, i, num_envs, s.seed, s.gamma) for i in range(num_envs)])
    model = PPO("MlpPolicy", venv, n_steps=s.num_steps, batch_size=s.num_steps * num_envs // s.num_minibatches,
                n_epochs=s.update_epochs, learning_rate=s.learning_rate, gamma=s.gamma, gae_lambda=s.gae_lambda,
                clip_range=s.clip_coef, ent_coef=s.ent_coef, vf_coef=s.vf_coef, max_grad_norm=s.max_grad_norm,
                device="cpu", seed=s.seed, verbose=0)
    start = time.perf_counter()
    model.learn(total_timesteps=steps, callback=_KeepOneThread())
    elapsed = time.perf_counter() - start
    venv.close()
    return model.num_timesteps / elapsed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", default="collect_diamond")
    p.add_argument("--steps", type=int, default=8192, help="training steps per PPO measurement")
    p.add_argument("--raw-steps", type=int, default=4000)
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--max-episode-steps", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=2, help="alternating rounds; each figure is its best round")
    p.add_argument("--modes", default="sync,batched,async", help="our vector modes to measure, comma-separated")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    cfg = RLConfig(task=args.task, max_episode_steps=args.max_episode_steps)
    factory = CrafterFactory(cfg.model_dump_json(), 0, 1, 0, 0.99)

    warm_up_imports()
    # the machine is shared: alternate the measurements and keep each one's best of --repeats
    raw, ours, sb3 = 0.0, dict.fromkeys(args.modes.split(","), 0.0), None
    for rep in range(args.repeats):
        figures = {"raw": raw_steps_per_s(factory, args.raw_steps)}
        for mode in ours:
            figures[mode] = ours_steps_per_s(cfg, args.steps, args.num_envs, mode)
            ours[mode] = max(ours[mode], figures[mode])
        sps = sb3_steps_per_s(cfg, args.steps, args.num_envs)
        raw, figures["sb3"] = max(raw, figures["raw"]), sps
        sb3 = sps if sb3 is None else max(sb3, sps or 0.0)
        print(f"  repeat {rep + 1}/{args.repeats}: "
              + ", ".join(f"{k} {v:.0f}" for k, v in figures.items() if v is not None), flush=True)
    print(f"raw env (1 env, random actions, this process): {raw:8.0f} steps/s")
    for mode, sps in ours.items():
        print(f"our PPO ({args.num_envs} envs, {mode:7s}):             {sps:8.0f} steps/s  ({sps / raw:.2f}x raw"
              + (f", {sps / sb3:.2f}x SB3)" if sb3 else ")"))
    best_mode = max(ours, key=ours.get)
    if sb3 is not None:
        print(f"stable-baselines3 PPO ({args.num_envs} envs, DummyVecEnv): {sb3:8.0f} steps/s")
    best = ours[best_mode]
    print(f"\nbest ours ({best_mode}): {best / raw:.2f}x raw (target >= 0.7)"
          + (f", {best / sb3:.2f}x stable-baselines3 (target >= 1.5)" if sb3 else ""))
    print(f"task {cfg.task}, symbolic obs, {args.steps} training steps per measurement, "
          f"{torch.get_num_threads()} torch thread(s), {os.cpu_count()} CPU(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
