"""Finding the Ray cluster (the `ray` extra), one rule for every command, and running a function as a Ray task.

Where the work goes, in this order:
  1. the address the command was given (``--ray ADDRESS``: ``host:port``, ``auto``, ``ray://host:port``,
     ``local``), which the command hands over with ``session(address)``;
  2. the ``RAY_ADDRESS`` environment variable;
  3. a local Ray that this process starts itself, and stops when the session ends (or at exit). It is private
     to the command: every process of it listens on 127.0.0.1 only (checked after the start), and Ray's
     token authentication is on with a token of its own, held in the environment, not written to ~/.ray.

An address that does not answer fails within ``CONNECT_TIMEOUT_S`` with a ``RayClusterError`` (one clear
message, which the commands print without a traceback); so does a process without Ray installed.
Ray is imported here only when a cluster is asked for: the project works without the extra.

Nothing assumes a shared filesystem: what a task returns comes back through Ray's object store. Every node
must run the same environment as the driver (the project and its dependencies installed the same way).
See docs/scaling.md.
"""
from __future__ import annotations

import ipaddress
import logging
import os
import secrets
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from contextlib import contextmanager
from typing import Any

INSTALL_HINT = "install the ray extra: pip install -e '.[ray]'"
CONNECT_TIMEOUT_S = 30.0
LOCAL_START_TIMEOUT_S = 180.0  # starting a local Ray (its GCS, raylet and agents) on a loaded machine
LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 6379  # Ray's default GCS port (`ray start --head` without --port)
CLIENT_PORT = 10001  # Ray Client's default port (ray://HOST)


class RayClusterError(RuntimeError):
    """Ray is not installed, or the cluster cannot be reached: the message says which and what to do."""


_lock = threading.Lock()
_requested: list[str | None] = [None]   # the command's --ray value (a stack: sessions may nest)
_connected_here = [False]               # this module called ray.init (so it calls ray.shutdown)
_starter: list[ThreadPoolExecutor] = []  # the one thread that starts local Rays (see connect)
_env_added: list[str] = []  # variables set for a local Ray (by _private_token or ray.init), removed when it stops
history: deque = deque(maxlen=1000)      # (function name, node id) of the tasks run_task ran: a record to check


def import_ray() -> Any:
    """The ray module, or RayClusterError with the install hint."""
    try:
        import ray
    except ImportError:
        raise RayClusterError(f"Ray is not installed in this environment; {INSTALL_HINT}") from None
    return ray


def requested() -> str | None:
    """The address this process's command was given with --ray (None: not given)."""
    return _requested[-1]


def address() -> str:
    """Where to connect: the command's --ray, else RAY_ADDRESS, else 'local' (a Ray this process starts)."""
    return requested() or os.environ.get("RAY_ADDRESS") or "local"


def _host_port(addr: str) -> tuple[str, int] | None:
    """(host, port) of a concrete address; None for 'auto' and 'local', which Ray resolves itself."""
    text = addr.strip()
    if text in ("auto", "local", ""):
        return None
    client = text.startswith("ray://")
    text = text.split("://", 1)[-1]
    host, _, port = text.rpartition(":") if ":" in text else (text, "", "")
    host = host.strip("[]") or text
    try:
        return host, int(port) if port else (CLIENT_PORT if client else DEFAULT_PORT)
    except ValueError:
        raise RayClusterError(f"the Ray address {addr!r} is not HOST:PORT, 'auto' or 'local'") from None


def _check_reachable(addr: str, timeout_s: float) -> None:
    """A TCP connection to the head's port, so that a wrong address fails in seconds: ray.init itself retries
    an unreachable address for minutes."""
    target = _host_port(addr)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=min(timeout_s, 10.0)):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, socket.timeout) else (exc.strerror or str(exc))
        raise RayClusterError(
            f"cannot reach the Ray cluster at {addr} ({reason}). Start one with `ray start --head` "
            "(docs/scaling.md), or check --ray / RAY_ADDRESS; without either, a local Ray is started.") from None


