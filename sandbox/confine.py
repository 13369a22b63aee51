"""What the sandbox process does to itself before any agent code runs: drop privileges, hard limits, seccomp.

Applied in `sandbox.child` after its imports (so that reading the Python runtime is done) and before it
loads the agent's code. Each layer holds on its own; together they leave agent code that has escaped
every Python-level restriction with a process that can compute, and read and write the two pipes it
was given, and nothing else:

- privileges: a root process drops to `nobody` (all capabilities go with the uid change); then
  no_new_privs, so nothing it executes can gain any back.
- hard rlimits (soft = hard, so they cannot be raised again): address space, CPU time, processes
  (none: no fork, no threads), open files, file size, core dumps.
- seccomp: an allow-list of system calls for computing and talking over the inherited pipes. Opening
  files, sockets, fork/clone/exec, signals to other processes, ptrace, namespaces and mounts all fail
  with EPERM. It needs no privilege and holds where namespaces are forbidden (Docker's default profile,
  Ubuntu's AppArmor rules for user namespaces).

`confine()` returns what it applied; the host reports any layer that is missing.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import struct

NOBODY = 65534

# ---- seccomp ------------------------------------------------------------------------------------
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
PR_SET_PDEATHSIG = 1
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_KILL_PROCESS = 0x80000000
BPF_LD_W_ABS = 0x20      # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K = 0x15         # BPF_JMP | BPF_JEQ | BPF_K
BPF_RET_K = 0x06         # BPF_RET | BPF_K
SECCOMP_DATA_NR, SECCOMP_DATA_ARCH, SECCOMP_DATA_ARG0 = 0, 4, 16

# What a Python process computing over two pipes calls. Everything else gets EPERM; fcntl and ioctl
# among them, since F_SETOWN/F_SETSIG (and FIOSETOWN) would let a process signal others of its uid.
_ALLOWED_CALLS = (
    "read", "write", "readv", "writev", "pread64", "close", "fstat", "newfstatat", "lseek",
    "mmap", "munmap", "mremap", "mprotect", "brk", "madvise",
    "futex", "sched_yield", "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres", "gettimeofday",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
    "getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getrusage", "getrandom",
    "poll", "ppoll", "select", "pselect6", "setitimer",
    "exit", "exit_group",
)
# prlimit64 only on this process itself (pid 0): the child lowers its own CPU clock per request.
_SELF_ONLY_CALLS = ("prlimit64",)

_SYSCALLS: dict[str, tuple[int, dict[str, int]]] = {
    # machine: (AUDIT_ARCH_*, name -> number)
    "x86_64": (0xC000003E, {
        "read": 0, "write": 1, "close": 3, "fstat": 5, "poll": 7, "lseek": 8, "mmap": 9, "mprotect": 10,
        "munmap": 11, "brk": 12, "rt_sigaction": 13, "rt_sigprocmask": 14, "rt_sigreturn": 15,
        "pread64": 17, "readv": 19, "writev": 20, "select": 23, "sched_yield": 24, "mremap": 25,
        "madvise": 28, "nanosleep": 35, "getpid": 39, "exit": 60, "fcntl": 72, "gettimeofday": 96,
        "getrusage": 98, "getuid": 102, "getgid": 104, "geteuid": 107, "getegid": 108, "getppid": 110,
        "sigaltstack": 131, "gettid": 186, "futex": 202, "clock_gettime": 228, "clock_getres": 229,
        "clock_nanosleep": 230, "exit_group": 231, "newfstatat": 262, "pselect6": 270, "ppoll": 271,
        "prlimit64": 302, "getrandom": 318, "setitimer": 38,
    }),
    "aarch64": (0xC00000B7, {
        "fcntl": 25, "close": 57, "lseek": 62, "read": 63, "write": 64, "readv": 65, "writev": 66,
        "pread64": 67, "pselect6": 72, "ppoll": 73, "newfstatat": 79, "fstat": 80, "exit": 93,
        "exit_group": 94, "futex": 98, "nanosleep": 101, "clock_gettime": 113, "clock_getres": 114,
        "clock_nanosleep": 115, "sched_yield": 124, "sigaltstack": 132, "rt_sigaction": 134,
        "rt_sigprocmask": 135, "rt_sigreturn": 139, "getrusage": 165, "gettimeofday": 169, "getpid": 172,
        "getppid": 173, "getuid": 174, "geteuid": 175, "getgid": 176, "getegid": 177, "gettid": 178,
        "brk": 214, "munmap": 215, "mremap": 216, "mmap": 222, "mprotect": 226, "madvise": 233,
        "prlimit64": 261, "getrandom": 278, "setitimer": 103,
    }),
}


def _instruction(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def seccomp_program(machine: str | None = None) -> bytes:
    """The BPF filter: wrong architecture -> kill; allowed call -> allow; self-only call on pid 0 -> allow;
    anything else -> EPERM."""
    arch, numbers = _SYSCALLS[machine or platform.machine()]
    allowed = sorted({numbers[name] for name in _ALLOWED_CALLS if name in numbers})
    self_only = sorted({numbers[name] for name in _SELF_ONLY_CALLS if name in numbers})
    # Layout: [arch check] [load nr] [allow checks] [self-only checks] [deny] [allow] [pid check]
    deny = _instruction(BPF_RET_K, SECCOMP_RET_ERRNO | errno.EPERM)
    allow = _instruction(BPF_RET_K, SECCOMP_RET_ALLOW)
    program = [
        _instruction(BPF_LD_W_ABS, SECCOMP_DATA_ARCH),
        _instruction(BPF_JEQ_K, arch, jt=1, jf=0),
        _instruction(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
        _instruction(BPF_LD_W_ABS, SECCOMP_DATA_NR),
    ]
    checks = len(allowed) + len(self_only)
    for i, number in enumerate(allowed):
        to_allow = (checks - i - 1) + 1  # skip the remaining checks and the deny
        program.append(_instruction(BPF_JEQ_K, number, jt=to_allow))
    for i, number in enumerate(self_only):
        to_pid_check = (len(self_only) - i - 1) + 2  # skip the remaining checks, the deny and the allow
        program.append(_instruction(BPF_JEQ_K, number, jt=to_pid_check))
    program += [deny, allow]
    if self_only:  # both 32-bit halves of the first argument must be 0
        program += [
            _instruction(BPF_LD_W_ABS, SECCOMP_DATA_ARG0),
            _instruction(BPF_JEQ_K, 0, jt=0, jf=3),
            _instruction(BPF_LD_W_ABS, SECCOMP_DATA_ARG0 + 4),
            _instruction(BPF_JEQ_K, 0, jt=0, jf=1),
            allow,
            deny,
        ]
    if len(program) > 255 + 4:
        raise AssertionError("seccomp program too long for 8-bit jumps")
    return b"".join(program)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def install_seccomp() -> str | None:
    """Install the filter on this process for good; None, or why it could not be installed."""
    if platform.machine() not in _SYSCALLS:
        return f"no system-call table for {platform.machine()}"
    libc = _libc()
    program = seccomp_program()
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"no_new_privs refused ({os.strerror(ctypes.get_errno())})"
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return f"seccomp refused ({os.strerror(ctypes.get_errno())})"
    return None


# ---- the rest -------------------------------------------------------------------------------------

def drop_root() -> str | None:
    """From root to nobody: the uid change clears every capability. None, or why not."""
    if os.getuid() != 0 and os.geteuid() != 0:
        return None
    try:
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
    except OSError as exc:
        return f"could not drop root ({exc})"
    return None


def capabilities() -> int:
    """The effective capability set (0: none), read from /proc; -1 where it cannot be read."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return -1


