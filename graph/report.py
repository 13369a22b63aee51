"""The end-of-run report on screen and on disk: tables printed, report.md + report.json written.

The report's data comes from `nodes.report.build_report` (the same builder the graph's report
node uses); this module only renders it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from graph.pictures import RUN_GRAPH_STEM, TIMELINE_FILE
from nodes.report import rate_of

# how each kind of skill rate was measured (nodes.skills.library.RateSource), for the skill lines
RATE_SOURCE_TEXT = {"code_tests": "in code tests", "training": "in training",
                    "chain_training": "in training from where the chain reached it",
                    "validation": "on validation seeds",
                    "none": "(no measurement)"}
# The pictures graph.run leaves in the run folder (graph.pictures), in the order the report shows them;
# then any GIF in VIDEO_DIR (graph.video's folder), captioned from its JSON sidecar when it has one.
PICTURES = ((f"{RUN_GRAPH_STEM}.png", "The run drawn over the graph: each node's visits, time and env steps, "
                                      "each edge's traversals (from the run's checkpoints).",
             f"{RUN_GRAPH_STEM}.mmd"),
            (TIMELINE_FILE, "The subtasks on a timeline: each attempt (code tests or a training) with its success "
                            "and env steps, the moves between code and RL, the attempt that became the skill.", None))
VIDEO_DIR = "videos"


# ---- rendering -------------------------------------------------------------------------------
def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def _evaluation_text(ev: Mapping[str, Any]) -> str:
    if not ev:
        return "not run"
    if ev.get("ran") is False:
        return f"not run ({ev.get('reason', 'no reason given')})"
    if ev.get("crafter_score") is not None:  # a score task: no single success, the benchmark's score
        low, high = ev.get("crafter_score_ci95") or (None, None)
        rates = ev.get("achievement_rates") or {}
        return (f"Crafter score {ev['crafter_score']:.1f}"
                + (f" (95% CI {low:.1f}-{high:.1f})" if low is not None else "")
                + f" over {ev.get('episodes', 0)} episodes; {sum(v > 0 for v in rates.values())} of {len(rates)} "
                "achievements unlocked at least once")
    text = f"{_pct(rate_of(ev))}"
    if "successes" in ev and "episodes" in ev:
        text += f" ({ev['successes']}/{ev['episodes']} episodes"
        ci = ev.get("ci95")
        text += f", 95% CI {_pct(ci[0])}-{_pct(ci[1])})" if isinstance(ci, (list, tuple)) and len(ci) == 2 else ")"
    elif "episodes" in ev:
        text += f" over {ev['episodes']} episodes"
    return text


ENDING_ROWS = 12  # rows of the held-out endings table; report.json holds every episode's


def _endings_markdown(ended: Sequence[Mapping[str, Any]], episodes: int, score: bool = False) -> list[str]:
    """Where the held-out episodes that missed the task ended (`score`: that ended before the chain's last skill,
    which are the ones a score plan loses achievements in): the skill of the chain, how (died and of what, out of
    steps, stopped, no skill), and the functions the code was in at the end, most often."""
    failed = sum(int(r["episodes"]) for r in ended)
    which = ("that ended before the chain's last skill had played (the others got through the chain alive)"
             if score else "that missed the task")
    lines = [f"Where the {failed} of {episodes} held-out episodes {which} ended (the chain's skill "
             "playing then; report.json `evaluation.endings` has each seed's):", "",
             "| skill | how | episodes | the code was in (most often) |", "|---|---|---:|---|"]
    for r in ended[:ENDING_ROWS]:
        # one table cell: the sandbox cleaned the text already; a newline, pipe or backtick would break the row
        where = " ".join(str(r.get("often_in") or "").split()).replace("|", "/").replace("`", "'")
        lines.append(f"| {r['subtask']} | {r['how']} | {r['episodes']} | {f'`{where}`' if where else '-'} |")
    if len(ended) > ENDING_ROWS:
        rest = sum(int(r["episodes"]) for r in ended[ENDING_ROWS:])
        lines.append(f"| {len(ended) - ENDING_ROWS} more | | {rest} | |")
    return [*lines, ""]


def _measured(skill: Mapping[str, Any]) -> str:
    """' in code tests' / ' in training' ...: what a skill's rate is (never the held-out chain's)."""
    text = RATE_SOURCE_TEXT.get(skill.get("rate_source") or "")
    return f" {text}" if text else ""


def _kinds(action: Mapping[str, Any]) -> str:
    hist = action.get("history") or ([action["kind"]] if action.get("kind") else [])
    return " -> ".join(hist) if hist else "-"


def summary_tables(report: Mapping[str, Any]) -> list[Table]:
    subs = Table(title=f"RL-GPT run {report['run_id']}: {report['task_text']} ({report['task']}), "
                       f"model {report['model']}", title_justify="left")
    for col, just in (("subtask", "left"), ("status", "left"), ("sub-action", "left"), ("code / RL", "left"),
                      ("attempts", "right"), ("success", "right"), ("env steps", "right")):
        subs.add_column(col, justify=just)  # type: ignore[arg-type]
    for s in report["subtasks"]:
        actions = s["sub_actions"] or [{"name": "-", "history": [], "attempts": 0, "best_success_rate": None,
                                        "env_steps": 0}]
        for j, a in enumerate(actions):
            subs.add_row(s["name"] if j == 0 else "", s["status"] if j == 0 else "", a["name"], _kinds(a),
                         str(a["attempts"]), _pct(a["best_success_rate"]), f"{a['env_steps']:,}")
        subs.add_section()
    ev = report.get("evaluation") or {}
    steps = report["env_steps"]
    totals = Table(show_header=False, title="Totals", title_justify="left")
    totals.add_column(style="bold")
    totals.add_column()
    totals.add_row("held-out score" if ev.get("crafter_score") is not None else "held-out success",
                   _evaluation_text(ev))
    if ev.get("achievement_rates"):
        totals.add_row("", ", ".join(f"{a} {v:.0f}%" for a, v in ev["achievement_rates"].items()))
    totals.add_row("env steps", f"{steps['spent']:,} of {steps['budget']:,} budget"
                                + (f" (+{steps['evaluation']:,} evaluation)" if steps["evaluation"] else ""))
    totals.add_row("wall time", f"{report['wall_s']:.1f} s")
    it = report["iterations"]
    totals.add_row("iterations", f"outer {it['outer']}, inner {it['inner']}, replans {it['replans']}")
    totals.add_row("stopped because", report["stop_reason"] or "all subtasks done")
    totals.add_row("skills", report["skills"]["library"])
    for k in report["skills"]["skills"]:
        totals.add_row("", f"{k['subtask']}: {k['kind']} {_pct(k['success_rate'])}{_measured(k)}"
                           f"{' (reused)' if k['reused'] else ''} {k['path'] or '(not saved: below threshold)'}")
    usage = Table(title="Model calls and tokens per node", title_justify="left")
    for col in ("node", "calls", "retries", "prompt tok", "completion tok", "total tok"):
        usage.add_column(col, justify="left" if col == "node" else "right")
    for role, u in report["usage"].items():
        usage.add_row(role, str(u["calls"]), str(u["retries"]), str(u["prompt_tokens"]),
                      str(u["completion_tokens"]), str(u["total_tokens"]))
    t = report["usage_total"]
    usage.add_section()
    usage.add_row("TOTAL", str(t["calls"]), str(t["retries"]), str(t["prompt_tokens"]),
                  str(t["completion_tokens"]), str(t["prompt_tokens"] + t["completion_tokens"]))
    return [subs, totals, usage]


def _video_caption(gif: Path) -> str:
    """What a video shows, from its sidecar (same name, .json) when there is one."""
    try:
        info = json.loads(gif.with_suffix(".json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        info = None
    if not isinstance(info, Mapping):
        return gif.stem.replace("_", " ")
    text = str(info.get("title") or gif.stem.replace("_", " "))
    details = [str(info[k]) for k in ("outcome",) if info.get(k)]
    if isinstance(info.get("episode_steps"), int):
        details.append(f"{info['episode_steps']:,} steps")
    if isinstance(info.get("seed"), int):
        details.append(f"seed {info['seed']}")
    return text + (f" ({', '.join(details)})" if details else "")


def run_pictures(run_dir: Path) -> list[tuple[str, str, str | None]]:
    """(path relative to the run folder, caption, a related text file or None) of each picture and
    video present in `run_dir`."""
    found: list[tuple[str, str, str | None]] = []
    for name, caption, source in PICTURES:
        if (run_dir / name).is_file():
            found.append((name, caption, source if source and (run_dir / source).is_file() else None))
    for gif in sorted((run_dir / VIDEO_DIR).glob("*.gif")):
        found.append((f"{VIDEO_DIR}/{gif.name}", _video_caption(gif), None))
    return found


def _pictures_markdown(pictures: Sequence[tuple[str, str, str | None]]) -> list[str]:
    lines = ["", "## Pictures", ""]
    for path, caption, source in pictures:
        lines += [f"![{caption}]({path})", "", caption + (f" Mermaid text: [{source}]({source})." if source else ""),
                  ""]
    return lines[:-1]


def render_markdown(report: Mapping[str, Any], pictures: Sequence[tuple[str, str, str | None]] = ()) -> str:
    """report.md; `pictures` (`run_pictures`): the pictures and videos in the run folder, linked relatively."""
    lines = [f"# RL-GPT run `{report['run_id']}`", "",
             f"- task: {report['task_text']} (`{report['task']}`), env {report['env']}",
             f"- model: {report['model']}", f"- status: {report['status']}; "
             f"stopped because: {report['stop_reason'] or 'all subtasks done'}",
             f"- env steps: {report['env_steps']['spent']:,} of {report['env_steps']['budget']:,}"
             f" (+{report['env_steps']['evaluation']:,} evaluation)",
             f"- wall time: {report['wall_s']:.1f} s", ""]
    ev = report.get("evaluation") or {}
    lines += [f"Held-out evaluation: {_evaluation_text(ev)}.", ""]
    if ev.get("ended"):
        lines += _endings_markdown(ev["ended"], int(ev.get("episodes") or 0), score=ev.get("crafter_score") is not None)
    if ev.get("achievement_rates"):
        lines += ["| achievement | unlocked in |", "|---|---:|"]
        lines += [f"| {a} | {v:.0f}% |" for a, v in ev["achievement_rates"].items()] + [""]
    lines += ["## Subtasks", "", "| subtask | status | sub-action | code / RL | attempts | success | env steps |",
              "|---|---|---|---|---:|---:|---:|"]
    for s in report["subtasks"]:
        for j, a in enumerate(s["sub_actions"] or [{"name": "-", "history": [], "attempts": 0,
                                                    "best_success_rate": None, "env_steps": 0}]):
            lines.append(f"| {s['name'] if j == 0 else ''} | {s['status'] if j == 0 else ''} | {a['name']} | "
                         f"{_kinds(a)} | {a['attempts']} | {_pct(a['best_success_rate'])} | {a['env_steps']:,} |")
    if report["moves"]:
        lines += ["", "## Moves between code and RL", ""]
        for m in report["moves"]:
            why = m.get("feedback") or m.get("reason") or ""
            at = f" at {_pct(m['success_rate'])}" if isinstance(m.get("success_rate"), (int, float)) else ""
            lines.append(f"- {m.get('subtask')}/{m.get('sub_action')}: {m.get('from')} -> {m.get('to')}{at}"
                         + (f" - {why}" if why else ""))
    lines += ["", "## Model calls and tokens per node", "",
              "| node | calls | retries | prompt tok | completion tok | total tok |", "|---|---:|---:|---:|---:|---:|"]
    for role, u in report["usage"].items():
        lines.append(f"| {role} | {u['calls']} | {u['retries']} | {u['prompt_tokens']} | "
                     f"{u['completion_tokens']} | {u['total_tokens']} |")
    lines += ["", "## Skills", "", f"Library: `{report['skills']['library']}`", ""]
    for k in report["skills"]["skills"]:
        lines.append(f"- {k['subtask']}: `{k['name']}` ({k['kind']}, {_pct(k['success_rate'])}{_measured(k)}"
                     f"{', ' + k['measured_in'] if k.get('measured_in') else ''}{', reused' if k['reused'] else ''}) "
                     + (f"`{k['path']}`" if k["path"] else "(not saved: below the threshold)"))
    if pictures:
        lines += _pictures_markdown(pictures)
    return "\n".join(lines) + "\n"


def _atomic_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def write_report(report: Mapping[str, Any], run_dir: Path) -> tuple[Path, Path]:
    """Write report.md (linking the pictures and videos already in the run folder) and report.json into
    the run folder; returns their paths."""
    run_dir.mkdir(parents=True, exist_ok=True)
    md, js = run_dir / "report.md", run_dir / "report.json"
    _atomic_text(md, render_markdown(report, run_pictures(run_dir)))
    _atomic_text(js, json.dumps(report, indent=2, default=str))
    return md, js


def print_summary(report: Mapping[str, Any], md_path: Path, json_path: Path,
                  console: Console | None = None) -> None:
    console = console or Console(highlight=False, soft_wrap=False, width=max(Console().width, 110))
    for table in summary_tables(report):
        console.print(table)
    console.print(f"report: {md_path} and {json_path}")
    console.print(f"skills: {report['skills']['library']}")
