"""The results folder: report.md, one CSV per table, and the tables printed to the terminal."""
from __future__ import annotations

import csv
import json
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable

from graph.evaluation.tables import Column, EvalConfig, Table


def fmt(row: dict[str, Any], col: Column) -> str:
    value = row.get(col.key)
    if value is None or value == "":
        return "-"
    if col.kind in ("rate", "score"):
        if isinstance(value, str):
            return value
        scale, unit = (100.0, "%") if col.kind == "rate" else (1.0, "")
        lo, hi = row.get(f"{col.key}_ci_low"), row.get(f"{col.key}_ci_high")
        text = f"{value * scale:.1f}{unit}" if col.kind == "rate" else f"{value:.2f}"
        if lo is not None and hi is not None:
            text += f" [{lo * scale:.1f}-{hi * scale:.1f}]" if col.kind == "rate" else f" [{lo:.2f}-{hi:.2f}]"
        return text
    if col.kind == "pct":
        return f"{value * 100:.1f}%" if isinstance(value, (int, float)) else str(value)
    if col.kind == "int":
        return f"{int(value):,}" if isinstance(value, (int, float)) else str(value)
    if col.kind == "float":
        return f"{value:.1f}" if isinstance(value, (int, float)) else str(value)
    return str(value).replace("|", "/")


def markdown_table(table: Table) -> list[str]:
    lines = ["| " + " | ".join(c.header for c in table.columns) + " |",
             "|" + "|".join("---:" if c.kind in ("int", "float", "rate", "pct", "score") else "---"
                            for c in table.columns) + "|"]
    lines += ["| " + " | ".join(fmt(r, c) for c in table.columns) + " |" for r in table.rows]
    return lines


def write_csv(table: Table, folder: Path) -> Path:
    """Every raw field of every row (rates as fractions, CI bounds in their own columns)."""
    keys: list[str] = []
    for row in table.rows:
        keys += [k for k in row if k not in keys]
    path = folder / f"{table.key}.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        for row in table.rows:
            writer.writerow({k: row.get(k, "") for k in keys})
    return path


# Crafter draws its night as darkened, noisy pixels; the symbolic view that agent code and our policies read
# has no such loss, so the report says so next to every table set.
SYMBOLIC_VIEW_NOTE = ("the symbolic 9x7 local view (materials, creatures), the inventory, status bars and "
                      "daylight; unlike Crafter's pixels it does not darken at night, so at night agent code and "
                      "policies see cells a human player could not make out")


def render_markdown(tables: Sequence[Table], cfg: EvalConfig, meta: dict[str, Any]) -> str:
    from envs.seeds import eval_seeds

    seeds = eval_seeds(cfg.episodes)
    mode = "QUICK (tiny budgets: checks the pipeline, the numbers mean nothing)" if cfg.quick else "full"
    lines = ["# RL-GPT on Crafter: evaluation report", "",
             f"Produced by `{meta['command']}` on {meta['date']}.", "",
             f"- mode: {mode}",
             "- model: the offline rule-based expert (no language model)",
             f"- budgets (primitive env steps, the same for every method compared): tables 1 and 5: "
             f"{cfg.budget:,}; tables 2, 3, 4: {cfg.task_budget:,} per task",
             f"- held-out seeds: {seeds[0]}..{seeds[-1]} ({cfg.episodes} episodes per rate, one per seed)",
             f"- training seed: {cfg.seed}; PPO inside RL-GPT: {cfg.train_steps:,} steps per training; "
             f"code tests: {cfg.test_episodes} training seeds per measurement; PPO vector mode: {cfg.vector_mode}",
             f"- wall time: {meta['wall_s_total']:.0f} s measured over all cells "
             f"({meta['wall_s_session']:.0f} s in the last session; {meta['cached']} cells reused from the cache)",
             f"- machine: {meta['machine']}",
             f"- what the player sees: {SYMBOLIC_VIEW_NOTE}", "",
             "Every rate is given as `value [95% CI]` (Wilson score interval). Rows and columns marked "
             "*published* are figures from the papers (MineDojo or the Crafter benchmark), not our runs.", ""]
    for t in tables:
        lines += [f"## {t.title}", "", f"Reproduces: {t.paper}.", ""]
        lines += markdown_table(t)
        lines.append("")
        lines += [f"- {n}" for n in t.notes]
        if t.plot:
            lines += ["", f"![{t.title}]({t.plot})"]
        lines += ["", f"CSV: [`{t.key}.csv`]({t.key}.csv)", ""]
    return "\n".join(lines) + "\n"


def print_tables(tables: Sequence[Table], console: Console | None = None) -> None:
    console = console or Console(highlight=False, width=160)
    for t in tables:
        rt = RichTable(title=t.title, title_justify="left")
        for c in t.columns:
            rt.add_column(c.header, justify="right" if c.kind in ("int", "float", "rate", "pct", "score") else "left",
                          overflow="fold")
        for r in t.rows:
            rt.add_row(*[fmt(r, c) for c in t.columns])
        console.print(rt)


def write_results(tables: Sequence[Table], cfg: EvalConfig, meta: dict[str, Any]) -> Path:
    from graph.evaluation.plots import plot_table

    out = cfg.out
    out.mkdir(parents=True, exist_ok=True)
    for t in tables:
        write_csv(t, out)
        plot_table(t, out)
    (out / "report.md").write_text(render_markdown(tables, cfg, meta), encoding="utf-8")
    (out / "report.json").write_text(json.dumps({"meta": meta, "tables": [
        {"key": t.key, "title": t.title, "paper": t.paper, "notes": t.notes, "rows": t.rows} for t in tables]},
        indent=1, default=str), encoding="utf-8")
    return out / "report.md"


def machine() -> str:
    import os

    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores, Python {platform.python_version()}"


def now() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
