"""The ways PPO steps its environments (``PPOSettings.vector_mode``), and the 'actors' mode's rollout pool.

'sync' steps every env in the learner's process, 'batched' in BatchedVectorEnv's workers (a slice of envs
each), 'async' in gymnasium's AsyncVectorEnv (a process per env). 'actors' uses BatchedVectorEnv's
workers too, but each worker holds a copy of the policy and collects its slice of every rollout with
rl.ppo's Collector, so a rollout costs one message per worker instead of one per step (ActorPool).
'ray' is 'actors' on a Ray cluster (rl/vector_ray.py): Ray actors, possibly on other machines, hold the
slices; ActorPool drives them with the same jobs and the same function (``collect_slice``).
"""
from __future__ import annotations

import math
from typing import Any, Protocol

import gymnasium as gym
import torch

from rl.options import OverlappedSyncVectorEnv
from rl.ppo import Agent, Collector, CollectorSpec, Segment
from rl.vector import BETWEEN_COMMANDS, BatchedVectorEnv, default_context

VECTOR_MODES = ("auto", "sync", "batched", "async", "actors", "ray")


def resolve_vector_mode(mode: str, env_source, num_envs: int) -> str:
    """'auto' -> 'actors' for Crafter with >= 2 envs (a Crafter rollout costs far more than sending the
    policy's weights), 'sync' otherwise. 'auto' never picks 'ray': a cluster is the user's choice."""
    if mode not in VECTOR_MODES:
        raise ValueError(f"vector_mode must be one of {', '.join(map(repr, VECTOR_MODES))}, got {mode!r}")
    if mode == "auto":
        return "actors" if env_source.config is not None and num_envs >= 2 else "sync"
    return mode


def make_vector_env(env_fns: list, mode: str, num_workers: int | None = None) -> gym.vector.VectorEnv:
    """The envs of a mode other than 'auto'. For 'ray' they are Ray actors on the cluster (rl.ray_cluster finds
    it), which only ActorPool can step. ``num_workers``: the processes (or Ray actors) of 'batched', 'actors'
    and 'ray' (None: one per CPU)."""
    if mode not in VECTOR_MODES[1:]:
        raise ValueError(f"vector_mode must be 'sync', 'batched', 'async', 'actors' or 'ray' here, got {mode!r}")
    autoreset = gym.vector.AutoresetMode.SAME_STEP
    if mode == "ray":
        from rl.vector_ray import RayVectorEnv  # imports ray: only where a cluster is asked for

        return RayVectorEnv(env_fns, num_workers)  # type: ignore[return-value]  # the VectorEnv surface ActorPool uses
    if mode in ("batched", "actors"):
        return BatchedVectorEnv(env_fns, num_workers)  # always same-step autoreset
    if mode == "async":
        return gym.vector.AsyncVectorEnv(env_fns, context=default_context(), autoreset_mode=autoreset)
    return OverlappedSyncVectorEnv(env_fns)  # SyncVectorEnv, same-step autoreset


def collect_slice(envs: list, state: dict, spec: CollectorSpec, seeds: list, weights: dict,
                  budget: int) -> Segment:
    """Runs inside a worker (a BatchedVectorEnv process, or a Ray actor in the 'ray' mode): collect this
    worker's slice of the rollout with its own copy of the policy (always on the CPU), so the whole rollout
    costs one message per worker, not one per step. The segment goes back as numpy arrays (rl.ppo.Rollout)."""
    if "collector" not in state:
        torch.set_num_threads(1)
        # mypy cannot infer a lambda with a default argument
        local = OverlappedSyncVectorEnv([lambda e=e: e for e in envs])  # type: ignore[misc]
        state["agent"] = Agent(spec.obs_shape, spec.n_actions, spec.hidden_size)
        state["collector"] = Collector(local, spec, seed=seeds)
        state[BETWEEN_COMMANDS] = prepare_resets  # while the learner updates, build the next worlds
    # copies: from Ray's object store the arrays come read-only
    state["agent"].load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    return state["collector"].collect(state["agent"], budget)


def prepare_resets(envs: list) -> None:
    """Build each env's next world ahead of its reset, where its env stack can (a ``prepare_reset`` method:
    Crafter's TrainingSeeds or TaskEnv). An actor worker runs this while the learner updates: the worlds
    do not depend on the policy, so the rollouts stay on-policy and step for step the same, and world
    generation (~6 ms a reset) leaves the rollout's critical path."""
    for env in envs:
        try:
            prepare = env.get_wrapper_attr("prepare_reset")
        except AttributeError:  # an env that builds its episodes at reset only (CartPole, a factory's env)
            continue
        prepare()


class SliceWorkers(Protocol):
    """Workers that each hold a contiguous slice of the envs: BatchedVectorEnv ('actors') or
    rl.vector_ray.RayVectorEnv ('ray')."""

    num_envs: int

    @property
    def worker_slices(self) -> list[tuple[int, int]]: ...

    def run_in_workers(self, fn: Any, jobs: list[tuple]) -> list: ...


def actor_jobs(spec: CollectorSpec, slices: list[tuple[int, int]], num_envs: int, weights: dict,
               budget: int) -> list[tuple]:
    """``collect_slice``'s arguments for each worker: its envs' seeds, the weights, and its share of the
    budget left, so that the rollout stops near the budget as it would in one process."""
    return [(spec, list(range(spec.seed + lo, spec.seed + hi)), weights,
             max(1, math.ceil(budget * (hi - lo) / num_envs))) for lo, hi in slices]


class ActorPool:
    """The 'actors' and 'ray' vector modes: workers each hold a copy of the policy and collect their envs'
    part of every rollout; the learner sends the weights once per rollout. Called as
    ``rl.ppo.train_loop``'s ``collect``. The same seed and the same worker slices give the same rollouts
    whichever kind of worker runs them."""

    def __init__(self, envs: SliceWorkers, spec: CollectorSpec):
        self.envs, self.spec = envs, spec
        self.slices = envs.worker_slices

    def __call__(self, agent: Agent, budget: int) -> list[Segment]:
        weights = {k: v.detach().cpu().numpy() for k, v in agent.state_dict().items()}
        return self.envs.run_in_workers(collect_slice, actor_jobs(self.spec, self.slices, self.envs.num_envs,
                                                                  weights, budget))
