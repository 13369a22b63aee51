"""What an attempt leaves behind: its measured result as the subtask's skill record.

The record is `nodes.skills.library.Skill` in its state form; whether it passes is judged by the same rate
the critic judges (`judged_rate`: over the runs that reached the sub-action, when a prefix was replayed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.attempt.results import judged_rate
from nodes.entries import MeasuredResult, SkillRecord
from nodes.skills.library import Skill


def skill_from_attempt(subtask: str, attempt: MeasuredResult, threshold: float) -> SkillRecord:
    """The state's record of a measured attempt (a critic result) as the skill for `subtask`."""
    kind = attempt["kind"]
    skill = Skill(
        name=f"{subtask}_{kind}", kind=kind, task=subtask,
        success_rate=float(attempt.get("success_rate", 0.0)), rate_source=attempt.get("rate_source"),
        success_given_start=attempt.get("success_given_start"), started=attempt.get("started"),
        episodes=int(attempt.get("episodes") or 0), env_steps=int(attempt.get("steps") or 0),
        sources=list(attempt.get("sources") or []), entry=attempt.get("entry"),
        policy_path=attempt.get("policy_path"), rl_config=attempt.get("rl_config"),
        measured_in=round_name(attempt), replayed=attempt.get("replayed"),
        passing=judged_rate(attempt) >= threshold, reused=False)
    return skill.to_state()


def round_name(attempt: MeasuredResult) -> str | None:
    """The round an attempt was measured in, numbered as the prompts number them ('Outer iteration 2 of 3',
    'Repairs of this decomposition used: 1'): answerers could not tell which of their rounds became the skill."""
    if attempt.get("outer_iter") is None:
        return None
    return f"outer iteration {int(attempt['outer_iter']) + 1}, repair {int(attempt.get('inner_iter') or 0)}"


def skill_from_best(state: Mapping[str, Any], subtask: str, threshold: float) -> SkillRecord | None:
    best = (state.get("best") or {}).get(subtask)
    return None if best is None else skill_from_attempt(subtask, best, threshold)
