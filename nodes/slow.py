"""Slow agent node: decomposes the current subtask into sub-actions, each marked code or rl, and
revises the decomposition in the outer loop when the critic asks for it (move code <-> rl)."""

from __future__ import annotations

from typing import Any

from envs.tasks import TASKS
from nodes.limits import limit_reached
from nodes.recipes import recipe_facts, template_for
from nodes.schemas import Decomposition
from nodes.settings import RunSettings
from prompts.templates import messages_for


def slow_context(state: dict, settings: RunSettings) -> dict[str, Any]:
    subtask = state["plan"][state["subtask_index"]]
    feedback = state.get("feedback")
    best = (state.get("best") or {}).get(subtask["name"])
    return {
        "subtask": subtask, "recipe": recipe_facts(subtask["name"]), "template": template_for(subtask["name"]),
        "task_description": TASKS[subtask["name"]].description,
        "prior_skills": [{"subtask": k, "kind": v["kind"], "success_rate": v["success_rate"]}
                         for k, v in (state.get("skills") or {}).items()],
        "previous": state.get("decomposition"), "critique": feedback,
        "best": None if best is None else {"kind": best["kind"], "success_rate": best["success_rate"]},
        "outer_iter": state.get("outer_iter", 0), "max_outer_iters": settings.max_outer_iters,
    }


def make_slow(settings: RunSettings, model: Any):
    def slow(state: dict) -> dict:
        stop = limit_reached(state, settings, model)
        if stop:
            return {"route": "executor", "stop_reason": stop, "events": [{"type": "stop", "reason": stop}]}
        context = slow_context(state, settings)
        answer: Decomposition = model.structured("slow", messages_for("slow", context), Decomposition, context)
        decomposition = answer.model_dump()
        name = context["subtask"]["name"]
        if decomposition["subtask"] != name:  # the subtask is the node's fact, not the model's choice
            decomposition["subtask"] = name
        return {"decomposition": decomposition, "inner_iter": 0, "route": "fast",
                "events": [{"type": "decompose", "subtask": name, "outer_iter": state.get("outer_iter", 0),
                            "sub_actions": [f"{a['name']}:{a['kind']}" for a in decomposition["sub_actions"]],
                            "reason": decomposition["reason"]}]}

    return slow
