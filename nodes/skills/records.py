"""Skill records in the graph's state: to and from the skill library, and which earlier skills a subtask builds on.

The record is `nodes.skills.library.Skill`; the state holds its plain dump (`Skill.to_state()`), one per
subtask. A coded skill runs its `entry` function from `sources`; a learned one runs the policy at
`policy_path` (its coded actions come with it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envs.tasks import ACHIEVEMENTS, TASKS
from nodes.entries import SkillRecord
from nodes.recipes import backward_chain
from nodes.settings import RunSettings
from nodes.skills.library import Skill, SkillLibrary
from nodes.skills.pool import Pool, function_names, pool_of


def save_skill(settings: RunSettings, record: Mapping[str, Any] | Skill) -> str | None:
    """Put a passing skill into the library; returns a note for the events log (or None)."""
    skill = Skill.model_validate(record)
    if not skill.passing:
        return None
    lib = SkillLibrary(settings.skills_path)
    if skill.kind == "rl" and not (skill.policy_path and Path(skill.policy_path).is_file()):
        return f"learned skill {skill.name} not saved: no policy file"
    lib.put(skill.model_copy(update={"run_id": settings.run_id}), keep_best=True)
    return f"saved {skill.kind} skill {skill.name} ({skill.success_rate:.0%}) to {lib.path}"


def reuse_skill(settings: RunSettings, subtask: str) -> SkillRecord | None:
    """A passing skill for this subtask from an earlier run, as the state's record, or None."""
    skill = SkillLibrary(settings.skills_path).find_for_task(subtask, settings.skill_threshold)
    if skill is None:
        return None
    # this run spent nothing on it, and the library keeps only passing skills worth reusing
    return skill.model_copy(update={"task": subtask, "env_steps": 0, "reused": True, "passing": True,
                                    "measured_in": None, "replayed": None}).to_state()


def needed_before(subtask: str | None, earlier: list[str], whole_chain: bool = False) -> list[str]:
    """The earlier subtasks that `subtask` depends on, in plan order.

    In a score plan a subtask's code test and its RL prefix replay only what it needs: the plan passes over a
    step that fails, so a step it does not need would only hold it up. Subtasks outside Crafter's recipe data
    (an LLM's own names) give no dependency facts, so all of them are kept. So are all of them in the plan of a
    one-achievement task (`whole_chain`, `replays_earlier_skills`): held-out play is that chain, and what a
    planner put before a subtask is there when it plays (an answerer's sword before defeat_skeleton, which
    needs nothing by recipe, was left out of every test of it).
    """
    known = TASKS.get(subtask) if subtask else None
    if whole_chain or known is None or known.achievement is None:
        return list(earlier)
    closure = set(backward_chain(known.name))
    return [name for name in earlier if name in closure or name not in TASKS]


def replays_earlier_skills(task: str | None) -> bool:
    """Whether the code tests of every subtask of `task`'s plan replay every earlier skill first, in plan order, as
    held-out play chains them (graph rules 18): a one-achievement task. Until then only the plan's last subtask
    did, and the others replayed what their recipe needs: a furnace placed at step 40 in its tests met no hunger,
    no night and no mine, and in held-out play, after the iron, it met all three (one answerer's chain died at
    place_furnace in 41 of 200 held-out episodes, 11 of them starved inside its own survival code, after 7 of 7
    tests had passed). A score plan passes over a step that fails, so no earlier step stands for its state."""
    known = TASKS.get(task) if task else None
    return known is not None and not known.is_score


def replays_the_chain(plan: Sequence[Mapping[str, Any]], index: int, task: str | None) -> bool:
    """Whether the plan's subtask at `index` is the last of a one-achievement task's plan, whose tests replay the
    whole chain held-out play is (`replays_earlier_skills`); a score plan passes over a step that fails, so
    no subtask of it stands for the whole."""
    return bool(plan) and index == len(plan) - 1 and replays_earlier_skills(task)


def prior_sources(state: Mapping[str, Any]) -> list[dict]:
    """Coded sources of the skills solved before the current subtask that its tests replay first, in plan order,
    for the fast agent: every earlier one a test can play in a one-achievement task's plan
    (`replays_earlier_skills`), else those it depends on (`needed_before`)."""
    out = []
    plan = state.get("plan", [])
    index = state.get("subtask_index", 0)
    current = plan[index]["name"] if index < len(plan) else None
    earlier = [sub["name"] for sub in plan[:index]]
    by_recipe = set(needed_before(current, earlier))
    needed = set(earlier) if replays_earlier_skills(state.get("task")) else by_recipe
    for sub in plan[:index]:
        record = (state.get("skills") or {}).get(sub["name"])
        if record is None or sub["name"] not in needed:
            continue
        skill = Skill.model_validate(record)
        entry = skill.entry
        if skill.kind == "rl":  # the learned skill's own coded action, if it has one named after the subtask
            names = [name for src in skill.sources for name in function_names(src)]
            entry = sub["name"] if sub["name"] in names else None
        if entry is None and sub["name"] not in by_recipe:
            # beyond the recipe, a skill a test cannot replay would only count its achievement as one the
            # runs must pass through first (prerequisite_achievements)
            continue
        out.append({"subtask": sub["name"], "kind": skill.kind, "main": entry, "sources": skill.sources})
    return out


def shares_its_code(record: Mapping[str, Any]) -> bool:
    """Whether a skill's definitions join the library of the later skills: not a kept attempt that never
    succeeded (a score plan plays it last, with its own code only: its rewrite of stay_alive or a helper may
    be why it never succeeded)."""
    never = int(record.get("episodes") or 0) > 0 and not float(record.get("success_rate") or 0.0)
    return bool(record.get("passing")) or not never


def solved_pool(state: Mapping[str, Any]) -> Pool:
    """The pool of every coded definition of the skills solved before the current subtask, in plan order
    (nodes.skills.pool.pool_of): whatever a skill defined stays callable in every later subtask, whether or
    not the later one replays it (`shares_its_code`)."""
    plan = state.get("plan", [])
    skills = state.get("skills") or {}
    index = state.get("subtask_index", 0)
    return pool_of((sub["name"], skills[sub["name"]]) for sub in plan[:index]
                   if sub["name"] in skills and shares_its_code(skills[sub["name"]]))


def prerequisite_achievements(state: Mapping[str, Any]) -> list[str]:
    """Achievements a code test of the current subtask passes through before the subtask's own turn."""
    return [p["subtask"] for p in prior_sources(state) if p["subtask"] in ACHIEVEMENTS]


def earlier_entries(state: Mapping[str, Any]) -> set[str]:
    """The coded actions of the skills solved before the current subtask: a sub-action of one of these names
    reuses it (and plays it as a step of the chain)."""
    plan = state.get("plan", [])
    skills = state.get("skills") or {}
    return {str(record["entry"]) for sub in plan[:state.get("subtask_index", 0)]
            if (record := skills.get(sub["name"])) and record.get("entry") and shares_its_code(record)}


def replaced_names(state: Mapping[str, Any]) -> set[str]:
    """Functions a sub-action of the same name replaces rather than plays as a step: the built-in actions
    and the helpers of earlier skills (every callable of the solved pool but the skills' own actions)."""
    return set(solved_pool(state).functions()) - earlier_entries(state)

