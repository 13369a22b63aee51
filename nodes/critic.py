"""Critic node: measures the attempt from the tool reports, asks the model for a verdict, and
decides where the run goes next.

- pass                         -> the subtask is solved with this attempt (skill saved), next subtask
- revise (inner iterations left) -> fast agent again, with the feedback (inner loop)
- move / revise without inner iterations (outer iterations left) -> slow agent revises (outer loop)
- otherwise                    -> keep the subtask's best attempt if it passes the skill threshold,
                                  else ask the planner to re-plan
A run limit (budget, wall time, model calls) stops the loops: the best attempt is kept and the
executor measures what was reached.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from envs.tasks import ACHIEVEMENTS
from nodes.attempts import (
    CODE_TOOL,
    TRAIN_TOOL,
    judged_rate,
    last_tool_calls,
    last_tool_round,
    measure,
    split_functions,
    steps_of,
)
from nodes.limits import MIN_TRAIN_STEPS, budget_left, limit_reached
from nodes.schemas import Critique
from nodes.settings import RunSettings
from nodes.skills_io import prior_sources, save_skill, skill_from_attempt
from prompts.templates import messages_for

# result fields the critic is not shown: the artefacts, the per-seed detail, and the rate's label
# (that one is for the skill record and the report; the critic's prompt stays as it was)
HIDDEN_FROM_CRITIC = ("sources", "rl_config", "per_seed", "rate_source")


def judged_sub_action(decomposition: dict) -> dict:
    """The sub-action an attempt measures: the learned one, else the last coded non-explore one."""
    subs = decomposition["sub_actions"]
    learned = [a for a in subs if a["kind"] == "rl"]
    if learned:
        return learned[-1]
    main = [a for a in subs if a.get("template") != "explore"] or subs
    return main[-1]


def _artefacts(state: dict, result: dict, judged: dict) -> dict:
    """The code or configuration behind a measured result, so the skill can be run again."""
    calls = last_tool_calls(state.get("messages", []))
    if result["kind"] == "code":
        call = next((c for c in calls if c["name"] == CODE_TOOL), None)
        if call is None:
            return {}
        functions = split_functions(call["args"].get("code", ""))
        entry = call["args"].get("action") or (judged["name"] if judged["name"] in functions else "main")
        return {"sources": [src for name, src in functions.items() if name != "main" or entry == "main"],
                "entry": entry}
    call = next((c for c in calls if c["name"] == TRAIN_TOOL), None)
    config = (call.get("args", {}) if call else {}).get("rl_config") or {}
    return {"sources": list(config.get("coded_actions", [])), "rl_config": config, "entry": None}


def prerequisite_achievements(state: dict) -> list[str]:
    """Achievements a code test of the current subtask passes through before the subtask's own turn."""
    return [p["subtask"] for p in prior_sources(state) if p["subtask"] in ACHIEVEMENTS]


def _best_by_kind(results: list[dict], subtask: str) -> dict[str, float]:
    best: dict[str, float] = {}
    for r in results:
        if r.get("subtask") == subtask:
            best[r["kind"]] = max(best.get(r["kind"], 0.0), float(r["success_rate"]))
    return best


