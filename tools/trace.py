"""A short, bounded text trace of one code run: the first and last steps, every event, the prints.

Built in the parent from progress items sent by the child, so a run that is killed (timeout,
memory) still has its trace up to the moment it stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_PRINT_LINES = 200
MAX_LINE_CHARS = 200


@dataclass
class TraceBuilder:
    head: int = 12
    tail: int = 12
    max_chars: int = 4000
    lines: list[tuple[str, str, bool]] = field(default_factory=list)  # (kind, text, keep always)
    prints: int = 0

    def step(self, t: int, action: str, events: list[str]) -> None:
        text = f"step {t}: {action}" + (f" -> {'; '.join(events)}" if events else "")
        self.lines.append(("step", text, bool(events)))

    def printed(self, t: int, text: str) -> None:
        self.prints += 1
        if self.prints > MAX_PRINT_LINES:
            return
        if len(text) > MAX_LINE_CHARS:
            text = text[:MAX_LINE_CHARS] + "..."
        self.lines.append(("print", f"print at step {t}: {text}", True))

    def note(self, text: str) -> None:
        self.lines.append(("note", text, True))

    def render(self) -> str:
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
        if self.prints > MAX_PRINT_LINES:
            out.append(f"({self.prints - MAX_PRINT_LINES} more print lines dropped)")
        text = "\n".join(out)
        if len(text) > self.max_chars:
            half = self.max_chars // 2
            text = text[:half] + "\n[... trace shortened ...]\n" + text[-half:]
        return text
