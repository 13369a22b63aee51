"""The coded-action contract: generator functions over the game API, run as temporally extended actions.

    @coded_action(precondition=lambda game: game.has("wood"), max_steps=50)
    def place_table(game):
        ...
        yield "place_table"

Two halves, which the sandbox puts on the two sides of its boundary:
- `CallStepper` advances one call's generator and answers with the next action name, the end of the
  call or the agent's error (with its line). It runs next to the code: in the sandbox process for
  agent-written code (`sandbox.child`), in-process for the project's own callables (`LocalActions`).
- `run_option` is the trusted loop around it: it steps the environment once per action name, counts
  every primitive step, enforces the step limit and sums the (discounted) reward. The code never holds
  the environment, so it cannot step it uncounted or change what the step returns.
"""

from __future__ import annotations

import inspect
import traceback
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Protocol

AGENT_CODE_FILENAME = "<agent-code>"  # the filename agent source is compiled under
DEFAULT_MAX_STEPS = 200
RUNNING_DEPTH = 6  # nested calls named in CallStepper.running
DEFAULT_STEP_TIMEOUT_S = 2.0  # CPU-time limit for the code between two yields (the sandbox enforces it)


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
    suspended: bool = False
    """the call reached `max_steps` still running and was left open (option_steps' `keep_open`): the
    driver's next `advance` continues it"""


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
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:  # the agent's own exception type may break its text on purpose
        text = f"{type(exc).__name__} (its message could not be shown)"
    if not frames:
        return text
    frame = frames[-1]
    where = f"line {frame.lineno} in {frame.name}"
    if source:
        lines = source.splitlines()
        if frame.lineno and 0 < frame.lineno <= len(lines):
            where += f" (`{lines[frame.lineno - 1].strip()}`)"
    return f"{where}: {text}"


@dataclass(frozen=True)
class ActionSpec:
    """What the trusted side knows of a coded action: plain data, no code."""

    name: str
    max_steps: int = DEFAULT_MAX_STEPS
    has_precondition: bool = False
    doc: str = ""
    declared_max_steps: bool = False  # @coded_action(max_steps=...) was given, not the default


def spec_of(action: CodedAction) -> ActionSpec:
    return ActionSpec(action.name, action.max_steps, action.precondition is not None, action.doc,
                      "max_steps" in vars(action.fn))


# A step of a call, as the code's side reports it: ("act", name) | ("end", None) | ("error", text)
# | ("precondition", text): the precondition was false or raised, nothing ran.
Reply = tuple[str, Any]


def check_precondition(action: CodedAction, game) -> tuple[bool, str | None]:
    """(can run, error). A precondition that raises counts as not satisfied, with its error."""
    if action.precondition is None:
        return True, None
    try:
        return bool(action.precondition(game)), None
    except Exception as exc:  # agent code: any failure is reported, never raised
        return False, f"precondition of {action.name}: {describe_agent_error(exc, action.source)}"


class CallStepper:
    """Runs calls of coded actions one yielded action at a time, next to the code (see module docstring)."""

    def __init__(self, actions: list[CodedAction]):
        self.actions = {a.name: a for a in actions}
        self._generator: Generator[Any, Any, Any] | None = None
        self._action: CodedAction | None = None

    def begin(self, name: str, game) -> Reply:
        self.finish()
        action = self.actions.get(name)
        if action is None:
            return "error", f"no coded action named {name!r}; there are: {', '.join(self.actions)}"
        ok, error = check_precondition(action, game)
        if not ok:
            return "precondition", error or f"precondition of {name} is false: the action cannot run here"
        try:
            generator = action.fn(game)
        except Exception as exc:
            return "error", describe_agent_error(exc, action.source)
        if not inspect.isgenerator(generator):
            return "error", f"{name} must be a generator function that yields action names"
        self._generator, self._action = generator, action
        return self.advance()

    def advance(self) -> Reply:
        """The call's next action name, after the game API has seen the last step's observation."""
        if self._generator is None:
            return "end", None
        try:
            name = next(self._generator)
        except StopIteration:
            self._generator = None
            return "end", None
        except Exception as exc:  # agent code raised: the call stops, the episode goes on
            self._generator = None
            return "error", describe_agent_error(exc, self._action.source if self._action else None)
        if not isinstance(name, str):
            self.finish()
            return "error", f"{self._action_name()} yielded a {type(name).__name__}; yield action names (strings)"
        return "act", name

    def finish(self) -> None:
        generator, self._generator = self._generator, None
        if generator is not None:
            try:
                generator.close()
            except Exception:  # a misbehaving `finally` in agent code must not escape either
                pass

    def mask(self, game) -> list[bool]:
        return [check_precondition(a, game)[0] for a in self.actions.values()]

    def _action_name(self) -> str:
        return self._action.name if self._action else "the coded action"

    def running(self) -> str:
        """Which functions the call is in now, outermost first ('main > collect_iron > go_to'): the generators
        it is suspended in, each `yield from` the next (agent code's and the game API's helpers)."""
        names: list[str] = []
        generator: Any = self._generator
        while inspect.isgenerator(generator) and len(names) < RUNNING_DEPTH:
            names.append(generator.gi_code.co_name)
            generator = generator.gi_yieldfrom
        return " > ".join(names)


