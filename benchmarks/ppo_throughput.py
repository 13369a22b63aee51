"""Throughput on one symbolic Crafter setup: raw env steps/s, our PPO's training steps/s (sync, batched and
async vector envs, and actor workers), and stable-baselines3 PPO's training steps/s with the same env stack,
network and settings.

Targets (issue 14, on 2 cores): our best mode >= 0.8x the raw single env and >= 2x the best stable-baselines3.

    python -m benchmarks.ppo_throughput [--task collect_diamond] [--steps 32768] [--num-envs 4] [--repeats 2]
                                        [--modes sync,batched,async,actors] [--sb3-vec dummy,subproc] [--device cpu]
                                        [--coded]

With --coded, our PPO is also measured with the offline expert's coded actions for the task in its action
head (each env's code served by a sandbox process, sandbox.AgentCode), printed beside the plain figures.
Its steps count every primitive step the coded calls take.

Two raw figures are printed: one env stepped in this process (the env's own speed), and the same vector
env our PPO uses, stepped with random actions (what PPO could reach with zero learning cost). On a
machine with many cores the second is the fair reference for a multi-process mode. SB3 runs with the
vec env of the same kind: DummyVecEnv beside our sync mode, SubprocVecEnv beside the multi-process ones.

The default task never succeeds by chance, so episodes run to their step limit (or the player's death)
and the figures measure stepping and learning rather than success resets.

The default budget, 32,768 steps (64 updates), measures the steady rate a long training runs at. Each
training also pays once for its start: a worker's first reset loads world generation's compiled code
(~0.3 s). At 8,192 steps (16 updates, about 2 s) that one-time cost is over a tenth of the run, and
repeats of the same command differed by up to a third here; pass --steps 8192 to see it.
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
from rl.env_factory import CrafterFactory, EnvSource
from rl.ppo import PPOSettings
from rl.training import train
from rl.vector import BatchedVectorEnv, default_context, random_steps
from rl.vector_modes import make_vector_env

SB3_KIND = {"sync": "dummy", "batched": "subproc", "async": "subproc", "actors": "subproc"}


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


def raw_vector_steps_per_s(cfg: RLConfig, steps: int, num_envs: int, mode: str) -> float:
    """The vector env our PPO builds for ``mode``, stepped with random actions: PPO's ceiling. For 'actors',
    the workers step their envs on their own (no message per step), as they do when collecting."""
    s = PPOSettings()
    if mode == "actors":
        envs = BatchedVectorEnv(EnvSource.from_any(cfg).env_fns(num_envs, s.seed, s.gamma))
        try:
            start = time.perf_counter()
            jobs = [(-(-steps // num_envs), w) for w in range(len(envs.worker_slices))]
            done = sum(envs.run_in_workers(random_steps, jobs))
            return done / (time.perf_counter() - start)
        finally:
            envs.close()
    envs = make_vector_env(EnvSource.from_any(cfg).env_fns(num_envs, s.seed, s.gamma), mode)
    try:
        rng = np.random.default_rng(0)
        n_actions = int(envs.single_action_space.n)
        start = time.perf_counter()  # includes the first reset, as the trainers' clocks do
        envs.reset(seed=s.seed)
        done = 0
        while done < steps:
            envs.step(rng.integers(n_actions, size=num_envs))
            done += num_envs
        return done / (time.perf_counter() - start)
    finally:
        envs.close()


def ours_steps_per_s(cfg: RLConfig, steps: int, num_envs: int, mode: str,
                     device: str) -> tuple[float, tuple[float, float]]:
    """Our PPO's steps/s, and the shares of its wall time spent collecting and updating."""
    settings = cfg.ppo_settings(total_steps=steps, num_envs=num_envs, vector_mode=mode, progress="none",
                                device=device, run_dir=tempfile.mkdtemp(prefix="ppo_tp_"))
    result = train(settings, cfg)
    sps = result.steps_used / result.wall_time_s  # from the first reset to the last update
    return sps, (result.collect_time_s / result.wall_time_s, result.update_time_s / result.wall_time_s)


