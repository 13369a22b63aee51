"""The compared methods, each spending a budget of primitive environment steps on one task.

- RL-GPT: the LangGraph (planner, slow, fast, critic) with the offline rule-based expert; every
  code test and PPO step counts. Ablation variants change the loop structure (see VARIANTS).
- pure RL: PPO on the 17 primitive actions for the whole budget (optionally with coded actions
  appended to the action head, the ablation of the paper's key idea).
- pure code: the expert's coded actions chained by one program, no learning; its steps are the
  code tests on training seeds.

Each returns a plain dict (a table cell): the held-out success rate with its 95% interval, the
steps spent, the wall time, and what was produced. Nothing here reads an evaluation seed before
the final held-out measurement.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envs.seeds import train_seeds
from envs.tasks import TASKS, get_task
from graph.evaluation.heldout import code_skill, evaluate_skills, policy_skill

Log = Callable[[str], None]

# Loop structure of each RL-GPT variant (the paper's framework ablation).
VARIANTS: dict[str, str] = {
    "full": "slow + fast + critic: both loops (the fast agent repairs its code from the test reports and the "
            "critic judges; the slow agent moves code <-> RL)",
    "no_critic": "slow + fast: the slow agent's first decomposition is kept with whatever the fast agent "
                 "settles on (its repairs from the test reports still run); nothing judges it, so the outer "
                 "loop never iterates",
    "one_agent": "one agent: no separate slow agent revising the decomposition (no outer loop), so code "
                 "is never moved to RL; the agent only fixes its code from its own test results",
}


class NoCriticExpert:
    """The expert with its critic replaced by acceptance of the first measured attempt.

    The critic node still records the measurement (the steps stay counted); only the verdict,
    and so every loop back, is gone. Wraps the model because the graph has no critic switch."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.name = f"{getattr(inner, 'name', 'model')} (no critic)"
        self.usage = inner.usage

    def structured(self, role, messages, schema, context=None):
        if role != "critic":
            return self.inner.structured(role, messages, schema, context)
        result = (context or {}).get("result", {})
        sub = (context or {}).get("sub_action", {})
        self.usage.record(role)
        return schema(sub_action=sub.get("name", "?"), success_rate=float(result.get("success_rate", 0.0)),
                      verdict="pass", feedback="no critic in this variant: the first attempt is kept")

    def tool_call(self, role, messages, tools, context=None):
        return self.inner.tool_call(role, messages, tools, context)


def _model_for(variant: str):
    from nodes.models.expert import ExpertModel

    if variant not in VARIANTS:
        raise ValueError(f"unknown RL-GPT variant '{variant}'; variants: {', '.join(VARIANTS)}")
    expert = ExpertModel()
    return NoCriticExpert(expert) if variant == "no_critic" else expert


def _run_id(key: str) -> str:
    return key.replace("=", "_")[:100]


