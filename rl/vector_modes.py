"""The ways PPO steps its environments (``PPOSettings.vector_mode``), and the 'actors' mode's rollout pool.

'sync' steps every env in the learner's process, 'batched' in BatchedVectorEnv's workers (a slice of envs
each), 'async' in gymnasium's AsyncVectorEnv (a process per env). 'actors' uses BatchedVectorEnv's
workers too, but each worker holds a copy of the policy and collects its slice of every rollout with
rl.ppo's Collector, so a rollout costs one message per worker instead of one per step (ActorPool).
"""
from __future__ import annotations

import dataclasses
import math

import gymnasium as gym
import torch

from rl.ppo import Agent, Collector, CollectorSpec, Segment
from rl.vector import BatchedVectorEnv, default_context

VECTOR_MODES = ("auto", "sync", "batched", "async", "actors")


def resolve_vector_mode(mode: str, env_source, num_envs: int) -> str:
    """'auto' -> 'actors' for Crafter with >= 2 envs (a Crafter rollout costs far more than sending the
    policy's weights), 'sync' otherwise."""
    if mode not in VECTOR_MODES:
        raise ValueError(f"vector_mode must be one of {', '.join(map(repr, VECTOR_MODES))}, got {mode!r}")
    if mode == "auto":
        return "actors" if env_source.config is not None and num_envs >= 2 else "sync"
    return mode


def make_vector_env(env_fns: list, mode: str) -> gym.vector.VectorEnv:
    if mode not in VECTOR_MODES[1:]:
        raise ValueError(f"vector_mode must be 'sync', 'batched', 'async' or 'actors' here, got {mode!r}")
    autoreset = gym.vector.AutoresetMode.SAME_STEP
    if mode in ("batched", "actors"):
        return BatchedVectorEnv(env_fns)  # always same-step autoreset
    if mode == "async":
        return gym.vector.AsyncVectorEnv(env_fns, context=default_context(), autoreset_mode=autoreset)
    return gym.vector.SyncVectorEnv(env_fns, autoreset_mode=autoreset)


def _rollout_to_numpy(seg: Segment) -> Segment:
    """Plain array copies: compact to pickle (a tensor view would carry its whole buffer)."""
    return dataclasses.replace(seg, rollout=seg.rollout.map(lambda x: x.cpu().numpy().copy()),
                               next_value=seg.next_value.cpu().numpy().copy())


def _rollout_to_device(seg: Segment, device: torch.device) -> Segment:
    return dataclasses.replace(seg, rollout=seg.rollout.map(lambda x: torch.as_tensor(x, device=device)),
                               next_value=torch.as_tensor(seg.next_value, device=device))


def _actor_collect(envs: list, state: dict, spec: CollectorSpec, seeds: list, weights: dict,
                   budget: int) -> Segment:
    """Runs inside a BatchedVectorEnv worker: collect this worker's slice of the rollout with its own copy
    of the policy (always on the CPU), so the whole rollout costs one message per worker, not one per step."""
    if "collector" not in state:
        torch.set_num_threads(1)
        torch.manual_seed(spec.seed * 7919 + seeds[0])  # each worker samples its own action stream
        # mypy cannot infer a lambda with a default argument
        local = gym.vector.SyncVectorEnv([lambda e=e: e for e in envs],  # type: ignore[misc]
                                         autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
        state["agent"] = Agent(spec.obs_shape, spec.n_actions, spec.hidden_size)
        state["collector"] = Collector(local, spec, torch.device("cpu"), seed=seeds)
    state["agent"].load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    return _rollout_to_numpy(state["collector"].collect(state["agent"], budget))


class ActorPool:
    """The 'actors' vector mode: BatchedVectorEnv's workers each hold a copy of the policy and collect
    their envs' part of every rollout; the learner sends the weights once per rollout. Called as
    ``rl.ppo.train_loop``'s ``collect``."""

    def __init__(self, envs: BatchedVectorEnv, spec: CollectorSpec, device: torch.device):
        self.envs, self.spec, self.device = envs, spec, device
        self.slices = envs.worker_slices

    def __call__(self, agent: Agent, budget: int) -> list[Segment]:
        weights = {k: v.detach().cpu().numpy() for k, v in agent.state_dict().items()}
        n = self.envs.num_envs
        # each worker gets its share of the budget left, so the rollout stops near it as in-process would
        jobs = [(self.spec, list(range(self.spec.seed + lo, self.spec.seed + hi)), weights,
                 max(1, math.ceil(budget * (hi - lo) / n))) for lo, hi in self.slices]
        return [_rollout_to_device(seg, self.device) for seg in self.envs.run_in_workers(_actor_collect, jobs)]
