"""A short, bounded text trace of one code run: the first and last steps, every event, the prints.

Built in the parent from progress items sent by the child, so a run that is killed (timeout,
memory) still has its trace up to the moment it stopped. The end of a run is what a repair needs
most (where it died, stalled or broke), so the trace keeps more steps from the end than from the
start, and when it is still too long it drops lines from the middle, never from the end.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_PRINT_LINES = 200
MAX_LINE_CHARS = 200
PRINT_PREFIX = "print at step "
PRINTS_FOLLOW = "; the code's prints from there follow"
HEAD_SHARE = 4  # when shortened, the head gets 1/HEAD_SHARE of max_chars and the tail the rest


@dataclass
class TraceBuilder:
    head: int = 8
    tail: int = 24
    max_chars: int = 4000
    lines: list[tuple[str, str, bool]] = field(default_factory=list)  # (kind, text, keep always)
    prints: int = 0
    running: str = ""  # the functions the last step line said the code was in

    def step(self, t: int, action: str, events: list[str], running: str = "") -> None:
        """One step. `running`: the functions the code was in when it chose `action` ('main > go_to'), shown
        where it changed and on every step with an event (those lines are always kept)."""
        text = f"step {t}: {action}"
        if running and (events or running != self.running):
            text += f" (in {running})"
        self.running = running
        text += f" -> {'; '.join(events)}" if events else ""
        self.lines.append(("step", _clip(text), bool(events)))

    def printed(self, t: int, text: str) -> None:
        self.prints += 1
        if self.prints > MAX_PRINT_LINES:
            return
        self.lines.append(("print", f"{PRINT_PREFIX}{t}: {_clip(text)}", True))

    def note(self, text: str) -> None:
        self.lines.append(("note", _clip(text), True))

    def render(self) -> str:
        out = self._kept_lines()
        if self.prints > MAX_PRINT_LINES:
            out.append(f"({self.prints - MAX_PRINT_LINES} more print lines dropped)")
        text = "\n".join(out)
        if len(text) <= self.max_chars:
            return text
        head, tail = _ends(out, self.max_chars)
        middle = out[len(head):len(out) - len(tail)]
        rescued: list[str] = []
        if any(line.startswith(PRINT_PREFIX) for line in middle):
            # the code's own prints outlive the middle's steps: they are the diagnostics its author asked for
            room = min(self.max_chars // 8, sum(len(line) + 1 for line in out if line.startswith(PRINT_PREFIX)))
            head, tail = _ends(out, self.max_chars - room - len(PRINTS_FOLLOW))
            middle = out[len(head):len(out) - len(tail)]
            rescued = last_lines_within([line for line in middle if line.startswith(PRINT_PREFIX)], room)
        # the marker counts what is still left out
        marker = [_middle_marker(len(middle) - len(rescued), prints_follow=bool(rescued))] if middle else []
        return "\n".join([*head, *marker, *rescued, *tail])

    def _kept_lines(self) -> list[str]:
        """Every event, print and note; of the uneventful steps only the first `head` and the last `tail`."""
        step_rows = [i for i, (kind, _, _) in enumerate(self.lines) if kind == "step"]
        keep_steps = set(step_rows[:self.head]) | set(step_rows[-self.tail:] if self.tail else [])
        out: list[str] = []
        skipped = 0
        for i, (_, text, always) in enumerate(self.lines):
            if always or i in keep_steps:
                if skipped:
                    out.append(f"... {skipped} uneventful steps ...")
                    skipped = 0
                out.append(text)
            else:
                skipped += 1
        if skipped:
            out.append(f"... {skipped} uneventful steps ...")
        return out


def _ends(lines: list[str], max_chars: int) -> tuple[list[str], list[str]]:
    """Whole lines from the start (a quarter of `max_chars`) and from the end (the rest), room left for a
    marker of the dropped middle; the last line is always kept (clipped at its end only if it alone is too
    long)."""
    marker_room = 60
    head: list[str] = []
    used = 0
    for line in lines[:-1]:
        if used + len(line) + 1 > max_chars // HEAD_SHARE:
            break
        head.append(line)
        used += len(line) + 1
    budget = max(0, max_chars - used - marker_room)
    tail = [lines[-1][:budget]] if lines else []
    used = len(tail[0]) + 1 if tail else 0
    for line in reversed(lines[len(head):-1]):
        if used + len(line) + 1 > budget:
            break
        tail.insert(0, line)
        used += len(line) + 1
    return head, tail


def last_lines_within(lines: list[str], room: int) -> list[str]:
    """The last of `lines` that fit whole in `room` characters (one newline each)."""
    tail: list[str] = []
    for line in reversed(lines):
        if len(line) + 1 > room:
            break
        tail.insert(0, line)
        room -= len(line) + 1
    return tail


def _middle_marker(dropped: int, prints_follow: bool = False) -> str:
    after = PRINTS_FOLLOW if prints_follow else ""
    return f"[... {dropped} lines dropped from the middle of the trace{after} ...]"


def _clip(text: str) -> str:
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + "..."


def reached_action(report: Mapping[str, Any], prerequisites: Collection[str] = (),
                   judged: Collection[str] = ()) -> bool:
    """Whether a code test's run reached the action it judges: the earlier skills it replays first unlocked
    `prerequisites`, and a run that died did so once one of the `judged` functions had taken a step. The
    chain walks to its stations and keeps the player fed before it calls the action, and a death there
    says nothing about the action's code. The labels come from the sandbox: a forged one can only leave a
    death out of the judged runs, never make a success (achievements are read on the trusted side), and
    held-out evaluation never reads them."""
    if set(prerequisites) - set(report.get("achievements_unlocked") or ()):
        return False
    first_steps = report.get("first_steps")
    if not judged or first_steps is None or report.get("ended") != "died":  # a report from before the labels
        return True
    return any(name in first_steps for name in judged)

