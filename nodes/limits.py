"""The run's limits in one place: environment-step budget, wall time and model calls.

Nodes call `limit_reached` before starting expensive work; the answer is a readable stop reason
(it goes into the report) or None. Settings come from `graph.settings.RunSettings`; knobs that a
settings object may lack fall back to the defaults here so that nodes work with any settings.
"""

from __future__ import annotations

import time
from typing import Any

DEFAULT_TARGET = 0.9          # success rate at which an attempt passes outright
DEFAULT_TEST_EPISODES = 8     # code-test seeds per measurement
MIN_TRAIN_STEPS = 1_000       # smallest PPO run rl.config accepts
MAX_REPLANS = 1


def knob(settings: Any, name: str, default: Any) -> Any:
    value = getattr(settings, name, None)
    return default if value is None else value


def target_success(settings: Any) -> float:
    return float(knob(settings, "target_success", DEFAULT_TARGET))


def skill_threshold(settings: Any) -> float:
    return float(knob(settings, "skill_threshold", 0.5))


def test_episodes(settings: Any) -> int:
    default = min(DEFAULT_TEST_EPISODES, int(knob(settings, "eval_episodes", DEFAULT_TEST_EPISODES)))
    return int(knob(settings, "test_episodes", default))


def budget_left(state: dict) -> int:
    return int(state.get("budget_steps", 0)) - int(state.get("env_steps_spent", 0))


def model_calls(model: Any) -> int:
    usage = getattr(model, "usage", None)
    return usage.total().calls if usage is not None else 0


def limit_reached(state: dict, settings: Any, model: Any, need_steps: int = 1) -> str | None:
    """Why the loops must stop now, or None. `need_steps`: the smallest useful next spend."""
    left = budget_left(state)
    if left < need_steps:
        return (f"environment-step budget reached: {state.get('env_steps_spent', 0)} of "
                f"{state.get('budget_steps', 0)} steps spent")
    max_wall = knob(settings, "max_wall_s", None)
    started = float(state.get("started_at") or 0.0)
    if max_wall and started and time.time() - started >= float(max_wall):
        return f"wall-time limit reached: {time.time() - started:.0f} s of {float(max_wall):.0f} s"
    max_calls = knob(settings, "max_model_calls", None)
    if max_calls and model_calls(model) >= int(max_calls):
        return f"model-call limit reached: {model_calls(model)} of {int(max_calls)} calls"
    return None
