"""`run_code_in_env`: test agent-written coded actions in a fresh Crafter episode, safely.

The code is linted here (instant feedback, no process started), then loaded in a sandbox process
(`sandbox.AgentCode`) while the episode is played here: the code only names actions, this side steps
the environment and counts. Whatever the code does, the caller gets a `CodeRunReport` back: a
violation, a syntax or runtime error (with the line in the agent's code), a timeout or the memory
limit is an `error`, never an exception.

Which coded action runs: `action` when given, else the one named `main`, else the last coded
action the code defines. Steps are counted honestly: `steps` is every primitive environment
step the code took, also when the run was stopped by a limit.
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from typing import Any

from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from envs.crafter_env import CrafterEnv
from envs.seeds import check_training_seed
from envs.tasks import UnknownTaskError, get_task
from sandbox import (
    ALLOWED_MODULES,
    AgentCode,
    CodeRejected,
    SandboxLimits,
    SandboxUnavailable,
    UnsafeCodeError,
    check_source,
)
from sandbox.wire import clean_text
from tools.trace import TraceBuilder

DEFAULT_OUTPUT_DIR = os.path.join("runs", "code_runs")
MAX_STEPS_LIMIT = 10_000
MAX_GIF_FRAMES = 300
GIF_FPS = 8
GIF_MIN_WIDTH = 192


class CodeRunReport(BaseModel):
    """What one test run of agent code did."""

    ok: bool = Field(description="the code ran without error (it may still have missed the task)")
    error: str | None = Field(None, description="what went wrong, with the line in the agent's code")
    failure_kind: str | None = Field(
        None, description="input | unsafe | load | runtime | precondition | timeout | memory | crashed")
    task: str = ""
    seed: int = 0
    action: str | None = Field(None, description="the coded action that ran")
    task_success: bool = False
    steps: int = Field(0, description="primitive environment steps the code used")
    achievements_unlocked: list[str] = Field(default_factory=list)
    inventory_before: dict[str, int] = Field(default_factory=dict)
    inventory_after: dict[str, int] = Field(default_factory=dict)
    trace: str = ""
    gif_path: str | None = None
    wall_time_s: float = 0.0

    def to_text(self) -> str:
        """Compact summary for a language model (the tool's message content)."""
        status = "ok" if self.ok else f"FAILED ({self.failure_kind})"
        lines = [f"run: {status}; task {self.task} seed {self.seed}; action {self.action or '-'}",
                 f"task success: {self.task_success}; steps used: {self.steps}"]
        if self.error:
            lines.append(f"error: {self.error}")
        if self.achievements_unlocked:
            lines.append(f"achievements unlocked: {', '.join(self.achievements_unlocked)}")
        changes = _inventory_changes(self.inventory_before, self.inventory_after)
        if changes:
            lines.append(f"inventory changes: {changes}")
        if self.trace:
            lines.append("trace:\n" + self.trace)
        if self.gif_path:
            lines.append(f"gif: {self.gif_path}")
        return "\n".join(lines)


def _inventory_changes(before: dict[str, int], after: dict[str, int]) -> str:
    parts = [f"{k} {after.get(k, 0) - before.get(k, 0):+d}" for k in sorted(set(before) | set(after))
             if after.get(k, 0) != before.get(k, 0)]
    return ", ".join(parts)


class _Progress:
    """What the code did, step by step, as the trusted side saw it: the whole story also when a limit
    stopped it."""

    def __init__(self, env, gif: bool) -> None:
        self.env = env
        self.trace = TraceBuilder()
        self.inventory_before = dict(env.game.inventory)
        self.inventory = dict(self.inventory_before)
        self.achievements = sorted(env.game.achievements)
        self.steps = 0
        self.frames = [env.render()] if gif else []
        self.deadline = float("inf")

    def on_step(self, name: str, obs, reward: float, info: dict) -> None:
        self.steps += 1
        inventory = dict(info["inventory"])
        new = [a for a in info["achievements"] if a not in self.achievements]
        self.trace.step(self.steps, name, _events(self.inventory, inventory, new, reward))
        self.inventory, self.achievements = inventory, list(info["achievements"])
        if self.frames and len(self.frames) < MAX_GIF_FRAMES:
            self.frames.append(self.env.render())
        if time.monotonic() > self.deadline:
            raise _OutOfTime

    def on_print(self, text: str) -> None:
        self.trace.printed(self.steps, text)


class _OutOfTime(Exception):
    """The test's wall-clock limit passed (raised from the step callback, in trusted code)."""


def _events(before: dict[str, int], after: dict[str, int], new_achievements: list[str], reward: float) -> list[str]:
    events = [f"{key} {after.get(key, 0) - before.get(key, 0):+d}" for key in sorted(set(before) | set(after))
              if after.get(key, 0) != before.get(key, 0)]
    events += [f"unlocked {a}" for a in new_achievements]
    if reward:
        events.append(f"reward {reward:g}")
    return events


def default_wall_time(max_steps: int) -> float:
    """Generous for honest code (start-up plus ~20 ms a step), short for code that stalls on purpose."""
    return 15.0 + 0.02 * max_steps


def choose_action(names: list[str], wanted: str | None) -> str:
    """`wanted`, else `main`, else the last coded action the code defines; LookupError if absent."""
    if wanted is not None:
        if wanted not in names:
            raise LookupError(f"the code defines no coded action named '{wanted}'; it defines: {', '.join(names)}")
        return wanted
    return "main" if "main" in names else names[-1]


def run_code(code: str, task: str = "collect_wood", seed: int = 0, max_steps: int = 500,
             action: str | None = None, gif: bool = False, *, wall_time_s: float | None = None,
             memory_mb: int = 512, output_dir: str = DEFAULT_OUTPUT_DIR) -> CodeRunReport:
    """Run agent code in a fresh episode; the code runs in the sandbox, the episode here. Always returns a report."""
    start = time.monotonic()
    base: dict[str, Any] = {"task": str(task), "seed": seed if isinstance(seed, int) else 0}

    def failed(kind: str, error: str, **extra) -> CodeRunReport:
        return CodeRunReport(ok=False, failure_kind=kind, error=clean_text(error),
                             wall_time_s=round(time.monotonic() - start, 3), **{**base, **extra})

    problem = _input_problem(task, seed, max_steps, action)
    if problem:
        return failed("input", problem)
    base["task"] = get_task(task).name
    try:
        check_source(code)  # the lint: an early, readable error before any process starts
    except UnsafeCodeError as exc:
        return failed("unsafe", str(exc))

    env = CrafterEnv(task=base["task"], obs_kind="symbolic", max_steps=max_steps)
    env.reset(seed=seed)
    progress = _Progress(env, gif)
    wall = wall_time_s or default_wall_time(max_steps)
    limits = SandboxLimits(memory_mb=memory_mb, load_timeout_s=min(wall, SandboxLimits.load_timeout_s))
    try:
        agent_code = AgentCode([code], limits=limits)
    except CodeRejected as exc:
        if "MemoryError" in str(exc):
            return failed("memory", f"exceeded the memory limit of {memory_mb} MiB ({exc})")
        return failed(exc.kind, str(exc))
    except SandboxUnavailable as exc:
        return failed("crashed", f"the code could not be run: {exc}; this is not your code's fault")
    with agent_code:
        try:
            name = choose_action(agent_code.names, action)
        except LookupError as exc:
            return failed("load", str(exc))
        progress.deadline = start + wall
        try:
            outcome = agent_code.execute(env, name, max_steps=_step_limit(agent_code, name, max_steps),
                                         on_step=progress.on_step, on_print=progress.on_print)
        except _OutOfTime:
            return failed("timeout", f"timed out after {wall:g} s (wall-clock limit) after {progress.steps} steps",
                          **_seen(progress, name))
    gif_path = _write_gif(progress.frames, output_dir, base) if gif else None
    error, kind = outcome.error, None
    if error:
        kind = "precondition" if outcome.precondition_failed else _failure_kind(error)
        if kind == "memory":
            error = f"exceeded the memory limit of {memory_mb} MiB ({error})"
        elif kind == "timeout":
            error = f"{error}; stopped after {outcome.steps} steps"
    return CodeRunReport(
        ok=error is None, error=error, failure_kind=kind, action=name,
        task_success=env.task.is_success(set(env.game.achievements)), steps=outcome.steps,
        achievements_unlocked=sorted(env.game.achievements), inventory_before=progress.inventory_before,
        inventory_after=dict(env.game.inventory), trace=progress.trace.render(), gif_path=gif_path,
        wall_time_s=round(time.monotonic() - start, 3), **base)


def _step_limit(code: AgentCode, name: str, max_steps: int) -> int:
    """The test's budget, or the action's own @coded_action(max_steps=...) when it declared a smaller one."""
    spec = next(s for s in code.specs if s.name == name)
    return min(spec.max_steps, max_steps) if spec.declared_max_steps else max_steps


def _failure_kind(error: str) -> str:
    if error.startswith("no answer within"):
        return "timeout"
    if "MemoryError" in error:
        return "memory"
    if error.startswith("the sandbox process"):
        return "crashed"
    return "runtime"


def _seen(progress: _Progress, name: str) -> dict[str, Any]:
    return dict(action=name, steps=progress.steps, achievements_unlocked=sorted(progress.achievements),
                inventory_before=progress.inventory_before, inventory_after=progress.inventory,
                trace=progress.trace.render())


def _input_problem(task: Any, seed: Any, max_steps: Any, action: Any) -> str | None:
    try:
        get_task(task)
    except UnknownTaskError as exc:
        return str(exc)
    if not isinstance(seed, int) or isinstance(seed, bool):
        return f"seed must be an integer, got {seed!r}"
    try:
        check_training_seed(seed, what="code tests")
    except ValueError as exc:
        return str(exc)
    if not isinstance(max_steps, int) or not 1 <= max_steps <= MAX_STEPS_LIMIT:
        return f"max_steps must be an integer from 1 to {MAX_STEPS_LIMIT}, got {max_steps!r}"
    if action is not None and (not isinstance(action, str) or not action.isidentifier()):
        return f"action must be the name of a coded action in the code, got {action!r}"
    return None


def _write_gif(frames: list, output_dir: str, base: dict) -> str | None:
    """The test episode as a GIF (frames rendered here, from the trusted env)."""
    if not frames:
        return None
    import imageio.v2 as imageio  # only runs that ask for a GIF pay for the import

    scale = max(1, GIF_MIN_WIDTH // frames[0].shape[1])  # Crafter frames are tiny: enlarge, pixel-exact
    frames = [f.repeat(scale, axis=0).repeat(scale, axis=1) for f in frames]
    os.makedirs(output_dir, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    target = os.path.join(output_dir, f"{base['task']}-seed{base['seed']}-{stamp}.gif")
    imageio.mimsave(target, frames, duration=1000.0 / GIF_FPS, loop=0)
    return target


class RunCodeArgs(BaseModel):
    code: str = Field(description="Python source defining one or more coded actions: generator functions "
                                  "`def name(game): ... yield 'move_left'` that yield primitive action names")
    task: str = Field("collect_wood", description="task name, e.g. collect_wood, place_table")
    seed: int = Field(0, ge=0, description="world seed for the test episode (training seeds only)")
    max_steps: int = Field(500, ge=1, le=MAX_STEPS_LIMIT, description="primitive step budget of the test")
    action: str | None = Field(None, description="coded action to run; default: `main`, else the last one defined")
    gif: bool = Field(False, description="also save a GIF of the episode")


def _tool_entry(code: str, task: str = "collect_wood", seed: int = 0, max_steps: int = 500,
                action: str | None = None, gif: bool = False) -> tuple[str, CodeRunReport]:
    report = run_code(code, task=task, seed=seed, max_steps=max_steps, action=action, gif=gif)
    return report.to_text(), report


_MODULES = ", ".join(m for m in ALLOWED_MODULES if m != "envs.coded")

run_code_in_env = StructuredTool.from_function(
    func=_tool_entry,
    name="run_code_in_env",
    description=(
        "Test coded actions in a fresh Crafter episode and get back what happened: success or the error "
        "with its line, primitive steps used, achievements unlocked, inventory before/after and a trace. "
        f"The code runs sandboxed: imports only from {_MODULES}; no names or attributes starting with '_', "
        "no open/eval/exec/getattr/type, no classes. "
        "Runs `action`, else the function named `main`, else the last coded action defined."),
    args_schema=RunCodeArgs,
    response_format="content_and_artifact",
)
