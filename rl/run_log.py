"""Run folder of a PPO training: metrics CSV, TensorBoard events, progress display, learning-curve PNG
(and the moving-window row each update logs)."""
from __future__ import annotations

import csv
import math
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

CSV_COLUMNS = ["step", "update", "episodes", "success_rate", "mean_return", "mean_length", "sps",
               "policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "lr"]


def _graph_stream_writer():
    """LangGraph's custom-event writer when training runs inside a graph node (train_ppo), else None."""
    try:
        from langgraph.config import get_stream_writer

        return get_stream_writer()
    except Exception:  # outside a graph run there is no runnable context: nothing to report to
        return None


def curve_row(episodes: list, window: int, step: int, update: int, elapsed: float) -> dict[str, float]:
    """The learning-curve columns of one update: means over the last ``window`` episodes, each given as
    (global step, return, length, success), success NaN where the env reports none."""
    recent = episodes[-window:]
    succ = [e[3] for e in recent if not math.isnan(e[3])]
    return {
        "step": step, "update": update, "episodes": len(episodes),
        "success_rate": float(np.mean(succ)) if succ else float("nan"),
        "mean_return": float(np.mean([e[1] for e in recent])) if recent else float("nan"),
        "mean_length": float(np.mean([e[2] for e in recent])) if recent else float("nan"),
        "sps": step / max(elapsed, 1e-9),
    }


# How a training episode ended, one short string per finished episode (rl.ppo's Collector): its task done, a
# death with its cause as the env names it (info["death_cause"]: envs.describe.damage_cause's words, the
# code-test reports' vocabulary), the episode's step limit, or another end (an env that reports neither, such as
# CartPole's falling pole).
SUCCEEDED, STEP_LIMIT, OTHER_END, DIED = "succeeded", "step limit", "ended", "died: "


def episode_outcome(success: float, terminated: bool, death_cause: Any = None) -> str:
    """The outcome of an episode that ended on this step; ``success`` NaN where the env reports none. Success
    comes first: with Crafter's own reward an episode goes on after the task is done, and is counted a success
    as the learning curve counts it."""
    if success >= 0.5:  # False for NaN
        return SUCCEEDED
    if not terminated:
        return STEP_LIMIT
    return DIED + death_cause if isinstance(death_cause, str) and death_cause else OTHER_END


def outcome_counts(outcomes: Iterable[str]) -> dict[str, int]:
    """Outcome -> episodes, the most frequent first (ties by name, so that equal runs give equal reports)."""
    return dict(sorted(Counter(outcomes).items(), key=lambda kv: (-kv[1], kv[0])))


def outcomes_text(counts: Mapping[str, int], step_limit: int | None = None) -> str:
    """'12 succeeded, 30 died (zombie 18, thirst 7, lava 5), 8 hit the 1,000-step limit' from outcome counts."""
    deaths = {k.removeprefix(DIED): n for k, n in counts.items() if k.startswith(DIED)}
    limit = f"the {step_limit:,}-step limit" if step_limit else "the step limit"
    parts = [f"{counts.get(SUCCEEDED, 0)} succeeded"]
    if deaths:
        causes = ", ".join(f"{cause} {n}" for cause, n in deaths.items())
        parts.append(f"{sum(deaths.values())} died ({causes})")
    if counts.get(STEP_LIMIT):
        parts.append(f"{counts[STEP_LIMIT]} hit {limit}")
    if counts.get(OTHER_END):
        parts.append(f"{counts[OTHER_END]} ended otherwise")
    return ", ".join(parts)


def default_run_dir(name: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "run"
    return Path("runs") / "ppo" / f"{safe}-{time.strftime('%Y%m%d-%H%M%S')}"


class RunLogger:
    """Receives one row per PPO update. Progress is a rich bar on a terminal, periodic lines otherwise."""

    def __init__(self, settings, name: str, total: int):
        run_dir = Path(settings.run_dir) if settings.run_dir else default_run_dir(name)
        if run_dir.exists() and any(run_dir.iterdir()) and (run_dir / "metrics.csv").exists():
            # never mix two runs' metrics in one CSV
            run_dir = run_dir.with_name(run_dir.name + time.strftime("-%H%M%S"))
        run_dir.mkdir(parents=True, exist_ok=True)
        self.run_dir = run_dir
        self.total = total
        self.log_every = max(1, settings.log_every)
        self.rows: list[dict[str, Any]] = []
        self._csv_file = open(run_dir / "metrics.csv", "w", newline="")
        self._csv = csv.DictWriter(self._csv_file, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        self._csv.writeheader()
        from torch.utils.tensorboard import SummaryWriter

        self._tb = SummaryWriter(str(run_dir / "tb"))
        self._graph_writer = _graph_stream_writer()
        mode = settings.progress
        if mode == "auto" and self._graph_writer is not None:
            mode = "none"  # the graph run's own display shows training; a second live bar would clash
        elif mode == "auto":
            mode = "bar" if sys.stdout.isatty() else "log"
        if mode not in ("bar", "log", "none"):
            raise ValueError(f"progress must be 'auto', 'bar', 'log' or 'none', got {settings.progress!r}")
        self.mode = mode
        self._name = name
        self._bar = None
        if mode == "bar":
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self._bar = Progress(TextColumn("[bold]PPO {task.fields[name]}"), BarColumn(),
                                 TextColumn("{task.completed:,}/{task.total:,} steps"),
                                 TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn())
            self._task = self._bar.add_task("ppo", total=total, name=name, info="")
            self._bar.start()

    def record(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self._csv.writerow(row)
        self._csv_file.flush()
        step = int(row["step"])
        for key, value in row.items():
            if key not in ("step", "update") and isinstance(value, (int, float)) and not math.isnan(value):
                self._tb.add_scalar(f"ppo/{key}", value, step)
        summary = (f"success {_fmt(row['success_rate'])}  return {_fmt(row['mean_return'])}  "
                   f"{row['sps']:.0f} steps/s")
        if self._graph_writer is not None:  # inside a graph run: drive the run's own training bar
            self._graph_writer({"event": "train", "name": self._name, "steps": step, "total": self.total,
                                "success_rate": row.get("success_rate"), "mean_return": row.get("mean_return")})
        if self._bar is not None:
            self._bar.update(self._task, completed=min(step, self.total), info=summary)
        elif self.mode == "log" and (row["update"] % self.log_every == 0 or step >= self.total):
            print(f"[ppo] step {step:,}/{self.total:,}  update {row['update']}  episodes {row['episodes']}  {summary}",
                  flush=True)

    def summary(self) -> dict[str, Any]:
        """The run as rl.training.TrainResult reports it: its folder, the curve (step, success_rate, mean_return,
        mean_length of each update) and the last update's success rate and return (None when unknown)."""
        last = self.rows[-1] if self.rows else {}
        return {"run_dir": str(self.run_dir),
                "curve": [{k: r[k] for k in ("step", "success_rate", "mean_return", "mean_length")} for r in self.rows],
                "final_train_success_rate": _nan_to_none(last.get("success_rate")),
                "final_mean_return": _nan_to_none(last.get("mean_return"))}

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
        self._tb.close()
        self._csv_file.close()
        if self.rows:
            save_curve_png(self.rows, self.run_dir / "learning_curve.png")


def _nan_to_none(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _fmt(x: float) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:.3g}"


def save_curve_png(rows: list[dict[str, Any]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # no display needed, safe in worker processes and CI
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    axes[0].plot(steps, [r["success_rate"] for r in rows])
    axes[0].set_ylabel("success rate (moving window)")
    axes[1].plot(steps, [r["mean_return"] for r in rows])
    axes[1].set_ylabel("episode return (moving window)")
    for ax in axes:
        ax.set_xlabel("primitive environment steps")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path
