"""The run's subtasks on a timeline: one row per subtask, its attempts in run order (code tests or a
training each), their env steps and success, the moves between code and RL, and how each subtask ended.

Everything comes from the state's logs (`nodes.state.LOG_KEYS`): `results` holds each measured
attempt (kind, success_rate, steps), `events` the decisions in order: a `measure` per result with its
verdict, `move` (code -> rl), `reuse` (a passing skill from the library), `skill`, `subtask_failed`,
`stop`, and `plan` (the subtasks of each plan, re-plans included).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodes.attempt.results import round_steps

KIND_COLOURS = {"code": "#4c72b0", "rl": "#dd8452"}
REUSE_COLOUR = "#9e9e9e"


@dataclass(frozen=True)
class Slot:
    """One box on the timeline: a measured attempt, or a skill reused from the library."""

    index: int                    # position in run order
    subtask: str
    kind: str                     # code | rl | reuse
    sub_action: str = ""
    success_rate: float | None = None
    env_steps: int = 0
    verdict: str | None = None    # repair, pass, move, revise, fail (the critic's, or the fast agent's repair)


@dataclass
class Move:
    subtask: str
    sub_action: str
    source: str                   # code
    target: str                   # rl
    after: int                    # the slot it follows
    forced: bool = False          # the graph moved it when the code's revisions ran out


@dataclass
class Row:
    subtask: str
    slots: list[Slot] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    outcome: str = "not reached"


def _same(result: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    return all(result.get(k) == event.get(k) for k in ("subtask", "sub_action", "kind"))


def timeline_rows(values: Mapping[str, Any]) -> list[Row]:
    """The rows of a run's timeline from its (final) state."""
    results = [r for r in values.get("results") or [] if isinstance(r, Mapping)]
    events = [e for e in values.get("events") or [] if isinstance(e, Mapping)]
    rows: dict[str, Row] = {}

    def row(name: str) -> Row:
        return rows.setdefault(name, Row(name))

    for e in events:  # every subtask any plan named, in the order the plans named them
        if e.get("type") == "plan":
            for name in e.get("subtasks") or []:
                row(str(name))
    for sub in values.get("plan") or []:
        row(str(sub.get("name")))

    used = [False] * len(results)
    slots: list[Slot] = []

    def add(result: Mapping[str, Any], verdict: str | None) -> None:
        slot = Slot(len(slots), str(result.get("subtask")), str(result.get("kind")), str(result.get("sub_action")),
                    result.get("success_rate"), round_steps(result), verdict)
        slots.append(slot)
        row(slot.subtask).slots.append(slot)

    for e in events:
        kind = e.get("type")
        if kind == "measure":  # the next result of this sub-action not shown yet
            i = next((i for i, r in enumerate(results) if not used[i] and _same(r, e)), None)
            if i is not None:
                used[i] = True
                add(results[i], e.get("verdict"))
            else:
                add(e, e.get("verdict"))
        elif kind == "reuse":
            slot = Slot(len(slots), str(e.get("subtask")), "reuse", str(e.get("kind") or ""),
                        e.get("success_rate"))
            slots.append(slot)
            row(slot.subtask).slots.append(slot)
        elif kind == "move":
            name = str(e.get("subtask"))
            row(name).moves.append(Move(name, str(e.get("sub_action")), str(e.get("from")), str(e.get("to")),
                                        slots[-1].index if slots else -1, bool(e.get("forced"))))
    for i, r in enumerate(results):  # measured, but the run stopped before a verdict
        if not used[i]:
            add(r, None)

    skills = values.get("skills") or {}
    failed = {str(e.get("subtask")) for e in events if e.get("type") == "subtask_failed"}
    for name, line in rows.items():
        skill = skills.get(name)
        if isinstance(skill, Mapping) and skill.get("passing"):
            how = "reused" if skill.get("reused") else "skill"
            rate = skill.get("success_rate")
            line.outcome = f"{how}: {skill.get('kind')}" + (f" {rate:.0%}" if isinstance(rate, (int, float)) else "")
        elif name in failed:
            line.outcome = "failed: re-plan"
        elif line.slots:
            line.outcome = "no passing skill"
    return list(rows.values())


def _steps_text(n: int) -> str:
    return f"{n / 1000:.1f}k steps" if n >= 1000 else f"{n} steps"


