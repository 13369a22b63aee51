"""`run_code_in_env`: test agent-written coded actions in a fresh Crafter episode, safely.

The code is linted here (instant feedback, no process started), then loaded in a sandbox process
(`sandbox.AgentCode`) while the episode is played here: the code only names actions, this side steps
the environment and counts. Whatever the code does, the caller gets a `CodeRunReport` back: a
violation, a syntax or runtime error (with the line in the agent's code), a timeout or the memory
limit is an `error`, never an exception.

Which coded action runs: `action` when given, else the one named `main`, else the last coded
action the code defines. Steps are counted honestly: `steps` is every primitive environment
step the code took, also when the run was stopped by a limit.

The report says how the episode ended (`ended`), and when the player died, what most likely killed
it, inferred here from what the player observed (envs.describe); `last_view` is what it saw at the
end. `summarise_reports_for_agent` turns the reports of one round of tests on several seeds into the
text an agent repairs its code from.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field, PrivateAttr

from envs.crafter_env import CrafterEnv
from envs.describe import NIGHT_BELOW, damage_cause, describe_view
from envs.game_api import GameAPI
from envs.observation import STATUS_KEYS
from envs.saved_state import SavedState
from envs.seeds import check_training_seed
from envs.tasks import UnknownTaskError, get_task
from sandbox import (
    ALLOWED_MODULES,
    AgentCode,
    CodeRejected,
    SandboxLimits,
    SandboxUnavailable,
    UnsafeCodeError,
    check_source,
)
from sandbox.wire import clean_text
from tools.trace import PRINT_PREFIX, TraceBuilder, last_lines_within, reached_action

DEFAULT_OUTPUT_DIR = os.path.join("runs", "code_runs")
MAX_STEPS_LIMIT = 10_000
MAX_GIF_FRAMES = 300
GIF_FPS = 8
GIF_MIN_WIDTH = 192


Ended = Literal["success", "died", "out_of_steps", "action_returned", "error", "precondition"]
LAST_HURTS = 6  # health losses listed in a death's detail
MAX_REFUSAL_HELPERS = 6  # helpers listed with their refusals in a report
MAX_FIRST_STEPS = 40  # functions whose first step a report keeps (what a judged action's start is read from)
# the game API's helpers by name (shelter, go_to, its private _dig_and_seal): a death inside one says since when it ran
API_HELPERS = frozenset(name for name, value in vars(GameAPI).items() if callable(value) and not name.startswith("__"))
VITALS_EVERY = 50  # steps between two samples of the bars in a report's timeline
MAX_VITALS = MAX_STEPS_LIMIT // VITALS_EVERY + 1  # samples kept, the end's aside: the longest test whole
VITALS_HEADING = "bars by step (health/food/drink/energy, * dark, what main ran)"
VITALS_LAST = 4  # a timeline thinned to fit keeps its last samples at every VITALS_EVERY steps: the death is there
MAX_VITALS_CHARS = 320  # a detail's timeline at most: the trace's end and the view keep the rest
# A test plays the code on past the subtask's achievement to its return, as a held-out chain does (code that
# ran only after it was never tested: answerers' skills starved or stalled there); this many steps at most
AFTER_SUCCESS_STEPS = 200
MIN_VITALS_CHARS = 200  # ... and at least, before the view and the trace's end: in a crowded report a third of
# what the death's lines leave was too little for any timeline, and the answerers read it before either


class CodeRunReport(BaseModel):
    """What one test run of agent code did."""

    ok: bool = Field(description="the code ran without error (it may still have missed the task)")
    error: str | None = Field(None, description="what went wrong, with the line in the agent's code")
    failure_kind: str | None = Field(
        None, description="input | unsafe | load | runtime | precondition | timeout | memory | crashed")
    ended: Ended = Field(description="how the episode ended: success | died | out_of_steps (the step budget ran "
                                     "out) | action_returned (the action finished without success) | error (see "
                                     "failure_kind) | precondition (its precondition was false: nothing to act on)")
    death_cause: str | None = Field(
        None, description="when died: lava | zombie | skeleton arrow | starvation | thirst | exhaustion | unseen "
                          "attacker")
    death_detail: str | None = Field(None, description="when died: the last health losses and the status bars")
    daylight_at_end: float | None = Field(None, description="when died: the daylight then (below 0.4: night)")
    last_refusal: str | None = Field(None, description="why a helper of the game API (go_to, shelter, ...) last "
                                                       "stopped short during the run, if one did")
    last_refusal_step: int | None = Field(None, description="the step at which last_refusal was said")
    refusals: list[str] = Field(default_factory=list, description="each helper that stopped short: how often, "
                                                                  "at which step last, and its last reason")
    task: str = ""
    seed: int = 0
    action: str | None = Field(None, description="the coded action that ran")
    task_success: bool = Field(False, description="the subtask's achievement unlocked and the player was alive "
                                                  "when the code ended (returned, raised or was stopped); with "
                                                  "after_success_steps 0, the achievement unlocked")
    success_step: int | None = Field(None, description="the step the subtask's achievement unlocked; the code then "
                                                      "played on to its return (or after_success_steps)")
    stopped_after_success: bool = Field(False, description="still running after the achievement when the test "
                                                           "stopped it (after_success_steps after it, "
                                                           f"{AFTER_SUCCESS_STEPS} by default, or the step limit)")
    steps: int = Field(0, description="primitive environment steps the code used")
    achievements_before: list[str] = Field(default_factory=list, description="unlocked before the code ran")
    achievements_unlocked: list[str] = Field(default_factory=list, description="unlocked at the end (all of them)")
    inventory_before: dict[str, int] = Field(default_factory=dict)
    inventory_after: dict[str, int] = Field(default_factory=dict)
    trace: str = ""
    vitals: str = Field("", description="the bars every 50 steps and at the end: 'step health/food/drink/energy', "
                                        "'*' after a step in the dark, and what main ran where it changed")
    running_at_end: str = Field("", description="the functions the code was in at its last step, outermost first "
                                "('main > make_iron_pickaxe > go_to'), as the sandbox said")
    first_steps: dict[str, int] = Field(default_factory=dict, description="each function the code was in at some "
                                        "step, with the first such step, as the sandbox said (the trace's labels)")
    helper_since: str = Field("", description="the outermost game API helper the code was in at its last step, and "
                              "since which step it had been in it without a break ('shelter since step 190')")
    last_view: str | None = Field(None, description="what the player saw at the end")
    gif_path: str | None = None
    wall_time_s: float = 0.0
    # where a successful test stopped, for trainings of later sub-actions to start from (envs.saved_state);
    # private: never in the report's text or dump, so neither a model nor a checkpoint carries a world
    _end_state: SavedState | None = PrivateAttr(None)

    @property
    def end_state(self) -> SavedState | None:
        return self._end_state

    def to_text(self) -> str:
        """Compact summary for a language model (the tool's message content)."""
        data = self.model_dump()
        status = "no error" if self.ok else f"FAILED ({self.failure_kind})"
        lines = [f"run: {status}; ended: {_ended_text(data)}; task {self.task} seed {self.seed}; "
                 f"action {self.action or '-'}",
                 f"task success: {self.task_success}; steps used: {self.steps}"]
        if self.death_detail:
            lines.append(f"death: {self.death_cause}; {self.death_detail}")
        if self.error:
            lines.append(f"error: {self.error}")
        if self.vitals:
            lines.append(f"{VITALS_HEADING}: {self.vitals}")
        if self.refusals:
            lines.append("helpers that stopped short: " + "; ".join(self.refusals))
        elif self.last_refusal:
            lines.append(f"a helper stopped short: {self.last_refusal}")
        gained = _gained(data)
        if gained or self.achievements_before:
            lines.append(f"achievements unlocked: {', '.join(gained) or 'none'}"
                         + (f" (before the code ran: {', '.join(self.achievements_before)})"
                            if self.achievements_before else ""))
        changes = _inventory_changes(self.inventory_before, self.inventory_after)
        if changes:
            lines.append(f"inventory changes: {changes}")
        if self.trace:
            lines.append("trace:\n" + self.trace)
        if self.last_view:
            lines.append("last view:\n" + self.last_view)
        if self.gif_path:
            lines.append(f"gif: {self.gif_path}")
        return "\n".join(lines)


def _ended_text(report: dict) -> str:
    """'died at step 57 (zombie)', 'error (runtime) after 3 steps', ... from a report as plain data."""
    steps, ended = report.get("steps") or 0, _ended_of(report)
    return {
        "success": f"success at step {_success_at(report)}",
        "died": f"died at step {steps}{_night(report)} ({report.get('death_cause') or 'cause not recorded'})"
                + _after_success(report),
        "out_of_steps": f"out of steps after {steps} steps",
        "action_returned": f"the action returned after {steps} steps without success",
        "error": f"error ({report.get('failure_kind') or 'unknown'}) after {steps} steps",
        "precondition": "the precondition was false: nothing to act on",
    }.get(ended, f"{ended} after {steps} steps")


def _success_at(report: dict) -> str:
    """'57', '57 (returned at 80)', '57 (still running at 257, stopped)', '57 (raised an error at 60)': the
    achievement's step, and how the code ended when it played on."""
    steps, at = report.get("steps") or 0, report.get("success_step")
    if at is None or (at == steps and not report.get("failure_kind")):
        return str(steps)
    if report.get("failure_kind"):  # held-out play goes on after a skill that raised once it unlocked its goal
        return f"{at} (raised an error at {steps})"
    if report.get("stopped_after_success"):
        return f"{at} (still running at {steps}, stopped)"
    return f"{at} (returned at {steps})"


def _after_success(report: dict) -> str:
    """For a death after the subtask's achievement: when, before the code returned."""
    at = report.get("success_step")
    if at is None:
        return ""
    after = (report.get("steps") or 0) - at
    return (", on the step of the achievement" if after <= 0
            else f", {after} steps after the achievement, before the code returned")


def _night(report: dict) -> str:
    """', at night' when the player died in the dark (zombies crowd the grass then), else ''."""
    daylight = report.get("daylight_at_end")
    return ", at night" if isinstance(daylight, (int, float)) and daylight < NIGHT_BELOW else ""


def _ended_of(report: dict) -> str:
    """`ended`; for a report from before the field existed, what its other fields say."""
    if report.get("ended"):
        return str(report["ended"])
    if report.get("failure_kind"):
        return "precondition" if report["failure_kind"] == "precondition" else "error"
    return "success" if report.get("task_success") else "no success"


def _gained(report: dict) -> list[str]:
    before = set(report.get("achievements_before") or ())
    return [a for a in report.get("achievements_unlocked") or () if a not in before]


def _inventory_changes(before: dict[str, int], after: dict[str, int]) -> str:
    parts = [f"{k} {after.get(k, 0) - before.get(k, 0):+d}" for k in sorted(set(before) | set(after))
             if after.get(k, 0) != before.get(k, 0)]
    return ", ".join(parts)


def _bars_text(inventory: dict[str, int], health: bool = True) -> str:
    return ", ".join(f"{bar} {inventory.get(bar, 0)}" for bar in STATUS_KEYS if health or bar != "health")


def _frames(running: str) -> list[str]:
    """The functions of a running stack ('main > collect_wood > go_to'), outermost first; none for ''."""
    return [f for f in running.split(" > ") if f]


class _Progress:
    """What the code did, step by step, as the trusted side saw it: the whole story also when a limit
    stopped it, and every health loss with its likely cause, read from the player's view at that step."""

    def __init__(self, env, gif: bool, after_success_steps: int = AFTER_SUCCESS_STEPS) -> None:
        self.env = env
        self.after_success_steps = after_success_steps
        self.trace = TraceBuilder()
        self.inventory_before = dict(env.game.inventory)
        self.inventory = dict(self.inventory_before)
        self.achievements_before = sorted(env.game.achievements)
        self.achievements = list(self.achievements_before)
        self.steps = 0
        self.success_step: int | None = None  # the step the subtask's achievement unlocked
        self.hurts: list[tuple[int, str, int]] = []  # (step, likely cause, health lost)
        self.frames = [env.render()] if gif else []
        self.deadline = float("inf")
        self.refusal: str | None = None
        self.refusal_step: int | None = None
        self.refusals: dict[str, tuple[int, int, str]] = {}  # helper -> (times, last step, last reason)
        self.code: AgentCode | None = None  # the sandbox running the call: says which functions it is in
        self.running = ""  # the functions the code was in at the last step
        self.entered: list[int] = []  # the step each function of `running` was called at, outermost first
        self.first_steps: dict[str, int] = {}  # function -> the first step taken inside it
        self.faced = self._faced()  # what a 'do' hits: read before the step, shown on its trace line
        # the bars every VITALS_EVERY steps: answerers could not tell from a trace's end whether food ran out
        # from too little hunting or no cows, or when the night caught the player
        self.vitals: list[str] = []  # 'step[*] h/f/d/e what', `what` where it changed (vitals_text)
        self._shown = ""
        self._sampled_at = -1
        self._sample()

    def _sample(self, end: bool = False) -> None:
        if (len(self.vitals) >= MAX_VITALS and not end) or self._sampled_at == self.steps:
            return
        self._sampled_at = self.steps
        # what main ran: a chain's skill (its first function inside main), else the function the code was in
        parts = _frames(self.running)
        what = (parts[1] if len(parts) > 1 and parts[0] == "main" else parts[0]) if parts else ""
        dark = "*" if float(self.observation().daylight) < NIGHT_BELOW else ""
        text = f"{self.steps}{dark} {'/'.join(str(int(self.inventory.get(k, 0))) for k in STATUS_KEYS)}"
        if what and what != self._shown:
            text, self._shown = f"{text} {what}", what
        self.vitals.append(text)

    def vitals_text(self) -> str:
        """'0 9/9/9/9, 50 9/8/7/8 collect_wood, ..., 200* 7/3/2/5 collect_iron, 219* 0/3/2/5': every
        VITALS_EVERY steps and the end; empty when the code took no step."""
        if not self.steps:
            return ""
        self._sample(end=True)  # the end, whatever its step (nothing when it was just sampled)
        return ", ".join(self.vitals)

    def on_step(self, name: str, obs, reward: float, info: dict) -> None:
        self.steps += 1
        inventory = dict(info["inventory"])
        new = [a for a in info["achievements"] if a not in self.achievements]
        events = _events(self.inventory, inventory, new, reward)
        lost = self.inventory.get("health", 0) - inventory.get("health", 0)
        if lost > 0:
            cause = damage_cause(self.observation(), lost, before=self.inventory)
            self.hurts.append((self.steps, cause, lost))
            events = [f"{e} ({cause})" if e.startswith("health ") else e for e in events]
        shown = f"do at {self.faced}" if name == "do" else name
        running = self.code.running if self.code is not None else ""
        self.trace.step(self.steps, shown, events, running)
        self._enter(running)
        self.running = running
        for function in _frames(running):
            if function not in self.first_steps and len(self.first_steps) < MAX_FIRST_STEPS:
                self.first_steps[function] = self.steps
        self.faced = self._faced()
        self.inventory, self.achievements = inventory, list(info["achievements"])
        if self.success_step is None and info["success"]:  # the env's own reading of the task
            self.success_step = self.steps
        if self.steps % VITALS_EVERY == 0:
            self._sample()
        if self.frames and len(self.frames) < MAX_GIF_FRAMES:
            self.frames.append(self.env.render())
        if time.monotonic() > self.deadline:
            raise _OutOfTime
        if self.success_step is not None and self.steps - self.success_step >= self.after_success_steps:
            raise _RanOnAfterSuccess

    def _enter(self, running: str) -> None:
        """Keep the step each function now running was called at: the frames shared with the last step's keep theirs
        (a function left and called again between two steps reads as one call)."""
        parts, old = _frames(running), _frames(self.running)
        same = 0
        while same < min(len(parts), len(old), len(self.entered)) and parts[same] == old[same]:
            same += 1
        self.entered = self.entered[:same] + [self.steps] * (len(parts) - same)

    def helper_since(self) -> str:
        """'shelter since step 190': the outermost game API helper running at the last step, and since when."""
        parts = _frames(self.running)
        return next((f"{name} since step {at}" for name, at in zip(parts, self.entered, strict=False)
                     if name in API_HELPERS), "")

    def _faced(self) -> str:
        """The creature or material on the tile the player faces."""
        game = self.env.game
        creatures = game._facing_creatures()  # trusted side: the private reader, not a new public member
        return creatures[0] if creatures else game.facing_material()

    def on_print(self, text: str) -> None:
        self.trace.printed(self.steps, text)

    def on_refusal(self, text: str) -> None:
        self.refusal, self.refusal_step = text, self.steps
        self.trace.note(f"step {self.steps}: a helper stopped short: {text}")
        helper, _, reason = text.partition(":")  # the helper names itself first ('shelter: no stone ...')
        helper = helper[:40]
        count = self.refusals.get(helper, (0, 0, ""))[0] + 1
        self.refusals[helper] = (count, self.steps, reason.strip() or text)

    def refusal_lines(self) -> list[str]:
        """Per helper that stopped short: how often, when last and why; the trace's end may not reach it."""
        return [f"{helper} {count} time{'s' if count > 1 else ''}, last at step {step}: {text}"
                for helper, (count, step, text) in list(self.refusals.items())[:MAX_REFUSAL_HELPERS]]

    def observation(self):
        """What the player observes now (the backend's plain-data view, no link to the simulator)."""
        return self.env.backend.player_observation(self.env.episode_steps)

    def died(self) -> bool:
        return self.steps > 0 and self.inventory.get("health", 1) <= 0

    def ending(self) -> dict[str, Any]:
        """The report fields that describe the end as observed: the death, the trace, the last view."""
        fields: dict[str, Any] = {}
        if self.died():
            cause = self.hurts[-1][1] if self.hurts else "no health loss was seen"
            hurts = ", ".join(f"step {t} {c} -{n}" for t, c, n in self.hurts[-LAST_HURTS:])
            fields.update(death_cause=cause, death_detail=f"health lost in the last steps: {hurts or 'none seen'}; "
                                                          f"at the end: {_bars_text(self.inventory)}",
                          daylight_at_end=round(float(self.observation().daylight), 2))
            self.trace.note(f"step {self.steps}: the player died ({cause}); {_bars_text(self.inventory)}")
        fields.update(trace=self.trace.render(), last_view=describe_view(self.observation()),
                      vitals=self.vitals_text())
        return fields


class _OutOfTime(Exception):
    """The test's wall-clock limit passed (raised from the step callback, in trusted code)."""


class _RanOnAfterSuccess(Exception):
    """The code was still running `after_success_steps` after the achievement (raised like _OutOfTime)."""


def _events(before: dict[str, int], after: dict[str, int], new_achievements: list[str], reward: float) -> list[str]:
    events = [f"{key} {after.get(key, 0) - before.get(key, 0):+d}" for key in sorted(set(before) | set(after))
              if after.get(key, 0) != before.get(key, 0)]
    events += [f"unlocked {a}" for a in new_achievements]
    if reward:
        events.append(f"reward {reward:g}")
    return events


def default_wall_time(max_steps: int) -> float:
    """Generous for honest code (start-up plus ~20 ms a step), short for code that stalls on purpose."""
    return 15.0 + 0.02 * max_steps


def choose_action(names: list[str], wanted: str | None) -> str:
    """`wanted`, else `main`, else the last coded action the code defines; LookupError if absent."""
    if wanted is not None:
        if wanted not in names:
            raise LookupError(f"the code defines no coded action named '{wanted}'; it defines: {', '.join(names)}")
        return wanted
    return "main" if "main" in names else names[-1]


def run_code(code: str, task: str = "collect_wood", seed: int = 0, max_steps: int = 500,
             action: str | None = None, gif: bool = False, after_success_steps: int = AFTER_SUCCESS_STEPS, *,
             wall_time_s: float | None = None, memory_mb: int = 512,
             output_dir: str = DEFAULT_OUTPUT_DIR) -> CodeRunReport:
    """Run agent code in a fresh episode; the code runs in the sandbox, the episode here. Always returns a report.

    `after_success_steps`: how long the code plays on after the achievement, the player to be alive then (the chain
    goes on from there); 0 where held-out play ends at the achievement (the plan's last subtask), which is then
    the success whatever comes after."""
    start = time.monotonic()
    base: dict[str, Any] = {"task": str(task), "seed": seed if isinstance(seed, int) else 0}

    def failed(kind: str, error: str, **extra) -> CodeRunReport:
        # capped and scrubbed, lines left as they are: text from the sandbox in `error` was marked where the
        # host received it, and the rest is this side's (the lint's list quotes the agent's code line by line)
        return CodeRunReport(ok=False, failure_kind=kind, error=clean_text(error, mark=False),
                             wall_time_s=round(time.monotonic() - start, 3), **{"ended": "error", **base, **extra})

    problem = _input_problem(task, seed, max_steps, action, after_success_steps)
    if problem:
        return failed("input", problem)
    base["task"] = get_task(task).name
    try:
        check_source(code)  # the lint: an early, readable error before any process starts
    except UnsafeCodeError as exc:
        return failed("unsafe", str(exc))

    env = CrafterEnv(task=base["task"], obs_kind="symbolic", max_steps=max_steps, end_on_success=False)
    env.reset(seed=seed)
    progress = _Progress(env, gif, after_success_steps)
    wall = wall_time_s or default_wall_time(max_steps)
    limits = SandboxLimits(memory_mb=memory_mb, load_timeout_s=min(wall, SandboxLimits.load_timeout_s))
    try:
        agent_code = AgentCode([code], limits=limits)
    except CodeRejected as exc:
        if "MemoryError" in str(exc):
            return failed("memory", f"exceeded the memory limit of {memory_mb} MiB ({exc})")
        return failed(exc.kind, str(exc))
    except SandboxUnavailable as exc:
        return failed("crashed", f"the code could not be run: {exc}; this is not your code's fault")
    with agent_code:
        try:
            name = choose_action(agent_code.names, action)
        except LookupError as exc:
            return failed("load", str(exc))
        progress.deadline = start + wall
        progress.code = agent_code
        limit = _step_limit(agent_code, name, max_steps)
        outcome, stopped = None, False
        try:
            outcome = agent_code.execute(env, name, max_steps=limit, on_step=progress.on_step,
                                         on_print=progress.on_print, on_refusal=progress.on_refusal)
        except _OutOfTime:
            return failed("timeout", f"timed out after {wall:g} s (wall-clock limit) after {progress.steps} steps",
                          **_seen(progress, name))
        except _RanOnAfterSuccess:
            stopped = True
    gif_path = _write_gif(progress.frames, output_dir, base) if gif else None
    error, kind = (outcome.error if outcome else None), None
    if outcome and error:
        kind = "precondition" if outcome.precondition_failed else _failure_kind(error)
        if kind == "memory":
            error = f"exceeded the memory limit of {memory_mb} MiB ({error})"
        elif kind == "timeout":
            error = f"{error}; stopped after {outcome.steps} steps"
    out_of_steps = outcome is None or outcome.truncated or outcome.steps >= limit
    # held-out play goes on from where the code ends, also after an error once the goal is unlocked: a success
    # is the achievement with the player alive then
    success = progress.success_step is not None and (after_success_steps == 0 or not progress.died())
    stopped = success and not kind and (stopped or out_of_steps)
    ended: Ended = ("precondition" if kind == "precondition" else "success" if success else "error" if kind
                    else "died" if progress.died() else "out_of_steps" if out_of_steps else "action_returned")
    report = CodeRunReport(
        ok=error is None, error=error, failure_kind=kind, task_success=success, stopped_after_success=stopped,
        **_seen(progress, name), ended=ended, gif_path=gif_path, wall_time_s=round(time.monotonic() - start, 3),
        **base)
    if ended == "success" and not stopped:  # where the chain goes on from: after the code returned
        report._end_state = env.save_state(source=f"code test of {base['task']}")
    return report


def _step_limit(code: AgentCode, name: str, max_steps: int) -> int:
    """The test's budget, or the action's own @coded_action(max_steps=...) when it declared a smaller one."""
    spec = next(s for s in code.specs if s.name == name)
    return min(spec.max_steps, max_steps) if spec.declared_max_steps else max_steps


def _failure_kind(error: str) -> str:
    if error.startswith("no answer within"):
        return "timeout"
    if "MemoryError" in error:
        return "memory"
    if error.startswith("the sandbox process"):
        return "crashed"
    return "runtime"


def _seen(progress: _Progress, name: str) -> dict[str, Any]:
    """What the trusted side saw of the episode, up to where it ended or was stopped."""
    return dict(action=name, steps=progress.steps, success_step=progress.success_step,
                achievements_before=progress.achievements_before,
                achievements_unlocked=sorted(progress.achievements), inventory_before=progress.inventory_before,
                inventory_after=progress.inventory, last_refusal=progress.refusal,
                last_refusal_step=progress.refusal_step, refusals=progress.refusal_lines(),
                running_at_end=progress.running, first_steps=dict(progress.first_steps),
                helper_since=progress.helper_since(),
                **progress.ending())


def _input_problem(task: Any, seed: Any, max_steps: Any, action: Any, after_success_steps: Any = 0) -> str | None:
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
    if (not isinstance(after_success_steps, int) or isinstance(after_success_steps, bool)
            or not 0 <= after_success_steps <= MAX_STEPS_LIMIT):
        return f"after_success_steps must be an integer from 0 to {MAX_STEPS_LIMIT}, got {after_success_steps!r}"
    return None


def _write_gif(frames: list, output_dir: str, base: dict) -> str | None:
    """The test episode as a GIF (frames rendered here, from the trusted env)."""
    if not frames:
        return None
    import imageio.v2 as imageio  # only runs that ask for a GIF pay for the import

    scale = max(1, GIF_MIN_WIDTH // frames[0].shape[1])  # Crafter frames are tiny: enlarge, pixel-exact
    frames = [f.repeat(scale, axis=0).repeat(scale, axis=1) for f in frames]
    os.makedirs(output_dir, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    target = os.path.join(output_dir, f"{base['task']}-seed{base['seed']}-{stamp}.gif")
    imageio.mimsave(target, frames, duration=1000.0 / GIF_FPS, loop=0)
    return target


ERROR_FIRST_LINE_CHARS = 160
REFUSAL_CHARS = 260  # a helper's refusal whole: its end says what it needs (the game API's are shorter)
MAX_DETAILS = 3  # failing seeds shown in detail, while the budget lasts
MIN_DETAIL_CHARS = 1200  # the first failure whole where the room allows: its death, bars, the moves before it, the view
MIN_LATER_DETAIL_CHARS = 250  # a second failure's death and last health losses say more than its absence
MIN_CUT_LINE_CHARS = 40  # a detail's last line is cut to fit when at least this much of it can show
DEATH_REFUSAL_WINDOW = 100  # steps before a death within which a helper's refusal is told on its line
DEATH_REFUSAL_CHARS = 140
MIN_SEED_LINE_CHARS = 90  # a failing seed's line is cut to no less: its seed, ending and cause
DETAIL_ERROR_CHARS = 700
# the trace's end (its lines) before the view: an answerer shown a death with only its last line could not see
# what the code did before it (a shelter walking in the dark); the view's rows are cut first
MIN_TRACE_CHARS = 400
MAX_EARLIER_PRINT_CHARS = 400  # the code's last prints before the trace's end, within a quarter of the room
EARLIER_PRINTS = "your print() lines from before the trace's end below:"
MIN_SUMMARY_CHARS = 300
BUILTIN_SURVIVAL = "the built-in `stay_alive`: one you write replaces it, here too"


def summarise_reports_for_agent(reports: list[CodeRunReport | dict], max_chars: int = 2500,
                                prerequisites: Sequence[str] = (), judged: Sequence[str] = (),
                                last_round: Sequence[Mapping[str, Any]] = (), survival: str = "",
                                compared: str = "") -> str:
    """One round of code tests on several seeds as the text an agent repairs its code from: a line per seed
    (how it ended, steps, the death's cause or the error's first line, achievements gained), then the detail
    of the most informative failure (an error, else a death, else the run that got furthest): the error with
    its line, the end of the trace, the last view. `prerequisites` and `judged`: what a run must pass to
    reach the action under test (tools.trace.reached_action). `last_round`: the previous round's per-seed
    endings of the same action (nodes.attempt.results.summarise_code_runs' `per_seed`), to mark the seeds
    that ended exactly as then. `survival`: whose `stay_alive` the chain called between skills and what the
    model can do about it (BUILTIN_SURVIVAL when empty), said where runs died before the action. `compared`: a
    line on the same seeds played otherwise (nodes.fast.helpers_before_text) or on why they were not
    (helpers_not_played_text), after the round's figures. At most
    `max_chars` characters. Reports may be CodeRunReports or their `model_dump(mode="json")` dicts (as they
    come back from a checkpoint)."""
    if not isinstance(max_chars, int) or max_chars < MIN_SUMMARY_CHARS:
        raise ValueError(f"max_chars must be an integer >= {MIN_SUMMARY_CHARS}, got {max_chars!r}")
    rows = []
    for i, report in enumerate(reports):
        if isinstance(report, CodeRunReport):
            rows.append(report.model_dump(mode="json"))
        elif isinstance(report, dict):
            rows.append(report)
        else:
            raise TypeError(f"reports[{i}] must be a CodeRunReport or its dict, got {type(report).__name__}")
    if not rows:
        return "no code tests ran"
    counts = Counter(_ended_of(r) for r in rows)
    # "at step N" below is the episode's step, not the action's: answerers asked which
    lines = [f"code tests on {len(rows)} seeds (steps count from each episode's start): "
             + ", ".join(f"{n} {kind}" for kind, n in counts.most_common())]
    needed = set(prerequisites)
    reached = {id(r): reached_action(r, needed, judged) for r in rows}
    started = [r for r in rows if reached[id(r)]]
    if needed or len(started) < len(rows):  # the figures the critic judges on: the rate over the runs that reached it
        won = sum(bool(r.get("task_success")) for r in started)
        before = (f"earlier skills played first ({_skills_text(prerequisites)})" if needed
                  else "the chain ran before your action")
        # said only where a seed line has a 'gained' part: a run that reached the action and failed
        aside = (" ('gained' below leaves their achievements out)"
                 if needed and any(not r.get("task_success") for r in started) else "")
        lines.append(f"{before}: {len(started)} of {len(rows)} runs reached your action; {won} of those "
                     f"{len(started)} succeeded{aside}")
        early_deaths = sum(1 for r in rows if not reached[id(r)] and _ended_of(r) == "died")
        if early_deaths:  # the one lever the fast agent has over the chain before its action
            # which one ran: an answerer that had rewritten it could not tell whether its version played
            lines.append(f"{early_deaths} died before it; between skills the chain called "
                         f"{survival or BUILTIN_SURVIVAL}")
    if compared:
        lines.append(compared)
    repeated = _repeated_endings(rows, last_round)
    if repeated:  # an answerer spent revisions on seeds its changes never reached
        lines.append(f"{len(repeated)} failing seeds (marked 'as last round') ended at the same step in the same "
                     "way as the last round: your revision likely changed nothing they played before then")
    # every failing seed keeps its line (cut to a fair share when they do not all fit), the successes share one:
    # the seed lines take at most three fifths: a line cut short loses where the player died and with what
    # (answerers asked for those first), the rest goes to the detail a repair reads
    budget = max_chars * 3 // 5
    successes = [r for r in rows if r.get("task_success")]
    success_line = (f"success on {len(successes)} seeds: " + ", ".join(
        f"{r.get('seed')} at step {_success_at(r)}" for r in successes)) if successes else ""
    failing = [r for r in rows if not r.get("task_success")]
    room = budget - sum(len(x) + 1 for x in lines) - min(len(success_line) + 1, 200)
    share = max(MIN_SEED_LINE_CHARS, room // max(1, len(failing)))
    lines += [_fitted_seed_line(r, share, prerequisites, reached[id(r)], r.get("seed") in repeated, judged)
              for r in failing]
    if success_line:
        lines.append(_cut(success_line, 200))
    head = "\n".join(lines)
    ranked = _most_informative(rows, lambda r: reached[id(r)])
    if not ranked:
        return head[:max_chars]
    # a death on the way to the action is repaired elsewhere (a stay_alive the model writes): when the chain
    # loses runs there, the second detail shows one, whatever the action's own failures
    early = [k for k, r in enumerate(ranked) if not reached[id(r)] and _ended_of(r) == "died"]
    if early and early[0] > 1:
        ranked.insert(1, ranked.pop(early[0]))
    early_second = bool(early) and early[0] >= 1
    # then each next detail shows an ending not shown yet where there is one: an answerer saw only zombie deaths
    # in detail while its starvation and thirst deaths grew, and repaired those blind
    # (not a run that ran out of steps on the way to the action: it shows neither the action nor a death)
    def promotable(r: dict) -> bool:
        return reached[id(r)] or _ended_of(r) != "out_of_steps"
    ranked = _varied(ranked, 2 if early_second else 1, promotable)
    second_needed = len(ranked) > 1 and promotable(ranked[1]) and (
        early_second or _ending(ranked[1]) != _ending(ranked[0]))
    # the most informative failure in full; more of them while a fair share of the budget is left
    out, room = head, max_chars - len(head) - 1
    for k, report in enumerate(ranked[:MAX_DETAILS]):
        # the first gets most of it: one failure seen whole (its trace's end and view) helps more than two cut,
        # but leaves room for a second that ended otherwise (another cause, or a death on the way to the action).
        # A later one comes only while at least MIN_LATER_DETAIL_CHARS are left (the final cut would end it
        # mid-word), with all of them when no third fits.
        share = room if k == len(ranked[:MAX_DETAILS]) - 1 else room * 2 // 3
        if k == 0:
            share = min(room, max(share, MIN_DETAIL_CHARS))
            # kept for the second only where the first still gets two thirds (a room of about 750 or more): below
            # that the first takes it all, as a first cut for a second too short to help helps none
            if second_needed and room - MIN_LATER_DETAIL_CHARS - 1 >= room * 2 // 3:
                share = min(share, room - MIN_LATER_DETAIL_CHARS - 1)
        elif room < MIN_LATER_DETAIL_CHARS:
            break
        elif share < MIN_LATER_DETAIL_CHARS or room - share - 1 < MIN_LATER_DETAIL_CHARS:
            share = room  # no third could follow: this one takes what is left
        detail = _detail(report, share)
        out += "\n" + detail
        room -= len(detail) + 1
    return out[:max_chars]


# endings a revision that played differently would most likely move: a death or a return, at a step the code
# decided. Out of steps always ends at the limit, and an error that stops a program before its first step ends
# at step 0 whatever the code says: neither tells that the play was the same.
REPEATABLE_ENDINGS = ("died", "action_returned")


def _repeated_endings(rows: list[dict], last_round: Sequence[Mapping[str, Any]]) -> set[Any]:
    """The seeds of failing runs that ended as the same seed did in `last_round`: a death or a return at the
    same step, of the same cause, holding the same inventory. The world is fixed by its seed, so the play up
    to there was most likely the same."""
    before = {e.get("seed"): e for e in last_round if isinstance(e, Mapping) and not e.get("success")}
    out = set()
    for r in rows:
        was = before.get(r.get("seed"))
        if (was is None or r.get("task_success") or r.get("failure_kind")
                or r.get("ended") not in REPEATABLE_ENDINGS):
            continue
        if (was.get("ended"), was.get("steps"), was.get("death_cause"), was.get("failure"),
                was.get("inventory_after") or {}) == (r.get("ended"), r.get("steps"), r.get("death_cause"), None,
                                                        r.get("inventory_after") or {}):
            out.add(r.get("seed"))
    return out


def _fitted_seed_line(report: dict, room: int, prerequisites: Sequence[str] = (), reached: bool = True,
                      repeated: bool = False, judged: Sequence[str] = ()) -> str:
    """A failing seed's line in `room` characters: where it does not fit, the functions it was in are cut to the
    outermost and the two innermost first, so that a cut for room keeps where the player died (an answerer's
    lines ended '... at night (zombie) before your action ...', the place cut off, for 4 of 7 deaths)."""
    line = _seed_line(report, prerequisites, reached, repeated, judged)
    if len(line) > room:
        line = _seed_line(report, prerequisites, reached, repeated, judged, compact=True)
    return _cut(line, room)


def _compact_path(where: str) -> str:
    """'a > b > c > d > e' as 'a > ... > d > e': the skill, and the helpers the player died in."""
    frames = where.split(" > ")
    return where if len(frames) <= 3 else " > ".join([frames[0], "...", *frames[-2:]])


def _seed_line(report: dict, prerequisites: Sequence[str] = (), reached: bool = True, repeated: bool = False,
               judged: Sequence[str] = (), compact: bool = False) -> str:
    """A failing seed's line; `prerequisites` in the order the chain plays them; `repeated`: it ended as in the
    last round (said at the front, where no cut for room reaches); `judged`: the functions of the action;
    `compact`: the functions it was in by their ends only (_fitted_seed_line)."""
    line = f"seed {report.get('seed')}{' (as last round)' if repeated else ''}: {_ended_text(report)}"
    if report.get("failure_kind") == "harness":
        return line + "; a harness failure, not counted against the code"
    unlocked = set(report.get("achievements_unlocked") or ())
    missing = [a for a in dict.fromkeys(prerequisites) if a not in unlocked]
    died = _ended_of(report) == "died"
    # a chain's outermost function is its main: the line's room goes to what ran inside it
    where = clean_text(report.get("running_at_end") or "", ERROR_FIRST_LINE_CHARS, mark=False)
    where = "" if where == "main" else where.removeprefix("main > ")
    # what the line says: the functions, and who called them where the chain's main did (`where` stays the path)
    shown = (_compact_path(where) if compact else where) + _chain_glue(where, [*prerequisites, *judged])
    if missing and not report.get("task_success"):
        # not this action's code to repair, but a death there is what a stay_alive the model writes can change:
        # where it happened and the bars at death, as for a death inside the action. The skill it ended in is
        # named by `where`; only an end between skills (or no record of where) names the skill to come.
        line += " before your action"
        if missing[0] not in where.split(" > "):
            line += f" ({missing[0]} next)"
        return line + (_death_facts(report, shown) if died else f"; in {shown}" if shown else "")
    if died and not reached:
        # the chain was still walking to the stations or keeping the player fed: not the action's code
        return line + " before your action" + _death_facts(report, shown)
    if died:
        line += _death_facts(report, shown)
    if report.get("last_refusal") and _ended_of(report) in ("action_returned", "out_of_steps"):
        line += f"; {clean_text(report['last_refusal'], REFUSAL_CHARS, mark=False)}"
    error = (report.get("error") or "").strip()
    if error and _ended_of(report) != "died":
        rows = error.splitlines()
        # a heading line ('...rejected before running:') says nothing without the line it introduces
        first = f"{rows[0]} {rows[1].strip()}" if rows[0].endswith(":") and len(rows) > 1 else rows[0]
        line += f"; {first[:ERROR_FIRST_LINE_CHARS]}{'...' if len(first) > ERROR_FIRST_LINE_CHARS else ''}"
        if report.get("failure_kind") == "timeout" and where:
            # a process that stopped answering names no line: where its last step came from is the lead
            line += f"; its last step was in {shown}"
    gained = [a for a in _gained(report) if a not in prerequisites]  # the earlier skills' are said once above
    return line + f"; gained {', '.join(gained) if gained else 'nothing'}"


# what the chain's main calls between skills (prompts/chain_driver.py), by the function it calls: an answerer
# read "in explore > explore" as a skill of its own and could not tell which step of the chain it was. Kept
# short: a seed line cut for room loses what follows first (the bars and the items held at death)
CHAIN_GLUE = {"go_near": "the chain's walk to stations", "explore": "the chain's search: a skill found nothing"}


def _chain_glue(where: str, skills: Sequence[str]) -> str:
    """' (the chain ...)' where the first function `where` names is one the chain's main calls itself."""
    first = where.split(" > ", 1)[0]
    return f" ({CHAIN_GLUE[first]})" if first in CHAIN_GLUE and first not in skills else ""


def _skills_text(skills: Sequence[str]) -> str:
    """The earlier skills in play order; a long chain by its ends and count, the room goes to the seeds."""
    names = list(dict.fromkeys(skills))
    return ", ".join(names) if len(names) <= 4 else f"{len(names)} skills, {names[0]} to {names[-1]}"


def _death_facts(report: dict, where: str) -> str:
    """'; in stay_alive > go_to, go_to since step 371; at death: food 4, drink 2, energy 6; step 388 go_to: no path
    ...; held stone 3, ...': what the player was running (the game API helper in it since when: a shelter begun
    after nightfall) and holding when it died, and a helper's refusal shortly before (why no water was drunk, no
    shelter built). The held items last: a line cut for room loses them first."""
    held = ", ".join(f"{k} {v}" for k, v in sorted((report.get("inventory_after") or {}).items())
                     if v and k not in ("health", "food", "drink", "energy"))
    bars = _bars_text(report.get("inventory_after") or {}, health=False)  # health is 0 at a death
    said, at = report.get("last_refusal"), report.get("last_refusal_step")
    recent = (f"; step {at} {clean_text(said, DEATH_REFUSAL_CHARS, mark=False)}"
              if said and isinstance(at, int) and int(report.get("steps") or 0) - at <= DEATH_REFUSAL_WINDOW else "")
    since = report.get("helper_since") or ""  # a helper called at nightfall, or walking for long: why it did not save
    where = f"{where}, {since}" if where and since else where
    return (f"; in {where}" if where else "") + f"; at death: {bars}" + recent + (f"; held {held}" if held else "")


def _cut(line: str, room: int) -> str:
    """`line` in at most `room` characters, cut after a whole item ('; ' or ', ' separated) when one fits,
    else between two words, so that no name is cut in half when it can be helped."""
    if len(line) <= room:
        return line
    head = line[:max(room - 4, 0)]
    at = max(head.rfind("; "), head.rfind(", "))
    if at <= room // 2:  # no whole item fits in the second half: cut between words at least
        at = head.rfind(" ")
    return (head[:at] if at > room // 2 else head) + " ..."


def _most_informative(rows: list[dict], reached: Callable[[dict], bool] = lambda r: True) -> list[dict]:
    """The failing runs, those whose detail helps a repair most first: a run that reached the action
    before one that ended before it started, then an error, a death, the run that got furthest."""
    failing = [r for r in rows if not r.get("task_success") and r.get("failure_kind") != "harness"]
    rank = {"error": 0, "died": 1}
    return sorted(failing, key=lambda r: (not reached(r), rank.get(_ended_of(r), 2), -len(_gained(r)),
                                          -int(r.get("steps") or 0)))


def _ending(report: dict) -> tuple[str, str]:
    """How a failure ended, as the details tell them apart: the way, and a death's cause."""
    return _ended_of(report), str(report.get("death_cause") or "")


def _varied(ranked: list[dict], kept: int, promotable: Callable[[dict], bool] = lambda r: True) -> list[dict]:
    """`ranked` with its first `kept` in place, then at each place the best-ranked `promotable` failure whose
    ending (`_ending`) no earlier one has, else the best-ranked left."""
    out, rest = ranked[:kept], ranked[kept:]
    while rest:
        shown = {_ending(r) for r in out}
        pick = next((r for r in rest if promotable(r) and _ending(r) not in shown), rest[0])
        out.append(pick)
        rest.remove(pick)
    return out


def _detail(report: dict, budget: int) -> str:
    """The error, the death, the end of the trace and the last view, in at most `budget` characters: the
    view gets at most half of what the error and the death leave, less where the trace's end would get under
    MIN_TRACE_CHARS, and the trace's end the rest."""
    parts = [f"--- detail of seed {report.get('seed')} ({_ended_text(report)}) ---"]
    if report.get("error"):
        parts.append(f"error: {clean_text(report['error'], DETAIL_ERROR_CHARS, mark=False)}")
    if report.get("death_detail"):
        parts.append(f"death: {report.get('death_cause')}; {report['death_detail']}")
    if report.get("refusals"):
        parts.append("helpers that stopped short: " + "; ".join(
            clean_text(r, REFUSAL_CHARS, mark=False) for r in report["refusals"]))
    elif report.get("last_refusal"):
        parts.append(f"a helper stopped short: {report['last_refusal']}")
    if report.get("vitals"):  # a third of the room, within bounds: the trace's end still shows the last moves
        left = budget - sum(len(p) + 1 for p in parts)
        vitals = _vitals_line(str(report["vitals"]), min(MAX_VITALS_CHARS, max(left // 3, MIN_VITALS_CHARS), left))
        parts += [vitals] if vitals else []
    room = budget - sum(len(p) + 1 for p in parts)
    trace_lines = (report.get("trace") or "").splitlines()
    heading = len("trace (end):\n[... earlier lines dropped ...]\n") + 1
    view_room = min(room // 2, room - heading - min(MIN_TRACE_CHARS, len(report.get("trace") or "")))
    view = _whole_lines(f"last view:\n{report['last_view']}", view_room) if report.get("last_view") else ""
    room -= len(view) + heading
    tail = last_lines_within(trace_lines, room)
    # the code's own prints before the trace's end: an answerer's diagnostics vanished with the earlier lines.
    # Their room is set aside before the end is cut again, so no print falls between the two.
    if any(line.startswith(PRINT_PREFIX) for line in trace_lines[:len(trace_lines) - len(tail)]):
        aside = min(room // 4, MAX_EARLIER_PRINT_CHARS)
        shorter = last_lines_within(trace_lines, room - aside)
        printed = [line for line in trace_lines[:len(trace_lines) - len(shorter)] if line.startswith(PRINT_PREFIX)]
        shown = last_lines_within(printed, aside - len(EARLIER_PRINTS) - 1)
        if shown:  # else no print fits: the end keeps its room
            parts.append(EARLIER_PRINTS + "\n" + "\n".join(shown))
            tail = shorter
    if tail:
        cut = "[... earlier lines dropped ...]\n" if len(tail) < len(trace_lines) else ""
        parts.append("trace (end):\n" + cut + "\n".join(tail))
    if view:
        parts.append(view)
    text = "\n".join(parts)
    if len(text) <= budget:
        return text
    # the lines that fit whole, and the next one cut between items or words (a long error keeps its start):
    # a line cut mid-word ('the player d') reads as a broken report
    kept = text[:max(0, budget)].rpartition("\n")[0]
    room = budget - len(kept) - (1 if kept else 0)
    following = text[len(kept) + (1 if kept else 0):].split("\n", 1)[0]
    return kept + ("\n" if kept else "") + _cut(following, room) if room >= MIN_CUT_LINE_CHARS else kept


def _vitals_line(vitals: str, room: int) -> str:
    """The timeline of the bars in `room` characters. One that does not fit is thinned, not cut: every k-th
    sample over the whole run (an answerer shown only the two ends could not see what happened at dusk) and the
    last VITALS_LAST as they are; what main ran is said again where it changed between the kept samples.
    Empty when not even the first and the last fit."""
    line = f"{VITALS_HEADING}: {vitals}"
    if len(line) <= room:
        return line
    samples = []  # (step and bars, what main ran then)
    what = ""
    for sample in vitals.split(", "):
        words = sample.split(" ", 2)  # step, bars and, where it changed, what main ran
        what = words[2] if len(words) > 2 else what
        samples.append((" ".join(words[:2]), what))
    last = max(1, len(samples) - VITALS_LAST)
    for stride in range(2, len(samples) + 1):
        kept = [samples[i] for i in range(last) if i % stride == 0] + samples[last:]
        out, shown = [], ""
        for text, what in kept:
            out.append(f"{text} {what}" if what and what != shown else text)
            shown = what or shown
        line = f"{VITALS_HEADING}: {', '.join(out)}"
        if len(line) <= room:
            return line
    return ""


def _whole_lines(text: str, room: int) -> str:
    """The first lines of `text` that fit `room` whole (a view cut inside a row misleads), and a marker for
    the rest; empty when not even the heading and one row fit."""
    lines = text.splitlines()
    kept: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > room - 40:  # room for the marker
            break
        kept.append(line)
        used += len(line) + 1
    if len(kept) < 2:
        return ""
    return "\n".join(kept) + (f"\n[... {len(lines) - len(kept)} more lines of the view left out ...]"
                              if len(kept) < len(lines) else "")


class RunCodeArgs(BaseModel):
    code: str = Field(description="Python source defining one or more coded actions: generator functions "
                                  "`def name(game): ... yield 'move_left'` that yield primitive action names")
    task: str = Field("collect_wood", description="task name, e.g. collect_wood, place_table")
    seed: int = Field(0, ge=0, description="world seed for the test episode (training seeds only)")
    max_steps: int = Field(500, ge=1, le=MAX_STEPS_LIMIT, description="primitive step budget of the test")
    action: str | None = Field(None, description="coded action to run; default: `main`, else the last one defined")
    gif: bool = Field(False, description="also save a GIF of the episode")
    after_success_steps: int = Field(AFTER_SUCCESS_STEPS, ge=0, le=MAX_STEPS_LIMIT,
                                     description="steps the code plays on after the achievement, the player to be "
                                                 "alive then; 0: the test ends at the achievement")


def _tool_entry(code: str, task: str = "collect_wood", seed: int = 0, max_steps: int = 500,
                action: str | None = None, gif: bool = False,
                after_success_steps: int = AFTER_SUCCESS_STEPS) -> tuple[str, CodeRunReport]:
    report = run_code_where_asked(code, task=task, seed=seed, max_steps=max_steps, action=action, gif=gif,
                                  after_success_steps=after_success_steps)
    return report.to_text(), report


def run_code_where_asked(code: str, task: str = "collect_wood", seed: int = 0, max_steps: int = 500,
                         action: str | None = None, gif: bool = False,
                         after_success_steps: int = AFTER_SUCCESS_STEPS) -> CodeRunReport:
    """`run_code` here, or, when the command was given a Ray cluster (`graph.run --ray`), as a Ray task on one
    of its nodes: the test runs there exactly as here (the sandbox process is started on that node) and its
    report comes back through Ray. The graph's code tests are one tool call per seed, which LangGraph's
    ToolNode runs in parallel threads, so they run in parallel on the cluster. A test asking for a GIF (a
    file) stays here."""
    from rl import ray_cluster

    if gif or ray_cluster.requested() is None:
        return run_code(code, task=task, seed=seed, max_steps=max_steps, action=action, gif=gif,
                        after_success_steps=after_success_steps)
    try:
        # the test's own wall-clock limit, plus a margin for scheduling and the sandbox's start on the node
        return ray_cluster.run_task(run_code, code, task=task, seed=seed, max_steps=max_steps, action=action,
                                    after_success_steps=after_success_steps,
                                    timeout_s=default_wall_time(max_steps) + 120)
    except Exception as exc:  # the cluster, not the code: say so, as for a sandbox that cannot start
        first = (str(exc).strip().splitlines() or [""])[0]
        return CodeRunReport(ok=False, failure_kind="crashed", ended="error", task=str(task),
                             seed=seed if isinstance(seed, int) else 0,
                             error=clean_text(f"the code test could not run on the Ray cluster: "
                                              f"{type(exc).__name__}: {first}; this is not your code's fault"))


_MODULES = ", ".join(m for m in ALLOWED_MODULES if m != "envs.coded")

run_code_in_env = StructuredTool.from_function(
    func=_tool_entry,
    name="run_code_in_env",
    description=(
        "Test coded actions in a fresh Crafter episode and get back what happened: how the episode ended "
        "(success, died and of what, out of steps, the action returned, an error with its line), primitive steps "
        "used, achievements unlocked, inventory before/after, a trace that keeps the last steps and the "
        "player's view at the end. "
        f"The code runs sandboxed: imports only from {_MODULES}; no names or attributes starting with '_', "
        "no open/eval/exec/getattr/type, no classes. "
        "Runs `action`, else the function named `main`, else the last coded action defined."),
    args_schema=RunCodeArgs,
    response_format="content_and_artifact",
)
