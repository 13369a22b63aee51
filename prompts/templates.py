"""What a language model sees, per role: a system prompt and the facts of the moment.

Each node builds a `context` dict of facts (the rule-based expert reasons on it directly) and
calls `messages_for(role, context)`, which renders the very same facts as text for an LLM. The
fast agent also sees the few-shot coded actions from `prompts.fewshot.example_sources()`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

ROLES = ("planner", "slow", "fast", "critic")

GAME_RULES = """\
The game is Crafter, a 2D Minecraft-like world. The player sees a 9x7 tile view around itself, its
inventory and status bars (health, food, drink, energy). 17 primitive actions: noop, move_left,
move_right, move_up, move_down, do (interact with the faced tile: collect, attack, eat, drink),
sleep, place_stone, place_table, place_furnace, place_plant, make_wood_pickaxe, make_stone_pickaxe,
make_iron_pickaxe, make_wood_sword, make_stone_sword, make_iron_sword.
Every environment step counts toward the sample budget, code tests and training alike."""

SYSTEM = {
    "planner": GAME_RULES + """

You are the task planner of RL-GPT. Split the task into subtasks along Crafter's tech tree, the
prerequisites first and the task itself last. Each subtask is a Crafter achievement name (such as
collect_wood, place_table, make_wood_pickaxe) with a success condition. When a subtask failed,
re-plan the remaining work: answer the subtasks from the failed one on. Starting with the failed
subtask keeps its best attempt when it ever succeeded (else retries it); another first subtask
changes the route; an empty list gives up.""",
    "slow": GAME_RULES + """

You are the slow agent of RL-GPT. Decompose one subtask into sub-actions and decide for each one
whether it is better coded (deterministic, written as a program over the game API) or learned with
RL (needs adaptation: search, navigation, combat, timing). A learned sub-action lists the coded
sub-actions that are appended to its policy's action head (the policy learns when to call them);
put it last. When the critic asks to move a sub-action between code and rl, revise the
decomposition accordingly and say what changed.""",
    "fast": GAME_RULES + """

You are the fast agent of RL-GPT. Implement the current decomposition by calling tools:
- all sub-actions coded: write one program and call run_code_in_env once per test seed given below
  (same code, task and max_steps; the function named `main` runs, so define `main` calling the
  sub-actions in order with `yield from`);
- any sub-action learned: call configure_rl with an RL configuration whose coded_actions are the
  sources of the coded sub-actions (one function per source), then train_ppo with the validated
  configuration.
Coded actions are generator functions `def name(game): ... yield "do"` that yield primitive action
names; they may only use what the player sees (the game API). Fix errors the tools report.""",
    "critic": GAME_RULES + """

You are the critic of RL-GPT. Judge the measured attempt: 'pass' when its success rate reaches the
target; 'revise' when the code or configuration should be fixed and tried again (inner loop);
'move' with move_to when a sub-action should change between code and rl (outer loop): code that
fails because it cannot adapt (the target is not in view, search, timing) belongs to rl with the
working code kept as coded actions; 'fail' when nothing left to try is likely to help. Base the
verdict on the numbers, and say concretely what to change. A code test that replays earlier skills
first reports `started` (runs that reached the judged sub-action) and `success_given_start` (its
success over those runs): judge the code itself on that rate, and compare code with RL on
success_rate, which both measure from a fresh world.""",
}


def _block(title: str, value: Any) -> str:
    if value is None or value == [] or value == {}:
        return ""
    if isinstance(value, list) and all(isinstance(v, (int, float, str)) for v in value):
        value = json.dumps(value)  # short lists of scalars on one line
    if not isinstance(value, str):
        value = json.dumps(value, indent=1, sort_keys=True, default=str)
    return f"## {title}\n{value}\n"


def _render_planner(c: Mapping[str, Any]) -> str:
    parts = [
        _block("Task", f"{c['task']}: {c.get('task_description', '')}"),
        _block("Recipes (Crafter data: what each achievement needs)", c.get("recipes")),
        _block("Known tech-tree chain for this task", c.get("prerequisites")),
        _block("Failure to re-plan around", c.get("failed")),
        _block("Remaining plan before the failure", c.get("remaining")),
    ]
    return "".join(parts) + "Answer with the plan."


def _render_slow(c: Mapping[str, Any]) -> str:
    parts = [
        _block("Subtask", c.get("subtask")),
        _block("Recipe facts for this subtask", c.get("recipe")),
        _block("Few-shot template that fits (kind, target, item)", c.get("template")),
        _block("Skills already solved earlier in the plan", c.get("prior_skills")),
        _block("Current decomposition", c.get("previous")),
        _block("Latest critique", c.get("critique")),
        _block("Best measured attempts so far", c.get("best")),
        _block("Outer iteration", f"{c.get('outer_iter', 0)} of {c.get('max_outer_iters', '?')}"),
    ]
    return "".join(parts) + "Answer with the decomposition."


def _render_fast(c: Mapping[str, Any]) -> str:
    from prompts.fewshot import example_sources

    examples = "\n".join(f"### {name}.py\n```python\n{src.rstrip()}\n```" for name, src in example_sources().items())
    parts = [
        _block("Subtask (test task name)", c.get("subtask")),
        _block("Decomposition to implement", c.get("decomposition")),
        _block("Sources of skills solved earlier (reuse them)", c.get("prior_sources")),
        _block("Latest code of each sub-action", c.get("versions")),
        _block("Critic feedback on the last attempt", c.get("feedback")),
        _block("Test seeds (one run_code_in_env call each)", c.get("test_seeds")),
        _block("Limits", {"max_steps per code test": c.get("test_max_steps"),
                          "total_steps for one training": c.get("train_steps"),
                          "environment steps left in the budget": c.get("budget_left"),
                          "subtasks left, this one included (leave them a share)": c.get("subtasks_left"),
                          "run_dir for train_ppo": c.get("run_dir"),
                          "ppo defaults": c.get("ppo_defaults")}),
        _block("Validated RL configuration (call train_ppo with it)", c.get("configured")),
        _block("Configuration error to fix", c.get("configure_error")),
        _block("Few-shot coded actions", examples),
    ]
    return "".join(parts) + "Call the tools now."


def _render_critic(c: Mapping[str, Any]) -> str:
    parts = [
        _block("Subtask", c.get("subtask")),
        _block("Sub-action judged", c.get("sub_action")),
        _block("Measured attempt", c.get("result")),
        _block("Target success rate", c.get("target")),
        _block("Best rates so far by kind", c.get("best_by_kind")),
        _block("Loops", {"inner": f"{c.get('inner_iter')} of {c.get('max_inner_iters')}",
                         "outer": f"{c.get('outer_iter')} of {c.get('max_outer_iters')}",
                         "budget_left": c.get("budget_left")}),
    ]
    return "".join(parts) + "Answer with the critique."


_RENDER = {"planner": _render_planner, "slow": _render_slow, "fast": _render_fast, "critic": _render_critic}


def messages_for(role: str, context: Mapping[str, Any]) -> list[BaseMessage]:
    """System prompt + the rendered facts for one role."""
    if role not in _RENDER:
        raise ValueError(f"unknown role '{role}'; roles: {', '.join(ROLES)}")
    return [SystemMessage(SYSTEM[role]), HumanMessage(_RENDER[role](context))]
