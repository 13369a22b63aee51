"""Planner node: the task -> ordered subtasks along the tech tree; re-plans after a subtask fails.

A fresh plan replaces everything; a re-plan answers the work from the failed subtask on. If it
starts with the failed subtask and some attempt of it ever succeeded, that best attempt is kept
as its skill and the run goes on with the rest; otherwise the new plan is solved from its first
subtask (a retry when that is the failed one). An empty re-plan ends the loops.
"""

from __future__ import annotations

import time
from typing import Any

from envs.tasks import TASKS
from nodes.limits import limit_reached
from nodes.recipes import recipe_facts
from nodes.schemas import Plan
from nodes.settings import RunSettings
from nodes.skills_io import skill_from_best
from prompts.templates import messages_for


def planner_context(state: dict) -> dict[str, Any]:
    task = TASKS[state["task"]]
    chain = list(task.chain) if task.achievement is not None else [task.name]
    context = {"task": task.name, "task_description": task.description,
               "recipes": [recipe_facts(n) for n in chain], "prerequisites": list(task.prerequisites)}
    failed = state.get("failed")
    if failed:
        context["failed"] = failed
        context["remaining"] = state["plan"][state["subtask_index"]:]
    return context


def make_planner(settings: RunSettings, model: Any):
    def planner(state: dict) -> dict:
        update: dict = {}
        if not state.get("started_at"):
            update["started_at"] = time.time()
        context = planner_context(state)
        failed = context.get("failed")
        if failed and state.get("replans", 0) >= settings.max_replans:
            return {**update, "failed": None, "route": "executor",
                    "stop_reason": f"subtask {failed['subtask']} failed and the re-plan limit is reached",
                    "events": [{"type": "stop", "reason": "re-plan limit", "subtask": failed["subtask"]}]}
        stop = limit_reached({**state, **update}, settings, model)
        if stop:
            return {**update, "failed": None, "route": "executor", "stop_reason": stop,
                    "events": [{"type": "stop", "reason": stop}]}
        plan: Plan = model.structured("planner", messages_for("planner", context), Plan, context)
        subtasks = [s.model_dump() for s in plan.subtasks]
        if not failed:
            return {**update, "plan": subtasks, "plan_reason": plan.reason, "subtask_index": 0, "route": "subtask",
                    "events": [{"type": "plan", "subtasks": [s["name"] for s in subtasks], "reason": plan.reason}]}
        index = state["subtask_index"]
        kept = state["plan"][:index]
        event = {"type": "replan", "failed": failed["subtask"], "subtasks": [s["name"] for s in subtasks],
                 "reason": plan.reason}
        base = {**update, "failed": None, "replans": state.get("replans", 0) + 1, "events": [event]}
        if not subtasks:
            return {**base, "route": "executor", "stop_reason": f"planner gave up after {failed['subtask']} failed: "
                                                                 f"{plan.reason}"}
        best = skill_from_best(state, failed["subtask"], settings.skill_threshold)
        if subtasks[0]["name"] == failed["subtask"] and best is not None and best["success_rate"] > 0:
            # keep what worked sometimes and go on with the rest of the new plan
            skills = {**(state.get("skills") or {}), failed["subtask"]: best}
            return {**base, "plan": kept + subtasks, "skills": skills, "subtask_index": index + 1,
                    "route": "subtask"}
        # a different plan, or a subtask that never succeeded: solve the new plan from here
        return {**base, "plan": kept + subtasks, "route": "subtask"}

    return planner