def _kept(row: Row, skill: Mapping[str, Any] | None) -> int | None:
    """The slot whose attempt became the subtask's skill (a reused one, or the last attempt measured
    at the skill's kind and rate)."""
    if not isinstance(skill, Mapping):
        return None
    for s in reversed(row.slots):
        if skill.get("reused") and s.kind == "reuse":
            return s.index
        rate = skill.get("success_rate")
        if (not skill.get("reused") and s.kind == skill.get("kind") and isinstance(rate, (int, float))
                and isinstance(s.success_rate, (int, float)) and abs(s.success_rate - rate) < 1e-9):
            return s.index
    return None


def draw_timeline(rows: Sequence[Row], path: Path, title: str = "",
                  skills: Mapping[str, Any] | None = None) -> None:
    """The timeline as a PNG: subtasks top to bottom, attempts left to right in run order; the attempt
    that became a subtask's skill (`skills`: the state's) framed green."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, Patch, Rectangle

    n_slots = max((s.index + 1 for r in rows for s in r.slots), default=1)
    n_rows = max(len(rows), 1)
    width = min(max(2.8 + 1.15 * n_slots, 0.075 * len(title) + 1.0, 7.5), 40.0)
    fig, ax = plt.subplots(figsize=(width, 1.9 + 1.0 * n_rows))
    ax.set_xlim(-0.6, n_slots - 0.4)
    ax.set_ylim(n_rows - 0.45, -0.8)
    for y, r in enumerate(rows):
        if y % 2 == 0:
            ax.axhspan(y - 0.5, y + 0.5, color="#f6f6f6", zorder=0)
        kept = _kept(r, (skills or {}).get(r.subtask))
        for s in r.slots:
            colour = KIND_COLOURS.get(s.kind, REUSE_COLOUR)
            ax.add_patch(Rectangle((s.index - 0.36, y - 0.27), 0.72, 0.54, fc=colour,
                                   alpha=0.9 if s.kind != "reuse" else 0.6, hatch="//" if s.kind == "reuse" else None,
                                   ec="#2ca02c" if s.index == kept else "#333333", lw=2.8 if s.index == kept else 0.6,
                                   zorder=2))
            rate = f"{s.success_rate:.0%}" if isinstance(s.success_rate, (int, float)) else "-"
            lines = ["reused", rate] if s.kind == "reuse" else [f"{'RL' if s.kind == 'rl' else s.kind} {rate}",
                                                                 _steps_text(s.env_steps)]
            ax.text(s.index, y, "\n".join(lines), ha="center", va="center", fontsize=8, color="white",
                    fontweight="bold", zorder=3, linespacing=1.25)
            if s.verdict and s.kind != "reuse":
                ax.text(s.index, y + 0.38, s.verdict, ha="center", va="center", fontsize=7, color="#444444",
                        zorder=3)
        for m in r.moves:
            later = [s for s in r.slots if s.index > m.after]
            x1 = later[0].index if later else m.after + 0.8
            ax.add_patch(FancyArrowPatch((m.after, y - 0.28), (x1, y - 0.28), arrowstyle="-|>", mutation_scale=11,
                                         connectionstyle="arc3,rad=-0.3", color="#c0392b", lw=1.4, zorder=4,
                                         shrinkA=2, shrinkB=2))
            ax.text((m.after + x1) / 2, y - 0.62, f"{'forced ' if m.forced else ''}move {m.source} → {m.target}",
                    ha="center", va="center", fontsize=7, color="#c0392b", zorder=4,
                    bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.8))
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{r.subtask}\n{r.outcome}" for r in rows], fontsize=9)
    ax.set_xticks(range(n_slots))
    ax.set_xticklabels([str(i + 1) for i in range(n_slots)], fontsize=8)
    ax.set_xlabel("attempts in run order (each a round of code tests or one training)", fontsize=9)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(handles=[Patch(fc=KIND_COLOURS["code"], label="code"), Patch(fc=KIND_COLOURS["rl"], label="RL"),
                       Patch(fc=REUSE_COLOUR, hatch="//", label="skill reused"),
                       Patch(fc="white", ec="#2ca02c", lw=2.2, label="became the skill")],
              loc="upper center", bbox_to_anchor=(0.5, -0.55 / (0.7 + 1.0 * n_rows)), ncol=4, fontsize=8,
              frameon=False)
    if title:
        ax.set_title(title, fontsize=10, loc="left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_timeline(values: Mapping[str, Any], path: Path, title: str = "") -> list[Row]:
    rows = timeline_rows(values)
    draw_timeline(rows, path, title, values.get("skills") or {})
    return rows
