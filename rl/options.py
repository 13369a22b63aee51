"""CodedActionsWrapper: the policy's action head = the primitive actions + one action per coded action.

A coded action is an option: choosing it runs one call (``envs.coded.run_option``: the env steps here, the
code only names actions) until it returns, hits its step limit or the episode ends, and the wrapper hands
PPO one transition carrying the discounted reward sum and ``info["primitive_steps"]`` so the learner can
discount by gamma**steps. Agent-written actions come as a ``sandbox.AgentCode``; the project's own
callables (tests, toys) as a list of ``envs.coded.CodedAction``, driven in-process.

Both sides of that info protocol live here: the wrapper writes the fields; the functions at the end read
them back out of a vector env's batched infos for the learner (rl/ppo.py), and ``CodedStats`` counts the
calls and errors they report. ``StepAllowance`` lets a trainer cut coded calls to the steps it has left.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Generator
from copy import deepcopy
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import concatenate, iterate

from envs.coded import LocalActions, StepCoroutine, ask_later, drive, option_steps


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


def share_allowance(envs: gym.vector.VectorEnv) -> StepAllowance | None:
    """One allowance for the envs a SyncVectorEnv steps in this process, given to their CodedActionsWrappers.
    None where the envs live in other processes, or run their own options (no CodedActionsWrapper)."""
    if not isinstance(envs, gym.vector.SyncVectorEnv):
        return None
    allowance = StepAllowance()
    try:
        envs.call("share_allowance", allowance)
    except AttributeError:
        return None
    return allowance


class CodedActionsWrapper(GameForwarding):
    """``Discrete(n_primitive + k)``. Index ``n_primitive + j`` runs ``coded_actions[j]``.

    ``info`` always has ``primitive_steps``, ``option_reward`` (undiscounted reward of the transition),
    ``action_mask`` (bool, n_primitive + k: primitives always allowed, a coded action only when its
    precondition holds), ``coded_call`` (name or "") and ``coded_error`` (error text or "").
    A call that takes no step (precondition failed, or raised at once) still spends one ``noop`` so that
    time always advances and the policy cannot loop for free.

    With ``decision_steps`` the policy decides again after that many primitive steps of a coded call: the call
    is left open, choosing the same action next continues it where it stopped (within its own ``max_steps``
    in all), and any other choice ends it. The policy then watches the code run and learns where to step in
    (a call that ends by itself before ``decision_steps`` returns as usual).
    """

    def __init__(self, env: gym.Env, coded_actions, gamma: float = 0.99, decision_steps: int | None = None):
        super().__init__(env)
        if not isinstance(env.action_space, gym.spaces.Discrete):
            raise ValueError(f"CodedActionsWrapper needs a Discrete action space, got {env.action_space}")
        # a sandbox.AgentCode, or trusted in-process callables
        self.driver = LocalActions(list(coded_actions)) if isinstance(coded_actions, (list, tuple)) else coded_actions
        self.coded_actions = list(self.driver.specs)
        self.gamma = float(gamma)
        self.n_primitive = int(env.action_space.n)
        self.n_actions = self.n_primitive + len(self.coded_actions)
        self.action_space = gym.spaces.Discrete(self.n_actions)  # typed Space by gym.Wrapper: use n_actions
        names = list(self.primitive_actions)
        if "noop" not in names:
            raise ValueError("the wrapped environment has no 'noop' primitive action")
        self._noop = names.index("noop")
        self.call_counts = {a.name: 0 for a in self.coded_actions}
        self.failure_counts = {a.name: 0 for a in self.coded_actions}
        self.allowance: StepAllowance | None = None
        self._longest_call = max((a.max_steps for a in self.coded_actions), default=1)
        if decision_steps is not None and decision_steps < 1:
            raise ValueError(f"decision_steps must be >= 1, got {decision_steps}")
        self.decision_steps = decision_steps
        if decision_steps is not None:
            self._longest_call = min(self._longest_call, decision_steps)
        self._open: tuple[str, int] | None = None  # the call left open at the last decision: (name, steps so far)
        self._game = None  # the game object of this episode, looked up once per reset (see `game`)

    def close(self):
        close = getattr(self.driver, "close", None)
        if close is not None:
            close()
        super().close()

    def share_allowance(self, allowance: StepAllowance | None) -> None:
        """Cut coded calls to the trainer's budget (see StepAllowance); None lifts the limit."""
        self.allowance = allowance

    def may_cut_calls(self) -> bool:
        """Whether the trainer's allowance may cut a call of this vector step short: then its envs step one
        after another, as the allowance's rule assumes (OverlappedSyncVectorEnv)."""
        a = self.allowance
        return a is not None and a.left is not None and a.left < a.pending * (self._longest_call + 1)

    @property
    def action_names(self) -> list[str]:
        return self.primitive_actions + [a.name for a in self.coded_actions]

    def action_mask(self) -> np.ndarray:
        return drive(self._mask_steps())

    def _mask_steps(self) -> Generator[Any, None, np.ndarray]:
        if self._game is None:
            self._game = self.game
        answer = ask_later(self.driver, "mask", self._game)
        yield answer
        mask = np.ones(self.n_actions, dtype=bool)
        mask[self.n_primitive:] = answer.get()  # a raising precondition masks its action
        return mask

    def end_open_call(self) -> None:
        """End the call left open at the last decision, if any (a reset or another choice does it too)."""
        if self._open is not None:
            self._open = None
            self.driver.finish()

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self.end_open_call()
        obs, info = self.env.reset(seed=seed, options=options)
        self._game = None  # an env may build a new game object on reset
        info = dict(info)
        info.update(primitive_steps=0, option_reward=0.0, coded_call="", coded_error="",
                    action_mask=self.action_mask())
        return obs, info

    def step(self, action: Any):
        return drive(self.step_requests(action))

    def step_requests(self, action: Any) -> StepCoroutine:
        """`step` as a step coroutine (envs.coded.drive): it yields each sandbox answer it waits for, so that a
        vector env can step its other envs meanwhile (OverlappedSyncVectorEnv)."""
        a = int(action)
        if not 0 <= a < self.n_actions:
            raise ValueError(f"action {a} is outside Discrete({self.n_actions})")
        cap = self.allowance.cap_for_next_env() if self.allowance is not None else None
        if self._open is not None and (a < self.n_primitive or self.coded_actions[a - self.n_primitive].name
                                       != self._open[0]):
            self.end_open_call()  # another choice ends the call left open
        if a < self.n_primitive:
            obs, reward, terminated, truncated, info = self.env.step(a)
            info = dict(info)
            info.update(primitive_steps=1, option_reward=float(reward), coded_call="", coded_error="")
        else:
            obs, reward, terminated, truncated, info = yield from self._coded_steps(
                self.coded_actions[a - self.n_primitive], cap)
        if self.allowance is not None:
            self.allowance.spend(info["primitive_steps"])
        info["action_mask"] = yield from self._mask_steps()
        return obs, reward, terminated, truncated, info

    def _coded_steps(self, action, cap: int | None = None) -> StepCoroutine:
        resume = self._open is not None  # the same action as the open call's (step_requests ended any other)
        done_before = self._open[1] if self._open is not None else 0
        if not resume:
            self.call_counts[action.name] += 1
        limit = action.max_steps - done_before
        for bound in (cap, self.decision_steps):
            limit = limit if bound is None else min(limit, bound)
        keep_open = self.decision_steps is not None and done_before + limit < action.max_steps
        self._open = None
        outcome = yield from option_steps(self.env, self.driver, action.name, gamma=self.gamma, max_steps=limit,
                                          resume=resume, keep_open=keep_open)
        if outcome.suspended:
            self._open = (action.name, done_before + outcome.steps)
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


