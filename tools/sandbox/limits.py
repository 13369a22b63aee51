"""Resource limits and isolation applied inside the sandbox's child process.

Defence in depth, not a kernel jail: agent code already cannot name `open`, `os` or `socket`
(checker + restricted builtins); these limits catch what runs anyway (loops, big allocations)
and make the trusted code around it harmless too.

- wall clock: enforced by the parent, which kills the child (`runner.py`); RLIMIT_CPU is a
  backstop for the case where the parent itself dies.
- memory: RLIMIT_AS = the child's address space after start-up + `memory_mb`, so the limit is
  what agent code may allocate on top of the interpreter and simulator, whatever they weigh.
- network: a fresh, empty network namespace when the process may create one (root, Linux),
  and in every case `socket.socket` replaced by a class that refuses to be created.
- files: the working directory and TMPDIR are a fresh scratch folder; RLIMIT_FSIZE caps any file.
"""

from __future__ import annotations

import ctypes
import math
import os
import socket
import sys
from dataclasses import dataclass

try:
    import resource
except ImportError:  # Windows: no rlimits, so no sandbox
    resource = None

CLONE_NEWNET = 0x40000000


@dataclass(frozen=True)
class SandboxLimits:
    wall_time_s: float = 10.0
    memory_mb: int = 512
    file_size_mb: int = 64
    isolate_network: bool = True

    def __post_init__(self):
        if not (self.wall_time_s > 0):
            raise ValueError(f"wall_time_s must be > 0, got {self.wall_time_s}")
        if self.memory_mb < 16:
            raise ValueError(f"memory_mb must be >= 16, got {self.memory_mb}")
        if self.file_size_mb < 1:
            raise ValueError(f"file_size_mb must be >= 1, got {self.file_size_mb}")


class NetworkDisabledError(OSError):
    """Raised by the sandbox's replacement for socket.socket."""


class _NoSocket(socket.socket):
    def __init__(self, *args, **kwargs):
        raise NetworkDisabledError("network access is disabled in the sandbox")


def require_posix() -> None:
    if resource is None or not sys.platform.startswith(("linux", "darwin")):
        raise RuntimeError(f"the code sandbox needs Linux or macOS (resource limits); this is {sys.platform}")


def _address_space_bytes() -> int | None:
    """Current virtual memory size of this process (Linux), or None where /proc is missing."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _set_limit(kind: int, soft: int) -> None:
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(kind, (soft, hard))


def _new_network_namespace() -> bool:
    """Move this process into an empty network namespace (loopback only, down). False if not permitted."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.unshare(CLONE_NEWNET) == 0
    except (OSError, AttributeError):
        return False


def apply_child_limits(limits: SandboxLimits, scratch: str) -> dict[str, object]:
    """Apply every limit to the current (child) process; returns what was applied, for reports."""
    require_posix()
    applied: dict[str, object] = {}
    os.chdir(scratch)
    os.environ["TMPDIR"] = scratch
    os.environ["HOME"] = scratch

    _set_limit(resource.RLIMIT_CORE, 0)
    _set_limit(resource.RLIMIT_FSIZE, limits.file_size_mb * 1024 * 1024)
    used = resource.getrusage(resource.RUSAGE_SELF)
    _set_limit(resource.RLIMIT_CPU, int(math.ceil(used.ru_utime + used.ru_stime + limits.wall_time_s)) + 2)

    if limits.isolate_network:
        applied["network_namespace"] = _new_network_namespace()
        socket.socket = _NoSocket
        socket.create_connection = _refuse_network
        socket.socketpair = _refuse_network
        applied["socket_patched"] = True

    # Last, so that the setup above does not count against the agent's memory.
    base = _address_space_bytes()
    if base is not None and hasattr(resource, "RLIMIT_AS"):
        _set_limit(resource.RLIMIT_AS, base + limits.memory_mb * 1024 * 1024)
        applied["address_space_limit"] = base + limits.memory_mb * 1024 * 1024
    return applied


def _refuse_network(*args, **kwargs):
    raise NetworkDisabledError("network access is disabled in the sandbox")
