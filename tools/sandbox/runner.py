"""Run a picklable callable in a separate, limited process and always come back with a result.

Each run is a fresh `python -m tools.sandbox.child` process. multiprocessing's spawn and
forkserver were not used: both re-import the caller's `__main__` in the child, which breaks
scripts without an `if __name__ == "__main__"` guard and would drag the caller's imports (torch,
LangGraph) into every sandbox. A fresh interpreter inherits nothing from the caller.

The parent enforces the wall clock from the moment the child reports it is ready (imports and
limits done), kills the child when it runs over, and turns every way a child can end (result,
exception, memory, signal, timeout) into a `SandboxResult` with a clear message.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable

from tools.sandbox.limits import SandboxLimits, require_posix

PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
STARTUP_TIMEOUT_S = 120.0  # imports on a loaded machine; not part of the code's own limit
# One thread per numeric library: less start-up work and address space in the child.
_THREAD_ENV = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                "NUMBA_NUM_THREADS")}


@dataclass
class SandboxResult:
    ok: bool
    value: Any = None
    error: str | None = None
    kind: str = "ok"            # ok | error | timeout | memory | crashed
    wall_time_s: float = 0.0    # from the child's "ready" to its end
    details: str | None = None  # traceback of a failure in trusted code, or the child's stderr tail
    applied: dict = field(default_factory=dict)


def run_sandboxed(target: Callable[..., Any], kwargs: dict[str, Any] | None = None,
                  limits: SandboxLimits | None = None,
                  on_progress: Callable[[Any], None] | None = None,
                  scratch_dir: str | None = None, preload: tuple[str, ...] = (),
                  setup: Callable[..., Any] | None = None,
                  setup_kwargs: dict[str, Any] | None = None) -> SandboxResult:
    """Run `target(**kwargs)` in a limited child process; never raises for what the child does.

    `target` must be a module-level function. With `on_progress`, the target also gets a
    `progress(item)` callable whose items reach `on_progress` in the parent as they happen, so
    a run that is killed still reports what it did. `scratch_dir` (kept) or a fresh temporary
    folder (removed afterwards) is the child's working directory. `preload` modules are
    imported before the limits apply. `setup(**setup_kwargs)`, trusted code, also runs before the
    limits and the clock, and its return value reaches the target as `prepared`.
    """
    require_posix()
    limits = limits or SandboxLimits()
    call = pickle.dumps((target, dict(kwargs or {}), setup, dict(setup_kwargs or {})))
    own_scratch = scratch_dir is None
    scratch = scratch_dir or tempfile.mkdtemp(prefix="rlgpt-sandbox-")
    job = {"sys_path": [p for p in sys.path if p], "preload": list(preload), "call": call,
           "limits": limits, "scratch": scratch, "with_progress": on_progress is not None}
    read_fd, write_fd = os.pipe()
    env = {**os.environ, **_THREAD_ENV,
           "PYTHONPATH": os.pathsep.join([PROJECT_ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])}
    stderr_path = os.path.join(scratch, ".child-stderr")
    try:
        with open(stderr_path, "wb") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tools.sandbox.child", str(write_fd)], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=stderr, pass_fds=(write_fd,), cwd=scratch, env=env,
                start_new_session=True)  # Ctrl-C in the caller's terminal is the caller's business
        os.close(write_fd)  # only the child writes: a dead child then reads as end of file
        write_fd = -1
        reader = Connection(read_fd, writable=False)
        read_fd = -1
        try:
            proc.stdin.write(pickle.dumps(job))
            proc.stdin.close()
        except BrokenPipeError:
            pass  # the child died at start-up; _collect reports it
        try:
            return _collect(proc, reader, limits, on_progress, stderr_path)
        finally:
            reader.close()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    finally:
        for fd in (read_fd, write_fd):
            if fd >= 0:
                os.close(fd)
        if own_scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def _collect(proc, reader: Connection, limits: SandboxLimits, on_progress, stderr_path: str) -> SandboxResult:
    started = time.monotonic()
    deadline = started + STARTUP_TIMEOUT_S
    ready = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            proc.kill()
            if not ready:
                return SandboxResult(False, error=f"the sandbox did not start within {STARTUP_TIMEOUT_S:g} s",
                                     kind="crashed")
            return SandboxResult(False, kind="timeout", wall_time_s=time.monotonic() - started,
                                 error=f"timed out after {limits.wall_time_s:g} s (wall-clock limit); look for "
                                       "a loop that never ends or never yields")
        if not reader.poll(min(remaining, 0.25)):
            continue
        try:
            message = reader.recv()
        except (EOFError, OSError):
            return _crashed(proc, limits, started, stderr_path)
        if message[0] == "ready":
            ready = True
            started = time.monotonic()
            deadline = started + limits.wall_time_s
            continue
        if message[0] == "progress":
            if on_progress is not None:
                on_progress(message[1])
            continue
        kind, payload, details, applied = message
        elapsed = time.monotonic() - started
        if kind == "ok":
            return SandboxResult(True, value=payload, wall_time_s=elapsed, applied=applied)
        if kind == "memory":
            return SandboxResult(False, error=f"exceeded the memory limit of {limits.memory_mb} MiB",
                                 kind="memory", wall_time_s=elapsed, applied=applied)
        return SandboxResult(False, error=payload, kind="error", details=details,
                             wall_time_s=elapsed, applied=applied)


def _stderr_tail(path: str, limit: int = 2000) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read()[-limit:].decode("utf-8", "replace")
    except OSError:
        return ""


def _crashed(proc, limits: SandboxLimits, started: float, stderr_path: str) -> SandboxResult:
    code = proc.wait()
    elapsed = time.monotonic() - started
    details = _stderr_tail(stderr_path)
    if code < 0 and -code == signal.SIGXCPU:
        return SandboxResult(False, error=f"timed out after {limits.wall_time_s:g} s (CPU-time limit)",
                             kind="timeout", wall_time_s=elapsed, details=details)
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return SandboxResult(False, error=f"the sandboxed process was killed by {name} (often a sign of "
                                          f"exceeding the memory limit of {limits.memory_mb} MiB)",
                             kind="crashed", wall_time_s=elapsed, details=details)
    return SandboxResult(False, error=f"the sandboxed process ended without a result (exit code {code})",
                         kind="crashed", wall_time_s=elapsed, details=details)