def run_rlgpt(task: str, budget: int, episodes: int, work_dir: Path, key: str, *, seed: int = 0,
              variant: str = "full", train_steps: int = 20_000, test_episodes: int = 8,
              max_wall_s: float = 7 * 24 * 3600, vector_mode: str = "sync", eval_max_steps: int | None = None,
              log: Log = print) -> dict[str, Any]:
    """One RL-GPT run through the graph, checkpointed per node so a killed cell resumes mid-run.
    `eval_max_steps`: the held-out episodes' length (default: the task's own)."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    from graph.builder import build_graph, run_config, run_context, start_state
    from nodes.limits import train_steps_within
    from nodes.settings import RunSettings

    task = get_task(task).name
    start = time.time()
    # without a critic nothing judges an attempt: the graph's own refusal of a 'pass' below the skill
    # threshold (nodes.critic) would be a critic, so that variant keeps whatever it measured first
    no_critic = {"skill_threshold": 0.0} if variant == "no_critic" else {}
    settings = RunSettings(
        task=task, budget_steps=budget, train_steps=train_steps_within(train_steps, budget),
        test_episodes=test_episodes, eval_episodes=episodes, seed=seed, max_wall_s=max_wall_s,
        max_model_calls=1_000_000, max_outer_iters=1 if variant == "one_agent" else 3, vector_mode=vector_mode,
        eval_max_steps=eval_max_steps,
        out_dir=work_dir / "rlgpt", skills_dir=work_dir / "rlgpt" / key / "skills", run_id=_run_id(key),
        **no_critic)
    model = _model_for(variant)
    work_dir.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(work_dir / "checkpoints.sqlite"), check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        graph = build_graph(checkpointer=saver)
        config = run_config(settings)
        snapshot = graph.get_state(config)
        if snapshot.values and not snapshot.next:
            values = snapshot.values  # finished before the cell's result was written
        else:
            if snapshot.values:
                log(f"    resuming RL-GPT run {settings.run_id} at {', '.join(snapshot.next)}")
            inputs = None if snapshot.values else start_state(settings)
            # the attempt subgraph's events reach this level when an attempt ends
            for update in graph.stream(inputs, config, context=run_context(settings, model), stream_mode="updates",
                                       durability="sync"):
                for change in update.values():
                    for event in (change or {}).get("events", []) if isinstance(change, dict) else []:
                        if event.get("type") in ("measure", "move", "stop"):
                            log("    " + _describe_event(event))
            values = graph.get_state(config).values
    finally:
        conn.close()
    return _rlgpt_cell(task, budget, episodes, seed, variant, values, time.time() - start)


def _describe_event(e: dict) -> str:
    from nodes.attempt.results import rate_text

    if e["type"] == "measure":
        return (f"[{e['subtask']}] {e['sub_action']} as {e['kind']} (outer {e['outer_iter']}, inner "
                f"{e['inner_iter']}): {rate_text(e)}, {e.get('steps', 0)} steps -> {e['verdict']}")
    if e["type"] == "move":
        return f"[{e['subtask']}] moved {e['sub_action']} {e['from']} -> {e['to']}"
    return f"stopped: {e.get('reason')}"


def _rlgpt_cell(task: str, budget: int, episodes: int, seed: int, variant: str, values: dict,
                wall_s: float) -> dict[str, Any]:
    plan = [s["name"] for s in values.get("plan", [])]
    skills = values.get("skills") or {}
    evaluation = values.get("evaluation") or {}
    score = TASKS[task].is_score
    if score and not evaluation.get("ran"):
        raise RuntimeError(f"the RL-GPT run on {task} made no skill to play: {evaluation.get('reason', '')}")
    if evaluation.get("ran"):
        held = {"successes": int(evaluation["successes"]), "eval_steps": int(evaluation["steps"]),
                "reached": evaluation.get("reached", {}), "errors": evaluation.get("errors", []),
                "replays": evaluation.get("replays", {}), "outcomes": evaluation.get("outcomes")}
        note = ""
    else:
        # the chain is incomplete: play the skills it has, in plan order, up to the first gap
        prefix = []
        for name in plan:
            if name not in skills:
                break
            prefix.append((name, skills[name]))
        held = evaluate_skills(task, prefix, episodes, seed)
        note = (f"the run ended without a skill for every subtask ({evaluation.get('reason', '')}); "
                f"the {len(prefix)} skill(s) it made were played")
    from graph.evaluation.heldout import rate_fields

    attempts = [{k: r.get(k) for k in ("subtask", "sub_action", "kind", "success_rate", "episodes", "steps",
                                       "outer_iter", "inner_iter", "sources", "entry", "policy_path")}
                for r in values.get("results", [])]
    return {"method": "rlgpt", "variant": variant, "task": task, "budget_steps": budget,
            "env_steps": int(values.get("env_steps_spent", 0)), **rate_fields(held["successes"], episodes),
            "eval_steps": held["eval_steps"], "seed": seed, "wall_s": round(wall_s, 1),
            "stop_reason": values.get("stop_reason"), "plan": plan,
            "skills": {k: {x: v.get(x) for x in ("kind", "success_rate", "passing", "sources", "entry", "policy_path")}
                       for k, v in skills.items()},
            "reached": held.get("reached", {}), "attempts": attempts, "note": note,
            "replays": held.get("replays", {}), "outcomes": held.get("outcomes"),
            # a score task: what each held-out episode unlocked, as table 5 reads it
            **({"achievements": evaluation["achievements"], "mean_episode_length": evaluation["mean_steps"]}
               if score else {})}


def run_pure_rl(task: str, budget: int, episodes: int, work_dir: Path, *, seed: int = 0,
                coded_sources: list[str] | None = None, reward: str = "task",
                max_episode_steps: int | None = None, vector_mode: str = "sync", log: Log = print) -> dict[str, Any]:
    """PPO for the whole budget; with `coded_sources`, the coded actions join the action head. The default
    vector mode 'sync' gives results that do not depend on the core count (rl.ppo PPOSettings)."""
    from rl.config import RLConfig
    from rl.training import train

    task = get_task(task).name
    start = time.time()
    config = RLConfig(
        task=task, reward=reward, terminate_on_success=reward == "task", coded_actions=list(coded_sources or []),
        max_episode_steps=max_episode_steps, eval_episodes=0,
        ppo={"total_steps": budget, "seed": seed, "num_envs": 4, "num_steps": 128, "vector_mode": vector_mode,
             "torch_threads": 1, "progress": "log", "log_every": 25, "run_dir": str(work_dir / "ppo")})
    log(f"    PPO on {task} for {budget:,} steps ({len(config.coded_actions)} coded actions in the head)")
    result = train(config.ppo_settings(), config)
    cell = {"method": "pure_rl" if not coded_sources else "rl_with_code", "task": task, "budget_steps": budget,
            "env_steps": int(result.steps_used), "seed": seed, "policy_path": result.policy_path,
            "train_success_rate": result.final_train_success_rate, "train_wall_s": round(result.wall_time_s, 1),
            "coded_action_counts": result.coded_action_counts}
    if TASKS[task].achievement is not None:
        held = evaluate_skills(task, [(task, policy_skill(result.policy_path))], episodes, seed)
        cell.update({k: held[k] for k in ("successes", "episodes", "success_rate", "ci_low", "ci_high",
                                          "eval_steps", "replays", "outcomes")})
    cell["wall_s"] = round(time.time() - start, 1)
    return cell


def test_pure_code(task: str, test_episodes: int = 8, seed: int = 0, log: Log = print) -> dict[str, Any]:
    """The expert's coded chain for `task` and its code tests on training seeds (steps counted)."""
    from graph.evaluation.coded import chain_of, pure_code_program
    from tools.run_code import run_code

    task = get_task(task).name
    source = pure_code_program(task)
    tests = [run_code(source, task=task, seed=s, max_steps=TASKS[task].max_steps, action="main")
             for s in train_seeds(test_episodes, offset=1000 * seed)]
    wins = sum(r.task_success for r in tests)
    steps = sum(r.steps for r in tests)
    log(f"    code tests of the pure-code chain for {task}: {wins}/{len(tests)} on training seeds, {steps} steps")
    return {"source": source, "chain": chain_of(task), "env_steps": steps, "test_episodes": len(tests),
            "test_success_rate": wins / max(len(tests), 1),
            "test_errors": [f"seed {r.seed}: {r.error}" for r in tests if r.error][:3]}


def run_pure_code(task: str, episodes: int, *, test_episodes: int = 8, seed: int = 0,
                  log: Log = print) -> dict[str, Any]:
    """The expert's coded chain with no RL: tested on training seeds, then played on held-out seeds."""
    task = get_task(task).name
    start = time.time()
    tested = test_pure_code(task, test_episodes, seed, log)
    held = evaluate_skills(task, [(task, code_skill(tested["source"], "main"))], episodes, seed)
    return {"method": "pure_code", "task": task, "budget_steps": None,
            **{k: v for k, v in tested.items() if k != "source"},
            **{k: held[k] for k in ("successes", "episodes", "success_rate", "ci_low", "ci_high", "eval_steps",
                                    "replays", "outcomes")},
            "seed": seed, "wall_s": round(time.time() - start, 1)}
