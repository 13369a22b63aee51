"""Report node: what the run reached, in one dict (state['report']).

The node keeps it in the state; the application shell writes the files. It shows both loops at work (every measurement with its verdict, every code<->rl move and the
numbers behind it), the environment steps spent against the budget, the held-out evaluation
(its steps counted apart: evaluation, not training), and model calls and tokens per role
(the expert makes calls but uses no tokens).
"""

from __future__ import annotations

import time
from typing import Any

from nodes.attempts import rate_text
from nodes.limits import knob


def build_report(state: dict, settings: Any, model: Any) -> dict:
    usage = model.usage.to_dict() if getattr(model, "usage", None) is not None else {}
    events = state.get("events", [])
    started = float(state.get("started_at") or 0.0)
    return {
        "task": state.get("task"), "task_text": state.get("task_text"),
        "model": getattr(model, "name", "?"),
        "finished": state.get("stop_reason") is None,
        "stop_reason": state.get("stop_reason"),
        "plan": [s["name"] for s in state.get("plan", [])], "plan_reason": state.get("plan_reason"),
        "subtasks_solved": sum(1 for s in (state.get("skills") or {}).values() if s.get("passing")),
        "loops": {"outer_iterations": state.get("total_outer_iters", 0),
                  "inner_iterations": state.get("total_inner_iters", 0),
                  "attempts": len(state.get("results", [])), "replans": state.get("replans", 0)},
        "budget": {"training_and_code_test_steps": state.get("env_steps_spent", 0),
                   "budget_steps": state.get("budget_steps", 0),
                   "evaluation_steps": state.get("eval_steps", 0),
                   "note": "evaluation steps run on held-out seeds after the loops and are not training budget"},
        "measurements": [e for e in events if e.get("type") == "measure"],
        "moves": [e for e in events if e.get("type") == "move"],
        "skills": {k: {x: v.get(x) for x in ("kind", "success_rate", "episodes", "passing", "reused", "entry",
                                             "policy_path")}
                   for k, v in (state.get("skills") or {}).items()},
        "evaluation": state.get("evaluation"),
        "usage": usage,
        "wall_time_s": round(time.time() - started, 1) if started else None,
        "run_id": knob(settings, "run_id", None),
    }


def format_report(report: dict) -> str:
    """A plain-text summary for the terminal."""
    lines = [f"RL-GPT run on '{report['task']}' with the {report['model']} model"]
    lines.append(f"plan: {' -> '.join(report['plan']) or '(none)'}")
    lines.append("stopped early: " + report["stop_reason"] if report["stop_reason"] else "loops finished")
    loops = report["loops"]
    lines.append(f"loops: {loops['attempts']} attempts, {loops['inner_iterations']} inner and "
                 f"{loops['outer_iterations']} outer iterations, {loops['replans']} re-plans")
    for m in report["measurements"]:
        lines.append(f"  [{m['subtask']}] {m['sub_action']} as {m['kind']} (outer {m['outer_iter']}, inner "
                     f"{m['inner_iter']}): success {rate_text(m)} over "
                     f"{m.get('episodes') or 'training'} episodes, {m.get('steps', 0)} steps -> {m['verdict']}")
    for m in report["moves"]:
        lines.append(f"  MOVED {m['sub_action']} {m['from']} -> {m['to']} at {m['success_rate']:.0%}: {m['feedback']}")
    for name, s in report["skills"].items():
        tag = "reused" if s.get("reused") else ("passing" if s.get("passing") else "below threshold")
        lines.append(f"skill {name}: {s['kind']}, {s['success_rate']:.0%} ({tag})")
    b = report["budget"]
    lines.append(f"environment steps: {b['training_and_code_test_steps']} of {b['budget_steps']} budget "
                 f"(training + code tests); evaluation: {b['evaluation_steps']} steps, not budget")
    ev = report.get("evaluation") or {}
    if ev.get("ran"):
        lo, hi = ev["ci95"]
        lines.append(f"held-out success: {ev['success_rate']:.0%} ({ev['successes']}/{ev['episodes']} episodes, "
                     f"95% CI {lo:.0%}-{hi:.0%}), mean {ev['mean_steps']:.0f} steps")
    else:
        lines.append(f"held-out evaluation not run: {ev.get('reason', 'no evaluation')}")
    for role, u in sorted(report["usage"].items()):
        lines.append(f"model usage {role}: {u['calls']} calls, {u['prompt_tokens'] + u['completion_tokens']} tokens")
    return "\n".join(lines)


def make_report(settings: Any, model: Any):
    def report(state: dict) -> dict:
        # the CLI (graph.run) writes report.json/report.md from the final state, this dict included
        data = build_report(state, settings, model)
        return {"report": data, "usage": data["usage"]}

    return report
