"""The graph's state: typed dicts that every node reads and returns updates to.

`RLGPTState` is the outer graph's (planner, subtask, slow agent, executor, report). `AttemptState`
is the attempt subgraph's (fast agent <-> tools <-> critic): the outer state plus the keys of one
attempt, its own tool-calling conversation above all, which never reaches the outer graph.

Everything is plain data (dicts, lists, numbers, strings and LangChain messages) so that the SQLite
checkpointer can store it after every node and a killed run can resume. Logs that grow over the
run (code versions, RL configs, results, critiques, events) use an append reducer: a node returns
only its new entries. The entries' shapes are TypedDicts (nodes.entries), plain dicts at runtime.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Annotated, Any, cast

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from typing_extensions import TypedDict  # pydantic (LangGraph's schema endpoints) needs it before Python 3.12

from envs.tasks import get_task
from nodes.entries import (
    CodeVersion,
    CritiqueEntry,
    CritiqueLog,
    DecompositionEntry,
    Event,
    FailedEntry,
    HeadTest,
    LastAttempt,
    MeasuredResult,
    PreviousAttempt,
    RLConfigEntry,
    SkillRecord,
    StartStateEntry,
    SubtaskEntry,
)
from nodes.settings import RunSettings


class RLGPTState(TypedDict, total=False):
    # -- the task and the plan --
    task: str                                # Crafter task name (resolved from the user's words)
    task_text: str                           # what the user typed
    plan: list[SubtaskEntry]                 # nodes.schemas.Subtask dumps, tech-tree order
    plan_reason: str
    subtask_index: int                       # index into plan of the subtask being solved
    replans: int                             # how many times the planner re-planned after a failure
    failed: FailedEntry | None               # {subtask, best_rate, feedback} while a re-plan is pending
    route: str                               # where the last deciding node sent the run (for logs)
    plugin_next: str | None                  # where the run goes after the plugin nodes (graph.builder)

    # -- the current subtask's decomposition (slow agent) --
    decomposition: DecompositionEntry | None  # nodes.schemas.Decomposition dump
    feedback: CritiqueEntry | None           # the last Critique dump for the current sub-action
    forced_rl: str | None                    # sub-action the graph moved to RL when its code revisions ran out
    previous_attempt: PreviousAttempt | None  # the code the critic sent back (revise/move) and its report,
                                             # shown to the fast agent of the next outer iteration
    best: dict[str, MeasuredResult]          # subtask name -> best measured attempt (result dump)
    attempt: int                             # attempts of the current subtask (all kinds)

    # -- logs (append-only) --
    code_versions: Annotated[list[CodeVersion], operator.add]  # {subtask, sub_action, version, source, ...}
    rl_configs: Annotated[list[RLConfigEntry], operator.add]   # {subtask, sub_action, version, config, ...}
    results: Annotated[list[MeasuredResult], operator.add]     # measured attempts (see nodes.attempt.results)
    critiques: Annotated[list[CritiqueLog], operator.add]      # Critique dumps with subtask + iteration
    events: Annotated[list[Event], operator.add]               # decisions: moves, passes, replans, stops
    start_states: Annotated[list[StartStateEntry], operator.add]  # where successful code tests stopped

    # -- loop counters and limits --
    inner_iter: int                          # fast-agent revisions of the current decomposition
    outer_iter: int                          # slow-agent revisions of the current subtask
    total_inner_iters: int
    total_outer_iters: int
    env_steps_spent: int                     # primitive steps of training and code tests
    budget_steps: int
    eval_steps: int                          # steps of the final held-out evaluation (not budget)
    started_at: float                        # wall clock of the first node (time.time())
    stop_reason: str | None                  # why the loops stopped early, None when they finished

    # -- skills and outcome --
    skills: dict[str, SkillRecord]           # subtask name -> nodes.skills.library.Skill dump (Skill.to_state)
    evaluation: dict | None                  # executor's held-out result
    usage: dict[str, Any]                    # per-role model calls and tokens
    report: dict | None                      # the final report (also written to out_dir)


LOG_KEYS = ("code_versions", "rl_configs", "results", "critiques", "events", "start_states")


class AttemptState(RLGPTState, total=False):
    """The attempt subgraph's state: the outer state plus what lives only while one attempt runs."""

    messages: Annotated[list[AnyMessage], add_messages]  # the fast agent's tool calls and the tool results
    last_attempt: LastAttempt | None         # the fast agent's last measured code and its report
    fast_error: str | None                   # why the fast agent's answer could not be used
    log_marks: dict[str, int]                # lengths of the outer logs when the attempt began
    counted_round: str | None                # the tool round already counted and logged (nodes.attempt.rounds)
    last_result: MeasuredResult | None       # that round's measured result
    exit_to: str | None                      # the outer node the attempt leaves for (nodes.exits)
    skipped_code: list[str]                  # coded sub-actions a policy trains without (never written)
    code_tested: list[HeadTest]              # head entries tested before the training: {sub_action, report, ...}


