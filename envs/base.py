"""The protocol a game backend implements so that TaskEnv, the game API and PPO can run on it."""

from __future__ import annotations

from typing import Protocol

import gymnasium as gym
import numpy as np

from envs.observation import PlayerObservation


class Backend(Protocol):
    """One simulator instance. Crafter is the default (envs/crafter_backend.py).

    Optional: ``prepare(seed, episode)`` builds that world ahead of the ``reset`` that starts it (the same
    episode either way), so that an actor worker can build it while the learner updates
    (TaskEnv.prepare_reset; a backend without it builds its worlds at reset)."""

    name: str
    primitive_actions: tuple[str, ...]

    def reset(self, seed: int, episode: int = 0) -> None:
        """Start the world for (seed, episode): the same pair gives the same world."""

    def step(self, action: int) -> tuple[float, bool]:
        """Apply one primitive action; returns (the game's own reward, whether the player died)."""

    def player_observation(self, episode_step: int) -> PlayerObservation:
        """What the player sees now: the only input of the game API."""

    def achievements(self) -> set[str]:
        """Achievements unlocked so far in this episode."""

    def inventory(self) -> dict[str, int]:
        ...

    def policy_space(self, obs_kind: str) -> gym.Space:
        """Observation space of the policy for 'symbolic' or 'pixels'."""

    def policy_observation(self, obs_kind: str, player_obs: PlayerObservation) -> np.ndarray:
        ...

    def render(self) -> np.ndarray:
        """An RGB frame of the player's view, for GIFs and the pixel policy."""

    def save(self) -> tuple[bytes, tuple[int, int]]:
        """The current world and player as bytes (envs.saved_state), and where the player spawned."""

    def restore(self, world: bytes, spawn: tuple[int, int], reseed: int) -> None:
        """Play on from a world `save` returned, its random generator seeded anew with `reseed`."""
