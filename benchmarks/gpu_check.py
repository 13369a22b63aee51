"""The GPU path of training, checked on a machine with a CUDA GPU.

Trains the same configurations on the GPU and on the CPU, side by side in one run, and checks that:
- PPO with coded actions in the action head trains on the GPU (symbolic MLP) and its held-out success
  rate is in line with the CPU run of the same seed (GPU kernels are not bitwise equal to CPU ones);
- the pixel CNN trains on the GPU;
- a policy trained on the GPU loads on the CPU and plays as a skill.
Prints steps/s for every run. Exits 2 where no GPU is present, 1 when a check fails.

    python -m benchmarks.gpu_check [--steps 20000] [--pixel-steps 8192] [--num-envs 8] [--episodes 20]
"""
from __future__ import annotations

import argparse
import sys
import tempfile

import torch

from benchmarks.coded_vs_plain import example_sources
from rl.config import RLConfig
from rl.evaluate import evaluate_policy
from rl.policy_io import load_policy
from rl.training import train


def _train(cfg: RLConfig, device: str, steps: int, num_envs: int, mode: str):
    settings = cfg.ppo_settings(total_steps=steps, num_envs=num_envs, vector_mode=mode, device=device,
                                seed=1, progress="none", run_dir=tempfile.mkdtemp(prefix=f"gpu_check_{device}_"))
    result = train(settings, cfg)
    sps = result.steps_used / result.wall_time_s
    print(f"  {cfg.task} {cfg.obs_kind:8s} {device:4s}: {result.steps_used:,} steps in {result.wall_time_s:5.1f} s "
          f"({sps:6.0f} steps/s), coded calls {result.coded_action_counts or '-'}", flush=True)
    return result, sps


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20_000, help="steps of the symbolic runs")
    p.add_argument("--pixel-steps", type=int, default=8192, help="steps of the pixel (CNN) runs")
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--vector-mode", default="batched")
    p.add_argument("--episodes", type=int, default=20, help="held-out episodes per symbolic policy")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA GPU here: this check needs one (torch.cuda.is_available() is False)")
        return 2
    print(f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    failures: list[str] = []

    print("symbolic MLP, PPO + coded actions (collect_wood, place_table, explore), task place_table:")
    cfg = RLConfig(task="place_table", coded_actions=example_sources(), max_episode_steps=300)
    rates = {}
    for device in ("cuda", "cpu"):
        result, _ = _train(cfg, device, args.steps, args.num_envs, args.vector_mode)
        ev = evaluate_policy(result.policy_path, episodes=args.episodes)  # loads on the CPU
        rates[device] = ev.success_rate
        print(f"    held-out {ev.successes}/{ev.episodes} = {ev.success_rate:.2f} [{ev.ci_low:.2f}, {ev.ci_high:.2f}]"
              f" (policy trained on {device}, played on the CPU)")
        agent, meta = load_policy(result.policy_path)
        if next(agent.parameters()).device.type != "cpu":
            failures.append(f"the {device} policy did not load onto the CPU")
    if rates["cuda"] < rates["cpu"] - 0.25:
        failures.append(f"GPU-trained policy is far worse than the CPU one ({rates['cuda']:.2f} vs {rates['cpu']:.2f})")
    if rates["cuda"] == 0.0:
        failures.append("the GPU-trained policy never succeeded on held-out seeds")

    print("pixel CNN, plain PPO, task collect_wood:")
    pix = RLConfig(task="collect_wood", obs_kind="pixels", max_episode_steps=300)
    sps = {}
    for device in ("cuda", "cpu"):
        result, sps[device] = _train(pix, device, args.pixel_steps, args.num_envs, args.vector_mode)
        if result.steps_used < args.pixel_steps:
            failures.append(f"pixel run on {device} stopped at {result.steps_used} of {args.pixel_steps} steps")
    print(f"    CNN training: GPU {sps['cuda']:.0f} vs CPU {sps['cpu']:.0f} steps/s ({sps['cuda'] / sps['cpu']:.2f}x)")

    print("\n" + ("PASS" if not failures else "FAIL:\n  " + "\n  ".join(failures)))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
