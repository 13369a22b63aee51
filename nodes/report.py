"""The run's report, built in one place: `build_report` turns a graph state into plain data.

The report node keeps it in the state (state['report']) as the graph ends; the application
shell (graph.run) builds it again from the final checkpoint with what only the shell knows (the
wall time and model usage of every process that worked on a resumed run), then renders and
writes it (graph.report).

It answers: which subtasks, code or RL for each sub-action (every measurement with its verdict,
every move between the two and the numbers behind it), the skills made and where the library
keeps them, the environment steps spent against the budget, the held-out evaluation (its steps
counted apart: evaluation, not training), the model calls and tokens per agent node (zero tokens
for the rule-based expert), and why the run stopped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from langgraph.runtime import Runtime
from pydantic import ValidationError

from nodes.attempt.results import judged_rate, reached_by_enough_runs, round_best, round_steps, skill_meets_target
from nodes.attempt.rounds import ends_the_chain
from nodes.context import RunContext, context_of
from nodes.settings import RunSettings
from nodes.skills.library import Skill, SkillLibrary, SkillLibraryError
from nodes.state import RLGPTState

AGENT_ROLES = ("planner", "slow", "fast", "critic")  # always listed, so a zero is visible, not missing


def usage_totals(usage: Mapping[str, Any]) -> dict[str, int]:
    """Sum calls and tokens over the roles of a `UsageCounter.to_dict()`-shaped mapping."""
    total = {"calls": 0, "retries": 0, "prompt_tokens": 0, "completion_tokens": 0}
    for counts in (usage or {}).values():
        if isinstance(counts, Mapping):
            for k in total:
                total[k] += int(counts.get(k, 0) or 0)
    return total


def _usage_rows(usage: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    rows: dict[str, dict[str, int]] = {}
    for role in list(AGENT_ROLES) + sorted(r for r in (usage or {}) if r not in AGENT_ROLES):
        c = (usage or {}).get(role) or {}
        p, q = int(c.get("prompt_tokens", 0) or 0), int(c.get("completion_tokens", 0) or 0)
        rows[role] = {"calls": int(c.get("calls", 0) or 0), "retries": int(c.get("retries", 0) or 0),
                      "prompt_tokens": p, "completion_tokens": q, "total_tokens": p + q}
    return rows


def rate_of(entry: Mapping[str, Any]) -> float | None:
    """The success rate a result, event or evaluation holds, if any."""
    for key in ("success_rate", "rate"):
        v = entry.get(key)
        if isinstance(v, (int, float)):
            return float(v)
    return None


def _sub_action_history(state: Mapping[str, Any], subtask: str) -> list[dict[str, Any]]:
    """Per sub-action of `subtask`: the kinds it was tried as, in order, attempts, best rate, steps."""
    by_name: dict[str, dict[str, Any]] = {}

    def entry(name: str) -> dict[str, Any]:
        return by_name.setdefault(name, {"name": name, "kind": None, "history": [], "attempts": 0,
                                         "best_success_rate": None, "env_steps": 0, "moves": []})

    for r in state.get("results") or []:
        if not isinstance(r, Mapping) or r.get("subtask") != subtask or not r.get("sub_action"):
            continue
        e = entry(str(r["sub_action"]))
        kind = r.get("kind")
        if kind and (not e["history"] or e["history"][-1] != kind):
            e["history"].append(kind)
        e["kind"] = kind or e["kind"]
        e["attempts"] += 1
        e["env_steps"] += round_steps(r)
        rate = rate_of(round_best(r))
        if rate is not None and (e["best_success_rate"] is None or rate > e["best_success_rate"]):
            e["best_success_rate"] = rate
    for ev in state.get("events") or []:
        if not isinstance(ev, Mapping) or ev.get("subtask") != subtask or ev.get("type") != "move":
            continue
        name = ev.get("sub_action")
        if name:
            entry(str(name))["moves"].append({"from": ev.get("from"), "to": ev.get("to"),
                                              "reason": ev.get("feedback") or ev.get("reason") or ""})
    decomposition = state.get("decomposition") or {}
    if decomposition.get("subtask") == subtask:  # sub-actions planned but never measured still show up
        for sa in decomposition.get("sub_actions") or []:
            e = entry(sa["name"])
            e["kind"] = e["kind"] or sa.get("kind")
            if not e["history"] and sa.get("kind"):
                e["history"].append(sa["kind"])
    return list(by_name.values())


def _kept_status(skill: Skill, target: float, whole_chain: bool = False) -> str:
    """What happened to a skill made in this run: 'passed' only when it met the target (by the pass rule's
    count for a code test, over the runs that reached the skill when it replayed earlier ones, and for the
    plan's last subtask (`whole_chain`) with half of its runs reaching it, as its rounds were judged);
    otherwise 'kept' with the rate it was kept at (below the target, or below the skill threshold too)."""
    record = skill.to_state()
    episodes = int(skill.episodes or 0)
    reached_ok = not (whole_chain and skill.kind == "code" and episodes) or reached_by_enough_runs(record)
    if skill_meets_target(record, target) and reached_ok:
        return "passed"
    given, judged = skill.success_given_start, judged_rate(record)
    rate = f"{judged:.0%} from its start" if given is not None and given != skill.success_rate else f"{judged:.0%}"
    if whole_chain and not reached_ok:  # held-out play is this chain: too few of its runs reached the skill
        return f"kept at {rate}, reached in {skill.started} of {episodes} runs (fewer than half)" + (
            "" if skill.passing else ", below the skill threshold (played here, not saved)")
    # below the threshold the skill still plays in this run's chain; it is only not saved for other runs
    return f"kept at {rate}, below the {'target' if skill.passing else 'skill threshold (played here, not saved)'}"


def _subtask_status(state: Mapping[str, Any], skills: Mapping[str, Skill], index: int, name: str,
                    graph_done: bool, target: float, task: str) -> str:
    skill = skills.get(name)
    if skill:
        if skill.reused:
            return "reused skill"
        # the plan's last subtask as its rounds were judged: with half of its runs reaching it
        return _kept_status(skill, target, ends_the_chain({**state, "subtask_index": index}, task))
    if any(isinstance(ev, Mapping) and ev.get("type") == "subtask_failed" and ev.get("subtask") == name
           for ev in state.get("events") or []):
        return "failed"
    current = int(state.get("subtask_index") or 0)
    if index < current:
        return "skipped"
    if index == current and state.get("stop_reason") is None and not graph_done:
        return "in progress"
    return "not reached"


def _state_skills(state: Mapping[str, Any]) -> dict[str, Skill]:
    """The state's skill records as Skills (older checkpoint shapes converted); a record that is not
    a skill (a hand-edited state) is left out rather than failing the report."""
    skills: dict[str, Skill] = {}
    for subtask, record in (state.get("skills") or {}).items():
        try:
            skills[subtask] = Skill.model_validate(record)
        except ValidationError:
            continue
    return skills


def _library_file(library: SkillLibrary, skill: Skill) -> str | None:
    """Where the library keeps this skill (None when it was not saved: below the threshold)."""
    if not skill.name:
        return None
    try:
        stored = library.get(skill.name)
    except (SkillLibraryError, ValueError):
        return None
    if stored is None:
        return None
    if stored.kind == "code":
        return str(library.code_path(stored))
    path = library.policy_path(stored)
    return str(path) if path else None


def _without_replays(evaluation: Any) -> Any:
    """The held-out result without its replayable episodes (the actions videos are made from, graph/video.py):
    they stay in the state, the report only names the videos."""
    if isinstance(evaluation, Mapping) and "replays" in evaluation:
        return {k: v for k, v in evaluation.items() if k != "replays"}
    return evaluation


def build_report(settings: RunSettings, state: Mapping[str, Any], wall_s: float, model_name: str = "",
                 usage: Mapping[str, Any] | None = None, graph_done: bool | None = None) -> dict[str, Any]:
    """Plain data describing the run, from its final (or latest checkpointed) state.

    `usage` is the per-role model usage (a resumed run's model object only counts its own calls, so
    the shell passes the sum over every process); without it the state's `usage` is used.
    `graph_done`: the graph reached its report node (default: the state holds the node's report).
    """
    state = dict(state or {})
    if graph_done is None:
        graph_done = state.get("report") is not None
    skills = _state_skills(state)
    library = SkillLibrary(settings.skills_path)
    events = [ev for ev in state.get("events") or [] if isinstance(ev, Mapping)]
    subtasks = []
    for i, sub in enumerate(state.get("plan") or []):
        name = sub.get("name", f"subtask_{i}")
        skill = skills.get(name)
        actions = _sub_action_history(state, name)
        subtasks.append({
            "name": name, "goal": sub.get("goal", ""),
            "status": _subtask_status(state, skills, i, name, graph_done, settings.target_success, settings.task),
            "success_rate": skill.success_rate if skill else max(
                (a["best_success_rate"] for a in actions if a["best_success_rate"] is not None), default=None),
            "env_steps": sum(a["env_steps"] for a in actions),
            "skill": (skill.name or None) if skill else None,
            "skill_kind": skill.kind if skill else None,
            "sub_actions": actions,
        })
    if usage is None:
        usage = state.get("usage") or {}
    skill_entries = [{"subtask": sub, "name": skill.name or None, "kind": skill.kind,
                      "success_rate": skill.success_rate, "rate_source": skill.rate_source,
                      "episodes": skill.episodes, "measured_in": skill.measured_in,
                      "passing": skill.passing, "reused": skill.reused,
                      "entry": skill.entry, "policy_path": skill.policy_path,
                      "path": _library_file(library, skill)}
                     for sub, skill in skills.items()]
    started = float(state.get("started_at") or 0.0)
    return {
        "run_id": settings.run_id, "task": state.get("task", settings.task),
        "task_text": state.get("task_text", settings.task), "env": settings.env,
        "model": model_name or settings.model_label,
        "status": "finished" if graph_done else "stopped",
        "finished": state.get("stop_reason") is None,  # the loops ended without a limit stopping them
        "stop_reason": state.get("stop_reason"),
        "plan": [s["name"] for s in state.get("plan") or []], "plan_reason": state.get("plan_reason"),
        "subtasks": subtasks,
        "subtasks_solved": sum(1 for skill in skills.values() if skill.passing),
        "measurements": [ev for ev in events if ev.get("type") == "measure"],
        "moves": [ev for ev in events if ev.get("type") == "move"],
        "evaluation": _without_replays(state.get("evaluation")),
        "loops": {"outer_iterations": state.get("total_outer_iters", 0),
                  "inner_iterations": state.get("total_inner_iters", 0),
                  "attempts": len(state.get("results", [])), "replans": state.get("replans", 0)},
        "iterations": {"outer": int(state.get("total_outer_iters") or 0),
                       "inner": int(state.get("total_inner_iters") or 0),
                       "replans": int(state.get("replans") or 0)},
        "budget": {"training_and_code_test_steps": state.get("env_steps_spent", 0),
                   "budget_steps": state.get("budget_steps", 0),
                   "evaluation_steps": state.get("eval_steps", 0),
                   "note": "evaluation steps run on held-out seeds after the loops and are not training budget"},
        "env_steps": {"spent": int(state.get("env_steps_spent") or 0),
                      "budget": int(state.get("budget_steps") or settings.budget_steps),
                      "evaluation": int(state.get("eval_steps") or 0)},
        "wall_s": round(float(wall_s), 2),  # summed over the run's processes when the shell builds it
        "wall_time_s": round(time.time() - started, 1) if started else None,  # since the run's first node
        "usage": _usage_rows(usage), "usage_total": usage_totals(usage),
        "skills": {"library": str(library.path), "skills": skill_entries},
        "settings": json.loads(settings.model_dump_json()),
        "graph_report": state.get("report"),  # what the graph's own report node recorded
    }


def report(state: RLGPTState, runtime: Runtime[RunContext]) -> dict:
    settings, model = context_of(runtime).settings, context_of(runtime).model
    # the CLI (graph.run) writes report.json/report.md from the final state, this dict included
    usage = model.usage.to_dict() if getattr(model, "usage", None) is not None else {}
    started = float(state.get("started_at") or 0.0)
    data = build_report(settings, state, wall_s=time.time() - started if started else 0.0,
                        model_name=getattr(model, "name", "?"), usage=usage, graph_done=True)
    return {"report": data, "usage": usage}
