"""Planner node: the task -> ordered subtasks along the tech tree; re-plans after a subtask fails.

A fresh plan replaces everything; a re-plan answers the work from the failed subtask on. If it
starts with the failed subtask, some attempt of it ever succeeded and later subtasks follow (or the
budget cannot pay for another try), that best attempt is kept as its skill and the run goes on with
the rest; otherwise the new plan is solved from its first subtask (a retry when that is the failed one,
whose best attempt held-out play falls back on if no later one passes). An empty re-plan ends the loops.

A score task (crafter_score: no achievement of its own, a plan over many) has no route to change:
a failed subtask keeps its best attempt, and the run goes on with the rest; the model is not asked again.
When no attempt ever succeeded, the later subtasks that need it are dropped (their tests could not get
past it), but its best attempt still plays in held-out play, last: after every other skill it costs no
achievement, and one its tests never reached (the diamond behind a chain that died first) may unlock there.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Literal, cast

from langgraph.runtime import Runtime
from langgraph.types import Command

from envs.tasks import TASKS
from nodes.attempt.outcome import skill_from_best
from nodes.context import RunContext, context_of
from nodes.entries import SubtaskEntry
from nodes.limits import MIN_TRAIN_STEPS, budget_left, limit_reached
from nodes.models.base import ModelOutputError
from nodes.recipes import all_recipe_facts, prerequisites
from nodes.schemas import Plan
from nodes.state import RLGPTState, start_update, with_update
from prompts.facts import PlannerFacts
from prompts.templates import messages_for


def planner_context(state: Mapping[str, Any]) -> PlannerFacts:
    """The task and the game's recipe facts (its manual); the planner derives the chain from them."""
    task = TASKS[state["task"]]
    context: PlannerFacts = {"task": task.name, "task_description": task.description, "recipes": all_recipe_facts()}
    failed = state.get("failed")
    if failed:
        context["failed"] = failed
        context["remaining"] = state["plan"][state["subtask_index"]:]
    return context


def _to(update: dict, target: str) -> Command:
    return Command(goto=target, update={**update, "route": target})


def planner(state: RLGPTState, runtime: Runtime[RunContext]) -> Command[Literal["subtask", "executor"]]:
    settings, model = context_of(runtime).settings, context_of(runtime).model
    # a run started from its task alone (LangGraph's API) gets the rest of its start state here
    update: dict = start_update(state, settings.budget_steps)
    state = cast(RLGPTState, with_update(state, update))
    if not state.get("started_at"):
        update["started_at"] = time.time()
    context = planner_context(state)
    failed = context.get("failed")
    if failed and TASKS[state["task"]].is_score:
        return _go_on_without(state, update, failed, settings.skill_threshold)
    if failed and state.get("replans", 0) >= settings.max_replans:
        why = f"subtask {failed['subtask']} failed and the re-plan limit is reached"
        # the budget is the run's, not the plan's: a SmolLM2 run stopped here at 4,000 of 100,000 steps
        return _learn_the_task(state, update, why, settings.skill_threshold) or _to({
            **update, "failed": None, "stop_reason": why,
            "events": [{"type": "stop", "reason": "re-plan limit", "subtask": failed["subtask"]}]}, "executor")
    stop = limit_reached({**state, **update}, settings, model)
    if stop:
        return _to({**update, "failed": None, "stop_reason": stop, "events": [{"type": "stop", "reason": stop}]},
                   "executor")
    try:
        plan: Plan = model.structured("planner", messages_for("planner", context), Plan, context)
    except ModelOutputError as exc:  # the task itself, learned; else the report with what the run has
        fallback = _learn_the_task(state, update, f"no valid plan from the model: {exc.last_error[:300]}",
                                   settings.skill_threshold)
        return fallback or _to({**update, "failed": None,
                                "stop_reason": f"no valid plan from the model: {exc.last_error[:300]}",
                                "events": [{"type": "stop", "reason": "no valid plan"}]}, "executor")
    answered = cast(list[SubtaskEntry], [s.model_dump() for s in plan.subtasks])
    subtasks, dropped = _ending_at_the_task(state["task"], answered)
    cut = {"dropped_after_the_task": dropped} if dropped else {}  # said in the plan's event
    if not subtasks:  # a plan that gives up while the budget lasts: the task itself, learned
        fallback = _learn_the_task(state, update, f"the plan is empty: {plan.reason}", settings.skill_threshold)
        if fallback is not None:
            return fallback
    if not failed:
        if not subtasks:
            return _to({**update, "stop_reason": f"the plan is empty: {plan.reason}",
                        "events": [{"type": "stop", "reason": "empty plan"}]}, "executor")
        return _to({**update, "plan": subtasks, "plan_reason": plan.reason, "subtask_index": 0,
                    "events": [{"type": "plan", "subtasks": [s["name"] for s in subtasks], "reason": plan.reason,
                                **cut}]}, "subtask")
    index = state["subtask_index"]
    kept = state["plan"][:index]
    event = {"type": "replan", "failed": failed["subtask"], "subtasks": [s["name"] for s in subtasks],
             "reason": plan.reason, **cut}
    base = {**update, "failed": None, "replans": state.get("replans", 0) + 1, "events": [event]}
    if not subtasks:
        return _to({**base, "stop_reason": f"planner gave up after {failed['subtask']} failed: {plan.reason}"},
                   "executor")
    best = skill_from_best(state, failed["subtask"], settings.skill_threshold)
    # with nothing after it, keeping the failed subtask's best attempt would end the run with the budget unspent
    # (a SmolLM2 run stopped at 1,000 of 6,000 steps): it is tried again, its best attempt still the fallback
    goes_on = len(subtasks) > 1 or budget_left({**state, **base}) < MIN_TRAIN_STEPS
    if subtasks[0]["name"] == failed["subtask"] and best is not None and best["success_rate"] > 0 and goes_on:
        # keep what worked sometimes and go on with the rest of the new plan
        skills = {**(state.get("skills") or {}), failed["subtask"]: best}
        return _to({**base, "plan": kept + subtasks, "skills": skills, "subtask_index": index + 1}, "subtask")
    # a different plan, a subtask that never succeeded, or the last one tried again: solve the new plan from here
    return _to({**base, "plan": kept + subtasks}, "subtask")


