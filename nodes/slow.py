"""Slow agent node: decomposes the current subtask into sub-actions, each marked code or rl, and
revises the decomposition in the outer loop when the critic asks for it (move code <-> rl)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast

from langgraph.runtime import Runtime
from langgraph.types import Command

from envs.tasks import TASKS
from nodes.context import RunContext, context_of
from nodes.entries import DecompositionEntry, FailedEntry, coded, learned
from nodes.limits import limit_reached
from nodes.models.base import ModelOutputError
from nodes.recipes import recipe_facts, template_for
from nodes.schemas import MAX_SUB_ACTIONS, Decomposition, SubAction
from nodes.settings import RunSettings
from nodes.skills.pool import builtin_pool
from nodes.skills.records import solved_pool
from nodes.state import RLGPTState
from prompts.facts import SlowFacts
from prompts.fewshot import BUILTIN_ACTIONS
from prompts.templates import messages_for


def slow_context(state: Mapping[str, Any], settings: RunSettings) -> SlowFacts:
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
        "forced_rl": state.get("forced_rl"),
        "rewritten": _rewritten_builtins(state),
    }


def _rewritten_builtins(state: Mapping[str, Any]) -> dict[str, str]:
    """Built-in actions an earlier skill wrote anew -> that skill's subtask (the latest in plan order): an
    answerer that rewrote stay_alive saw it still listed as built-in and could not tell whether it took effect."""
    pool, builtins = solved_pool(state), builtin_pool()
    # a learned skill's head entries carry the built-in `explore` as it is: that is no rewrite
    return {name: str(origin["subtask"]) for name in BUILTIN_ACTIONS
            if (origin := pool.origin.get(name, {})).get("subtask") and pool.sources[name] != builtins.sources[name]}


def enforce_move(decomposition: DecompositionEntry, forced: str | None) -> tuple[DecompositionEntry, bool]:
    """The decomposition with a learned sub-action when the graph chose to learn `forced` (the planner's
    fallback for a plan that gave up): the model's answer stands if it already learns something, else a
    policy is appended whose action head holds every coded sub-action (their code is kept). Returns (it,
    changed)."""
    subs = decomposition["sub_actions"]
    if not forced or learned(subs):
        return decomposition, False
    subs = subs[:MAX_SUB_ACTIONS - 1]  # room for the policy within the schema's limit
    names = {a["name"] for a in subs}
    name = f"{decomposition['subtask']}_policy"[:40]
    while name in names:  # never the name of a coded sub-action
        name = f"{name}_rl"[:48]
    coded_names = [a["name"] for a in coded(subs)]
    why = f"[graph] the code of '{forced}' ran out of revisions: learn when to call it"
    policy = SubAction(name=name, kind="rl", coded_actions=coded_names[:12], reason=why).model_dump()
    return cast(DecompositionEntry, Decomposition.model_validate(
        {**decomposition, "sub_actions": [*subs, policy]}).model_dump()), True


def _fail(state: RLGPTState, name: str, exc: ModelOutputError) -> Command:
    """The subtask fails for want of a decomposition: the planner re-plans around it. A subtask the graph
    chose to learn (the planner's fallback, `forced_rl`) is learned anyway, with exploration at hand."""
    if state.get("forced_rl") == name:
        policy = SubAction(name=f"{name}_policy"[:40], kind="rl", coded_actions=["explore"],
                           reason="[graph] no valid decomposition from the model: the subtask is learned")
        decomposition = cast(DecompositionEntry, Decomposition.model_validate(
            {"subtask": name, "sub_actions": [policy.model_dump()],
             "reason": f"[graph] {exc.last_error[:200]}"}).model_dump())
        decomposition["subtask"] = name
        return Command(goto="attempt", update={
            "decomposition": decomposition, "inner_iter": 0, "route": "attempt",
            "events": [{"type": "decompose", "subtask": name, "outer_iter": state.get("outer_iter", 0),
                        "sub_actions": [f"{policy.name}:rl"], "reason": decomposition["reason"], "forced_rl": True}]})
    failed: FailedEntry = {"subtask": name, "best_rate": float(((state.get("best") or {}).get(name) or {}).get(
        "success_rate", 0.0)), "feedback": f"no valid decomposition: {exc.last_error[:300]}"}
    return Command(goto="planner", update={"failed": failed, "route": "planner",
                                            "events": [{"type": "subtask_failed", **failed}]})


def slow(state: RLGPTState, runtime: Runtime[RunContext]) -> Command[Literal["attempt", "planner", "executor"]]:
    settings, model = context_of(runtime).settings, context_of(runtime).model
    stop = limit_reached(state, settings, model)
    if stop:
        return Command(goto="executor", update={"route": "executor", "stop_reason": stop,
                                                 "events": [{"type": "stop", "reason": stop}]})
    context = slow_context(state, settings)
    name = context["subtask"]["name"]
    try:
        answer: Decomposition = model.structured("slow", messages_for("slow", context), Decomposition, context)
    except ModelOutputError as exc:
        previous = state.get("decomposition")
        if previous is None:  # nothing to fall back on: the subtask fails and the planner re-plans
            return _fail(state, name, exc)
        try:
            answer = Decomposition.model_validate({**previous, "reason": "(kept: no valid answer from the model)"})
        except ValueError:  # a decomposition the graph extended past the schema: nothing sound to keep
            return _fail(state, name, exc)
    decomposition = cast(DecompositionEntry, answer.model_dump())
    decomposition["subtask"] = name  # the subtask is the node's fact, not the model's choice
    decomposition, forced = enforce_move(decomposition, state.get("forced_rl"))
    return Command(goto="attempt", update={
        "decomposition": decomposition, "inner_iter": 0, "route": "attempt",
        "events": [{"type": "decompose", "subtask": name, "outer_iter": state.get("outer_iter", 0),
                    "sub_actions": [f"{a['name']}:{a['kind']}" for a in decomposition["sub_actions"]],
                    "reason": decomposition["reason"], "forced_rl": forced}]})
