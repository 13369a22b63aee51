"""The end-of-run report: built from the final graph state, printed as tables, saved as md + json.

It answers: which subtasks, code or RL for each sub-action (and every move between the two),
the success rates measured, the environment steps and wall time spent, the model calls and
tokens per agent node (zero tokens for the rule-based expert), where the skills went, and why
the run stopped.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping

from rich.console import Console
from rich.table import Table

from graph.settings import RunSettings

AGENT_ROLES = ("planner", "slow", "fast", "critic")  # always listed, so a zero is visible, not missing


def usage_totals(usage: Mapping[str, Any]) -> dict[str, int]:
    """Sum calls and tokens over the roles of a `UsageCounter.to_dict()`-shaped mapping."""
    total = {"calls": 0, "retries": 0, "prompt_tokens": 0, "completion_tokens": 0}
    for counts in (usage or {}).values():
        if isinstance(counts, Mapping):
            for k in total:
                total[k] += int(counts.get(k, 0) or 0)
    return total


def _usage_rows(usage: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    rows: dict[str, dict[str, int]] = {}
    for role in list(AGENT_ROLES) + sorted(r for r in (usage or {}) if r not in AGENT_ROLES):
        c = (usage or {}).get(role) or {}
        p, q = int(c.get("prompt_tokens", 0) or 0), int(c.get("completion_tokens", 0) or 0)
        rows[role] = {"calls": int(c.get("calls", 0) or 0), "retries": int(c.get("retries", 0) or 0),
                      "prompt_tokens": p, "completion_tokens": q, "total_tokens": p + q}
    return rows


def _rate(entry: Mapping[str, Any]) -> float | None:
    for key in ("success_rate", "rate"):
        v = entry.get(key)
        if isinstance(v, (int, float)):
            return float(v)
    return None


def _sub_action_history(state: Mapping[str, Any], subtask: str) -> list[dict[str, Any]]:
    """Per sub-action of `subtask`: the kinds it was tried as, in order, attempts, best rate, steps."""
    by_name: dict[str, dict[str, Any]] = {}

    def entry(name: str) -> dict[str, Any]:
        return by_name.setdefault(name, {"name": name, "kind": None, "history": [], "attempts": 0,
                                         "best_success_rate": None, "env_steps": 0, "moves": []})

    for r in state.get("results") or []:
        if not isinstance(r, Mapping) or r.get("subtask") != subtask or not r.get("sub_action"):
            continue
        e = entry(str(r["sub_action"]))
        kind = r.get("kind")
        if kind and (not e["history"] or e["history"][-1] != kind):
            e["history"].append(kind)
        e["kind"] = kind or e["kind"]
        e["attempts"] += 1
        e["env_steps"] += int(r.get("steps", r.get("env_steps", 0)) or 0)
        rate = _rate(r)
        if rate is not None and (e["best_success_rate"] is None or rate > e["best_success_rate"]):
            e["best_success_rate"] = rate
    for ev in state.get("events") or []:
        if not isinstance(ev, Mapping) or ev.get("subtask") != subtask or ev.get("type") != "move":
            continue
        name = ev.get("sub_action")
        if name:
            entry(str(name))["moves"].append({"from": ev.get("from"), "to": ev.get("to"),
                                              "reason": ev.get("feedback") or ev.get("reason") or ""})
    decomposition = state.get("decomposition") or {}
    if decomposition.get("subtask") == subtask:  # sub-actions planned but never measured still show up
        for sa in decomposition.get("sub_actions") or []:
            e = entry(sa["name"])
            e["kind"] = e["kind"] or sa.get("kind")
            if not e["history"] and sa.get("kind"):
                e["history"].append(sa["kind"])
    return list(by_name.values())


def _subtask_status(state: Mapping[str, Any], index: int, name: str) -> str:
    skill = (state.get("skills") or {}).get(name)
    if skill:
        if skill.get("reused"):
            return "reused skill"
        return "passed" if skill.get("passing") else "kept (below threshold)"
    if any(isinstance(ev, Mapping) and ev.get("type") == "subtask_failed" and ev.get("subtask") == name
           for ev in state.get("events") or []):
        return "failed"
    current = int(state.get("subtask_index") or 0)
    if index < current:
        return "skipped"
    if index == current and state.get("stop_reason") is None and state.get("report") is None:
        return "in progress"
    return "not reached"


def _skill_file(library: Path, record: Mapping[str, Any]) -> str | None:
    """Where the library keeps this skill (None when it was not saved: below the threshold)."""
    from graph.skills import SkillLibrary, SkillLibraryError

    name = record.get("name")
    if not name:
        return None
    try:
        lib = SkillLibrary(library)
        skill = lib.get(name)
    except (SkillLibraryError, ValueError):
        return None
    if skill is None:
        return None
    if skill.kind == "code":
        return str(library / "code" / f"{skill.name}.py")
    path = lib.policy_path(skill)
    return str(path) if path else None


def build_report(settings: RunSettings, state: Mapping[str, Any], wall_s: float, model_name: str = "",
                 usage: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Plain data describing the run, from its final (or latest checkpointed) state.

    `usage` is the per-role model usage summed over every process of the run (a resumed run's
    model object only counts its own calls); without it the state's `usage` is used.
    """
    state = dict(state or {})
    skills_map: dict[str, Any] = state.get("skills") or {}
    subtasks = []
    for i, sub in enumerate(state.get("plan") or []):
        name = sub.get("name", f"subtask_{i}")
        skill = skills_map.get(name) or {}
        actions = _sub_action_history(state, name)
        subtasks.append({
            "name": name, "goal": sub.get("goal", ""), "status": _subtask_status(state, i, name),
            "success_rate": _rate(skill) if skill else max(
                (a["best_success_rate"] for a in actions if a["best_success_rate"] is not None), default=None),
            "env_steps": sum(a["env_steps"] for a in actions),
            "skill": skill.get("name") if skill else None,
            "skill_kind": skill.get("kind") if skill else None,
            "sub_actions": actions,
        })
    if usage is None:
        usage = state.get("usage") or {}
    library = settings.skills_path
    skill_files = [{"subtask": sub, "name": rec.get("name"), "kind": rec.get("kind"), "success_rate": _rate(rec),
                    "passing": bool(rec.get("passing")), "reused": bool(rec.get("reused")),
                    "path": _skill_file(library, rec)}
                   for sub, rec in skills_map.items() if isinstance(rec, Mapping)]
    finished = state.get("report") is not None
    return {
        "run_id": settings.run_id, "task": state.get("task", settings.task),
        "task_text": state.get("task_text", settings.task), "env": settings.env,
        "model": model_name or settings.model_label,
        "status": "finished" if finished else "stopped",
        "stop_reason": state.get("stop_reason"),
        "subtasks": subtasks,
        "evaluation": state.get("evaluation"),
        "env_steps": {"spent": int(state.get("env_steps_spent") or 0),
                      "budget": int(state.get("budget_steps") or settings.budget_steps),
                      "evaluation": int(state.get("eval_steps") or 0)},
        "wall_s": round(float(wall_s), 2),
        "iterations": {"outer": int(state.get("total_outer_iters") or 0),
                       "inner": int(state.get("total_inner_iters") or 0),
                       "replans": int(state.get("replans") or 0)},
        "usage": _usage_rows(usage), "usage_total": usage_totals(usage),
        "skills": {"library": str(library), "skills": skill_files},
        "moves": [ev for ev in state.get("events") or [] if isinstance(ev, Mapping) and ev.get("type") == "move"],
        "settings": json.loads(settings.model_dump_json()),
        "graph_report": state.get("report"),  # what the graph's own report node recorded
    }


