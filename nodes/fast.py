"""Fast agent node: implements the current decomposition by calling tools (the inner loop).

It asks the model for an AIMessage whose tool_calls run the real tools (run_code_in_env for coded
sub-actions; configure_rl then train_ppo for learned ones); LangGraph's ToolNode executes them.
A fresh attempt starts a fresh conversation (the critic's feedback is in the prompt), so a small
model's context never grows with the number of attempts. The code and RL configurations it
writes are logged as versions in the state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from envs.seeds import train_seeds
from envs.tasks import TASKS
from nodes.attempts import CODE_TOOL, CONFIGURE_TOOL, last_tool_round, report_of, split_functions, steps_of
from nodes.limits import MIN_TRAIN_STEPS, budget_left, fit_calls_to_budget, limit_reached
from nodes.settings import RunSettings
from nodes.skills_io import prior_sources
from prompts.templates import messages_for

MAX_TOOL_ROUNDS = 4  # tool rounds per attempt before the critic judges what there is


def ppo_defaults(settings: RunSettings) -> dict[str, Any]:
    """The PPO settings the fast agent starts a training from. Small runs: few envs stepped
    in-process, one torch thread. The vector mode is the run's (RunSettings.vector_mode, 'sync' by
    default: an actor's action samples depend on how the envs are split across workers, that is on
    the core count, and a graph run should replay the same on any machine)."""
    return {"num_envs": 4, "num_steps": 128, "vector_mode": settings.vector_mode, "torch_threads": 1,
            "progress": "none", "hidden_size": 64, "seed": settings.seed + 1}


def test_seeds(settings: RunSettings, state: dict) -> list[int]:
    """Code-test seeds: training range, varied per subtask so tests do not all see the same worlds."""
    offset = settings.seed * 1000 + 100 * int(state.get("subtask_index", 0))
    return train_seeds(settings.code_test_episodes, offset=offset)


def current_versions(state: dict, subtask: str) -> dict[str, str]:
    versions: dict[str, str] = {}
    for v in state.get("code_versions", []):
        if v["subtask"] == subtask:
            versions[v["sub_action"]] = v["source"]
    return versions


def fast_context(state: dict, settings: RunSettings, round_: Sequence[Any] = ()) -> dict[str, Any]:
    """The facts of the attempt; `round_` is the tool round just answered (empty for a fresh attempt)."""
    subtask = state["plan"][state["subtask_index"]]["name"]
    decomposition = state["decomposition"]
    rl_names = [a["name"] for a in decomposition["sub_actions"] if a["kind"] == "rl"]
    previous_steps = None
    for cfg in state.get("rl_configs", []):
        if cfg["subtask"] == subtask and cfg["sub_action"] in rl_names:
            previous_steps = cfg["config"].get("ppo", {}).get("total_steps")
    run_dir = settings.run_dir / "ppo" / (
        f"{subtask}-o{state.get('outer_iter', 0)}-i{state.get('inner_iter', 0)}")
    context = {
        "subtask": subtask, "task_description": TASKS[subtask].description,
        "decomposition": decomposition, "prior_sources": prior_sources(state),
        "versions": current_versions(state, subtask), "feedback": state.get("feedback"),
        "test_seeds": test_seeds(settings, state), "test_max_steps": TASKS[subtask].max_steps,
        "train_steps": settings.train_steps, "min_train_steps": MIN_TRAIN_STEPS,
        "budget_left": budget_left(state), "previous_train_steps": previous_steps,
        "subtasks_left": max(1, len(state["plan"]) - state["subtask_index"]),
        "run_dir": str(run_dir.resolve()),
        "ppo_defaults": ppo_defaults(settings),
    }
    for message in round_:
        if message.name == CONFIGURE_TOOL:
            report = report_of(message)
            if report.get("ok"):
                context["configured"] = report.get("config")
            else:
                context["configure_error"] = report.get("error")
    return context


def _versions_from(calls: Sequence[dict], state: dict, subtask: str) -> tuple[list[dict], list[dict]]:
    """Code versions and RL configurations written in this AIMessage, for the state's logs."""
    code, configs = [], []
    decomposition = state["decomposition"]
    code_names = [a["name"] for a in decomposition["sub_actions"] if a["kind"] == "code"]
    rl_name = next((a["name"] for a in decomposition["sub_actions"] if a["kind"] == "rl"), None)
    known = current_versions(state, subtask)
    n_versions = sum(1 for v in state.get("code_versions", []) if v["subtask"] == subtask)
    programs = [c["args"].get("code") for c in calls if c["name"] == CODE_TOOL and c["args"].get("code")]
    if programs:
        for name, source in split_functions(programs[0]).items():
            if name in code_names and known.get(name) != source:
                n_versions += 1
                code.append({"subtask": subtask, "sub_action": name, "version": n_versions, "source": source})
    n_configs = sum(1 for c in state.get("rl_configs", []) if c["subtask"] == subtask)
    for c in calls:
        if c["name"] == CONFIGURE_TOOL and isinstance(c["args"].get("rl_config"), dict):
            n_configs += 1
            configs.append({"subtask": subtask, "sub_action": rl_name, "version": n_configs,
                            "config": c["args"]["rl_config"]})
    return code, configs


def make_fast(settings: RunSettings, model: Any, tools: Sequence[Any]):
    def fast(state: dict) -> dict:
        messages = state.get("messages", [])
        # back from the ToolNode within an attempt; from slow or critic, a fresh attempt starts
        round_ = last_tool_round(messages) if state.get("route") == "tools" else []
        update: dict = {}
        if round_:  # back from a non-measuring tool round (configure_rl, plugin tools): count its steps
            update["env_steps_spent"] = int(state.get("env_steps_spent", 0)) + steps_of(messages)
        current = {**state, **update}
        learned = any(a["kind"] == "rl" for a in state["decomposition"]["sub_actions"])
        stop = limit_reached(current, settings, model, need_steps=MIN_TRAIN_STEPS if learned else 1)
        if stop:
            return {**update, "route": "executor", "stop_reason": stop, "events": [{"type": "stop", "reason": stop}]}
        rounds = sum(isinstance(m, AIMessage) for m in messages)
        if round_ and rounds >= MAX_TOOL_ROUNDS:  # e.g. a model that keeps sending invalid configs
            return {**update, "route": "critic"}
        context = fast_context(current, settings, round_)
        subtask = context["subtask"]
        if round_:
            prompt = list(messages)
            new_messages: list = []
        else:  # a fresh attempt: a fresh conversation
            prompt = messages_for("fast", context)
            new_messages = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *prompt]
        ai: AIMessage = model.tool_call("fast", prompt, tools, context)
        calls, fitted = fit_calls_to_budget(list(ai.tool_calls or []), budget_left(current))
        if fitted:  # the graph, not the model, holds the budget
            ai = ai.model_copy(update={"tool_calls": calls})
        code, configs = _versions_from(calls, state, subtask)
        route = "tools" if calls else "critic"  # no call: the critic records a failed attempt
        events = [{"type": "budget_fit", "subtask": subtask, "changes": fitted}] if fitted else []
        return {**update, "messages": [*new_messages, ai], "code_versions": code, "rl_configs": configs,
                "route": route, "attempt": int(state.get("attempt", 0)) + (0 if round_ else 1), "events": events}

    return fast
