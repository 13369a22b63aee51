"""Live progress of a run: a rich panel on a terminal, plain log lines otherwise.

The runner feeds it three kinds of facts: a node started/finished (from the "updates" stream),
a snapshot of the run's counters (read from the checkpointed state after each node), and
custom events that nodes emit through LangGraph's stream writer while they work, e.g.
``{"event": "train", "steps": 4096, "total": 20000, "success_rate": 0.1}`` from PPO training.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table


@dataclass
class Counters:
    """What the display shows about the run as a whole (filled from the graph state)."""

    subtask: str = ""
    subtask_index: int = 0
    subtask_count: int = 0
    outer_iter: int = 0
    inner_iter: int = 0
    steps_spent: int = 0
    model_calls: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _fmt_steps(n: int | float) -> str:
    n = int(n)
    return f"{n / 1e6:.2f}M" if n >= 1_000_000 else f"{n / 1e3:.1f}k" if n >= 10_000 else str(n)


class RunProgress:
    """Context manager; call `node_done`, `counters`, `custom` as the stream delivers facts."""

    def __init__(self, run_id: str, task: str, budget_steps: int, max_wall_s: float | None,
                 max_model_calls: int, live: bool | None = None, stream: TextIO | None = None,
                 elapsed_offset: float = 0.0):
        self.run_id = run_id
        self.task = task
        self.budget_steps = budget_steps
        self.max_wall_s = max_wall_s
        self.max_model_calls = max_model_calls
        self.stream = stream or sys.stderr
        self.live_mode = self.stream.isatty() if live is None else live
        self.started = time.monotonic() - elapsed_offset  # a resumed run keeps counting its earlier time
        self.node = "starting"
        self.nodes_done = 0
        self.counters = Counters()
        self.train: dict[str, Any] | None = None
        self.last_event = ""
        self._live: Live | None = None
        self._console = Console(file=self.stream, force_terminal=self.live_mode or None,
                                highlight=False, soft_wrap=True)
        self._budget_bar = Progress(TextColumn("{task.description:<14}"), BarColumn(),
                                    TaskProgressColumn(), TextColumn("{task.fields[label]}"),
                                    console=self._console)
        self._steps_task = self._budget_bar.add_task("env steps", total=max(budget_steps, 1), label="")
        # no wall limit: the bar shows the elapsed time against a total that never fills
        self._wall_task = self._budget_bar.add_task("wall time", total=max(max_wall_s, 1) if max_wall_s else None,
                                                    label="")
        self._calls_task = self._budget_bar.add_task("model calls", total=max(max_model_calls, 1), label="")
        self._train_bar = Progress(TextColumn("{task.description:<14}"), BarColumn(), TaskProgressColumn(),
                                   TextColumn("{task.fields[label]}"), TimeElapsedColumn(), console=self._console)
        self._train_task: TaskID | None = None

    # ---- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> RunProgress:
        if self.live_mode:
            self._live = Live(self._render(), console=self._console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        else:
            self._log(f"run {self.run_id}: task {self.task}, budget {self.budget_steps} env steps, "
                      f"{_wall_text(self.max_wall_s)}, {self.max_model_calls} model calls")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._refresh()
            self._live.__exit__(*exc)
            self._live = None

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    # ---- facts from the runner ------------------------------------------------------------
    def node_started(self, name: str) -> None:
        self.node = f"{name} (running)"
        self._refresh()

    def node_done(self, name: str, summary: str = "") -> None:
        self.nodes_done += 1
        self.node = f"{name} (done)"
        self.last_event = f"{name}: {summary}" if summary else name
        if not self.live_mode:
            c = self.counters
            where = f" subtask {c.subtask_index + 1}/{c.subtask_count} {c.subtask}" if c.subtask_count else ""
            self._log(f"[{self.elapsed:7.1f}s] node {name} done{where} outer {c.outer_iter} inner {c.inner_iter} "
                      f"steps {c.steps_spent}/{self.budget_steps}" + (f" - {summary}" if summary else ""))
        self._refresh()

    def update_counters(self, counters: Counters) -> None:
        self.counters = counters
        self._refresh()

    def custom(self, event: Mapping[str, Any]) -> None:
        """A node's own progress event; `train` events drive the training bar."""
        kind = event.get("event") if isinstance(event, Mapping) else None
        if kind == "train":
            self._train_event(event)
        elif kind == "node":
            self.node_started(str(event.get("name", "?")))
        elif isinstance(event, Mapping) and event.get("message"):
            self.last_event = str(event["message"])
            if not self.live_mode:
                self._log(f"[{self.elapsed:7.1f}s] {self.last_event}")
        self._refresh()

    def message(self, text: str) -> None:
        self.last_event = text
        if self._live is not None:
            self._live.console.print(text)
        else:
            self._log(text)

    # ---- internals ------------------------------------------------------------------------
    def _train_event(self, event: Mapping[str, Any]) -> None:
        steps, total = int(event.get("steps", 0)), int(event.get("total", 0) or 1)
        name = str(event.get("name", "PPO"))
        label = " ".join(f"{k} {event[k]:.2f}" if isinstance(event[k], float) else f"{k} {event[k]}"
                         for k in ("success_rate", "mean_return") if k in event)
        first = self.train is None or self.train.get("name") != name
        self.train = dict(event)
        if self._train_task is None or first:
            if self._train_task is not None:
                self._train_bar.remove_task(self._train_task)
            self._train_task = self._train_bar.add_task(f"train {name}"[:14], total=total, label=label)
        self._train_bar.update(self._train_task, completed=min(steps, total), total=total, label=label)
        if not self.live_mode and (first or steps >= total or event.get("log", False)):
            self._log(f"[{self.elapsed:7.1f}s] training {name}: {steps}/{total} steps {label}".rstrip())

    def _log(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    def _render(self) -> Panel:
        c = self.counters
        head = Table.grid(padding=(0, 2))
        head.add_column(style="bold")
        head.add_column()
        head.add_row("run", f"{self.run_id}  ({self.task})")
        head.add_row("node", self.node)
        if c.subtask_count:
            head.add_row("subtask", f"{c.subtask_index + 1}/{c.subtask_count}  {c.subtask}")
        head.add_row("loops", f"outer {c.outer_iter}  inner {c.inner_iter}  ({self.nodes_done} nodes done)")
        if self.last_event:
            head.add_row("last", self.last_event[:120])
        self._budget_bar.update(self._steps_task, completed=min(c.steps_spent, self.budget_steps),
                                label=f"{_fmt_steps(c.steps_spent)}/{_fmt_steps(self.budget_steps)}")
        self._budget_bar.update(self._wall_task, completed=min(self.elapsed, self.max_wall_s or self.elapsed),
                                label=f"{self.elapsed:.0f} s" + (f"/{self.max_wall_s:.0f} s" if self.max_wall_s else
                                                                 " (no wall limit)"))
        self._budget_bar.update(self._calls_task, completed=min(c.model_calls, self.max_model_calls),
                                label=f"{c.model_calls}/{self.max_model_calls}")
        parts: list[Any] = [head, self._budget_bar]
        if self._train_task is not None:
            parts.append(self._train_bar)
        return Panel(Group(*parts), title="RL-GPT", border_style="cyan")

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render())


def _wall_text(max_wall_s: float | None) -> str:
    return f"wall limit {max_wall_s:.0f} s" if max_wall_s else "no wall limit"
