"""A trained PPO policy loaded back as a skill: run it in a CrafterEnv until its task succeeds or a step limit."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from envs.tasks import get_task
from rl.coded_sources import agent_code
from rl.config import RLConfig
from rl.options import CodedActionsWrapper
from rl.policy_io import load_policy


@dataclass
class SkillRun:
    success: bool
    steps: int
    """primitive environment steps taken (coded-action steps included)"""
    reward: float
    ended: bool
    """the episode ended (death, the env's own success or time limit) before the skill finished"""
    coded_calls: dict[str, int] = field(default_factory=dict)
    coded_errors: list[str] = field(default_factory=list)


class PolicySkill:
    """Load ``policy.pt`` written by ``rl.training.train`` and execute it in an env the caller owns."""

    def __init__(self, path: str | Path, deterministic: bool = False, seed: int = 0):
        self.agent, self.meta = load_policy(path)
        env_meta = json.loads(self.meta["env"])
        if "rl_config" not in env_meta:
            raise ValueError(f"{path} was trained on {env_meta.get('env_id')!r}, not on a Crafter task: "
                             "only Crafter policies can run as skills")
        self.config = RLConfig.model_validate(env_meta["rl_config"])
        self.task = get_task(self.config.task)
        self.deterministic = deterministic
        # sampling is seeded so that a skill run is reproducible for a given world seed
        self._generator = torch.Generator().manual_seed(seed)
        self.name = f"ppo_{self.task.name}"
        self._code = None

    def _coded_actions(self):
        """The policy's coded actions, served by a sandbox process (None when it has none)."""
        if self._code is None and self.config.coded_actions:
            self._code = agent_code(self.config.coded_actions)
        return self._code

    def close(self) -> None:
        if self._code is not None:
            self._code.close()
            self._code = None

    def run(self, env, max_steps: int | None = None, obs: np.ndarray | None = None,
            until: Callable[[set, dict], bool] | None = None,
            on_decision: Callable[[int, dict], None] | None = None) -> SkillRun:
        """Act in ``env`` (a CrafterEnv, already reset, possibly mid-episode) until ``until(achievements,
        inventory)`` holds (default: the policy's task succeeds), ``max_steps`` primitive steps or the
        episode ends. ``obs`` is the env's current policy observation (read from the env when omitted).
        ``on_decision(action, info)`` is called after each choice of the policy has been played: ``info``
        says how many primitive steps it took (``primitive_steps``) and which coded action ran
        (``coded_call``, empty for a primitive action)."""
        if getattr(env, "obs_kind", self.config.obs_kind) != self.config.obs_kind:
            raise ValueError(f"this policy was trained on {self.config.obs_kind!r} observations but the env "
                             f"gives {env.obs_kind!r}; create the env with obs_kind={self.config.obs_kind!r}")
        done_when = until or (lambda ach, inv: self.task.is_success(set(ach), inv))
        limit = max_steps if max_steps is not None else (self.config.max_episode_steps or self.task.max_steps)
        coded = self._coded_actions()
        wrapped = CodedActionsWrapper(env, coded, gamma=self.meta["settings"]["gamma"],
                                      decision_steps=self.config.decision_steps) if coded else None
        obs = current_observation(env) if obs is None else obs
        achievements, inventory = set(env.game.achievements), dict(env.game.inventory)
        result = SkillRun(success=done_when(achievements, inventory), steps=0, reward=0.0, ended=False,
                          coded_calls={name: 0 for name in (coded.names if coded else [])})
        n_actions = self.agent.n_actions
        while not result.success and result.steps < limit:
            mask = wrapped.action_mask() if wrapped is not None else np.ones(n_actions, dtype=bool)
            action = self._act(obs, mask)
            obs, reward, terminated, truncated, info = (wrapped or env).step(action)
            result.steps += int(info.get("primitive_steps", 1))
            result.reward += float(info.get("option_reward", reward))
            if info.get("coded_call"):
                result.coded_calls[info["coded_call"]] += 1
                if info.get("coded_error") and len(result.coded_errors) < 20:
                    result.coded_errors.append(f"{info['coded_call']}: {info['coded_error']}")
            if on_decision is not None:
                on_decision(int(action), {"primitive_steps": int(info.get("primitive_steps", 1)),
                                          "coded_call": str(info.get("coded_call") or "")})
            result.success = done_when(set(info.get("achievements", ())), dict(info.get("inventory", {})))
            if terminated or truncated:
                result.ended = True
                break
        if wrapped is not None:
            wrapped.end_open_call()  # the skill is done: a call left open at its last decision ends with it
        return result

    def _act(self, obs: np.ndarray, mask: np.ndarray) -> int:
        with torch.no_grad():
            x = torch.as_tensor(np.asarray(obs)[None])
            logits = self.agent.actor(self.agent._features(x))
            logits = torch.where(torch.as_tensor(mask[None]), logits, torch.full_like(logits, -1e8))
            if self.deterministic:
                return int(logits.argmax(-1))
            probs = torch.softmax(logits, -1)
            return int(torch.multinomial(probs, 1, generator=self._generator))


def current_observation(env) -> np.ndarray:
    """The env's current policy observation. Seam: uses ``env.observation()`` when the env offers it,
    else rebuilds it from the backend's snapshot of the current step."""
    if hasattr(env, "observation") and callable(env.observation):
        return env.observation()
    backend = env.backend
    return backend.policy_observation(env.obs_kind, backend.player_observation(env.episode_steps))
