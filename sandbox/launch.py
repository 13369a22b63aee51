"""How a sandbox process starts: the command, an empty environment, namespaces where bubblewrap works.

The process is `python -I -B -c BOOT ROOT` (isolated mode: no PYTHON* variables, no user site), with no
inherited environment variable, in a new session (its own process group, no controlling terminal), and
with stdin/stdout as its only channel. Where `bwrap` is installed and allowed to make namespaces (as
root, or as a user where unprivileged user namespaces are enabled), it runs inside new user, PID,
network, IPC, UTS and mount namespaces whose file system holds only the read-only Python runtime and
the two project packages the child imports (`envs`, `sandbox`): no home folder, no checkout, no
results, no /etc. Elsewhere it runs without them and says so (see sandbox.host for the policy).

A started process only imports and waits for its job, so one is kept started ahead (a spare): a code
test then does not wait for the interpreter and numpy to load.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PROJECT_ROOT = str(Path(__file__).resolve().parents[1])
CHILD_PACKAGES = ("envs", "sandbox")
BOOT = ("import sys; sys.path[:0] = sys.argv[1:]\n"
        "from sandbox.child import run\n"
        "run()")
# The namespace probe: the child's own imports, from the same places, in the same bwrap command, then exit.
PROBE = ("import sys; sys.path[:0] = sys.argv[1:]\n"
         "import sandbox.child")
# Not secrets: one thread per numeric library, and the machine's OpenBLAS settings where it has them.
_PASSED_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_THREAD_ENV = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}

_live: weakref.WeakSet[subprocess.Popen] = weakref.WeakSet()
_lock = threading.Lock()
_spare: subprocess.Popen | None = None
_spare_owner = 0
_spawner_pool: ThreadPoolExecutor | None = None
_spawner_pid = 0
PROBE_TIMEOUT_S = 60.0  # as the host's start-up deadline: the imports on a loaded machine
_bwrap_ok: bool | None = None
_bwrap_problem = ""


def child_env() -> dict[str, str]:
    env = dict(_THREAD_ENV)
    env.update({k: os.environ[k] for k in _PASSED_ENV if k in os.environ})
    return env


def _runtime_dirs() -> list[str]:
    """Directories the child's Python needs to read: the interpreter's prefixes and site-packages."""
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
            str(Path(os.path.realpath(sys.executable)).parent.parent)}
    dirs |= {p for p in sys.path if p and "-packages" in p and os.path.isdir(p)}
    dirs = {os.path.abspath(d) for d in dirs}
    kept = sorted(d for d in dirs if os.path.isdir(d) and not d.startswith("/usr/"))
    # drop a directory already inside another bound one
    return [d for d in kept if not any(d != o and d.startswith(o.rstrip("/") + "/") for o in kept)]


def bwrap_command() -> list[str]:
    """The bwrap arguments. bwrap mounts in the order given, each on top of the ones before: the fresh
    /proc, /dev and empty /tmp come first, so that the runtime and the project packages bound after them
    stay visible wherever they live (a checkout or venv under /tmp included). bwrap is the one this
    process's PATH finds (the child's empty environment has none)."""
    args = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--uid", "65534", "--gid", "65534",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind", "/usr", "/usr"]
    for top in ("/lib", "/lib64", "/lib32", "/bin", "/sbin"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for path in _runtime_dirs():
        args += ["--ro-bind", path, path]
    for package in CHILD_PACKAGES:
        path = os.path.join(PROJECT_ROOT, package)
        args += ["--ro-bind", path, path]
    args += ["--chdir", "/"]
    return args


def namespaces_available() -> tuple[bool, str]:
    """(bwrap works here, why not). Probed once per process by starting the sandbox's interpreter in the
    bwrap command and importing what the child imports: a file system that lacks part of the runtime or
    of the project fails here, before any code runs, instead of at every sandbox start."""
    global _bwrap_ok, _bwrap_problem
    if _bwrap_ok is None:
        if shutil.which("bwrap") is None:
            _bwrap_ok, _bwrap_problem = False, "bubblewrap (bwrap) is not installed"
        else:
            try:
                probe = subprocess.run([*bwrap_command(), "--", *_python(PROBE)], env=child_env(), cwd="/",
                                       stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT_S)
                _bwrap_ok = probe.returncode == 0
                why = probe.stderr.decode(errors="replace").strip()[-300:]  # a traceback's end names the error
                if _bwrap_ok:
                    _bwrap_problem = ""
                elif why.startswith("bwrap:"):
                    _bwrap_problem = f"bwrap cannot create namespaces here: {why}"
                else:
                    _bwrap_problem = f"the sandbox's imports fail inside bwrap: {why or probe.returncode}"
            except (OSError, subprocess.TimeoutExpired) as exc:
                _bwrap_ok, _bwrap_problem = False, f"bwrap failed to start ({exc})"
    return _bwrap_ok, _bwrap_problem


def _python(program: str) -> list[str]:
    # normalized: a path such as checkout/tests/../.venv/bin/python names folders the sandbox does not have
    return [os.path.abspath(sys.executable), "-I", "-B", "-c", program, PROJECT_ROOT]


def command() -> list[str]:
    python = _python(BOOT)
    ok, _ = namespaces_available()
    return [*bwrap_command(), "--", *python] if ok else python


def _spawner() -> ThreadPoolExecutor:
    """The one thread of this process that starts sandbox processes. The kernel's parent-death signal
    (bwrap --die-with-parent, the child's own PR_SET_PDEATHSIG) fires when the *thread* that forked
    goes, and tool calls run in pool threads that end after each call; this thread lasts as long as
    the process. A forked worker gets its own."""
    global _spawner_pool, _spawner_pid
    if _spawner_pool is None or _spawner_pid != os.getpid():
        _spawner_pool, _spawner_pid = ThreadPoolExecutor(1, thread_name_prefix="rlgpt-sandbox-spawner"), os.getpid()
    return _spawner_pool


def _popen() -> subprocess.Popen:
    stderr = tempfile.TemporaryFile()  # the child's stray output, read back when it fails
    proc = subprocess.Popen(command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                            env=child_env(), cwd="/", start_new_session=True, close_fds=True)
    proc.stderr_file = stderr  # type: ignore[attr-defined]
    proc.owner_pid = os.getpid()  # type: ignore[attr-defined]
    return proc


def _start() -> subprocess.Popen:
    proc = _spawner().submit(_popen).result()
    _live.add(proc)
    return proc


def start_process() -> subprocess.Popen:
    """A started sandbox process (the spare when there is a live one), and a new spare behind it."""
    global _spare, _spare_owner
    with _lock:
        proc = _spare if _spare is not None and _spare_owner == os.getpid() and _spare.poll() is None else None
        _spare = None
        if proc is None:
            proc = _start()
        _spare, _spare_owner = _start(), os.getpid()
    return proc


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # clock ticks per second, as /proc counts


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def descendants(root: int) -> list[int]:
    """Every live process below `root` (bwrap's namespace init and the sandboxed Python under it)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(entry)
            if fields is not None and fields[0] != b"Z":
                parents[int(entry)] = int(fields[1])
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


def cpu_seconds(pids: list[int]) -> float | None:
    """User and system CPU seconds of these live processes together, from /proc; None when none can be read."""
    total, read = 0.0, False
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None:
            total += (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14 and 15 of stat)
            read = True
    return total if read else None


def _wait_gone(pids: list[int], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    for pid in pids:
        while time.monotonic() < deadline:
            fields = _stat_fields(pid)
            if fields is None or fields[0] == b"Z":
                break
            time.sleep(0.005)


def stop_process(proc: subprocess.Popen) -> None:
    """Kill the process, everything it started, and its group, and wait until they are gone (only from
    the process that started it: a forked worker's copy of the handle leaves the parent's sandbox alone)."""
    if getattr(proc, "owner_pid", None) != os.getpid():
        return
    below = descendants(proc.pid) if proc.poll() is None and os.path.isdir("/proc") else []
    for pid in below:  # bwrap's inner processes live in their own session: the group kill misses them
        try:
            os.kill(pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
    for pipe in (proc.stdin, proc.stdout):
        try:
            if pipe is not None:
                pipe.close()
        except OSError:
            pass
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.kill()
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    _wait_gone(below)
    _live.discard(proc)


@atexit.register
def _stop_all() -> None:
    for proc in list(_live):
        stop_process(proc)