def with_update(state: Mapping[str, Any], update: dict) -> dict:
    """The state as it will be after `update` (log keys appended, the others replaced), for a node that
    reads its own changes before returning them."""
    out = {**state, **update}
    for key in LOG_KEYS:
        if key in update:
            out[key] = list(state.get(key) or []) + list(update[key] or [])
    return out


def log_lengths(state: Mapping[str, Any]) -> dict[str, int]:
    """How many entries each log holds (an attempt's starting marks, nodes.exits)."""
    return {key: len(state.get(key) or []) for key in LOG_KEYS}


def current_decomposition(state: Mapping[str, Any]) -> DecompositionEntry:
    """The decomposition an attempt works on; the slow agent always writes one before an attempt starts."""
    decomposition = state.get("decomposition")
    if not isinstance(decomposition, dict):
        raise ValueError("an attempt started without a decomposition: the slow agent runs before the attempt")
    return cast(DecompositionEntry, decomposition)


def initial_state(task: str, task_text: str, budget_steps: int) -> RLGPTState:
    """The state a fresh run starts from."""
    return RLGPTState(
        task=task, task_text=task_text, plan=[], plan_reason="", subtask_index=0, replans=0, failed=None,
        route="planner", decomposition=None, feedback=None, forced_rl=None, best={}, attempt=0,
        code_versions=[], rl_configs=[], results=[], critiques=[], events=[], start_states=[],
        inner_iter=0, outer_iter=0, total_inner_iters=0, total_outer_iters=0,
        env_steps_spent=0, budget_steps=int(budget_steps), eval_steps=0, started_at=0.0,
        stop_reason=None, skills={}, evaluation=None, usage={}, report=None,
    )


# ---- a run started from its task alone (LangGraph's API and Studio, graph.studio) ---------------------
def _budget_bound(kind: str) -> int:
    """A bound of RunSettings.budget_steps, where it is declared."""
    for rule in RunSettings.model_fields["budget_steps"].metadata:
        if hasattr(rule, kind):
            return int(getattr(rule, kind))
    raise LookupError(f"RunSettings.budget_steps has no '{kind}' bound")


class RunInput(BaseModel):
    """The input of a run started through LangGraph's API or Studio: the task, and optionally its budget.

    The graph is built with this as its input schema there (graph.studio), so Studio's form asks for
    these fields only; the planner completes the rest (`start_update`) from the run settings, as
    `python -m graph.run TASK` does."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(description="task name or plain words, e.g. 'collect wood', 'obtain diamond', 'place_table'")
    budget_steps: int | None = Field(
        None, ge=_budget_bound("ge"), le=_budget_bound("le"),
        description="environment steps the run may spend (default: the run settings' budget_steps, "
                    f"{RunSettings.model_fields['budget_steps'].default} unless the RLGPT_CONFIG file sets it)")

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:
        get_task(value)  # UnknownTaskError, a ValueError, lists the close matches
        return value


class RunInputError(ValueError):
    """A run's input that cannot start a run; the message names the field and what to give."""


def _input_errors(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        field = ".".join(str(p) for p in e["loc"]) or "(input)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = f"not an input field (the input fields: {', '.join(RunInput.model_fields)})"
        lines.append(f"input field '{field}': {msg.rstrip('.')}")
    return ("; ".join(lines) + '. A run starts from its task, for example {"task": "collect wood"} '
            '(optional: "budget_steps").')


def start_update(state: Mapping[str, Any], budget_steps: int) -> dict:
    """The start state's fields for a run that began from its `RunInput` alone (LangGraph's API, Studio):
    the task resolved from the user's words, the budget given or `budget_steps` (the run settings'),
    and the rest as `initial_state` has them. {} for a run that began from a full start state
    (graph.builder.start_state, which the command line uses). RunInputError for an input that cannot
    start a run (an unknown task, a budget out of range)."""
    if "plan" in state:  # every start state has a plan (empty until the planner's first answer)
        return {}
    given = {k: state[k] for k in RunInput.model_fields if state.get(k) is not None}
    try:
        run_input = RunInput.model_validate(given)
    except ValidationError as e:
        raise RunInputError(_input_errors(e)) from None
    budget = run_input.budget_steps if run_input.budget_steps is not None else budget_steps
    return dict(initial_state(get_task(run_input.task).name, run_input.task, budget))