def _address_space() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmSize in /proc/self/status")


def _hard(kind: int, value: int) -> None:
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))


def set_limits(memory_mb: int, cpu_s: int, file_size_mb: int) -> None:
    """Hard limits (soft = hard). Memory is what the agent may allocate on top of what is loaded now."""
    _hard(resource.RLIMIT_CORE, 0)
    _hard(resource.RLIMIT_FSIZE, file_size_mb << 20)
    used = resource.getrusage(resource.RUSAGE_SELF)
    _hard(resource.RLIMIT_CPU, int(used.ru_utime + used.ru_stime) + int(cpu_s) + 1)
    _hard(resource.RLIMIT_NPROC, 0)
    _hard(resource.RLIMIT_NOFILE, max(_open_fds()) + 1)
    _hard(resource.RLIMIT_AS, _address_space() + (memory_mb << 20))


def _open_fds() -> list[int]:
    return [int(fd) for fd in os.listdir("/proc/self/fd")] or [2]


def die_with_parent() -> None:
    """SIGKILL this process when the parent that started it goes (Linux; the host starts it from a thread
    that lasts as long as the host, see sandbox.launch); after the uid change, which clears the setting."""
    signal_kill = 9
    _libc().prctl(PR_SET_PDEATHSIG, signal_kill, 0, 0, 0)


def confine(memory_mb: int, cpu_s: int, file_size_mb: int) -> dict[str, object]:
    """Every layer, in order; what was applied (False or a reason where a layer is missing)."""
    applied: dict[str, object] = {}
    problem = drop_root()
    applied["unprivileged"] = problem or (os.getuid() != 0 and capabilities() == 0)
    die_with_parent()
    set_limits(memory_mb, cpu_s, file_size_mb)
    applied["rlimits"] = True
    applied["seccomp"] = install_seccomp() or True
    return applied