def step_requests_of(env: gym.Env, action: Any) -> StepCoroutine:
    """``env``'s step as a step coroutine: its own ``step_requests`` where it has one (a CodedActionsWrapper, or a
    wrapper that passes one through), else its blocking step."""
    own = getattr(env, "step_requests", None)  # gymnasium wrappers do not forward attributes: only env's own
    return own(action) if own is not None else _blocking_step(env, action)


def _blocking_step(env: gym.Env, action: Any) -> StepCoroutine:
    return env.step(action)
    yield  # a generator that never waits


class OverlappedSyncVectorEnv(gym.vector.SyncVectorEnv):
    """SyncVectorEnv (same-step autoreset) that steps its envs' coded calls side by side: whenever an env waits
    for its sandbox (the next action of a call, the next action mask), it steps the other envs meanwhile, so
    the sandbox processes work out their answers while this one steps worlds. Each env sees the same actions
    and its sandbox the same requests in the same order as under SyncVectorEnv, so the results are equal step
    for step. When the trainer's step allowance may cut a call short, the envs step one after another (the
    allowance's rule depends on that order)."""

    def __init__(self, env_fns, **kwargs):
        super().__init__(env_fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP, **kwargs)
        self._may_cut = []  # one per env with coded actions (a CodedActionsWrapper in its stack)
        for env in self.envs:
            try:
                self._may_cut.append(env.get_wrapper_attr("may_cut_calls"))
            except AttributeError:
                pass
        self._overlap = bool(self._may_cut)  # without coded actions no env ever waits: SyncVectorEnv's own step

    def step(self, actions):
        if not self._overlap or any(may_cut() for may_cut in self._may_cut):
            return super().step(actions)
        runs = [step_requests_of(env, a) for env, a in zip(self.envs, iterate(self.action_space, actions))]
        results: list[Any] = [None] * self.num_envs
        waiting = deque(range(self.num_envs))
        while waiting:  # round robin: resume an env, which reads its answer, steps and sends its next request
            i = waiting.popleft()
            try:
                next(runs[i])
                waiting.append(i)
            except StopIteration as stop:
                results[i] = stop.value
        infos: dict[str, Any] = {}
        for i, env in enumerate(self.envs):  # then as SyncVectorEnv.step: autoreset, batched infos in env order
            (self._env_obs[i], self._rewards[i], self._terminations[i], self._truncations[i], info) = results[i]
            if self._terminations[i] or self._truncations[i]:
                infos = self._add_info(infos, {"final_obs": self._env_obs[i], "final_info": info}, i)
                self._env_obs[i], info = env.reset()
            infos = self._add_info(infos, info, i)
        self._observations = concatenate(self.single_observation_space, self._env_obs, self._observations)
        self._autoreset_envs = np.logical_or(self._terminations, self._truncations)
        return (deepcopy(self._observations) if self.copy else self._observations, np.copy(self._rewards),
                np.copy(self._terminations), np.copy(self._truncations), infos)


