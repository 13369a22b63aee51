"""CodedActionsWrapper: the policy's action head = the primitive actions + one action per coded action.

A coded action is an option: choosing it runs one call (``envs.coded.run_option``: the env steps here, the
code only names actions) until it returns, hits its step limit or the episode ends, and the wrapper hands
PPO one transition carrying the discounted reward sum and ``info["primitive_steps"]`` so the learner can
discount by gamma**steps. Agent-written actions come as a ``sandbox.AgentCode``; the project's own
callables (tests, toys) as a list of ``envs.coded.CodedAction``, driven in-process.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from envs.coded import LocalActions


class GameForwarding(gym.Wrapper):
    """Exposes the attributes envs.coded.execute and coded actions use (gymnasium wrappers do not)."""

    @property
    def game(self):
        return self.env.get_wrapper_attr("game")

    @property
    def primitive_actions(self) -> list[str]:
        return list(self.env.get_wrapper_attr("primitive_actions"))


class StepAllowance:
    """The primitive steps a trainer may still spend, shared by the envs it steps in one process.

    Before each vector step the trainer calls ``begin(left, n_envs)``; the envs then step one after
    another, and each coded call is cut at what is left minus one step for every env still to step.
    A long coded call thus runs uncut until the budget's last steps, and the budget is overrun by at most
    ``n_envs - 1`` steps (when fewer steps than envs are left)."""

    def __init__(self) -> None:
        self.left: int | None = None
        self.pending = 0

    def begin(self, left: int, n_envs: int) -> None:
        self.left, self.pending = int(left), int(n_envs)

    def cap_for_next_env(self) -> int | None:
        """The step cap of the env stepping now (None: no limit)."""
        self.pending = max(0, self.pending - 1)
        return None if self.left is None else max(1, self.left - self.pending)

    def spend(self, steps: int) -> None:
        if self.left is not None:
            self.left -= int(steps)


class CodedActionsWrapper(GameForwarding):
    """``Discrete(n_primitive + k)``. Index ``n_primitive + j`` runs ``coded_actions[j]``.

    ``info`` always has ``primitive_steps``, ``option_reward`` (undiscounted reward of the transition),
    ``action_mask`` (bool, n_primitive + k: primitives always allowed, a coded action only when its
    precondition holds), ``coded_call`` (name or "") and ``coded_error`` (error text or "").
    A call that takes no step (precondition failed, or raised at once) still spends one ``noop`` so that
    time always advances and the policy cannot loop for free.
    """

    def __init__(self, env: gym.Env, coded_actions, gamma: float = 0.99):
        super().__init__(env)
        if not isinstance(env.action_space, gym.spaces.Discrete):
            raise ValueError(f"CodedActionsWrapper needs a Discrete action space, got {env.action_space}")
        # a sandbox.AgentCode, or trusted in-process callables
        self.driver = LocalActions(list(coded_actions)) if isinstance(coded_actions, (list, tuple)) else coded_actions
        self.coded_actions = list(self.driver.specs)
        self.gamma = float(gamma)
        self.n_primitive = int(env.action_space.n)
        self.action_space = gym.spaces.Discrete(self.n_primitive + len(self.coded_actions))
        names = list(self.primitive_actions)
        if "noop" not in names:
            raise ValueError("the wrapped environment has no 'noop' primitive action")
        self._noop = names.index("noop")
        self.call_counts = {a.name: 0 for a in self.coded_actions}
        self.failure_counts = {a.name: 0 for a in self.coded_actions}
        self.allowance: StepAllowance | None = None

    def close(self):
        close = getattr(self.driver, "close", None)
        if close is not None:
            close()
        super().close()

    def share_allowance(self, allowance: StepAllowance | None) -> None:
        """Cut coded calls to the trainer's budget (see StepAllowance); None lifts the limit."""
        self.allowance = allowance

    @property
    def action_names(self) -> list[str]:
        return self.primitive_actions + [a.name for a in self.coded_actions]

    def action_mask(self) -> np.ndarray:
        mask = np.ones(self.action_space.n, dtype=bool)
        mask[self.n_primitive:] = self.driver.mask(self.game)  # a raising precondition masks its action
        return mask

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        info = dict(info)
        info.update(primitive_steps=0, option_reward=0.0, coded_call="", coded_error="",
                    action_mask=self.action_mask())
        return obs, info

    def step(self, action: Any):
        a = int(action)
        if not 0 <= a < self.action_space.n:
            raise ValueError(f"action {a} is outside Discrete({self.action_space.n})")
        cap = self.allowance.cap_for_next_env() if self.allowance is not None else None
        if a < self.n_primitive:
            obs, reward, terminated, truncated, info = self.env.step(a)
            info = dict(info)
            info.update(primitive_steps=1, option_reward=float(reward), coded_call="", coded_error="")
        else:
            obs, reward, terminated, truncated, info = self._run_coded(self.coded_actions[a - self.n_primitive], cap)
        if self.allowance is not None:
            self.allowance.spend(info["primitive_steps"])
        info["action_mask"] = self.action_mask()
        return obs, reward, terminated, truncated, info

    def _run_coded(self, action, cap: int | None = None):
        self.call_counts[action.name] += 1
        limit = action.max_steps if cap is None else min(action.max_steps, cap)
        outcome = self.driver.execute(self.env, action.name, gamma=self.gamma, max_steps=limit)
        error = outcome.error or ("precondition failed: the action cannot run here"
                                  if outcome.precondition_failed else "")
        if error:
            self.failure_counts[action.name] += 1
        if outcome.steps == 0:
            # nothing moved: spend one noop so a call always costs time (see class docstring)
            obs, reward, terminated, truncated, info = self.env.step(self._noop)
            info = dict(info)
            info.update(primitive_steps=1, option_reward=float(reward), coded_call=action.name, coded_error=error)
            return obs, float(reward), terminated, truncated, info
        info = dict(outcome.info)
        info.update(primitive_steps=int(outcome.steps), option_reward=float(outcome.reward),
                    coded_call=action.name, coded_error=error)
        return (outcome.obs, float(outcome.discounted_reward), bool(outcome.terminated),
                bool(outcome.truncated), info)