def _KeepThreads(n: int):
    """Gives SB3 our trainer's torch thread count and the same guard: Crafter's world generation
    (numba/OpenMP) resets torch's thread count, which would change SB3's updates for a reason unrelated
    to SB3 itself."""
    from stable_baselines3.common.callbacks import BaseCallback

    class KeepThreads(BaseCallback):
        def _on_step(self) -> bool:
            if torch.get_num_threads() != n:
                torch.set_num_threads(n)
            return True

    return KeepThreads()


def sb3_steps_per_s(cfg: RLConfig, steps: int, num_envs: int, kind: str, device: str) -> float | None:
    try:
        from stable_baselines3 import PPO
        from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
    except ImportError:
        return None
    s = PPOSettings()
    payload = cfg.model_dump_json()
    fns = [CrafterFactory(payload, i, num_envs, s.seed, s.gamma) for i in range(num_envs)]
    venv = DummyVecEnv(fns) if kind == "dummy" else SubprocVecEnv(fns, start_method=default_context())
    try:
        model = PPO("MlpPolicy", venv, n_steps=s.num_steps,
                    batch_size=s.num_steps * num_envs // s.num_minibatches, n_epochs=s.update_epochs,
                    learning_rate=s.learning_rate, gamma=s.gamma, gae_lambda=s.gae_lambda, clip_range=s.clip_coef,
                    ent_coef=s.ent_coef, vf_coef=s.vf_coef, max_grad_norm=s.max_grad_norm, device=device,
                    seed=s.seed, verbose=0)
        start = time.perf_counter()
        torch.set_num_threads(PPOSettings().torch_threads)
        model.learn(total_timesteps=steps, callback=_KeepThreads(PPOSettings().torch_threads))
        return model.num_timesteps / (time.perf_counter() - start)
    finally:
        venv.close()


def profile_training(cfg: RLConfig, steps: int, num_envs: int, mode: str, device: str, top: int = 15) -> int:
    import cProfile
    import pstats

    # a short training first, so that the profile shows training rather than one-time imports and the
    # loading of world generation's compiled code
    ours_steps_per_s(cfg, 4 * PPOSettings().num_steps * num_envs, num_envs, mode, device)
    profiler = cProfile.Profile()
    profiler.enable()
    sps, _ = ours_steps_per_s(cfg, steps, num_envs, mode, device)
    profiler.disable()
    print(f"our PPO ({num_envs} envs, {mode}) under cProfile: {sps:.0f} steps/s (slowed by the profiler); "
          f"top {top} functions by own time:")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(top)
    return 0


