"""build_graph: the RL-GPT StateGraph over RLGPTState.

    START -> planner -> subtask -> slow -> fast <-> tools -> critic
                 ^         ^  |                ^               |
                 |         |  +-> executor     +-- revise -----+  (inner loop)
                 |         |        |          slow <- move ---+  (outer loop)
                 |         +------- | ---------- pass ---------+  (next subtask)
                 +----------------- | ---------- failed -------+  (re-plan)
                                    v
                                 report -> END

Deciding nodes write `route` into the state and the conditional edges follow it; after the
ToolNode, measuring tools (run_code_in_env, train_ppo) go to the critic and the others (a valid
configure_rl, plugin tools) back to the fast agent. Any limit sends the run to the executor and
the report. Plugin nodes are spliced in right after the node they name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode

from envs.tasks import get_task
from graph.state import RLGPTState, initial_state
from nodes.attempts import MEASURING_TOOLS, last_tool_round
from nodes.critic import make_critic
from nodes.executor import make_executor
from nodes.fast import MAX_TOOL_ROUNDS, make_fast
from nodes.planner import make_planner
from nodes.report import make_report
from nodes.settings import RunSettings
from nodes.slow import make_slow
from nodes.subtask import make_subtask

# Re-plans the recursion limit is sized for: the default of RunSettings.max_replans, whatever a run's own
# setting (graph.run lifts the limit far above this anyway).
RECURSION_REPLANS = RunSettings.model_fields["max_replans"].default

ROUTES: dict[str, tuple[str, ...]] = {
    "planner": ("subtask", "executor"),
    "subtask": ("slow", "executor"),
    "slow": ("fast", "executor"),
    "fast": ("tools", "critic", "executor"),
    "tools": ("fast", "critic"),
    "critic": ("fast", "slow", "subtask", "planner", "executor"),
}


class GraphBuildError(ValueError):
    """The graph cannot be built from these settings or plugins; the message says why."""


def core_tools() -> list:
    from tools.rl_tools import configure_rl_tool, train_ppo_tool
    from tools.run_code import run_code_in_env

    return [run_code_in_env, configure_rl_tool, train_ppo_tool]


def _route_by_state(allowed: tuple[str, ...]) -> Callable[[dict], str]:
    def route(state: dict) -> str:
        target = state.get("route")
        return target if target in allowed else "executor"

    return route


def _route_after_tools(state: dict) -> str:
    names = {m.name for m in last_tool_round(state.get("messages", []))}
    return "critic" if names & set(MEASURING_TOOLS) else "fast"


def build_graph(settings: RunSettings, model: Any, checkpointer: Any = None, plugins: Any = None):
    """The compiled graph. `model` is an AgentModel (nodes.model_factory.make_model); `plugins` a
    graph.plugins.Plugins (extra tools for the fast agent, extra nodes)."""
    tools = core_tools() + list(getattr(plugins, "tools", []) or [])
    names = [t.name for t in tools]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise GraphBuildError(f"two tools share the name(s) {', '.join(dupes)}; rename the plugin tool")

    builder = StateGraph(RLGPTState)
    builder.add_node("planner", make_planner(settings, model))
    builder.add_node("subtask", make_subtask(settings, model))
    builder.add_node("slow", make_slow(settings, model))
    builder.add_node("fast", make_fast(settings, model, tools))
    builder.add_node("tools", ToolNode(tools, handle_tool_errors=True))
    builder.add_node("critic", make_critic(settings, model))
    builder.add_node("executor", make_executor(settings, model))
    builder.add_node("report", make_report(settings, model))
    builder.add_edge(START, "planner")

    routers: dict[str, tuple[Callable, tuple[str, ...] | None]] = {
        name: (_route_by_state(allowed), allowed) for name, allowed in ROUTES.items()}
    routers["tools"] = (_route_after_tools, ROUTES["tools"])
    routers["executor"] = (lambda state: "report", None)
    routers["report"] = (lambda state: END, None)

    tails = _splice_plugins(builder, getattr(plugins, "nodes", []) or [], set(routers))
    for node, (router, allowed) in routers.items():
        tail = tails.get(node, node)
        if allowed is None:
            builder.add_edge(tail, router({}))
        else:
            builder.add_conditional_edges(tail, router, list(allowed))
    return builder.compile(checkpointer=checkpointer)


def _splice_plugins(builder: StateGraph, specs: list, core: set[str]) -> dict[str, str]:
    """Add plugin nodes after their `after` node; returns node -> last node of its chain."""
    tails: dict[str, str] = {}
    for spec in specs:
        if spec.name in core:
            raise GraphBuildError(f"plugin node '{spec.name}' clashes with a built-in node; rename it")
        anchor = spec.after
        if anchor not in core:
            raise GraphBuildError(f"plugin node '{spec.name}' wants to run after '{anchor}', which is not a node; "
                                  f"nodes: {', '.join(sorted(core))}")
        builder.add_node(spec.name, spec.fn)
        builder.add_edge(tails.get(anchor, anchor), spec.name)
        tails[anchor] = spec.name
    return tails


def recursion_limit(settings: RunSettings) -> int:
    """Enough graph steps for every loop to reach its own limit first."""
    inner, outer = settings.max_inner_iters, settings.max_outer_iters
    per_attempt = 2 * MAX_TOOL_ROUNDS + 3
    per_subtask = outer * (inner * per_attempt + 1) + 2
    return 100 + 20 * per_subtask * (RECURSION_REPLANS + 1)


def run_config(settings: RunSettings) -> dict:
    """The RunnableConfig to invoke the graph with (thread id for the checkpointer, recursion limit)."""
    return {"configurable": {"thread_id": settings.run_id}, "recursion_limit": recursion_limit(settings)}


def start_state(settings: RunSettings, task_text: str | None = None) -> RLGPTState:
    """The input of a fresh run."""
    task = get_task(settings.task).name
    return initial_state(task, task_text or settings.task, int(settings.budget_steps))
