"""The graph's state: typed dicts that every node reads and returns updates to.

`RLGPTState` is the outer graph's (planner, subtask, slow agent, executor, report). `AttemptState`
is the attempt subgraph's (fast agent <-> tools <-> critic): the outer state plus the keys of one
attempt, its own tool-calling conversation above all, which never reaches the outer graph.

Everything is plain data (dicts, lists, numbers, strings and LangChain messages) so that the SQLite
checkpointer can store it after every node and a killed run can resume. Logs that grow over the
run (code versions, RL configs, results, critiques, events) use an append reducer: a node returns
only its new entries.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages


class RLGPTState(TypedDict, total=False):
    # -- the task and the plan --
    task: str                                # Crafter task name (resolved from the user's words)
    task_text: str                           # what the user typed
    plan: list[dict]                         # nodes.schemas.Subtask dumps, tech-tree order
    plan_reason: str
    subtask_index: int                       # index into plan of the subtask being solved
    replans: int                             # how many times the planner re-planned after a failure
    failed: dict | None                      # {subtask, best_rate, feedback} while a re-plan is pending
    route: str                               # where the last deciding node sent the run (for logs)
    plugin_next: str | None                  # where the run goes after the plugin nodes (graph.builder)

    # -- the current subtask's decomposition (slow agent) --
    decomposition: dict | None               # nodes.schemas.Decomposition dump
    feedback: dict | None                    # the last Critique dump for the current sub-action
    forced_rl: str | None                    # sub-action the graph moved to RL when its code revisions ran out
    best: dict                               # subtask name -> best measured attempt (result dump)
    attempt: int                             # attempts of the current subtask (all kinds)

    # -- logs (append-only) --
    code_versions: Annotated[list[dict], operator.add]   # {subtask, sub_action, version, source}
    rl_configs: Annotated[list[dict], operator.add]      # {subtask, sub_action, version, config}
    results: Annotated[list[dict], operator.add]         # measured attempts (see nodes.attempts)
    critiques: Annotated[list[dict], operator.add]       # Critique dumps with subtask + iteration
    events: Annotated[list[dict], operator.add]          # decisions: moves, passes, replans, stops

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
    skills: dict[str, dict]                  # subtask name -> nodes.skills.Skill dump (Skill.to_state)
    evaluation: dict | None                  # executor's held-out result
    usage: dict[str, Any]                    # per-role model calls and tokens
    report: dict | None                      # the final report (also written to out_dir)


LOG_KEYS = ("code_versions", "rl_configs", "results", "critiques", "events")


class AttemptState(RLGPTState, total=False):
    """The attempt subgraph's state: the outer state plus what lives only while one attempt runs."""

    messages: Annotated[list[AnyMessage], add_messages]  # the fast agent's tool calls and the tool results
    last_attempt: dict | None                # the fast agent's last measured code and its report
    fast_error: str | None                   # why the fast agent's answer could not be used
    log_marks: dict[str, int]                # lengths of the outer logs when the attempt began
    counted_round: str | None                # the tool round already counted and logged (nodes.rounds)
    last_result: dict | None                 # that round's measured result
    exit_to: str | None                      # the outer node the attempt leaves for (nodes.exits)
    skipped_code: list[str]                  # coded sub-actions a policy trains without (never written)


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


def current_decomposition(state: Mapping[str, Any]) -> dict:
    """The decomposition an attempt works on; the slow agent always writes one before an attempt starts."""
    decomposition = state.get("decomposition")
    if not isinstance(decomposition, dict):
        raise ValueError("an attempt started without a decomposition: the slow agent runs before the attempt")
    return decomposition


def initial_state(task: str, task_text: str, budget_steps: int) -> RLGPTState:
    """The state a fresh run starts from."""
    return RLGPTState(
        task=task, task_text=task_text, plan=[], plan_reason="", subtask_index=0, replans=0, failed=None,
        route="planner", decomposition=None, feedback=None, forced_rl=None, best={}, attempt=0,
        code_versions=[], rl_configs=[], results=[], critiques=[], events=[],
        inner_iter=0, outer_iter=0, total_inner_iters=0, total_outer_iters=0,
        env_steps_spent=0, budget_steps=int(budget_steps), eval_steps=0, started_at=0.0,
        stop_reason=None, skills={}, evaluation=None, usage={}, report=None,
    )
