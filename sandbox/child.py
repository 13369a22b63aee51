"""The untrusted side of the boundary: the process that holds agent code, and nothing else of value.

Started by `sandbox.host` as `python -I -c BOOT PROJECT_ROOT` with an empty environment (and, where
bubblewrap works, in namespaces with a read-only view of the Python runtime). It imports what it needs,
says it is ready, then waits for its job: the first request brings the limits and it confines itself
(sandbox.confine) and reports the layers; the second brings the sources and whether the lint applies.
Then it serves requests:

    confine {limits}     apply every layer (sandbox.confine) -> {"r": "confined", "v": {layer: True | why not}}
    load {sources, ...}  run the sources' top level -> {"r": "loaded", "v": [action specs]} | unsafe | load
    begin {name, sync}   start a call of a coded action -> {"r": "act"|"end"|"error"|"precondition", "v": ...}
                         (with "in": 'main > go_to' when the functions the call is in changed)
    advance {sync}       the step's observation; the call's next action -> the same
    finish {}            close the open call (its `finally` runs) -> {"r": "ok"}
    sync {sync}          observations the mirror missed, nothing else -> {"r": "ok"}
    mask {sync}          every action's precondition -> {"r": "mask", "v": "0110..."} (a digit per action)
    shape {prev, curr}   the reward-shaping bonus -> {"r": "value", "v": float} or an error
    (`print` in agent code sends {"print": text} before the reply, and a helper of the game API that stops
    short during a call sends {"refusal": why} (GameAPI.last_refusal) before it too)

It holds a mirror of the game API, fed observations by the host (`sync`); it never has the simulator,
the reward or the step count, so whatever the code does here it can only choose actions.
"""

from __future__ import annotations

import math
import random
import signal
import sys
import traceback  # noqa: F401 - imported before confinement: error descriptions use it
from collections.abc import Callable

from envs.coded import CallStepper, describe_agent_error, spec_of
from envs.game_api import GameAPI
from sandbox import confine
from sandbox.lint import UnsafeCodeError, checker_disabled
from sandbox.loader import load_coded_actions, load_shaping
from sandbox.namespace import CodeLoadError
from sandbox.wire import MAX_TO_CHILD, FrameReader, obs_from_wire, write_frame

REQUEST_IN, REPLY_OUT = 0, 1
PRINT_CAP = 500  # characters of one printed line that cross
TEXT_CAP = 8192  # characters of an error that cross (the host caps again at what a model reads)
RUNNING_CAP = 200  # characters of 'main > collect_iron > go_to' that cross
MAX_REFUSALS_TOLD = 20  # per answer: a helper refusing in a loop between two yields says it once or so
MIN_REFUSALS_TO_EXPLAIN = 3  # refusals before a timed-out step that make its error say how such a loop never yields


class CodeTimeout(Exception):
    """The agent's code ran too long without answering (raised where it was, so the error has its line)."""