def _ending_at_the_task(task_name: str, subtasks: list[SubtaskEntry]) -> tuple[list[SubtaskEntry], list[str]]:
    """A plan cut after the task's own achievement, and the names dropped: nothing after it is needed (a SmolLM2
    re-plan of "harvest log" added place_furnace, and the run spent its budget there). A score task has none."""
    goal = TASKS[task_name].achievement  # None for a score task
    names = [s["name"] for s in subtasks]
    if goal is None or goal not in names:
        return subtasks, []
    end = names.index(goal) + 1
    return subtasks[:end], names[end:]


def _learn_the_task(state: Mapping[str, Any], update: dict, why: str, threshold: float) -> Command | None:
    """The plan when the model's is empty or unusable, or a subtask failed past the re-plan limit, while the task
    is unsolved and the budget lasts: the task itself as one subtask, learned (the slow agent's decomposition
    gets a policy, `forced_rl`), so that a weak model's run still spends its budget on the task. A failed
    subtask before the task that sometimes succeeded stays in the plan as its best attempt, as a re-plan keeps
    it. Once per run; None where it does not apply (a score task has no single achievement to learn)."""
    task = TASKS[state["task"]]
    if task.is_score or any(e.get("type") == "fallback_plan" for e in state.get("events") or []):
        return None
    if budget_left({**state, **update}) < MIN_TRAIN_STEPS:
        return None
    failed_name = (state.get("failed") or {}).get("subtask")
    kept = state["plan"][:state["subtask_index"]] if failed_name else []
    skills = {}
    best = skill_from_best(state, failed_name, threshold) if failed_name and failed_name != task.name else None
    if failed_name and best is not None and best["success_rate"] > 0:  # it plays before the task, its reach kept
        kept = [*kept, state["plan"][state["subtask_index"]]]
        skills = {"skills": {**(state.get("skills") or {}), failed_name: best}}
    subtask: SubtaskEntry = {"name": task.name, "goal": task.description[:200],
               "success_condition": f"achievement '{task.achievement or task.name}' unlocked"}
    event = {"type": "fallback_plan", "subtasks": [task.name], "reason": why[:300],
             "note": "the task itself, learned with RL over the coded actions",
             **({"kept": failed_name} if skills else {})}
    return _to({**update, **skills, "failed": None, "plan": kept + [subtask], "plan_reason": f"[graph] {why}"[:300],
                "subtask_index": len(kept), "forced_rl": task.name, "events": [event]}, "subtask")


def _go_on_without(state: Mapping[str, Any], update: dict, failed: Mapping[str, Any], threshold: float) -> Command:
    """A score plan after a subtask failed: keep its best attempt; when it never succeeded, drop every later
    subtask that needs it (and the subtask too when it has no attempt to play); the subtask node then picks the
    next one (or ends the plan)."""
    index, name = state["subtask_index"], failed["subtask"]
    plan = list(state["plan"])
    best = skill_from_best(state, name, threshold)
    base = {**update, "failed": None}
    if best is not None and best["success_rate"] > 0:
        skills = {**(state.get("skills") or {}), name: best}
        event = {"type": "replan", "failed": name, "subtasks": [s["name"] for s in plan[index + 1:]],
                 "reason": f"score plan: keep the best attempt of {name} ({best['success_rate']:.0%}) and go on"}
        kept = {**base, "skills": skills, "subtask_index": index + 1}
    else:
        rest = [s for s in plan[index + 1:] if name not in prerequisites(s["name"])]
        needing = [s["name"] for s in plan[index + 1:] if s not in rest]
        # an attempt that played plays last in held-out play (nodes.executor.score_play_order: rate 0), with its
        # own code only (nodes.skills.records.shares_its_code); one that took no step (its code never loaded,
        # no policy trained) has nothing to play
        if best is not None and best.get("env_steps", 0) > 0 and (
                best.get("sources") if best["kind"] == "code" else best.get("policy_path")):
            skills = {**(state.get("skills") or {}), name: best}
            why = (f"score plan: {name} never succeeded in its tests; its best attempt plays last in held-out play"
                   + (f"; dropped {', '.join(needing)}, which need it," if needing else ",") + " and went on")
            kept = {**base, "skills": skills, "plan": plan[:index + 1] + rest, "subtask_index": index + 1}
        else:
            why = f"score plan: {name} has no attempt to play; dropped {', '.join([name, *needing])} and went on"
            kept = {**base, "plan": plan[:index] + rest}
        event = {"type": "replan", "failed": name, "subtasks": [s["name"] for s in rest], "reason": why}
    return _to({**kept, "events": [event]}, "subtask")
