"""The trusted side of the boundary: `AgentCode`, the handle through which every path runs agent code.

    with AgentCode([source]) as code:               # checked and loaded in a sandbox process
        outcome = code.execute(env, "chop_tree")    # the env steps here; the code only names actions
        mask = code.mask(env.game)                  # preconditions, evaluated over there

The environment, the reward, the step count and the achievements stay in this process. The sandbox
process (sandbox.child) holds a mirror of the game API, kept in step with observations sent as data,
and answers each request with data: an action name, the end of a call, an error, a mask, a number.
Every answer is awaited with a deadline and size-capped; a process that misses a deadline, breaks the
protocol or dies is killed with its whole group, the call ends with an error the model can read, and
the next request starts a fresh process (up to `max_restarts` times) that is brought back in step.

Policy: by default a run goes on with the isolation layers the machine offers and says once which
are missing; with RLGPT_SANDBOX=strict (`--sandbox strict`) it refuses to run agent code without
all of them (`SandboxUnavailable`).
"""

from __future__ import annotations

import logging
import math
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

from envs.coded import ActionSpec, OptionOutcome, Reply, run_option
from sandbox import launch
from sandbox.deadline import RequestDeadline
from sandbox.lint import lint_enforced
from sandbox.preconditions import Check, host_preconditions
from sandbox.wire import MAX_FROM_CHILD, FrameReader, ProtocolError, clean_text, obs_to_wire, write_frame

log = logging.getLogger("rlgpt.sandbox")
MODE_ENV = "RLGPT_SANDBOX"
MODES = ("default", "strict")
STARTUP_TIMEOUT_S = 60.0   # interpreter and imports on a loaded machine: not the code's time
MAX_PRINTS_PER_CALL = 10_000  # print lines passed on per call (the trace keeps fewer)
# What the process may send before it answers one request; past either it is stopped (a print flood
# would otherwise keep the host reading, and its prints add up over a call's steps).
MAX_PRINTS_PER_REQUEST = 10_000
MAX_BYTES_PER_REQUEST = 16 << 20
_READ_GRACE_S = 0.05  # to read an answer that is due already (see AgentCode._receive)
MIRROR_LAG = 256  # steps the mirror may miss while masks are read here (well inside GameAPI's sync window)
_warned: set[str] = set()
# The sets of missing layers this run has warned about (';'-separated), for the processes it starts later
# (PPO's workers, a local Ray): set by the process that warned, so that a run warns once, not once per worker.
WARNED_ENV = "RLGPT_SANDBOX_WARNED"