class StepTimer:
    """A courtesy for honest code: an endless loop gets an error naming its line. It counts this process's CPU
    time (SIGPROF), as the host's deadline does (sandbox.deadline), so a step that waited for a core on a
    busy machine is not taken for a loop. Code that catches the error is stopped by the host all the same.
    The handler is installed once; each request only arms and disarms the timer."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False  # during the request now served
        signal.signal(signal.SIGPROF, self._on_timer)

    def _on_timer(self, signum, frame):
        self.fired = True
        raise CodeTimeout(f"no action yielded within {self.seconds:g} s of computing (an endless loop?)")

    def arm(self) -> None:
        self.fired = False
        signal.setitimer(signal.ITIMER_PROF, self.seconds)

    @staticmethod
    def disarm() -> None:
        signal.setitimer(signal.ITIMER_PROF, 0)


class Server:
    def __init__(self) -> None:
        self.timer = StepTimer(1.0)
        self.game = GameAPI()
        self.stepper = CallStepper([])
        self.shaping: Callable[[dict, dict], float] | None = None
        self.shaping_source: str | None = None
        self.refusals: list[str] = []  # each reason a helper stops short, for the host (tell_refusals)
        self.game._refusals = self.refusals
        self.running_told = ""  # the functions the open call was last said to be in
        self.seeded_for: int | None = None  # the helper seed `random` was last seeded from (sync)

    def send(self, message: dict) -> None:
        write_frame(REPLY_OUT, message)

    def on_print(self, text: str) -> None:
        self.send({"print": text[:PRINT_CAP]})

    def confine(self, job: dict) -> dict:
        """Every layer, before any agent code: what this reports cannot have been written by that code."""
        limits = job["limits"]
        # the whole step time the prompts promise: the host waits longer (sandbox.deadline's grace), so the
        # code is interrupted with its line before it could be killed
        self.timer.seconds = float(limits["step_timeout_s"])
        applied = confine.confine(int(limits["memory_mb"]), int(limits["cpu_s"]), int(limits["file_size_mb"]))
        return {"r": "confined", "v": applied}

    def load(self, job: dict) -> dict:
        try:
            if job.get("lint", True):
                return self._load(job)
            with checker_disabled():
                return self._load(job)
        except UnsafeCodeError as exc:
            return {"r": "unsafe", "v": str(exc)}
        except CodeLoadError as exc:
            return {"r": "load", "v": str(exc)}
        except MemoryError:
            return {"r": "load", "v": "MemoryError: the code's top level ran out of memory"}

    def _load(self, job: dict) -> dict:
        actions = []
        for i, source in enumerate(job.get("sources") or []):
            try:
                actions += load_coded_actions(source, output=self.on_print)
            except (UnsafeCodeError, CodeLoadError) as exc:
                prefix = f"source {i + 1}: " if len(job["sources"]) > 1 else ""
                raise type(exc)(*([[prefix + v for v in exc.violations]] if isinstance(exc, UnsafeCodeError)
                                  else [prefix + str(exc)])) from None
        self.stepper = CallStepper(actions)
        if job.get("shaping"):
            self.shaping_source = job["shaping"]
            self.shaping = load_shaping(self.shaping_source, output=self.on_print)
        specs = [vars(spec_of(a)) for a in actions]
        return {"r": "loaded", "v": specs}

    def sync(self, request: dict) -> None:
        update = request.get("sync")
        if update:
            update = dict(update, observe=[obs_from_wire(o) for o in update["observe"]])
            self.game._apply(update)
            if "reset" in update or ("state" in update and self.game._helper_seed != self.seeded_for):
                # the `random` agent code imports is this process's: seeded from the episode's helper seed (the
                # env's own stream, never the world seed) each time the mirror takes up an episode, so the same
                # code plays the same episode the same way, in a test, in training and in held-out play. A
                # memory-map catch-up within the episode it plays already (a long gap between calls) keeps the
                # stream going rather than starting it again.
                self.seeded_for = self.game._helper_seed
                random.seed(2 * self.seeded_for + 1)

    def handle(self, request: dict) -> dict:
        try:
            self.timer.arm()
            try:
                reply = self._handle(request)
            finally:
                self.timer.disarm()
        except CodeTimeout as exc:  # raised between the agent's frames, outside their own handlers
            return {"r": "error", "v": str(exc)}
        except Exception as exc:  # e.g. an object of the agent's whose text representation raises
            return {"r": "error", "v": f"the code's answer could not be read ({type(exc).__name__})"}
        if isinstance(reply["v"], str):
            reply["v"] = reply["v"][:TEXT_CAP]
        return reply

    def _handle(self, request: dict) -> dict:
        op = request.get("op")
        self.sync(request)
        self.refusals.clear()  # only what this request's call does is told (even a precondition may run helpers)
        if op == "begin":
            self.running_told = ""
            kind, value = self.explained(*self.stepper.begin(str(request["name"]), self.game))
            self.tell_refusals()
        elif op == "advance":
            kind, value = self.explained(*self.stepper.advance())
            self.tell_refusals()
        elif op == "sync":  # only the observations it brought (masks read on the host side)
            kind, value = "ok", None
        elif op == "finish":
            self.stepper.finish()
            kind, value = "ok", None
        elif op == "mask":
            kind, value = "mask", "".join("1" if ok else "0" for ok in self.stepper.mask(self.game))
        elif op == "shape":
            kind, value = self.shape(request["prev"], request["curr"])
        else:
            kind, value = "error", f"unknown request {op!r}"
        reply = {"r": kind, "v": value}
        if kind == "act":  # where in the code the call is, when that changed (the host labels its trace)
            running = self.stepper.running()[:RUNNING_CAP]
            if running != self.running_told:
                reply["in"] = self.running_told = running
        return reply

    def explained(self, kind: str, value: object) -> tuple[str, object]:
        """A call's answer; a step that ran out of time while helpers kept refusing says so: a helper that
        stops short returns at once, without an action, so code that calls it again and again never yields."""
        if kind == "error" and isinstance(value, str) and self.timer.fired and (
                len(self.refusals) >= MIN_REFUSALS_TO_EXPLAIN):
            value += (f" (meanwhile helpers of the game API stopped short {len(self.refusals)} times without an "
                      f"action, the last: {str(self.refusals[-1])[:PRINT_CAP]!r}; a helper that stops short returns "
                      "at once, so a loop that calls it again never yields: check `game.last_refusal` and do "
                      "something else)")
        return kind, value

    def tell_refusals(self) -> None:
        """Each reason a helper stopped short since the last answer, once where it repeats itself."""
        told = None
        for text in self.refusals[:MAX_REFUSALS_TOLD]:
            if text != told:
                self.send({"refusal": str(text)[:PRINT_CAP]})
                told = text
        self.refusals.clear()

    def shape(self, prev: dict, curr: dict) -> tuple[str, object]:
        if self.shaping is None:
            return "error", "no shaping function was loaded"
        views = [{"inventory": dict(s["inventory"]), "achievements": frozenset(s["achievements"])}
                 for s in (prev, curr)]
        try:
            value = float(self.shaping(*views))
        except Exception as exc:
            described = describe_agent_error(exc, self.shaping_source)
            return "error", f"the shaping function raised {type(exc).__name__}: {described}"
        if not math.isfinite(value):
            return "error", f"the shaping function returned {value}; it must return a finite float"
        return "value", value


def main() -> int:
    reader = FrameReader(REQUEST_IN, MAX_TO_CHILD)
    server = Server()
    write_frame(REPLY_OUT, {"ready": True})
    job = reader.read(None)
    reply = server.confine(job)
    reply["id"] = job.get("id")
    server.send(reply)
    if job.get("strict") and any(v is not True for v in reply["v"].values()):
        return 1  # strict: with a layer missing, no agent code is loaded at all
    job = reader.read(None)
    reply = server.load(job)
    reply["id"] = job.get("id")
    server.send(reply)
    while True:
        request = reader.read(None)  # the host closing the pipe ends this process (ProtocolError)
        reply = server.handle(request)
        reply["id"] = request.get("id")
        server.send(reply)


def run() -> None:
    try:
        sys.exit(main())
    except Exception:  # noqa: BLE001 - the host reads the end of the pipe as the end of this process
        sys.exit(1)
