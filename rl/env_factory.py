"""Picklable environment factories for the PPO workers, and the wrappers they stack.

AsyncVectorEnv pickles each factory into a worker process, so a factory holds only plain data (the
RLConfig as JSON, seeds) and builds the env, compiles shaping code and loads coded actions inside
the worker. Stack (inner to outer):
    CrafterEnv -> SuccessTermination? -> RewardShaping? -> TrainingSeeds -> CodedActionsWrapper? -> TrainerInfo
TrainingSeeds starts episodes from the config's saved moments of the chain when it names some.
"""
from __future__ import annotations

import json
import multiprocessing
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from envs.seeds import EVAL_SEED_BASE, check_training_seed
from rl.coded_sources import agent_code
from rl.options import CodedActionsWrapper, GameForwarding, step_requests_of


class SuccessTermination(GameForwarding):
    """With Crafter's own reward, success does not end an episode; this makes it end."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated or bool(info.get("success")), truncated, info


def snapshot(info: dict) -> dict:
    """What the shaping function sees: copies of the player's inventory and achievements."""
    return {"inventory": dict(info.get("inventory", {})), "achievements": frozenset(info.get("achievements", ()))}


class RewardShaping(GameForwarding):
    """Adds ``shaping(prev, curr)`` to every primitive step's reward; the function runs in the sandbox
    (``shaping_fn`` is ``AgentCode.shape``, or a trusted callable in tests). A raising shaping function is a
    configuration error, so it is reported with the step and stops training instead of being hidden."""

    def __init__(self, env: gym.Env, shaping_fn):
        super().__init__(env)
        self._fn = shaping_fn
        self._prev: dict = {}

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._prev = snapshot(info)
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        curr = snapshot(info)
        try:
            bonus = float(self._fn(self._prev, curr))
        except Exception as exc:
            raise RuntimeError(f"the shaping function failed at episode step {info.get('episode_steps')}: "
                               f"{exc}") from exc
        if not np.isfinite(bonus):
            raise RuntimeError(f"the shaping function returned {bonus}; it must return a finite float")
        self._prev = curr
        return obs, float(reward) + bonus, terminated, truncated, info


class TrainingSeeds(GameForwarding):
    """Every episode gets its own training world: worker i plays seeds start+i, start+i+n, ...,
    always below EVAL_SEED_BASE, so training never meets an evaluation world.

    With `starts` (saved moments where the chain reached this task, envs.saved_state), episode k starts
    from the k-th of them in the same round-robin instead, with its seed as the creatures' random seed."""

    def __init__(self, env: gym.Env, index: int, num_envs: int, base_seed: int, starts: list | None = None):
        super().__init__(env)
        self._index, self._stride = index, max(1, num_envs)
        self._start = (base_seed * 10_007) % EVAL_SEED_BASE  # spread runs with different seeds apart
        self._episode = 0
        self._starts = list(starts or [])

    def _seed_of(self, episode: int) -> int:
        return (self._start + self._index + episode * self._stride) % EVAL_SEED_BASE

    def next_seed(self) -> int:
        seed = self._seed_of(self._episode)
        self._episode += 1
        return seed

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        # the vector env's own seed is ignored: our stream already depends on the run seed and index
        if self._starts:
            start = self._starts[(self._index + self._episode * self._stride) % len(self._starts)]
            options = {**(options or {}), "start": start}
        return self.env.reset(seed=check_training_seed(self.next_seed()), options=options)

    def prepare_reset(self) -> None:
        """Build the next episode's world ahead of time (envs.crafter_env.TaskEnv.prepare_reset); an episode
        that starts from a saved moment builds none."""
        if not self._starts:
            self.env.get_wrapper_attr("prepare_reset")(seed=check_training_seed(self._seed_of(self._episode)))


# death_cause is there only on the step an episode ends in a death: it costs nothing on the others
TRAINER_KEYS = ("primitive_steps", "option_reward", "action_mask", "coded_call", "coded_error", "success",
                "death_cause")


class TrainerInfo(gym.Wrapper):
    """Keeps only the info fields the learner reads: less to pickle and to batch per step."""

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return obs, {k: info[k] for k in TRAINER_KEYS if k in info}

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {k: info[k] for k in TRAINER_KEYS if k in info}

    def step_requests(self, action):
        """`step` as a step coroutine, passing the wrapped env's through (rl.options.OverlappedSyncVectorEnv)."""
        obs, reward, terminated, truncated, info = yield from step_requests_of(self.env, action)
        return obs, reward, terminated, truncated, {k: info[k] for k in TRAINER_KEYS if k in info}