class ActionDriver(Protocol):
    """What run_option needs from the side that holds the code (LocalActions or sandbox.AgentCode). A driver
    may also offer ``begin_later``, ``advance_later`` and ``mask_later``: the same requests, answered by an
    object whose ``get()`` reads the answer when it is needed (see `ask_later`)."""

    def begin(self, name: str, game) -> Reply: ...
    def advance(self, game) -> Reply: ...
    def finish(self) -> None: ...


class LocalActions:
    """The project's own coded actions (Python callables, trusted) driven in this process.

    Agent-written source never comes here: it is loaded only inside the sandbox (sandbox.AgentCode)."""

    def __init__(self, actions: list[CodedAction]):
        self._stepper = CallStepper(actions)
        self.specs = [spec_of(a) for a in actions]

    def begin(self, name: str, game) -> Reply:
        return self._stepper.begin(name, game)

    def advance(self, game) -> Reply:
        return self._stepper.advance()

    def finish(self) -> None:
        self._stepper.finish()

    def mask(self, game) -> list[bool]:
        return self._stepper.mask(game)

    def execute(self, env, name: str, **kwargs) -> OptionOutcome:
        return run_option(env, self, name, **kwargs)


class Ready:
    """An answer known at once (a driver's `*_later` request that needed no round trip)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def get(self) -> Any:
        return self.value


def ask_later(driver, request: str, *args) -> Any:
    """``driver.<request>_later(*args)`` where the driver can send a request and read its answer later
    (sandbox.AgentCode), else the blocking ``driver.<request>(*args)``'s answer, `Ready`."""
    later = getattr(driver, request + "_later", None)
    return later(*args) if later is not None else Ready(getattr(driver, request)(*args))


# What a step coroutine yields: an answer on its way (`.get()` reads it). Whoever drives it may step other
# envs before resuming it, while the sandbox works the answer out (rl.options.OverlappedSyncVectorEnv).
StepCoroutine = Generator[Any, None, Any]


def drive(steps: StepCoroutine) -> Any:
    """Run a step coroutine to its end, one answer at a time; its result."""
    try:
        while True:
            next(steps)
    except StopIteration as stop:
        return stop.value


def run_option(env, driver: ActionDriver, name: str, gamma: float = 0.99, on_step: Callable | None = None,
               max_steps: int = DEFAULT_MAX_STEPS) -> OptionOutcome:
    """Run one call of coded action `name` in `env` (an env exposing `.game` and `.primitive_actions`).

    The trusted loop: one env step per action name the driver answers, every step counted here."""
    return drive(option_steps(env, driver, name, gamma, on_step, max_steps))


def option_steps(env, driver: ActionDriver, name: str, gamma: float = 0.99, on_step: Callable | None = None,
                 max_steps: int = DEFAULT_MAX_STEPS, resume: bool = False,
                 keep_open: bool = False) -> Generator[Any, None, OptionOutcome]:
    """`run_option` as a step coroutine: it yields each answer it waits for and reads it when resumed.
    `keep_open`: a call still running at `max_steps` is left open (`outcome.suspended`) instead of finished;
    `resume` continues the driver's open call instead of beginning `name` (nothing stepped in between)."""
    outcome = OptionOutcome()
    index = {action: i for i, action in enumerate(env.primitive_actions)}
    game = env.game  # one object for the episode: looked up once, not through the wrappers every step
    answer = ask_later(driver, "advance", game) if resume else ask_later(driver, "begin", name, game)
    yield answer
    kind, value = answer.get()
    suspended = False
    try:
        while kind == "act":
            if value not in index:
                kind, value = "error", (f"{name} yielded {value!r}; expected one of the {len(index)} action "
                                        f"names: {', '.join(index)}")
                break
            if outcome.steps >= max_steps:
                break
            obs, reward, terminated, truncated, info = env.step(index[value])
            outcome.obs, outcome.info = obs, info
            outcome.reward += reward
            outcome.discounted_reward += gamma ** outcome.steps * reward
            outcome.steps += 1
            outcome.actions.append(value)
            outcome.terminated, outcome.truncated = terminated, truncated
            if on_step is not None:
                on_step(value, obs, reward, info)
            if terminated or truncated:
                break
            if outcome.steps >= max_steps:
                suspended = keep_open  # the next action is asked for when the call goes on
                break
            answer = ask_later(driver, "advance", game)
            yield answer
            kind, value = answer.get()
    finally:
        if not suspended:
            driver.finish()
    outcome.suspended = suspended
    if kind == "precondition":
        outcome.precondition_failed = True
        outcome.error = value
    elif kind == "error":
        outcome.error = value
    return outcome


def execute(env, action: CodedAction, gamma: float = 0.99, on_step: Callable | None = None,
            max_steps: int | None = None) -> OptionOutcome:
    """One call of a trusted, in-process coded action (tests, benchmarks of the game API)."""
    limit = max_steps if max_steps is not None else action.max_steps
    return run_option(env, LocalActions([action]), action.name, gamma=gamma, on_step=on_step, max_steps=limit)
