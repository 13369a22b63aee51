"""`run_code_in_env`: test agent-written coded actions in a fresh Crafter episode, safely.

The code is checked statically here (instant feedback, no process started), then loaded and run
with its own environment inside a sandboxed child process (`tools.sandbox`). Whatever the code
does, the caller gets a `CodeRunReport` back: a violation, a syntax or runtime error (with the
line in the agent's code), a timeout or the memory limit is an `error`, never an exception.

Which coded action runs: `action` when given, else the one named `main`, else the last coded
action the code defines. Steps are counted honestly: `steps` is every primitive environment
step the code took, also when the run was stopped by a limit.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from datetime import datetime
from typing import Any

from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from envs.seeds import check_training_seed
from envs.tasks import UnknownTaskError, get_task
from tools.sandbox import ALLOWED_MODULES, SandboxLimits, UnsafeCodeError, check_source, run_sandboxed
from tools.sandbox.episode import prepare_episode, run_episode
from tools.sandbox.trace import TraceBuilder

DEFAULT_OUTPUT_DIR = os.path.join("runs", "code_runs")
MAX_STEPS_LIMIT = 10_000


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
    """What the child reported while it ran; the whole story if it is killed."""

    def __init__(self) -> None:
        self.trace = TraceBuilder()
        self.action: str | None = None
        self.inventory_before: dict[str, int] = {}
        self.inventory: dict[str, int] = {}
        self.achievements: list[str] = []
        self.steps = 0

    def __call__(self, item: dict[str, Any]) -> None:
        kind = item.get("kind")
        if kind == "start":
            self.action = item["action"]
            self.inventory_before = dict(item["inventory"])
            self.inventory = dict(item["inventory"])
        elif kind == "step":
            self.steps = item["t"]
            self.inventory = dict(item["inventory"])
            self.achievements = list(item["achievements"])
            self.trace.step(item["t"], item["action"], item["events"])
        elif kind == "print":
            self.trace.printed(item["t"], item["text"])


def default_wall_time(max_steps: int) -> float:
    """Generous for honest code (start-up plus ~20 ms a step), short for an endless loop."""
    return 15.0 + 0.02 * max_steps


def run_code(code: str, task: str = "collect_wood", seed: int = 0, max_steps: int = 500,
             action: str | None = None, gif: bool = False, *, wall_time_s: float | None = None,
             memory_mb: int = 512, output_dir: str = DEFAULT_OUTPUT_DIR) -> CodeRunReport:
    """Run agent code in a fresh episode inside the sandbox; always returns a report."""
    start = time.monotonic()
    base = {"task": str(task), "seed": seed if isinstance(seed, int) else 0}

    def failed(kind: str, error: str, **extra) -> CodeRunReport:
        return CodeRunReport(ok=False, failure_kind=kind, error=error,
                             wall_time_s=round(time.monotonic() - start, 3), **{**base, **extra})

    problem = _input_problem(task, seed, max_steps, action)
    if problem:
        return failed("input", problem)
    base["task"] = get_task(task).name
    try:
        check_source(code)
    except UnsafeCodeError as exc:
        return failed("unsafe", str(exc))

    limits = SandboxLimits(wall_time_s=wall_time_s or default_wall_time(max_steps), memory_mb=memory_mb)
    progress = _Progress()
    scratch = tempfile.mkdtemp(prefix="rlgpt-code-run-")
    try:
        result = run_sandboxed(
            run_episode, dict(code=code, max_steps=max_steps, action=action, gif=gif), limits,
            on_progress=progress, scratch_dir=scratch, setup=prepare_episode,
            setup_kwargs=dict(task=base["task"], seed=seed, max_steps=max_steps, gif=gif))
        gif_path = None
        if result.ok and result.value.get("gif_file"):
            gif_path = _keep_gif(os.path.join(scratch, result.value["gif_file"]), output_dir, base)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    seen = dict(action=progress.action, steps=progress.steps, achievements_unlocked=progress.achievements,
                inventory_before=progress.inventory_before, inventory_after=progress.inventory,
                trace=progress.trace.render())
    if not result.ok:
        where = f" after {progress.steps} steps" if progress.steps else ""
        kind = {"timeout": "timeout", "memory": "memory"}.get(result.kind, "crashed")
        if result.kind == "error":
            return failed("crashed", f"the code runner failed ({result.error}); this is not your code's fault",
                          **seen)
        return failed(kind, f"{result.error}{where}", **seen)

    value = result.value
    if not value.get("loaded"):
        return failed("load", value["error"], trace=seen["trace"])
    error, kind = value["error"], None
    if error:
        kind = "precondition" if value["precondition_failed"] else "runtime"
        if "MemoryError" in error:
            kind, error = "memory", f"exceeded the memory limit of {memory_mb} MiB ({error})"
    return CodeRunReport(
        ok=error is None, error=error, failure_kind=kind, action=value["action"],
        task_success=value["task_success"], steps=value["steps"],
        achievements_unlocked=value["achievements"], inventory_before=value["inventory_before"],
        inventory_after=value["inventory_after"], trace=seen["trace"], gif_path=gif_path,
        wall_time_s=round(time.monotonic() - start, 3), **base)


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


def _keep_gif(path: str, output_dir: str, base: dict) -> str | None:
    if not os.path.isfile(path):
        return None
    os.makedirs(output_dir, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    target = os.path.join(output_dir, f"{base['task']}-seed{base['seed']}-{stamp}.gif")
    shutil.move(path, target)
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
        f"The code runs sandboxed: imports only from {_MODULES}; no names or attributes starting with '_', no open/eval/exec/getattr/type, no classes. "
        "Runs `action`, else the function named `main`, else the last coded action defined."),
    args_schema=RunCodeArgs,
    response_format="content_and_artifact",
)