@dataclass(frozen=True)
class SandboxLimits:
    step_timeout_s: float = 2.0    # agent code between two answers (one yield, a mask, a shaping value)
    load_timeout_s: float = 10.0   # the sources' top level
    memory_mb: int = 512           # address space on top of the loaded interpreter
    cpu_s: int = 3600              # CPU time of the whole process: a backstop should this process die
    file_size_mb: int = 1          # the largest file it may write (it can open none)
    max_restarts: int = 20         # fresh processes after kills before the code is given up

    def __post_init__(self):
        for name in ("step_timeout_s", "load_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.memory_mb < 16:
            raise ValueError(f"memory_mb must be >= 16, got {self.memory_mb}")
        if self.cpu_s < 1 or self.file_size_mb < 1 or self.max_restarts < 0:
            raise ValueError("cpu_s and file_size_mb must be >= 1 and max_restarts >= 0")


class CodeRejected(ValueError):
    """The sources did not load: `kind` is "unsafe" (the lint), "load" (the top level failed or defines
    no coded action) or "timeout" (the top level ran too long). The message is the model's to read."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class SandboxUnavailable(RuntimeError):
    """The sandbox process could not be started, or (strict mode) an isolation layer is missing."""


def mode() -> str:
    value = os.environ.get(MODE_ENV, "default")
    if value not in MODES:
        raise SandboxUnavailable(f"{MODE_ENV}={value!r}: choose one of {', '.join(MODES)}")
    return value


_NO_SHAPING = "def shaping(prev, curr):\n    return 0.0\n"


def check_layers() -> dict[str, object]:
    """The isolation layers agent code gets here, from a sandbox process started for the purpose with a
    trusted one-line shaping function: it warns about missing layers and (strict mode) raises
    `SandboxUnavailable` as any start does. A command calls it before it starts worker processes, so that a
    strict refusal comes first and the workers inherit that the warning was given (WARNED_ENV)."""
    with AgentCode([], shaping=_NO_SHAPING) as code:
        return dict(code.layers)


class AgentCode:
    """Agent-written coded actions (and optionally a reward-shaping function) behind the boundary."""

    def __init__(self, sources: list[str] | tuple[str, ...] = (), shaping: str | None = None,
                 limits: SandboxLimits | None = None, host_masks: bool = True):
        self.sources = list(sources)
        self.shaping_source = shaping
        self.limits = limits or SandboxLimits()
        self.specs: list[ActionSpec] = []
        self._any_precondition = False
        self.host_masks = host_masks
        self.layers: dict[str, object] = {}  # isolation layer -> True, or why it is missing
        self.restarts = 0
        self._given_up = False
        self.last_failure: str | None = None
        self.last_failure_timed_out = False
        self._proc: subprocess.Popen | None = None
        self._reader: FrameReader | None = None
        self._point = None            # the game state the process's mirror is at
        self._open_call = False
        self._next_id = 0
        self._on_print: Callable[[str], None] | None = None
        self._on_refusal: Callable[[str], None] | None = None
        self._prints = 0
        self.running = ""  # the functions the open call is in, as its last answer said ('main > go_to')
        self._pending: Pending | None = None  # the answer of a request sent and not read yet (*_later)
        # the request sent and not answered yet: (its deadline, its kind, the game state it brought)
        self._in_flight: tuple[RequestDeadline, str, Any] | None = None
        self._tree: list[int] | None = None  # the process's pids, for its CPU time (_sandbox_cpu_s)
        self._start(first=True)

    # ---- what the code defines ------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specs]

    @property
    def alive(self) -> bool:
        return self._proc is not None

    # ---- the driver interface of envs.coded.run_option ------------------------------------

    def begin(self, name: str, game) -> Reply:
        return self.begin_later(name, game).get()

    def advance(self, game) -> Reply:
        return self.advance_later(game).get()

    # The same requests, answered later (envs.coded.option_steps): each is sent at once and its answer read by
    # `get()` or by the next request of any kind, under the request's own deadline. One request is in
    # flight at a time, in the order they were made: the process sees exactly what the blocking calls send.

    def begin_later(self, name: str, game) -> Pending:
        self.running = ""
        if not self._ensure():
            return Pending(None, ("error", self.last_failure))
        return self._request({"op": "begin", "name": name}, game, self._call_step)

    def advance_later(self, game) -> Pending:
        return self._request({"op": "advance"}, game, self._call_step)

    def _call_step(self, answer: Reply | None) -> Reply:
        """A call's answer, checked: an action name, the end, or an error text; anything else ends it."""
        if answer is not None and not _is_call_step(answer):
            self._fail(f"the sandbox answered a call with {clean_text(answer, 200)}")
            answer = None
        self._open_call = answer is not None and answer[0] == "act"
        return answer or ("error", self.last_failure)

    def finish(self) -> None:
        self._settle()  # whether a call is open is known once its last answer is read
        if self._open_call and self._proc is not None:
            self._open_call = False
            self._ask({"op": "finish"}, None)

    def execute(self, env, name: str, gamma: float = 0.99, max_steps: int | None = None,
                on_step: Callable | None = None, on_print: Callable[[str], None] | None = None,
                on_refusal: Callable[[str], None] | None = None) -> OptionOutcome:
        """One call of coded action `name` in `env`, stepped here (envs.coded.run_option). `on_print` gets each
        line the code prints, `on_refusal` why a helper of the game API stopped short (GameAPI.last_refusal)."""
        spec = next((s for s in self.specs if s.name == name), None)
        limit = max_steps if max_steps is not None else (spec.max_steps if spec else 1)
        self._on_print, self._on_refusal, self._prints = on_print, on_refusal, 0
        try:
            return run_option(env, self, name, gamma=gamma, on_step=on_step, max_steps=limit)
        finally:
            self._on_print = self._on_refusal = None

    # ---- preconditions and shaping ----------------------------------------------------------

    def mask(self, game) -> list[bool]:
        """Whether each coded action's precondition holds now. An action without one is always allowed
        (no round trip when none has one); a broken sandbox allows none of them."""
        return self.mask_later(game).get()

    def mask_later(self, game) -> Pending:
        if not self._any_precondition:
            return Pending(None, [True] * len(self.specs))
        if not self._ensure():
            return Pending(None, [False] * len(self.specs))
        checks = self._host_checks
        if checks is not None:  # no round trip (sandbox.preconditions)
            self._keep_mirror_in_reach(game)
            return Pending(None, [check(game) for check in checks])
        return self._request({"op": "mask"}, game, self._mask_answer)

    def _keep_mirror_in_reach(self, game) -> None:
        """With masks read here, the sandbox's mirror hears of primitive steps only when the next call begins.
        Before it lags so far that only the memory map could bring it back (losing the helpers' random
        stream, GameAPI._catch_up), it gets the steps it missed: one message for many steps."""
        point = self._in_flight[2] if self._in_flight is not None else self._point
        if game._missed_by(point) >= MIRROR_LAG:
            self._request({"op": "sync"}, game, lambda answer: None)

    def _mask_answer(self, answer: Reply | None) -> list[bool]:
        if answer is not None and answer[0] == "mask" and _is_mask(answer[1], len(self.specs)):
            return [digit == "1" for digit in answer[1]]
        if answer is not None:
            self._fail(f"the sandbox answered a mask request with {clean_text(answer, 200)}")
        return [False] * len(self.specs)

    def _request(self, message: dict, game, read: Callable[[Reply | None], Any]) -> Pending:
        """Send `message`; its answer, checked by `read` (which gets None when the process failed), comes
        later."""
        if not self._send(message, game):
            return Pending(None, read(None))
        self._pending = Pending(self, read=read)
        return self._pending

    def _settle(self) -> None:
        """Read the answer of the request in flight, if any, into its Pending."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.value = pending.read(self._receive())
            pending.code = None

    def shape(self, prev: dict[str, Any], curr: dict[str, Any]) -> float:
        """The shaping bonus for one step, a finite float; RuntimeError (with the agent's error) when it cannot
        be had, and for any answer that is not a finite number (nan, infinity, beyond a float's range, a bool,
        a string, a container: whatever a process that forges its answers may send)."""
        if self.shaping_source is None:
            raise RuntimeError("no shaping function was loaded")
        if not self._ensure():
            raise RuntimeError(f"the shaping function cannot run: {self.last_failure}")
        answer = self._ask({"op": "shape", "prev": _shaping_view(prev), "curr": _shaping_view(curr)}, None)
        if answer is None:
            raise RuntimeError(f"the shaping function failed: {self.last_failure}")
        kind, value = answer
        if kind == "value":
            number = _finite_number(value)
            if number is None:
                raise RuntimeError(f"the shaping function answered a {type(value).__name__} that is not a finite "
                                   "number")
            return number
        raise RuntimeError(clean_text(value) if kind == "error" else
                           f"the shaping function answered {clean_text(kind, 40)!r}")

    # ---- life of the process ----------------------------------------------------------------

    def close(self) -> None:
        if self._proc is not None:
            launch.stop_process(self._proc)
        self._proc, self._reader, self._point, self._in_flight, self._tree = None, None, None, None, None
        pending, self._pending = self._pending, None
        if pending is not None:  # its answer will never come
            pending.value, pending.code = pending.read(None), None

    def __enter__(self) -> AgentCode:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _ensure(self) -> bool:
        """A live process: after a failure a fresh one, brought back in step on its first request, until
        `max_restarts` is spent."""
        if self._proc is not None:
            return True
        if self.restarts >= self.limits.max_restarts:
            if not self._given_up:
                self._given_up = True
                self.last_failure = f"{self.last_failure}; after {self.restarts} restarts this code is not run any more"
            return False
        self.restarts += 1
        try:
            self._start(first=False)
        except (CodeRejected, SandboxUnavailable) as exc:
            self.last_failure = clean_text(str(exc))
            return False
        return True

    def _start(self, first: bool) -> None:
        strict = mode() == "strict"
        ok, problem = launch.namespaces_available()
        if strict and not ok:
            raise SandboxUnavailable(f"--sandbox strict: {problem}")
        try:
            self._proc = proc = launch.start_process()
        except OSError as exc:
            raise SandboxUnavailable(f"the sandbox process could not be started: {exc}") from exc
        assert proc.stdin is not None and proc.stdout is not None  # started with stdin=stdout=PIPE
        self._reader = FrameReader(proc.stdout.fileno(), MAX_FROM_CHILD)
        os.set_blocking(proc.stdin.fileno(), False)  # every read and write here has a deadline
        os.set_blocking(proc.stdout.fileno(), False)
        try:
            ready = self._reader.read(time.monotonic() + STARTUP_TIMEOUT_S)
            if ready.get("ready") is not True:
                raise ProtocolError("no ready message")
        except ProtocolError as exc:
            details = self._stderr_tail()
            self.close()
            raise SandboxUnavailable(f"the sandbox process did not start ({exc}){details}") from None
        confined = self._ask({"op": "confine", "limits": asdict(self.limits), "strict": strict}, None,
                             timeout=STARTUP_TIMEOUT_S)
        if confined is None or confined[0] != "confined" or not isinstance(confined[1], dict):
            self.close()
            raise SandboxUnavailable("the sandbox process could not confine itself: "
                                     f"{self.last_failure or clean_text(confined, 300)}")
        reported = {clean_text(k, 40): v if v is True else clean_text(v, 300)
                    for k, v in list(confined[1].items())[:10]}
        self.layers = {"namespaces": ok or problem, **reported}
        missing = {k: v for k, v in reported.items() if v is not True}
        if strict and missing:
            self.close()
            raise SandboxUnavailable(f"--sandbox strict: isolation layers missing: {clean_text(missing, 500)}")
        job = {"op": "load", "sources": self.sources, "shaping": self.shaping_source, "lint": lint_enforced()}
        answer = self._ask(job, None, timeout=self.limits.load_timeout_s, kind="load")
        if answer is None:
            kind = "timeout" if self.last_failure_timed_out else "load"
            raise CodeRejected(kind, f"the code could not be loaded: {self.last_failure}")
        kind, value = answer
        if kind in ("unsafe", "load"):
            self.close()
            raise CodeRejected(kind, clean_text(value))
        specs = _specs(value)
        if kind != "loaded" or specs is None:
            self.close()
            raise CodeRejected("load", f"the sandbox answered the load with {clean_text(answer, 300)}")
        if first:
            self.specs = specs
            self._any_precondition = any(s.has_precondition for s in specs)
        elif [s.name for s in specs] != self.names:
            self.close()
            raise CodeRejected("load", "the code defined different actions when it was loaded again")
        self._warn_missing_layers()

    @cached_property
    def _host_checks(self) -> list[Check] | None:
        """The mask's checks where the host reads every precondition itself, else None. Read on first use:
        only trainings ask for masks, and a code test or an evaluation need not parse its program for them."""
        return self._checks_read_here() if self.host_masks else None

    def _checks_read_here(self) -> list[Check] | None:
        """Every action's mask check when the host can read each precondition as data (sandbox.preconditions),
        else None (the sandbox answers every mask)."""
        readable = host_preconditions(self.sources)
        if any(s.has_precondition and s.name not in readable for s in self.specs):
            return None
        return [readable[s.name] if s.has_precondition else _always for s in self.specs]

    def _warn_missing_layers(self) -> None:
        missing = sorted(k for k, v in self.layers.items() if v is not True)
        key = ",".join(missing)
        reported = _warned | set(os.environ.get(WARNED_ENV, "").split(";"))
        if missing and key not in reported:
            _warned.add(key)
            os.environ[WARNED_ENV] = ";".join(sorted((reported | {key}) - {""}))
            reasons = "; ".join(f"{k}: {self.layers[k]}" for k in missing if self.layers[k] is not False)
            log.warning("agent code runs without these sandbox layers: %s%s (docs/security.md; "
                        "--sandbox strict refuses to run without them)", ", ".join(missing),
                        f" ({reasons})" if reasons else "")

    # ---- one request ------------------------------------------------------------------------

    def _ask(self, message: dict, game, timeout: float | None = None, kind: str = "request") -> Reply | None:
        """Send one request (bringing the mirror in step with `game` first) and read its answer; None when
        the process failed (then it is stopped and `last_failure` says why)."""
        return self._receive() if self._send(message, game, timeout, kind) else None

    def _send(self, message: dict, game, timeout: float | None = None, kind: str = "request") -> bool:
        """Send one request; False when the process failed. The answer of a request still in flight is read
        first: one request at a time crosses, in the order they were made."""
        self._settle()
        if self._proc is None or self._reader is None:  # the two are set and cleared together
            return False
        assert self._proc.stdin is not None  # started with stdin=PIPE
        point = None
        if game is not None:
            point = game._sync_point()
            update = game._catch_up(self._point)
            if update is not None:
                message = dict(message, sync=dict(update, observe=[obs_to_wire(o) for o in update["observe"]]))
        self._next_id += 1
        message = dict(message, id=self._next_id)
        clock = RequestDeadline(timeout or self.limits.step_timeout_s, time.monotonic(), self._sandbox_cpu_s,
                                timer=kind == "request")  # a load runs no timer inside
        try:
            write_frame(self._proc.stdin.fileno(), message, clock.deadline)
        except ProtocolError as exc:
            self._protocol_failed(exc, clock, kind)
            return False
        self._in_flight = (clock, kind, point)
        return True

    def _receive(self) -> Reply | None:
        """The answer of the request in flight (`_send`); None when the process failed."""
        if self._in_flight is None or self._reader is None:
            return None
        clock, kind, point = self._in_flight
        self._in_flight = None
        # An answer that came while this process did other work counts as on time: the process had its
        # whole deadline, and a read of what is there already is instant.
        clock.deadline = max(clock.deadline, time.monotonic() + _READ_GRACE_S)
        received, prints, heard = self._reader.received, 0, self._reader.bytes_read
        try:
            while True:
                answer = self._read_frame(clock, heard)  # the deadline holds on every read, full pipe or not
                aside = "print" in answer or "refusal" in answer  # said along the way, before the answer
                prints += aside
                flood = self._flood(prints, self._reader.received - received)
                if flood is not None:
                    self.last_failure_timed_out = False
                    self._fail(flood)
                    return None
                if not aside:
                    break
                if "print" in answer:
                    self._printed(answer["print"])
                elif self._on_refusal is not None:
                    self._on_refusal(clean_text(answer["refusal"], 300))
                if time.monotonic() >= clock.deadline:  # and on every frame (the process is talking)
                    raise ProtocolError("no answer before the deadline", timed_out=True)
        except ProtocolError as exc:
            self._protocol_failed(exc, clock, kind)
            return None
        if answer.get("id") != self._next_id or not isinstance(answer.get("r"), str):
            self._fail("the sandbox process answered out of turn (the code wrote to its channel)")
            return None
        if point is not None:
            self._point = point
        if "in" in answer:
            self.running = clean_text(answer["in"], 200)
        value = answer.get("v")
        # the boundary: every text the process sends is cleaned here, once (prints in _printed; the values
        # of other shapes are checked by each caller, and the texts in them cleaned there)
        return answer["r"], clean_text(value) if isinstance(value, str) else value

    def _read_frame(self, clock: RequestDeadline, heard: int) -> dict:
        """The next frame, waiting as long as the request's deadline allows (sandbox.deadline). A process that
        has sent anything since the request (`heard`: the reader's bytes then) is running, not starved: for it
        the deadline does not move (a print flood that keeps the pipe full is stopped on time)."""
        assert self._reader is not None  # checked by _receive
        while True:
            talking = self._reader.bytes_read != heard
            try:
                return self._reader.read(clock.deadline if talking else clock.read_until())
            except ProtocolError as exc:
                if not exc.timed_out:
                    raise
                now = time.monotonic()
                if self._reader.bytes_read != heard:  # it talks (maybe began during this read): the plain deadline
                    if now < clock.deadline:
                        continue
                    raise
                if not clock.keep_waiting(now):
                    raise

    def _sandbox_cpu_s(self) -> float | None:
        """CPU seconds the sandbox's processes (bubblewrap's and the Python under it) have used so far."""
        if self._proc is None:
            return None
        if self._tree is None:  # the tree is complete once the process answered: found once per process
            self._tree = [self._proc.pid, *launch.descendants(self._proc.pid)]
        return launch.cpu_seconds(self._tree)

    def _protocol_failed(self, exc: ProtocolError, clock: RequestDeadline, kind: str) -> None:
        self.last_failure_timed_out = exc.timed_out
        timeout = clock.limit  # what the code had, the grace for the sandbox timer's report included
        if exc.timed_out and clock.starved_to_the_cap:
            self._fail(f"no answer within {clock.hard - clock.sent:g} s, though the code computed for less than "
                       f"{timeout:g} s of it: code that sleeps or blocks instead of answering")
        elif exc.timed_out:
            self._fail(f"no answer within {timeout:g} s: an endless loop, or code that does not yield"
                       if kind == "request" else
                       f"timed out after {timeout:g} s while loading: the top level never finished")
        else:
            self._fail(f"the sandbox process failed ({exc}){self._exit_note()}")

    @staticmethod
    def _flood(prints: int, received: int) -> str | None:
        """Why what the process sent before one answer is too much, or None."""
        if prints > MAX_PRINTS_PER_REQUEST:
            return (f"the code printed more than {MAX_PRINTS_PER_REQUEST:,} lines before one answer (a print "
                    "flood): its process was stopped")
        if received > MAX_BYTES_PER_REQUEST:
            return (f"the code sent more than {MAX_BYTES_PER_REQUEST >> 20} MiB of output before one answer "
                    "(a print flood): its process was stopped")
        return None

    def _printed(self, text: Any) -> None:
        self._prints += 1
        if self._on_print is not None and self._prints <= MAX_PRINTS_PER_CALL:
            self._on_print(clean_text(text, 500))

    def _fail(self, reason: str) -> None:
        self.last_failure = clean_text(reason)
        self._open_call = False
        self.close()

    def _exit_note(self) -> str:
        if self._proc is None:
            return ""
        try:
            code = self._proc.wait(timeout=1)
        except Exception:
            return ""
        if code is not None and code < 0:
            import signal

            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            hint = " (over the CPU-time limit)" if name == "SIGXCPU" else (
                " (over the file-size limit)" if name == "SIGXFSZ" else "")
            return f"; it was killed by {name}{hint}"
        return f"; it exited with code {code}" if code is not None else ""

    def _stderr_tail(self) -> str:
        handle = getattr(self._proc, "stderr_file", None)
        if handle is None:
            return ""
        try:
            handle.seek(0)
            tail = handle.read()[-600:].decode("utf-8", "replace").strip()
        except OSError:
            return ""
        return f": {clean_text(tail, 600)}" if tail else ""


class Pending:
    """The answer of a request sent with one of AgentCode's `*_later` methods: `get()` reads it, at once when it
    is known (`code` is None then)."""

    __slots__ = ("code", "read", "value")

    def __init__(self, code: AgentCode | None, value: Any = None, read: Callable[[Reply | None], Any] = lambda a: a):
        self.code, self.value, self.read = code, value, read

    def get(self) -> Any:
        if self.code is not None:
            self.code._settle()  # fills value and clears code (also when the process fails: close)
        return self.value


def _always(game) -> bool:
    return True


def _is_call_step(answer: Reply) -> bool:
    kind, value = answer
    if kind == "end":
        return value is None
    return kind in ("act", "error", "precondition") and isinstance(value, str)


def _is_mask(value: Any, n: int) -> bool:
    """A digit per action, 1 where its precondition holds (the compact form: a mask crosses every step)."""
    return type(value) is str and len(value) == n and not value.strip("01")


def _specs(value: Any) -> list[ActionSpec] | None:
    if not isinstance(value, list):
        return None
    specs = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].isidentifier():
            return None
        steps = item.get("max_steps")
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
            return None
        specs.append(ActionSpec(name=item["name"], max_steps=steps, has_precondition=bool(item.get("has_precondition")),
                                doc=clean_text(item.get("doc", ""), 1000),
                                declared_max_steps=bool(item.get("declared_max_steps"))))
    names = [s.name for s in specs]
    return specs if len(set(names)) == len(names) else None


def _finite_number(value: Any) -> float | None:
    """`value` as a finite float, or None (a bool is not a number here; an int may be beyond a float's range)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _shaping_view(snapshot: dict[str, Any]) -> dict[str, Any]:
    return {"inventory": {str(k): int(v) for k, v in dict(snapshot.get("inventory", {})).items()},
            "achievements": sorted(str(a) for a in snapshot.get("achievements", ()))}