# ---- rendering -------------------------------------------------------------------------------
def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def _evaluation_text(ev: Mapping[str, Any]) -> str:
    if not ev:
        return "not run"
    if ev.get("ran") is False:
        return f"not run ({ev.get('reason', 'no reason given')})"
    text = f"{_pct(_rate(ev))}"
    if "successes" in ev and "episodes" in ev:
        text += f" ({ev['successes']}/{ev['episodes']} episodes"
        ci = ev.get("ci95")
        text += f", 95% CI {_pct(ci[0])}-{_pct(ci[1])})" if isinstance(ci, (list, tuple)) and len(ci) == 2 else ")"
    elif "episodes" in ev:
        text += f" over {ev['episodes']} episodes"
    return text


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
    totals.add_row("held-out success", _evaluation_text(ev))
    totals.add_row("env steps", f"{steps['spent']:,} of {steps['budget']:,} budget"
                                + (f" (+{steps['evaluation']:,} evaluation)" if steps["evaluation"] else ""))
    totals.add_row("wall time", f"{report['wall_s']:.1f} s")
    it = report["iterations"]
    totals.add_row("iterations", f"outer {it['outer']}, inner {it['inner']}, replans {it['replans']}")
    totals.add_row("stopped because", report["stop_reason"] or "all subtasks done")
    totals.add_row("skills", report["skills"]["library"])
    for k in report["skills"]["skills"]:
        totals.add_row("", f"{k['subtask']}: {k['kind']} {_pct(k['success_rate'])}"
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


def render_markdown(report: Mapping[str, Any]) -> str:
    lines = [f"# RL-GPT run `{report['run_id']}`", "",
             f"- task: {report['task_text']} (`{report['task']}`), env {report['env']}",
             f"- model: {report['model']}", f"- status: {report['status']}; "
             f"stopped because: {report['stop_reason'] or 'all subtasks done'}",
             f"- env steps: {report['env_steps']['spent']:,} of {report['env_steps']['budget']:,}"
             f" (+{report['env_steps']['evaluation']:,} evaluation)",
             f"- wall time: {report['wall_s']:.1f} s", ""]
    lines += [f"Held-out evaluation: {_evaluation_text(report.get('evaluation') or {})}.", ""]
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
        lines.append(f"- {k['subtask']}: `{k['name']}` ({k['kind']}, {_pct(k['success_rate'])}"
                     f"{', reused' if k['reused'] else ''}) "
                     + (f"`{k['path']}`" if k["path"] else "(not saved: below the threshold)"))
    return "\n".join(lines) + "\n"


def _atomic_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def write_report(report: Mapping[str, Any], run_dir: Path) -> tuple[Path, Path]:
    """Write report.md and report.json into the run folder; returns their paths."""
    run_dir.mkdir(parents=True, exist_ok=True)
    md, js = run_dir / "report.md", run_dir / "report.json"
    _atomic_text(md, render_markdown(report))
    _atomic_text(js, json.dumps(report, indent=2, default=str))
    return md, js


def print_summary(report: Mapping[str, Any], md_path: Path, json_path: Path,
                  console: Console | None = None) -> None:
    console = console or Console(highlight=False, soft_wrap=False, width=max(Console().width, 110))
    for table in summary_tables(report):
        console.print(table)
    console.print(f"report: {md_path} and {json_path}")
    console.print(f"skills: {report['skills']['library']}")
