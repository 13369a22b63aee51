"""``train(settings, source) -> TrainResult``: one PPO training, from the environments to the saved policy.

The source (a Crafter RLConfig, a gymnasium id or an EnvSource) becomes environment factories
(rl/env_factory.py), stepped in the settings' vector mode (rl/vector_modes.py); rl.ppo's loop trains on
them and the policy is written to ``<run_dir>/policy.pt`` (rl/policy_io.py). The tools, the evaluation
and the command line train through here.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rl.coded_sources import check_sandbox_first
from rl.env_factory import EnvSource
from rl.policy_io import save_policy
from rl.ppo import Collect, Collector, CollectorSpec, PPOSettings, train_loop
from rl.ppo_fast import RolloutPolicy, fast_step
from rl.vector_modes import ActorPool, make_vector_env, resolve_vector_mode


@dataclass
class TrainResult:
    steps_used: int
    """primitive environment steps spent in training"""
    wall_time_s: float
    collect_time_s: float
    """of the wall time: collecting rollouts (stepping the envs and acting)"""
    update_time_s: float
    """of the wall time: advantages and PPO updates"""
    updates: int
    episodes: int
    episode_outcomes: dict[str, int]
    """how the finished episodes ended: outcome (rl.run_log.episode_outcome) -> episodes, the most first"""
    recent_episode_outcomes: dict[str, int]
    """the same for the last ``window`` episodes (those of the final moving-window success rate)"""
    curve: list[dict[str, float]]
    """one row per update: step, success_rate, mean_return, mean_length (moving window)"""
    coded_action_counts: dict[str, int]
    coded_action_failures: dict[str, int]
    coded_action_errors: list[str]
    policy_path: str
    run_dir: str
    final_train_success_rate: float | None
    final_mean_return: float | None
    stopped_early: str | None = None
    """why the training stopped before its budget (PPOSettings.stop_below), None when it spent it"""


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked for but no CUDA GPU is available; use 'auto' or 'cpu'")
    return torch.device(name)


def collector_spec(s: PPOSettings, envs: gym.vector.VectorEnv, coded_names: list[str]) -> CollectorSpec:
    """What the collectors need to know; the coded actions are the last ``len(coded_names)`` actions. They act
    through rl.ppo_fast.RolloutPolicy (numpy; the CNN in torch), whatever the agent."""
    if not isinstance(envs.single_action_space, gym.spaces.Discrete):
        raise ValueError(f"PPO here needs a Discrete action space, got {envs.single_action_space}")
    n_actions = int(envs.single_action_space.n)
    obs_shape = tuple(envs.single_observation_space.shape)  # type: ignore[arg-type]
    return CollectorSpec(obs_shape=obs_shape, n_actions=n_actions,
                         n_primitive=n_actions - len(coded_names), coded_names=tuple(coded_names),
                         hidden_size=s.hidden_size, num_steps=s.num_steps, gamma=s.gamma, seed=s.seed,
                         make_policy=RolloutPolicy)


def train(settings: PPOSettings, source: Any, run_name: str | None = None) -> TrainResult:
    """Train PPO. ``source`` is an ``rl.config.RLConfig`` (Crafter) or a gymnasium env id (e.g. CartPole-v1)."""
    env_source = EnvSource.from_any(source)
    s = settings
    if s.total_steps < 1 or s.num_envs < 1 or s.num_steps < 1:
        raise ValueError("total_steps, num_envs and num_steps must all be >= 1")
    if s.num_workers is not None and s.num_workers < 1:
        raise ValueError(f"num_workers must be >= 1 (or None: one per CPU core), got {s.num_workers}")
    # seeded before anything is built: the envs, then the agent's initial weights
    torch.manual_seed(s.seed)
    np.random.seed(s.seed)
    torch.set_num_threads(max(1, s.torch_threads))
    device = resolve_device(s.device)

    mode = resolve_vector_mode(s.vector_mode, env_source, s.num_envs)
    if env_source.config is not None:
        check_sandbox_first(env_source.config.coded_actions, env_source.config.shaping)
    envs = make_vector_env(env_source.env_fns(s.num_envs, s.seed, s.gamma), mode, s.num_workers)
    try:
        coded_names = env_source.coded_action_names()
        spec = collector_spec(s, envs, coded_names)
        collect: Collect
        if mode in ("actors", "ray"):  # workers with a copy of the policy each collect their envs' part of a rollout
            collect = ActorPool(envs, spec)  # type: ignore[arg-type]
        else:
            collect = Collector(envs, spec, seed=s.seed, threads=s.torch_threads)
        # the MLP learns through the hand-derived gradient, the CNN through autograd (rl.ppo_fast.fast_step)
        agent, numbers = train_loop(s, spec, collect, device, run_name or env_source.name, make_step=fast_step)
        path = save_policy(Path(numbers["run_dir"]) / "policy.pt", agent, env_source, s, spec.n_primitive,
                           coded_names)
        return TrainResult(**numbers, policy_path=str(path))
    finally:
        envs.close()
