"""Skill records: from a measured attempt to the state's `skills`, to and from the skill library.

A skill record is plain data: {subtask, name, kind, success_rate, episodes, env_steps, sources,
entry, policy_path, rl_config, reused, passing}. A coded skill runs its `entry` function from
`sources`; a learned one runs the policy at `policy_path` (its coded actions come with it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nodes.attempts import judged_rate
from nodes.limits import skill_threshold


def skill_from_attempt(subtask: str, attempt: dict, threshold: float) -> dict:
    name = f"{subtask}_{attempt['kind']}"
    return {
        "subtask": subtask, "name": name, "kind": attempt["kind"],
        "success_rate": float(attempt.get("success_rate", 0.0)), "episodes": int(attempt.get("episodes") or 0),
        "env_steps": int(attempt.get("steps") or 0), "sources": list(attempt.get("sources") or []),
        "entry": attempt.get("entry"), "policy_path": attempt.get("policy_path"),
        "rl_config": attempt.get("rl_config"), "reused": False,
        "success_given_start": attempt.get("success_given_start"),
        "passing": judged_rate(attempt) >= threshold,
    }


def skill_from_best(state: dict, subtask: str, threshold: float = 0.5) -> dict | None:
    best = (state.get("best") or {}).get(subtask)
    return None if best is None else skill_from_attempt(subtask, best, threshold)


def library(settings: Any):
    """The run's skill library, or None when the settings name no folder."""
    path = getattr(settings, "skills_path", None)
    if path is None:
        return None
    from graph.skills import SkillLibrary

    return SkillLibrary(path)


def save_skill(settings: Any, record: dict) -> str | None:
    """Put a passing skill into the library; returns a note for the events log (or None)."""
    lib = library(settings)
    if lib is None or not record.get("passing"):
        return None
    from graph.skills import Skill

    source = "\n\n".join(record["sources"]) if record["kind"] == "code" else None
    skill = Skill(name=record["name"], kind=record["kind"], task=record["subtask"],
                  description=f"entry: {record.get('entry')}" if record["kind"] == "code" else "PPO policy",
                  success_rate=record["success_rate"], episodes=record["episodes"], env_steps=record["env_steps"],
                  source=source, rl_config=record.get("rl_config"), run_id=getattr(settings, "run_id", None))
    if record["kind"] == "rl" and not (record.get("policy_path") and Path(record["policy_path"]).is_file()):
        return f"learned skill {record['name']} not saved: no policy file"
    lib.put(skill, policy_src=record.get("policy_path") if record["kind"] == "rl" else None, keep_best=True)
    return f"saved {record['kind']} skill {record['name']} ({record['success_rate']:.0%}) to {lib.path}"


def reuse_skill(settings: Any, subtask: str) -> dict | None:
    """A passing skill for this subtask from an earlier run, as a skill record, or None."""
    lib = library(settings)
    if lib is None:
        return None
    skill = lib.find_for_task(subtask, skill_threshold(settings))
    if skill is None:
        return None
    record = {"subtask": subtask, "name": skill.name, "kind": skill.kind, "success_rate": skill.success_rate,
              "episodes": skill.episodes, "env_steps": 0, "reused": True, "passing": True,
              "sources": [skill.source] if skill.source else [], "policy_path": None,
              "rl_config": skill.rl_config, "entry": None}
    if skill.kind == "code":
        record["entry"] = skill.description.removeprefix("entry: ").strip() or None
    else:
        path = lib.policy_path(skill)
        record["policy_path"] = str(path) if path else None
        record["sources"] = list((skill.rl_config or {}).get("coded_actions", []))
    return record


def needed_before(subtask: str | None, earlier: list[str]) -> list[str]:
    """The earlier subtasks that `subtask` depends on, in plan order.

    A subtask's code test and its RL prefix replay only what it needs: a furnace needs no iron, and
    replaying collect_iron first would charge iron's failures to the furnace's code. Subtasks outside
    Crafter's recipe data (an LLM's own names) give no dependency facts, so all of them are kept.
    """
    from envs.tasks import TASKS
    from nodes.recipes import backward_chain

    known = TASKS.get(subtask) if subtask else None
    if known is None or known.achievement is None:
        return list(earlier)
    closure = set(backward_chain(subtask))
    return [name for name in earlier if name in closure or name not in TASKS]


def prior_sources(state: dict) -> list[dict]:
    """Coded sources of the skills solved before the current subtask that it depends on (`needed_before`),
    in plan order, for the fast agent."""
    out = []
    plan = state.get("plan", [])
    index = state.get("subtask_index", 0)
    current = plan[index]["name"] if index < len(plan) else None
    earlier = [sub["name"] for sub in plan[:index]]
    needed = set(needed_before(current, earlier))
    for sub in plan[:index]:
        rec = (state.get("skills") or {}).get(sub["name"])
        if rec is None or sub["name"] not in needed:
            continue
        entry = rec.get("entry")
        if rec["kind"] == "rl":  # the learned skill's own coded action, if it has one named after the subtask
            from nodes.expert import defined_functions

            names = [n for src in rec.get("sources", []) for n in defined_functions(src)]
            entry = next((n for n in names if n == sub["name"]), None)
        out.append({"subtask": sub["name"], "kind": rec["kind"], "main": entry, "sources": rec.get("sources", [])})
    return out
