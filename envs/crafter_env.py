"""Crafter as a gymnasium environment with a task, two observation kinds and the game API.

`obs_kind="symbolic"` never renders: the policy sees the 9x7 local view as one-hot materials and
creatures plus inventory and status, built straight from the simulator's tile arrays, which is
several times faster than drawing pixels. `obs_kind="pixels"` is Crafter's 64x64 RGB image.
"""

from __future__ import annotations

from typing import Any

import crafter
import gymnasium as gym
import numpy as np
from crafter import objects as crafter_objects

from envs.game_api import GameAPI
from envs.observation import (
    CREATURES, INVENTORY_KEYS, MATERIAL_IDS, MATERIAL_NAMES, MATERIALS, VIEW_HEIGHT,
    VIEW_RADIUS_X, VIEW_RADIUS_Y, VIEW_WIDTH, VOID, PlayerObservation,
)
from envs.tasks import Task, get_task

PRIMITIVE_ACTIONS: tuple[str, ...] = tuple(crafter.constants.actions)
ACTION_INDEX: dict[str, int] = {name: i for i, name in enumerate(PRIMITIVE_ACTIONS)}
OBS_KINDS = ("symbolic", "pixels")
REWARD_KINDS = ("task", "crafter")

_FACINGS = ((-1, 0), (1, 0), (0, -1), (0, 1))
_INVENTORY_MAX = 9.0
SYMBOLIC_SIZE = (
    VIEW_WIDTH * VIEW_HEIGHT * (len(MATERIAL_NAMES) + len(CREATURES))
    + len(INVENTORY_KEYS) + len(_FACINGS) + 2  # + daylight, sleeping
)


class _Simulator(crafter.Env):
    """Crafter with rendering made lazy: its step() draws a frame every step otherwise."""

    def _obs(self):
        return None


def _creature_name(obj) -> str | None:
    if isinstance(obj, crafter_objects.Plant):
        return "ripe_plant" if obj.ripe else "plant"
    name = type(obj).__name__.lower()
    return name if name in CREATURES else None


