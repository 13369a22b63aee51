"""Tiny deterministic environments for the PPO and option-wrapper tests (module level: picklable)."""
from __future__ import annotations

import gymnasium as gym
import numpy as np

ACTIONS = ["noop", "step", "bad"]


class FakeGame:
    """Stands in for GameAPI: only what the test coded actions read."""

    def __init__(self):
        self.t = 0
        self.allow = True


class RewardEveryStepEnv(gym.Env):
    """Reward 1.0 on every primitive step; terminates after ``length`` steps. Exposes game/primitive_actions."""

    def __init__(self, length: int = 10):
        self.length = length
        self.primitive_actions = list(ACTIONS)
        self.action_space = gym.spaces.Discrete(len(ACTIONS))
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.game = FakeGame()
        self.actions_taken: list[int] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.game = FakeGame()
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.actions_taken.append(int(action))
        self.game.t += 1
        return (np.array([self.game.t / self.length, 0.0], np.float32), 1.0, self.game.t >= self.length, False,
                {"success": False})


class OptionChainEnv(gym.Env):
    """A stand-in for a CodedActionsWrapper-wrapped env with known option lengths.

    Action 0: one primitive step. Action 1: an 'option' of ``option_len`` primitive steps.
    Action 2: a 'coded action' whose precondition never holds (always masked).
    Every env shares ``ledger`` (sync vector env: same process) so a test can total the steps taken.
    """

    def __init__(self, ledger: list | None = None, option_len: int = 5, episode_len: int = 40):
        self.ledger = ledger if ledger is not None else []
        self.option_len, self.episode_len = option_len, episode_len
        self.action_space = gym.spaces.Discrete(3)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
        self.t = 0

    def _obs(self):
        return np.array([self.t / self.episode_len, 1.0, 0.0], np.float32)

    def _info(self, steps: int, success: bool = False):
        return {"primitive_steps": steps, "option_reward": 0.0, "success": success,
                "action_mask": np.array([True, True, False])}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), self._info(0)

    def step(self, action):
        action = int(action)
        if action == 2:
            raise AssertionError("the masked action was chosen")
        k = 1 if action == 0 else self.option_len
        self.t += k
        self.ledger.append(k)
        done = self.t >= self.episode_len
        return self._obs(), 0.0, done, False, self._info(k, success=done)


class OptionChainFactory:
    def __init__(self, ledger: list):
        self.ledger = ledger

    def __call__(self):
        return OptionChainEnv(self.ledger)


# ---- coded actions over FakeGame (module level so they pickle) --------------------------------------
def three_steps(game):
    for _ in range(3):
        yield "step"


def raise_after_two(game):
    yield "step"
    yield "step"
    raise KeyError("no tree here")


def nothing(game):
    return
    yield  # a generator that yields nothing


def bad_name(game):
    yield "fly"


def forever(game):
    while True:
        yield "step"


class InfoVarietyEnv(gym.Env):
    """Infos of every shape a vector env must batch: keys only some envs or steps report, a key whose type
    differs between envs (int here, float there), strings, arrays, a nested dict; episodes of random length
    (from the reset seed) that end by termination or by truncation. For comparing vector envs."""

    def __init__(self, index: int = 0, fail_at: int | None = None, hang_at: int | None = None,
                 die_at: int | None = None):
        self.index, self.fail_at, self.hang_at, self.die_at = index, fail_at, hang_at, die_at
        self.action_space = gym.spaces.Discrete(4)
        self.observation_space = gym.spaces.Box(-1e6, 1e6, (3,), np.float32)
        self.t, self.calls, self.limit = 0, 0, 1

    def _obs(self):
        return np.array([self.index, self.t, self.np_random.random()], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.limit = 0, int(self.np_random.integers(2, 12))
        info = {"start": self.index} if self.index % 2 else {}
        return self._obs(), info

    def step(self, action):
        self.calls += 1
        if self.calls == self.fail_at:
            raise KeyError(f"env {self.index} broke on call {self.calls}")
        if self.calls == self.hang_at:
            import time
            time.sleep(3600)
        if self.calls == self.die_at:
            import os
            os._exit(3)
        self.t += 1
        info = {"steps": self.t, "mixed": self.index if self.index % 2 else self.index + 0.5,
                "name": f"env{self.index}-{int(action)}", "mask": np.arange(4) <= int(action)}
        if self.t % 3 == 0:
            info["every_third"] = True
            info["nested"] = {"a": self.t * 1.5, "deep": {"b": np.int32(self.index)}}
        end = self.t >= self.limit
        terminated = end and self.index % 2 == 0
        return self._obs(), float(action) + self.t, terminated, end and not terminated, info


class InfoVarietyFactory:
    def __init__(self, index: int, **kwargs):
        self.index, self.kwargs = index, kwargs

    def __call__(self):
        return InfoVarietyEnv(self.index, **self.kwargs)


class FileLedger:
    """A ledger that survives process boundaries: each append is one line in a file (actor workers)."""

    def __init__(self, path):
        self.path = str(path)

    def append(self, k: int) -> None:
        with open(self.path, "a") as f:
            f.write(f"{k}\n")

    def entries(self) -> list[int]:
        try:
            with open(self.path) as f:
                return [int(line) for line in f]
        except FileNotFoundError:
            return []


class FileLedgerOptionChainFactory:
    """OptionChainEnv whose steps are recorded in ``folder``/env-<pid>-<n>.txt, readable from the test."""

    def __init__(self, folder):
        self.folder = str(folder)

    def __call__(self):
        import os
        import uuid

        return OptionChainEnv(FileLedger(os.path.join(self.folder, f"env-{os.getpid()}-{uuid.uuid4().hex}.txt")))


class FailingCodedActionFactory:
    """RewardEveryStepEnv with one coded action that raises after two steps (failure accounting)."""

    def __call__(self):
        from envs.coded import as_coded_action
        from rl.options import CodedActionsWrapper

        return CodedActionsWrapper(RewardEveryStepEnv(20), [as_coded_action(raise_after_two)], gamma=0.99)


def next_worlds(envs, state):
    """For run_in_workers: each env's prepared world, and the (seed, episode) its next reset starts."""
    out = []
    for env in envs:
        seeds = env.get_wrapper_attr("_seed_of")(env.get_wrapper_attr("_episode"))
        out.append((env.unwrapped.backend._spare_world, (seeds, 0)))
    return out


def leave_failing_work(envs, state):
    """For run_in_workers: leaves work for the wait before the next command that raises."""
    from rl.vector import BETWEEN_COMMANDS

    def fail(envs):
        raise OSError("no room to build the next world")

    state[BETWEEN_COMMANDS] = fail
    return "left"