# --------------------------------------------------------------------------------------------------
# Reading these infos back from a vector env. Gymnasium batches each info key into an (n,) array with a
# "_key" presence mask; with same-step autoreset, a finished env's own info of the step sits in
# "final_info" and the top level already holds the reset's info (the next episode's action mask).
# --------------------------------------------------------------------------------------------------
def info_column(infos: dict, key: str, n: int, default: float) -> np.ndarray:
    """One info field as an (n,) float array, with ``default`` where an env did not report it."""
    out = np.full(n, default, dtype=np.float64)
    if key in infos:
        present = infos.get("_" + key, np.ones(n, dtype=bool))
        out[present] = np.asarray(infos[key])[present]
    return out


def next_action_mask(infos: dict, n: int, n_actions: int) -> np.ndarray:
    """The (n, n_actions) mask of the next decision; envs that publish none allow every action."""
    out = np.ones((n, n_actions), dtype=bool)
    if "action_mask" in infos:
        present = infos.get("_action_mask", np.ones(n, dtype=bool))
        out[present] = np.asarray(infos["action_mask"], dtype=bool)[present]
    return out


def infos_of_this_step(infos: dict, done: np.ndarray, n: int) -> dict:
    """This step's infos for every env: ``final_info`` rows for finished envs, top-level rows otherwise."""
    if not done.any():
        return infos
    final = infos.get("final_info", {})
    merged: dict[str, Any] = {}
    for key in set(infos) | set(final):
        if key.startswith("_") or key in ("final_info", "final_obs"):
            continue
        if isinstance(infos.get(key), dict) or isinstance(final.get(key), dict):
            continue
        arr = None
        present = np.zeros(n, dtype=bool)
        for src, rows in ((infos, ~done), (final, done)):
            if key not in src:
                continue
            val = np.asarray(src[key])
            has = np.asarray(src.get("_" + key, np.ones(n, dtype=bool))) & rows
            if arr is None:
                arr = np.zeros_like(val)
            arr[has] = val[has]
            present |= has
        merged[key], merged["_" + key] = arr, present
    return merged


class CodedStats:
    """What a trainer counts of its coded actions: calls and failed calls per action, and the distinct error
    messages (at most 20)."""

    def __init__(self, names) -> None:
        self.names = tuple(names)
        self.calls = np.zeros(max(len(self.names), 1), dtype=np.int64)
        self.failures = dict.fromkeys(self.names, 0)
        self.errors: list[str] = []

    def add_error(self, message: str) -> None:
        if message not in self.errors and len(self.errors) < 20:  # keep distinct messages, bounded
            self.errors.append(message)

    def count_step(self, actions: np.ndarray, n_primitive: int, step_infos: dict, n: int) -> None:
        """One vector step: the coded actions chosen (``actions`` of n_primitive and above) and their errors."""
        if not self.names:  # nothing to count: skip the per-step work
            return
        np.add.at(self.calls, actions[actions >= n_primitive] - n_primitive, 1)
        if "coded_error" not in step_infos:
            return
        present = step_infos.get("_coded_error", np.ones(n, dtype=bool))
        for i in np.flatnonzero(present):
            err, name = step_infos["coded_error"][i], step_infos.get("coded_call", [None] * n)[i]
            if err and name in self.failures:
                self.failures[name] += 1
                self.add_error(f"{name}: {err}")

    def merge(self, other: CodedStats) -> None:
        self.calls += other.calls
        for name, count in other.failures.items():
            self.failures[name] += count
        for message in other.errors:
            self.add_error(message)

    def call_counts(self) -> dict[str, int]:
        return {name: int(c) for name, c in zip(self.names, self.calls)}