@dataclass
class CrafterFactory:
    """Builds one training env in a worker (picklable: plain data plus module-level coded actions)."""

    config_json: str
    index: int
    num_envs: int
    seed: int
    gamma: float

    def __call__(self) -> gym.Env:
        single_threaded_worldgen_in_workers()
        return build_crafter_env(self.config_json, self.gamma, seeds=(self.index, self.num_envs, self.seed))


def single_threaded_worldgen_in_workers() -> None:
    """In a worker process, world generation's noise (numba, parallel) runs on one thread. Its default is a
    thread per core in every process, so with one worker per core each reset oversubscribes the machine
    and the idle threads' spin-waits slow every worker's steps. The main process keeps numba's default."""
    if multiprocessing.parent_process() is None:
        return
    try:
        import numba

        numba.set_num_threads(1)
    except (ImportError, ValueError):  # no numba (pure-Python noise), or a layer that refuses: nothing to do
        pass


def build_crafter_env(config_json: str, gamma: float,
                      seeds: tuple[int, int, int] | None = None, keep_info: bool = False) -> gym.Env:
    """The training env stack for a config. ``seeds`` = (index, num_envs, run seed) adds TrainingSeeds;
    ``keep_info`` keeps the full info dict (evaluation and skills want achievements, inventory)."""
    # deferred, heavy: crafter and numba (~1 s), and RLConfig's PPO settings bring torch (~3 s); a worker that
    # unpickles a GymFactory imports this module and needs neither
    from envs.crafter_env import CrafterEnv
    from rl.config import RLConfig

    cfg = RLConfig.model_validate_json(config_json)
    env: gym.Env = CrafterEnv(task=cfg.task, obs_kind=cfg.obs_kind, max_steps=cfg.max_episode_steps,
                              reward=cfg.reward)
    if cfg.reward == "crafter" and cfg.terminate_on_success:
        env = SuccessTermination(env)
    code = agent_code(cfg.coded_actions, cfg.shaping)  # one sandbox process serves this env's agent code
    if code is not None:
        env = ClosesWith(env, code)
        if cfg.shaping:  # shaping source implies code is not None (agent_code)
            env = RewardShaping(env, code.shape)
    if seeds is not None:
        env = TrainingSeeds(env, *seeds, starts=cfg.load_starts())
    if cfg.coded_actions:
        env = CodedActionsWrapper(env, code, gamma, decision_steps=cfg.decision_steps)
    return env if keep_info else TrainerInfo(env)


class ClosesWith(GameForwarding):
    """Stops the env's sandbox process when the env is closed."""

    def __init__(self, env: gym.Env, resource):
        super().__init__(env)
        self._resource = resource

    def close(self):
        self._resource.close()
        super().close()


@dataclass
class GymFactory:
    env_id: str

    def __call__(self) -> gym.Env:
        return gym.make(self.env_id)


@dataclass
class EnvSource:
    """What PPO trains on: a Crafter RLConfig, a gymnasium id, or any picklable zero-argument env factory
    (``factory``; its envs may publish ``primitive_steps``/``action_mask`` infos like CodedActionsWrapper)."""

    config: Any = None
    env_id: str | None = None
    factory: Any = None
    coded_names: list = field(default_factory=list)

    @classmethod
    def from_any(cls, source: Any) -> EnvSource:
        from rl.config import RLConfig  # deferred, heavy (torch): see build_crafter_env

        if isinstance(source, EnvSource):
            return source
        if isinstance(source, RLConfig):
            return cls(config=source, coded_names=source.coded_action_names())
        if isinstance(source, str):
            if source not in gym.registry:
                raise ValueError(f"unknown gymnasium environment id {source!r}; for Crafter pass an RLConfig")
            return cls(env_id=source)
        raise ValueError(f"cannot train on {type(source).__name__}: pass an rl.config.RLConfig or a gymnasium id")

    @property
    def name(self) -> str:
        if self.config is not None:
            return self.config.task
        return self.env_id or type(self.factory).__name__

    def env_fns(self, n: int, seed: int, gamma: float) -> list:
        if self.config is not None:
            payload = self.config.model_dump_json()
            return [CrafterFactory(payload, i, n, seed, gamma) for i in range(n)]
        # one of config, env_id, factory is set (from_any)
        return [self.factory if self.factory is not None else GymFactory(self.env_id)  # type: ignore[arg-type]
                for _ in range(n)]

    def coded_action_names(self) -> list[str]:
        return list(self.coded_names)

    def coded_action_sources(self) -> list[str]:
        return list(self.config.coded_actions) if self.config is not None else []

    def to_json(self) -> str:
        if self.config is not None:
            return json.dumps({"rl_config": self.config.model_dump(mode="json")})
        return json.dumps({"env_id": self.env_id, "factory": repr(self.factory)})