def make_critic(settings: RunSettings, model: Any):
    target = settings.target_success
    threshold = settings.skill_threshold
    max_inner = settings.max_inner_iters
    max_outer = settings.max_outer_iters

    def critic(state: dict) -> dict:
        messages = state.get("messages", [])
        subtask = state["plan"][state["subtask_index"]]["name"]
        judged = judged_sub_action(state["decomposition"])
        spent = int(state.get("env_steps_spent", 0)) + (steps_of(messages) if last_tool_round(messages) else 0)
        result = measure(messages, prerequisite_achievements(state)) or {
            "kind": judged["kind"], "ok": False, "success_rate": 0.0, "episodes": 0, "steps": 0,
            "errors": ["the fast agent made no measuring tool call (run_code_in_env or train_ppo)"]}
        result.update(subtask=subtask, sub_action=judged["name"], outer_iter=state.get("outer_iter", 0),
                      inner_iter=state.get("inner_iter", 0), **_artefacts(state, result, judged))
        earlier = _best_by_kind(state.get("results", []), subtask)
        best = dict(state.get("best") or {})
        if subtask not in best or result["success_rate"] > best[subtask]["success_rate"]:
            best[subtask] = result
        current = {**state, "env_steps_spent": spent, "best": best}
        context = {
            "subtask": subtask, "sub_action": {"name": judged["name"], "kind": judged["kind"]},
            "result": {k: v for k, v in result.items() if k not in HIDDEN_FROM_CRITIC},
            "target": target,
            "best_by_kind": {**{k: v for k, v in earlier.items()}, "rl_before": earlier.get("rl")},
            "inner_iter": state.get("inner_iter", 0), "max_inner_iters": max_inner,
            "outer_iter": state.get("outer_iter", 0), "max_outer_iters": max_outer,
            "budget_left": budget_left(current), "min_train_steps": MIN_TRAIN_STEPS,
        }
        critique: Critique = model.structured("critic", messages_for("critic", context), Critique, context)
        c = critique.model_dump()
        update: dict = {
            "env_steps_spent": spent, "best": best, "results": [result],
            "critiques": [{**c, "subtask": subtask, "kind": judged["kind"], "outer_iter": result["outer_iter"],
                           "inner_iter": result["inner_iter"]}],
        }
        events = [{"type": "measure", "subtask": subtask, "sub_action": judged["name"], "kind": judged["kind"],
                   "success_rate": result["success_rate"], "episodes": result.get("episodes"),
                   "started": result.get("started"), "success_given_start": result.get("success_given_start"),
                   "steps": result.get("steps"), "verdict": c["verdict"], "outer_iter": result["outer_iter"],
                   "inner_iter": result["inner_iter"]}]
        if c["verdict"] == "move":
            events.append({"type": "move", "subtask": subtask, "sub_action": judged["name"], "from": judged["kind"],
                           "to": c["move_to"], "success_rate": result["success_rate"],
                           "episodes": result.get("episodes"), "feedback": c["feedback"]})

        def finish(attempt: dict, route: str, **extra) -> dict:
            more = extra.pop("more_events", [])
            record = skill_from_attempt(subtask, attempt, threshold)
            note = save_skill(settings, record) if route == "subtask" else None
            done = [{"type": "skill", "subtask": subtask, "kind": record["kind"],
                     "success_rate": record["success_rate"], "passing": record["passing"], "note": note}]
            return {**update, **extra, "skills": {**state.get("skills", {}), subtask: record},
                    "subtask_index": state["subtask_index"] + (1 if route == "subtask" else 0),
                    "decomposition": None, "feedback": None, "inner_iter": 0, "outer_iter": 0,
                    "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)], "route": route,
                    "events": events + done + more}

        if c["verdict"] == "pass":
            return finish(result, "subtask")
        stop = limit_reached(current, settings, model)
        if stop:
            return finish(best[subtask], "executor", stop_reason=stop,
                          more_events=[{"type": "stop", "reason": stop}])
        inner, outer = int(state.get("inner_iter", 0)), int(state.get("outer_iter", 0))
        if c["verdict"] == "revise" and inner + 1 < max_inner:
            return {**update, "feedback": c, "inner_iter": inner + 1,
                    "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)],
                    "total_inner_iters": state.get("total_inner_iters", 0) + 1, "route": "fast", "events": events}
        if c["verdict"] in ("move", "revise") and outer + 1 < max_outer:
            return {**update, "feedback": c, "inner_iter": 0, "outer_iter": outer + 1,
                    "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)],
                    "total_outer_iters": state.get("total_outer_iters", 0) + 1, "route": "slow", "events": events}
        chosen = best[subtask]
        if judged_rate(chosen) >= threshold:
            return finish(chosen, "subtask")
        failed = {"subtask": subtask, "best_rate": chosen["success_rate"], "feedback": c["feedback"]}
        return {**update, "failed": failed, "decomposition": None, "feedback": None, "inner_iter": 0,
                "outer_iter": 0, "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)], "route": "planner",
                "events": events + [{"type": "subtask_failed", **failed}]}

    return critic
