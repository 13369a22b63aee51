"""A task episode on a game backend as a gymnasium environment, with the game API kept in step.

`CrafterEnv` is the default: Crafter with `obs_kind="symbolic"` (fast, no rendering) or
`"pixels"` (64x64 RGB). See docs/CONTRACTS.md for the reward, termination and info keys.
"""

from __future__ import annotations

import random
import zlib
from typing import Any

import gymnasium as gym

import envs.registration  # noqa: F401 - whatever builds a Crafter env can also gymnasium.make one
from envs.base import Backend
from envs.crafter_backend import PRIMITIVE_ACTIONS, CrafterBackend
from envs.describe import damage_cause
from envs.game_api import MEMORY_BYTES, GameAPI
from envs.saved_state import SavedState
from envs.tasks import Task, get_task

ACTION_INDEX: dict[str, int] = {name: i for i, name in enumerate(PRIMITIVE_ACTIONS)}
OBS_KINDS = ("symbolic", "pixels")
REWARD_KINDS = ("task", "crafter")
# Seeds the env's own stream of helper seeds (GameAPI's random helpers, one value per episode). It is not the
# world seed and nothing about a world enters it, so agent code cannot learn the world seed from the helpers.
HELPER_STREAM_SEED = 0x5EED_4E1B


class TaskEnv(gym.Env):
    """One task on one backend: task reward and termination, seeding, and the game API."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, backend: Backend, task: str | Task = "collect_wood", obs_kind: str = "symbolic",
                 max_steps: int | None = None, reward: str = "task", render_mode: str | None = "rgb_array",
                 end_on_success: bool = True):
        self.task = task if isinstance(task, Task) else get_task(task)
        if obs_kind not in OBS_KINDS:
            raise ValueError(f"obs_kind must be one of {OBS_KINDS}, got {obs_kind!r}")
        if reward not in REWARD_KINDS:
            raise ValueError(f"reward must be one of {REWARD_KINDS}, got {reward!r}")
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.backend = backend
        self.obs_kind = obs_kind
        self.reward_kind = reward
        self.max_steps = max_steps or self.task.max_steps
        self.render_mode = render_mode
        # False for a code test: the code plays on to its return, as it does in a held-out chain; the task's
        # reward then comes once, on the step its achievement unlocks
        self.end_on_success = end_on_success
        self.primitive_actions = tuple(backend.primitive_actions)
        self.action_space = gym.spaces.Discrete(len(self.primitive_actions))
        self.observation_space = backend.policy_space(obs_kind)
        self.game = GameAPI()
        self._helper_seeds = random.Random(HELPER_STREAM_SEED)  # the same resets draw the same helper seeds
        self._seed = 0
        self._episode = 0
        self._seeded = False
        self._unlocked: set[str] = set()
        self._succeeded = False
        self._steps = 0
        self._limit = 0
        self._done = True

    def _world_of_reset(self, seed: int | None) -> tuple[int, int] | None:
        """The (seed, episode) that ``reset(seed=seed)`` starts; None for a first reset without a seed, which
        draws its seed then."""
        if seed is not None:
            return int(seed), 0
        if self._seeded:  # later unseeded resets move on to the seed's next world
            return self._seed, self._episode + 1
        return None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """A new episode: the world of `seed`, or with ``options={"start": SavedState}`` the saved moment of
        an earlier episode (envs.saved_state), played on with `seed` as its creatures' random seed. The
        episode then ends at the saved step plus `max_steps`."""
        super().reset(seed=seed)
        world = self._world_of_reset(seed)
        # first reset without a seed: draw one from gymnasium's RNG
        self._seed, self._episode = world or (int(self.np_random.integers(0, 2**31 - 1)), 0)
        self._seeded = True
        start = (options or {}).get("start")
        if start is None:
            self.backend.reset(self._seed, self._episode)
            self._steps = 0
        else:
            memory = start.memory_map(MEMORY_BYTES)  # checked before anything changes
            self.backend.restore(start.world, start.spawn, reseed=self._seed)
            self._steps = int(start.steps)
        self._unlocked = self.backend.achievements()
        self._succeeded = self.task.is_success(self._unlocked)
        self._limit = self._steps + self.max_steps
        self._done = False
        player_obs = self.backend.player_observation(self._steps)
        self.game._reset(player_obs, helper_seed=self._helper_seeds.getrandbits(63))
        if start is not None and memory:  # the map the chain had seen by then, as held-out play would have it
            self.game._load_memory(memory, start.cows)
        return self.backend.policy_observation(self.obs_kind, player_obs), self._info(False, 0)

    def prepare_reset(self, seed: int | None = None) -> None:
        """Let the backend build, ahead of time, the world that ``reset(seed=seed)`` will start (a backend
        without ``prepare`` builds it at the reset as usual). The episode is the same either way; the
        work moves to a moment when the process would otherwise wait."""
        prepare = getattr(self.backend, "prepare", None)
        world = self._world_of_reset(seed)
        if prepare is not None and world is not None:
            prepare(*world)

    def step(self, action):
        if self._done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        action = int(action)
        if not 0 <= action < len(self.primitive_actions):
            raise ValueError(f"action must be in [0, {len(self.primitive_actions)}), got {action}")
        native_reward, dead = self.backend.step(action)
        self._steps += 1
        self._unlocked = self.backend.achievements()
        success = self.task.is_success(self._unlocked)
        first_success, self._succeeded = success and not self._succeeded, self._succeeded or success
        if self.reward_kind == "task":
            reward = 1.0 if (success if self.end_on_success else first_success) else 0.0
            terminated = bool(dead or (success and self.end_on_success))
        else:
            reward = native_reward
            terminated = bool(dead)
        truncated = not terminated and self._steps >= self._limit
        self._done = terminated or truncated
        player_obs = self.backend.player_observation(self._steps)
        last = self.game._current() if dead else None
        self.game._observe(player_obs)
        obs = self.backend.policy_observation(self.obs_kind, player_obs)
        info = self._info(success, 1)
        if last is not None:  # named as the code-test reports name it, from what the player saw as it died
            info["death_cause"] = damage_cause(player_obs, last.inventory["health"] - player_obs.inventory["health"],
                                               before=last.inventory)
        return obs, reward, terminated, truncated, info

    def save_state(self, source: str = "") -> SavedState:
        """The episode as it stands now, to start later episodes from (envs.saved_state)."""
        world, spawn = self.backend.save()
        return SavedState(world=world, seed=self._seed, steps=self._steps, achievements=tuple(sorted(self._unlocked)),
                          spawn=spawn, source=source, memory=zlib.compress(self.game._memory_bytes(), 6),
                          cows=tuple(sorted(self.game._cows)))

    def render(self):
        return self.backend.render()

    def observation(self):
        """The policy observation of the current state, e.g. for a skill that starts mid-episode."""
        return self.backend.policy_observation(self.obs_kind, self.game._current())

    @property
    def episode_steps(self) -> int:
        return self._steps

    def _info(self, success: bool, primitive_steps: int) -> dict[str, Any]:
        return {
            "success": bool(success),
            "achievements": sorted(self._unlocked),
            "inventory": self.backend.inventory(),
            "episode_steps": self._steps,
            "primitive_steps": primitive_steps,
        }


class CrafterEnv(TaskEnv):
    """The default environment: a task on Crafter."""

    def __init__(self, task: str | Task = "collect_wood", obs_kind: str = "symbolic",
                 max_steps: int | None = None, reward: str = "task", render_mode: str | None = "rgb_array",
                 end_on_success: bool = True):
        super().__init__(CrafterBackend(), task, obs_kind, max_steps, reward, render_mode, end_on_success)

    def frame(self, size: int = 64):
        """A picture of the current state for a human (`CrafterBackend.frame`): it leaves the episode as it was."""
        backend = self.backend
        if not isinstance(backend, CrafterBackend):
            raise TypeError("frame() needs the Crafter backend")
        return backend.frame(size)