class CrafterEnv(gym.Env):
    """A Crafter episode for one task. See docs/CONTRACTS.md for the info keys."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, task: str | Task = "collect_wood", obs_kind: str = "symbolic",
                 max_steps: int | None = None, reward: str = "task", render_mode: str | None = "rgb_array"):
        self.task = task if isinstance(task, Task) else get_task(task)
        if obs_kind not in OBS_KINDS:
            raise ValueError(f"obs_kind must be one of {OBS_KINDS}, got {obs_kind!r}")
        if reward not in REWARD_KINDS:
            raise ValueError(f"reward must be one of {REWARD_KINDS}, got {reward!r}")
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.obs_kind = obs_kind
        self.reward_kind = reward
        self.max_steps = max_steps or self.task.max_steps
        self.render_mode = render_mode
        self.primitive_actions = PRIMITIVE_ACTIONS
        self.action_space = gym.spaces.Discrete(len(PRIMITIVE_ACTIONS))
        if obs_kind == "symbolic":
            self.observation_space = gym.spaces.Box(0.0, 1.0, (SYMBOLIC_SIZE,), np.float32)
        else:
            self.observation_space = gym.spaces.Box(0, 255, (64, 64, 3), np.uint8)
        # Crafter's own length limit is disabled: truncation is ours, so it matches max_steps.
        self._sim = _Simulator(area=(64, 64), view=(9, 9), size=(64, 64), reward=True, length=None, seed=0)
        self.game = GameAPI()
        self._seed = 0
        self._start = (0, 0)
        self._unlocked: set[str] = set()
        self._steps = 0
        self._done = True
        self._seeded = False
        self._onehot_materials = np.eye(len(MATERIAL_NAMES), dtype=np.float32)

    # -- gymnasium API --

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._seed, episode = int(seed), 0
        elif not self._seeded:  # first reset without a seed: draw one from gymnasium's RNG
            self._seed, episode = int(self.np_random.integers(0, 2**31 - 1)), 0
        else:  # later unseeded resets continue the seed's sequence of worlds
            episode = self._sim._episode
        self._seeded = True
        # Crafter seeds each world from (seed, episode number): pinning both makes reset(seed) replayable.
        self._sim._seed, self._sim._episode = self._seed, episode
        self._sim.reset()
        self._start = tuple(int(v) for v in self._sim._player.pos)
        self._unlocked = set()
        self._steps = 0
        self._done = False
        self.game._reset(self._player_observation(), seed=self._seed)
        return self._policy_obs(), self._info(success=False, primitive_steps=0)

    def step(self, action):
        if self._done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        action = int(action)
        if not 0 <= action < len(PRIMITIVE_ACTIONS):
            raise ValueError(f"action must be in [0, {len(PRIMITIVE_ACTIONS)}), got {action}")
        _, native_reward, dead, _ = self._sim.step(action)
        self._steps += 1
        self._unlocked = {k for k, v in self._sim._player.achievements.items() if v > 0}
        success = self.task.is_success(self._unlocked)
        if self.reward_kind == "task":
            reward = 1.0 if success else 0.0
            terminated = bool(dead or success)
        else:
            reward = float(native_reward)
            terminated = bool(dead)
        truncated = not terminated and self._steps >= self.max_steps
        self._done = terminated or truncated
        self.game._observe(self._player_observation())
        return self._policy_obs(), reward, terminated, truncated, self._info(success)

    def render(self):
        return self._sim.render()

    # -- observations --

    def _view_ids(self) -> np.ndarray:
        """Material ids of the 9x7 local view; cells beyond the world's edge are 'void'."""
        world = self._sim._world
        px, py = (int(v) for v in self._sim._player.pos)
        out = np.full((VIEW_WIDTH, VIEW_HEIGHT), MATERIAL_IDS[VOID], dtype=np.uint8)
        x0, y0 = px - VIEW_RADIUS_X, py - VIEW_RADIUS_Y
        w, h = world.area
        xa, ya = max(x0, 0), max(y0, 0)
        xb, yb = min(x0 + VIEW_WIDTH, w), min(y0 + VIEW_HEIGHT, h)
        # Crafter's material ids coincide with ours: index 0 is None, then constants.materials.
        out[xa - x0:xb - x0, ya - y0:yb - y0] = world._mat_map[xa:xb, ya:yb]
        return out

    def _visible_creatures(self) -> tuple[tuple[str, int, int], ...]:
        world = self._sim._world
        px, py = (int(v) for v in self._sim._player.pos)
        x0, y0 = max(px - VIEW_RADIUS_X, 0), max(py - VIEW_RADIUS_Y, 0)
        window = world._obj_map[x0:px + VIEW_RADIUS_X + 1, y0:py + VIEW_RADIUS_Y + 1]
        found = []
        for ix, iy in zip(*np.nonzero(window)):
            obj = world._objects[window[ix, iy]]
            name = _creature_name(obj) if obj is not self._sim._player else None
            if name:
                found.append((name, int(x0 + ix - px), int(y0 + iy - py)))
        return tuple(found)

    def _player_observation(self) -> PlayerObservation:
        player = self._sim._player
        pos = (int(player.pos[0]) - self._start[0], int(player.pos[1]) - self._start[1])
        return PlayerObservation(
            materials=self._view_ids(), creatures=self._visible_creatures(),
            inventory=dict(player.inventory), facing=tuple(int(v) for v in player.facing),
            pos=pos, daylight=float(self._sim._world.daylight), sleeping=bool(player.sleeping),
            episode_step=self._steps, achievements=frozenset(self._unlocked))

    def _policy_obs(self) -> np.ndarray:
        if self.obs_kind == "pixels":
            return self._sim.render()
        return self.symbolic_features(self.game._current())

    def symbolic_features(self, obs: PlayerObservation) -> np.ndarray:
        materials = self._onehot_materials[obs.materials]                 # (9, 7, M)
        creatures = np.zeros((VIEW_WIDTH, VIEW_HEIGHT, len(CREATURES)), np.float32)
        for name, dx, dy in obs.creatures:
            creatures[dx + VIEW_RADIUS_X, dy + VIEW_RADIUS_Y, CREATURES.index(name)] = 1.0
        inventory = np.array([obs.inventory.get(k, 0) for k in INVENTORY_KEYS], np.float32) / _INVENTORY_MAX
        facing = np.array([obs.facing == f for f in _FACINGS], np.float32)
        extra = np.array([obs.daylight, float(obs.sleeping)], np.float32)
        return np.concatenate([materials.ravel(), creatures.ravel(), np.clip(inventory, 0, 1), facing, extra])

    def _info(self, success: bool, primitive_steps: int = 1) -> dict[str, Any]:
        return {
            "success": bool(success),
            "achievements": sorted(self._unlocked),
            "inventory": dict(self._sim._player.inventory),
            "episode_steps": self._steps,
            "primitive_steps": primitive_steps,
        }


def check_material_ids() -> None:
    """Guard the id coincidence _view_ids relies on, in case Crafter's material list changes."""
    if tuple(crafter.constants.materials) != MATERIALS:
        raise RuntimeError(
            f"Crafter's materials changed ({crafter.constants.materials}); update envs/observation.py")


check_material_ids()