def connect(timeout_s: float = CONNECT_TIMEOUT_S) -> Any:
    """Connect this process to its cluster (address()), once; returns the ray module. Inside a Ray worker the
    process is already connected to its own cluster and nothing happens."""
    ray = import_ray()
    with _lock:
        if ray.is_initialized():
            return ray
        addr = address()
        start = time.monotonic()
        _check_reachable(addr, timeout_s)
        kwargs: dict[str, Any] = {"address": addr, "logging_level": logging.WARNING, "log_to_driver": True}
        local = addr == "local"
        if local:
            from rl.vector import usable_cpus

            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # a private cluster: nothing to report
            kwargs.update(num_cpus=usable_cpus(), include_dashboard=False, _node_ip_address=LOOPBACK)
            _private_token()
        outcome: dict[str, Any] = {}

        given_up = threading.Lock()  # held by whichever side finishes first: a late connection shuts itself

        def init() -> None:
            try:
                if local:
                    with _loopback_kept(ray):
                        ray.init(**kwargs)
                    _check_loopback(ray)
                else:
                    ray.init(**kwargs)
                outcome["ok"] = True
                if not given_up.acquire(blocking=False):  # the caller stopped waiting: leave nothing running
                    ray.shutdown()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                outcome["error"] = exc

        # in a thread, so that an address that accepts connections but never answers as Ray cannot hang the
        # command; Ray then warns that it sets no SIGTERM handler, which a driver does not need
        logging.getLogger("ray._private.worker").addFilter(_no_sigterm_warning)
        if local:
            # the processes of a local Ray ask for SIGKILL when the *thread* that started them ends (as the
            # sandbox's do, sandbox.launch): they are started by one thread that lasts as long as the process
            if not _starter:
                _starter.append(ThreadPoolExecutor(1, thread_name_prefix="rlgpt-ray-start"))
            started = _starter[0].submit(init)
            wait_for([started], max(1.0, LOCAL_START_TIMEOUT_S - (time.monotonic() - start)))
            waiting = not started.done()
        else:
            worker = threading.Thread(target=init, name="ray-connect", daemon=True)
            worker.start()
            worker.join(max(1.0, timeout_s - (time.monotonic() - start)))
            waiting = worker.is_alive()
        timed_out = waiting and given_up.acquire(blocking=False)
        if timed_out or "error" in outcome:
            _restore_env()
        if timed_out:
            if local:
                raise RayClusterError(f"a local Ray did not start within {LOCAL_START_TIMEOUT_S:g} s")
            raise RayClusterError(f"the Ray cluster at {addr} did not answer within {timeout_s:g} s; is it a Ray "
                                  "head node's address (`ray start --head` prints it)?")
        if "error" in outcome:
            exc = outcome["error"]
            if isinstance(exc, RayClusterError):
                raise exc
            what = "start a local Ray" if local else f"connect to the Ray cluster at {addr}"
            raise RayClusterError(f"could not {what}: {type(exc).__name__}: {str(exc).strip()[:500]}") from None
        _connected_here[0] = True
        return ray