def _best(store: dict, key: str, value: float | None) -> None:
    if value is not None:
        store[key] = max(store.get(key, 0.0), value)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", default="collect_diamond")
    p.add_argument("--steps", type=int, default=32768, help="training steps per PPO measurement")
    p.add_argument("--raw-steps", type=int, default=4000)
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--max-episode-steps", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=2, help="alternating rounds; each figure is its best round")
    p.add_argument("--modes", default="sync,batched,async,actors", help="our vector modes to measure, comma-separated")
    p.add_argument("--sb3-vec", default=None, help="SB3 vec envs to measure: dummy, subproc or both "
                                                   "(default: the kinds matching --modes)")
    p.add_argument("--device", default="cpu", help="torch device of both trainers (cpu, cuda)")
    p.add_argument("--profile", metavar="MODE", default=None,
                   help="instead of measuring: train ours once in MODE (use 'sync': other modes work in worker "
                        "processes, which the profile does not see) under cProfile and print the top functions")
    p.add_argument("--coded", action="store_true",
                   help="also measure our PPO with the expert's coded actions in the action head")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    modes = args.modes.split(",")
    sb3_kinds = (args.sb3_vec.split(",") if args.sb3_vec
                 else sorted({SB3_KIND[m] for m in modes}, key=["dummy", "subproc"].index))
    cfg = RLConfig(task=args.task, max_episode_steps=args.max_episode_steps)
    factory = CrafterFactory(cfg.model_dump_json(), 0, 1, 0, 0.99)
    coded_cfg = None
    if args.coded:
        from graph.evaluation.coded import coded_actions_for

        coded_cfg = cfg.model_copy(update={"coded_actions": list(coded_actions_for(args.task).values())})

    warm_up_imports()
    if args.profile:
        return profile_training(cfg, args.steps, args.num_envs, args.profile, args.device)
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        print("stable-baselines3 is not installed (pip install -e '.[dev]'): no SB3 figures")
        sb3_kinds = []
    # the machine may be shared: alternate the measurements and keep each one's best of --repeats
    best: dict[str, float] = {}
    splits: dict[str, tuple[float, float]] = {}  # our figures: (collecting, updating) shares of the best run
    for rep in range(args.repeats):
        figures = {"raw": raw_steps_per_s(factory, args.raw_steps)}
        for mode in modes:
            figures[f"raw-{mode}"] = raw_vector_steps_per_s(cfg, args.steps, args.num_envs, mode)
            for key, source in ((mode, cfg), (f"coded-{mode}", coded_cfg)):
                if source is None:
                    continue
                figures[key], split = ours_steps_per_s(source, args.steps, args.num_envs, mode, args.device)
                if figures[key] >= best.get(key, 0.0):
                    splits[key] = split
        for kind in sb3_kinds:
            figures[f"sb3-{kind}"] = sb3_steps_per_s(cfg, args.steps, args.num_envs, kind, args.device)
        for k, v in figures.items():
            _best(best, k, v)
        print(f"  repeat {rep + 1}/{args.repeats}: "
              + ", ".join(f"{k} {v:.0f}" for k, v in figures.items() if v is not None), flush=True)

    raw = best["raw"]
    print(f"\nraw env, 1 env in this process, random actions: {raw:8.0f} steps/s")
    for mode in modes:
        print(f"raw {mode:7s} vector env ({args.num_envs} envs), random actions: {best[f'raw-{mode}']:8.0f} steps/s")
    for kind in sb3_kinds:
        print(f"stable-baselines3 PPO ({args.num_envs} envs, {kind:7s}):    {best[f'sb3-{kind}']:8.0f} steps/s")
    print()
    for mode in modes:
        sps, kind = best[mode], SB3_KIND[mode]
        vs_sb3 = f", {sps / best[f'sb3-{kind}']:.2f}x SB3-{kind}" if f"sb3-{kind}" in best else ""
        collecting, updating = splits[mode]
        print(f"our PPO ({args.num_envs} envs, {mode:7s}): {sps:8.0f} steps/s = {sps / raw:.2f}x raw 1-env, "
              f"{sps / best[f'raw-{mode}']:.2f}x raw {mode}{vs_sb3}  "
              f"[time: {collecting:.0%} collecting, {updating:.0%} updating]")
    top = max(modes, key=best.get)
    sb3_top = max((best[f"sb3-{k}"] for k in sb3_kinds), default=None)
    if coded_cfg is not None:
        print()
        for mode in modes:
            sps = best[f"coded-{mode}"]
            vs_sb3 = f", {sps / sb3_top:.2f}x best SB3 (plain)" if sb3_top else ""
            print(f"our PPO + {len(coded_cfg.coded_actions)} coded actions ({args.num_envs} envs, {mode:7s}): "
                  f"{sps:8.0f} steps/s = {sps / raw:.2f}x raw 1-env, {sps / best[mode]:.2f}x our plain {mode}"
                  f"{vs_sb3}")
    print(f"\nbest ours ({top}): {best[top] / raw:.2f}x raw 1-env, {best[top] / best[f'raw-{top}']:.2f}x raw "
          f"{top}; target >= 0.8x raw 1-env"
          + (f"; {best[top] / sb3_top:.2f}x best SB3 (target >= 2)" if sb3_top else ""))
    print(f"task {cfg.task}, symbolic obs, {args.steps} training steps per measurement, device {args.device}, "
          f"{PPOSettings().torch_threads} torch thread(s) in both learners, {os.cpu_count()} CPU(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
