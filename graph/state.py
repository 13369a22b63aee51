"""The graph's state: one typed dict that every node reads and returns updates to.

Everything in it is plain data (dicts, lists, numbers, strings and LangChain messages) so that the
SQLite checkpointer can store it after every node and a killed run can resume. Logs that grow over
the run (code versions, RL configs, results, critiques, events) use an append reducer: a node
returns only its new entries. `messages` is the tool-calling conversation of the current
sub-action attempt and uses LangGraph's `add_messages`, which the ToolNode appends to.
"""

from __future__ import annotations

import operator
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
    route: str                               # where the last deciding node sends the run next

    # -- the current subtask's decomposition (slow agent) --
    decomposition: dict | None               # nodes.schemas.Decomposition dump
    sub_action_index: int                    # the sub-action the fast agent works on
    feedback: dict | None                    # the last Critique dump for the current sub-action
    best: dict                               # sub-action name -> best measured attempt (result dump)

    # -- the tool-calling loop of one attempt --
    messages: Annotated[list[AnyMessage], add_messages]
    attempt: int                             # attempts of the current sub-action (all kinds)

    # -- logs (append-only) --
    code_versions: Annotated[list[dict], operator.add]   # {subtask, sub_action, version, source}
    rl_configs: Annotated[list[dict], operator.add]      # {subtask, sub_action, version, config}
    results: Annotated[list[dict], operator.add]         # measured attempts (see nodes.results)
    critiques: Annotated[list[dict], operator.add]       # Critique dumps with subtask + iteration
    events: Annotated[list[dict], operator.add]          # decisions: moves, passes, replans, stops

    # -- loop counters and limits --
    inner_iter: int                          # fast<->critic rounds on the current sub-action
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


def initial_state(task: str, task_text: str, budget_steps: int) -> RLGPTState:
    """The state a fresh run starts from."""
    return RLGPTState(
        task=task, task_text=task_text, plan=[], plan_reason="", subtask_index=0, replans=0, failed=None,
        route="planner", decomposition=None, sub_action_index=0, feedback=None, best={}, messages=[], attempt=0,
        code_versions=[], rl_configs=[], results=[], critiques=[], events=[],
        inner_iter=0, outer_iter=0, total_inner_iters=0, total_outer_iters=0,
        env_steps_spent=0, budget_steps=int(budget_steps), eval_steps=0, started_at=0.0,
        stop_reason=None, skills={}, evaluation=None, usage={}, report=None,
    )