def _private_token() -> None:
    """A local Ray keeps the token authentication ray.init turns on (127.0.0.1 is open to every user of the
    machine), with a token of its own in the environment, which its processes inherit. Without one, ray.init
    writes a token to ~/.ray/auth_token, and from then on `ray start --head` on this machine requires it
    while `ray start --address` does not send it: the two-node recipe of docs/scaling.md fails. A token
    or an authentication mode the user set is left as it is."""
    if any(k in os.environ for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")):
        return
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    _env_added.extend(["RAY_AUTH_TOKEN", "RAY_AUTH_MODE"])  # ray.init sets the mode to "token" itself


def _restore_env() -> None:
    while _env_added:
        os.environ.pop(_env_added.pop(), None)


@contextmanager
def _loopback_kept(ray: Any) -> Iterator[None]:
    """While a local Ray starts: ray.init turns a loopback node address into the machine's network address
    wherever Ray supports clusters (Linux), unless its constant ``ENABLE_RAY_CLUSTER`` says otherwise. A
    private cluster has no use for other machines, so for the start this process says it does not: the node
    keeps 127.0.0.1 and Ray's servers (GCS, raylet, workers) bind to it. Put back after the start, so that a
    later connection to a real cluster is not affected; without the constant _check_loopback refuses."""
    constants = getattr(getattr(ray, "_private", None), "ray_constants", None)
    if constants is None or not hasattr(constants, "ENABLE_RAY_CLUSTER"):
        yield
        return
    before = constants.ENABLE_RAY_CLUSTER
    constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = before


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def cluster_hosts(ray: Any) -> list[str]:
    """The hosts the connected cluster's GCS and nodes are reached at."""
    gcs = str(ray.get_runtime_context().gcs_address or "")
    return [gcs.rpartition(":")[0] or gcs] + [str(n.get("NodeManagerAddress", "")) for n in ray.nodes()]


def _check_loopback(ray: Any) -> None:
    """A local Ray this process started must be reachable on loopback only; else it is stopped at once."""
    hosts = cluster_hosts(ray)
    if not all(_is_loopback(h) for h in hosts):
        ray.shutdown()
        raise RayClusterError(
            f"the local Ray started on {', '.join(sorted(set(hosts)))}, not on {LOOPBACK} only, and was stopped. "
            "Start a cluster yourself (`ray start --head`, docs/scaling.md) and pass its address with --ray "
            "or RAY_ADDRESS.")


def _no_sigterm_warning(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("SIGTERM handler is not set")


def disconnect() -> None:
    """Leave the cluster when this module joined it (a local Ray it started stops with it)."""
    with _lock:
        if not _connected_here[0]:
            return
        _connected_here[0] = False
        import ray

        ray.shutdown()
        _restore_env()


@contextmanager
def session(address: str | None, connect_now: bool = False) -> Iterator[None]:
    """A command's use of the cluster: ``address`` is its --ray value (None: not given). ``connect_now`` joins
    at once, so that a wrong address fails before any work starts; at the end this process leaves the
    cluster again (stopping a local Ray it started)."""
    _requested.append(address)
    try:
        if connect_now:
            connect()
        yield
    finally:
        _requested.pop()
        if len(_requested) == 1:
            disconnect()


def sandbox_options() -> dict[str, Any]:
    """Ray options for a task or actor that runs agent code: this process's sandbox settings (strict mode, the
    missing layers already reported) as its environment. A Ray worker does not inherit this process's
    environment (another node's never does), and without them it would run in the default mode however
    the command was started, and repeat the warning."""
    from sandbox.host import MODE_ENV, WARNED_ENV

    env = {k: os.environ[k] for k in (MODE_ENV, WARNED_ENV) if k in os.environ}
    return {"runtime_env": {"env_vars": env}} if env else {}


def cluster_cpus(ray: Any) -> int:
    """CPUs of the whole cluster (every node's), at least 1."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def node_id() -> str:
    """The Ray node this process runs on ('' outside Ray)."""
    try:
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""
    except Exception:
        return ""


def _call(fn: Callable, args: tuple, kwargs: dict) -> tuple[Any, str]:
    """What a Ray task runs: the function, and the node it ran on."""
    return fn(*args, **kwargs), node_id()


_remote_call: list[Any] = []


def run_task(fn: Callable, *args: Any, num_cpus: float = 1, timeout_s: float | None = None, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` as one Ray task on the cluster (a node with ``num_cpus`` free CPUs), blocking
    until it returns, at most ``timeout_s`` (then the task is cancelled and TimeoutError raised); its
    exception is raised here. Never retried: a task that lost its worker must not run its (agent) code a
    second time unseen. Safe to call from several threads at once: the calls then run in parallel on the
    cluster. ``fn`` must pickle (a module-level function)."""
    ray = connect()
    with _lock:
        if not _remote_call:
            _remote_call.append(ray.remote(_call))
    ref = _remote_call[0].options(num_cpus=num_cpus, max_retries=0, **sandbox_options()).remote(fn, args, kwargs)
    try:
        result, node = ray.get(ref, timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        ray.cancel(ref, force=True)
        raise TimeoutError(f"the Ray task did not finish within {timeout_s:g} s") from None
    history.append((getattr(fn, "__name__", repr(fn)), node))
    return result
