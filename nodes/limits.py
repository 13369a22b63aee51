"""The run's limits in one place: environment-step budget, wall time and model calls.

Nodes call `limit_reached` before starting expensive work; the answer is a readable stop reason
(it goes into the report) or None. The limits are the run's `nodes.settings.RunSettings`, which
also declares their defaults.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from nodes.attempt.results import CODE_TOOL, CONFIGURE_TOOL, TRAIN_TOOL
from nodes.settings import RunSettings
from rl import MIN_TRAIN_STEPS  # the smallest PPO run; nodes import it from here


def budget_left(state: Mapping[str, Any]) -> int:
    return int(state.get("budget_steps", 0)) - int(state.get("env_steps_spent", 0))


def model_calls(model: Any) -> int:
    usage = getattr(model, "usage", None)
    return usage.total().calls if usage is not None else 0


def limit_reached(state: Mapping[str, Any], settings: RunSettings, model: Any, need_steps: int = 1) -> str | None:
    """Why the loops must stop now, or None. `need_steps`: the smallest useful next spend."""
    left = budget_left(state)
    if left < need_steps:
        return (f"environment-step budget reached: {state.get('env_steps_spent', 0)} of "
                f"{state.get('budget_steps', 0)} steps spent")
    max_wall = settings.max_wall_s
    started = float(state.get("started_at") or 0.0)
    if max_wall and started and time.time() - started >= float(max_wall):
        return f"wall-time limit reached: {time.time() - started:.0f} s of {float(max_wall):.0f} s"
    max_calls = settings.max_model_calls
    if max_calls and model_calls(model) >= int(max_calls):
        return f"model-call limit reached: {model_calls(model)} of {int(max_calls)} calls"
    return None


def train_steps_within(asked: int, most: int, least: int | None = MIN_TRAIN_STEPS) -> int:
    """A training's total_steps: `asked`, at most `most` (what it may spend) and at least `least`, which wins
    when `most` is smaller (rl.config refuses a shorter run). least=None: no floor (the tool refuses what is
    too short)."""
    capped = min(asked, most)
    return capped if least is None else max(least, capped)


def fit_calls_to_budget(calls: Sequence[Mapping[str, Any]], left: int) -> tuple[list[dict], list[str]]:
    """The model's tool calls cut to the `left` env steps of the run's budget, so that no round overruns it.

    Code tests share what is left: each test's `max_steps` is at most its share, and tests beyond one
    step each are dropped. A PPO configuration or training gets at most what is left (PPO itself holds
    its `total_steps` to within num_envs - 1). Arguments that do not parse are left to the tool to refuse.
    Returns the calls and a note per change, for the events log."""
    from tools.run_code import RunCodeArgs  # heavy (the sandbox and Crafter): only when calls are fitted

    left = max(int(left), 0)
    code_calls = sum(c.get("name") == CODE_TOOL for c in calls)
    kept_tests = min(code_calls, left)
    share = left // kept_tests if kept_tests else 0
    out, notes, seen = [], [], 0
    for call in calls:
        name, args = call.get("name"), dict(call.get("args") or {})
        if name == CODE_TOOL:
            seen += 1
            if seen > kept_tests:
                notes.append(f"dropped code test {seen}: {left} env steps are left for {code_calls} tests")
                continue
            asked = _as_int(args.get("max_steps", RunCodeArgs.model_fields["max_steps"].default))
            if asked is not None and asked > share:
                args["max_steps"] = share
                notes.append(f"code test {seen}: max_steps {asked} -> {share} (its share of {left} steps left)")
        elif name in (CONFIGURE_TOOL, TRAIN_TOOL) and isinstance(args.get("rl_config"), dict):
            config = dict(args["rl_config"])
            ppo = config.get("ppo", {})
            if isinstance(ppo, dict):
                from rl.ppo import PPOSettings  # torch: loaded only for a training call

                asked = _as_int(ppo.get("total_steps", PPOSettings.total_steps))
                fitted = asked if asked is None else train_steps_within(asked, left, least=None)
                if fitted != asked:
                    config["ppo"] = {**ppo, "total_steps": fitted}
                    args["rl_config"] = config
                    notes.append(f"{name}: total_steps {asked} -> {fitted} (the steps left)")
        out.append({**call, "args": args})
    return out, notes


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
