"""The coded-action contract: generator functions over the game API, run as temporally extended actions.

    @coded_action(precondition=lambda game: game.has("wood"), max_steps=50)
    def place_table(game):
        ...
        yield "place_table"

`execute` drives one call inside an environment, one primitive step per yielded action name, and
returns what the call did: steps, (discounted) reward, and the error with the line in the agent's
code when it raised. Both the sandboxed code runner and the PPO option wrapper use it.
"""

from __future__ import annotations

import inspect
import signal
import threading
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable

AGENT_CODE_FILENAME = "<agent-code>"  # the filename agent source is compiled under
DEFAULT_MAX_STEPS = 200
DEFAULT_STEP_TIMEOUT_S = 2.0  # wall-clock limit for the code between two yields


class CodedActionTimeout(Exception):
    """The agent's code ran too long without yielding an action."""


@dataclass
class CodedAction:
    name: str
    fn: Callable
    precondition: Callable | None = None
    max_steps: int = DEFAULT_MAX_STEPS
    doc: str = ""
    source: str | None = None  # the agent's source, to quote lines in error messages


@dataclass
class OptionOutcome:
    obs: Any = None
    reward: float = 0.0
    discounted_reward: float = 0.0
    steps: int = 0
    terminated: bool = False
    truncated: bool = False
    info: dict = field(default_factory=dict)
    error: str | None = None
    precondition_failed: bool = False
    actions: list[str] = field(default_factory=list)


def coded_action(precondition: Callable | None = None, max_steps: int = DEFAULT_MAX_STEPS):
    """Decorator that attaches a precondition and a step limit to a coded action."""
    if max_steps < 1:
        raise ValueError("max_steps must be >= 1")

    def mark(fn):
        fn.precondition = precondition
        fn.max_steps = max_steps
        return fn

    return mark


def as_coded_action(fn: Callable, source: str | None = None) -> CodedAction:
    if not inspect.isgeneratorfunction(fn):
        raise TypeError(f"coded action '{getattr(fn, '__name__', fn)}' must be a generator function "
                        "(it must `yield` action names)")
    return CodedAction(
        name=fn.__name__, fn=fn, precondition=getattr(fn, "precondition", None),
        max_steps=int(getattr(fn, "max_steps", DEFAULT_MAX_STEPS)),
        doc=inspect.getdoc(fn) or "", source=source)


def describe_agent_error(exc: BaseException, source: str | None = None) -> str:
    """'line N in fn: Type: message' pointing at the deepest frame of the agent's own code."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == AGENT_CODE_FILENAME]
    text = f"{type(exc).__name__}: {exc}"
    if not frames:
        return text
    frame = frames[-1]
    where = f"line {frame.lineno} in {frame.name}"
    if source:
        lines = source.splitlines()
        if frame.lineno and 0 < frame.lineno <= len(lines):
            where += f" (`{lines[frame.lineno - 1].strip()}`)"
    return f"{where}: {text}"


@contextmanager
def _time_limit(seconds: float | None):
    """Raise CodedActionTimeout in the agent's code after `seconds` (main thread only, POSIX)."""
    usable = seconds and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def on_alarm(signum, frame):
        raise CodedActionTimeout(f"no action yielded within {seconds:g} s (endless loop?)")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_precondition(action: CodedAction, game) -> tuple[bool, str | None]:
    """(can run, error). A precondition that raises counts as not satisfied, with its error."""
    if action.precondition is None:
        return True, None
    try:
        with _time_limit(DEFAULT_STEP_TIMEOUT_S):
            return bool(action.precondition(game)), None
    except Exception as exc:  # agent code: any failure is reported, never raised
        return False, f"precondition of {action.name}: {describe_agent_error(exc, action.source)}"


def execute(env, action: CodedAction, gamma: float = 0.99, on_step: Callable | None = None,
            max_steps: int | None = None, step_timeout_s: float | None = DEFAULT_STEP_TIMEOUT_S) -> OptionOutcome:
    """Run one call of a coded action in `env` (a CrafterEnv or a wrapper exposing `.game`)."""
    outcome = OptionOutcome()
    game = env.game
    ok, error = check_precondition(action, game)
    if not ok:
        outcome.precondition_failed = True
        outcome.error = error
        return outcome
    index = {name: i for i, name in enumerate(env.primitive_actions)}
    limit = max_steps if max_steps is not None else action.max_steps  # the caller's limit wins
    try:
        with _time_limit(step_timeout_s):
            generator = action.fn(game)
    except Exception as exc:
        outcome.error = describe_agent_error(exc, action.source)
        return outcome
    if not inspect.isgenerator(generator):
        outcome.error = f"{action.name} must be a generator function that yields action names"
        return outcome
    discount = 1.0
    try:
        while outcome.steps < limit:
            try:
                with _time_limit(step_timeout_s):
                    name = next(generator)
            except StopIteration:
                break
            except Exception as exc:  # agent code raised: stop the call, keep the episode
                outcome.error = describe_agent_error(exc, action.source)
                break
            if not isinstance(name, str) or name not in index:
                outcome.error = (f"{action.name} yielded {name!r}; expected one of the "
                                 f"{len(index)} action names: {', '.join(index)}")
                break
            obs, reward, terminated, truncated, info = env.step(index[name])
            outcome.obs, outcome.info = obs, info
            outcome.reward += reward
            outcome.discounted_reward += discount * reward
            discount *= gamma
            outcome.steps += 1
            outcome.actions.append(name)
            outcome.terminated, outcome.truncated = terminated, truncated
            if on_step is not None:
                on_step(name, obs, reward, info)
            if terminated or truncated:
                break
    finally:
        try:
            generator.close()
        except Exception:  # a misbehaving `finally` in agent code must not escape either
            pass
    return outcome
