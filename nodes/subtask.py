"""Subtask dispatcher: picks the next subtask of the plan, reusing a passing skill from the library
when an earlier run already solved it, and sends the run to the slow agent or, when the plan is
done or a limit is hit, to the executor. No model call."""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime
from langgraph.types import Command

from nodes.context import RunContext, context_of
from nodes.limits import limit_reached
from nodes.skills.records import reuse_skill
from nodes.state import RLGPTState


def subtask(state: RLGPTState, runtime: Runtime[RunContext]) -> Command[Literal["slow", "executor"]]:
    settings, model = context_of(runtime).settings, context_of(runtime).model
    index = int(state.get("subtask_index", 0))
    plan = state.get("plan", [])
    skills = dict(state.get("skills") or {})
    events = []
    while index < len(plan):  # skip what the library already solves
        name = plan[index]["name"]
        record = skills.get(name) if skills.get(name, {}).get("passing") else reuse_skill(settings, name)
        if record is None:
            break
        skills[name] = record
        events.append({"type": "reuse", "subtask": name, "kind": record["kind"],
                       "success_rate": record["success_rate"]})
        index += 1
    # the planner's fallback names the subtask it learns; any other subtask starts without that
    learn = state.get("forced_rl") if index < len(plan) and state.get("forced_rl") == plan[index]["name"] else None
    update = {"subtask_index": index, "skills": skills, "events": events, "decomposition": None,
              "feedback": None, "forced_rl": learn, "inner_iter": 0, "outer_iter": 0}
    if index >= len(plan):
        return Command(goto="executor", update={**update, "route": "executor"})
    stop = limit_reached(state, settings, model)
    if stop:
        return Command(goto="executor", update={**update, "route": "executor", "stop_reason": stop,
                                                 "events": events + [{"type": "stop", "reason": stop}]})
    return Command(goto="slow", update={**update, "route": "slow"})
