"""build_graph: the RL-GPT graph, an outer StateGraph with the attempt loop as a subgraph.

    START -> planner -> subtask -> slow -> attempt ------------------+-> executor -> report -> END
                ^          ^  |     ^      (fast <-> tools, critic) |
                |          |  +-----|------------------------------>+   (plan done, limit)
                |          +--------|------ pass / keep best -------+   (next subtask)
                |                   +------ move / revise ----------+   (outer loop)
                +-------------------------- re-plan ----------------+

    attempt:  START -> fast <-> tools      fast -> critic -> fast (train longer) | leave -> outer node
                       ^  |                 (the code-test report goes back to fast until it passes or
                       +--+ (next coded sub-action)   its revisions run out: the inner loop)

Every deciding node routes with a `Command` whose `Literal` return type lists its targets, so an unknown
route is an error and the drawing shows every edge. Settings and model reach the nodes through
LangGraph's runtime context (`nodes.context.RunContext`): invoke with `context=run_context(...)`.
Plugin nodes run right after the node they name (`after`), inside the attempt subgraph for fast,
tools and critic.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Sequence
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command

from envs.tasks import get_task
from nodes.context import RunContext
from nodes.critic import critic
from nodes.executor import executor
from nodes.exits import leave
from nodes.fast import MAX_TOOL_ROUNDS, fast
from nodes.measure import measure
from nodes.planner import planner
from nodes.report import report
from nodes.settings import RunSettings
from nodes.slow import slow
from nodes.state import AttemptState, RLGPTState, initial_state
from nodes.subtask import subtask

# Re-plans the recursion limit is sized for: the default of RunSettings.max_replans, whatever a run's own
# setting (graph.run lifts the limit far above this anyway).
RECURSION_REPLANS = RunSettings.model_fields["max_replans"].default

# When each route is taken, for the drawings (LangGraph's `destinations` labels): deciding node -> target
# -> label. Every target in a node's `Command[Literal[...]]` has one (tests/test_draw.py checks it).
ATTEMPT_EXITS = {"slow": "move / revise", "subtask": "pass / keep best", "planner": "re-plan",
                 "executor": "limit reached"}
ROUTE_LABELS: dict[str, dict[str, str]] = {
    "planner": {"subtask": "plan / re-plan", "executor": "no plan / limit"},
    "subtask": {"slow": "no passing skill", "executor": "plan done / limit"},
    "slow": {"attempt": "decomposition", "planner": "no decomposition", "executor": "limit reached"},
    "fast": {"tools": "code test / training / tool", "critic": "no usable answer / unchanged code",
             "fast": "next coded action", "leave": "limit reached"},
    "measure": {"critic": "judge: passed, no gain, revisions out, trained", "fast": "repair / next step"},
    "critic": {"fast": "revise: train longer", "leave": "pass / move / re-plan / limit"},
}
PLUGIN_LABEL = "then the plugin nodes"
OUTER_NODES: dict[str, Callable] = {"planner": planner, "subtask": subtask, "slow": slow,
                                    "executor": executor, "report": report}
ATTEMPT_NODES: dict[str, Callable] = {"fast": fast, "measure": measure, "critic": critic}
STATIC_EDGES = {"executor": "report", "report": END, "tools": "measure"}


class GraphBuildError(ValueError):
    """The graph cannot be built from these plugins; the message says why."""


def core_tools() -> list:
    from tools.rl_tools import configure_rl_tool, train_ppo_tool
    from tools.run_code import run_code_in_env

    return [run_code_in_env, configure_rl_tool, train_ppo_tool]


def command_targets(fn: Callable) -> tuple[str, ...]:
    """The targets in a node's `-> Command[Literal[...]]` annotation."""
    hint = typing.get_type_hints(fn).get("return")
    if typing.get_origin(hint) is not Command:
        return ()
    (literal,) = typing.get_args(hint)
    return typing.get_args(literal)


def _through_plugins(fn: Callable, first_plugin: str) -> Callable:
    """`fn` with its Command sent to the plugin chain first; the chain's end goes where `fn` chose."""

    def node(state, runtime):
        out = fn(state, runtime)
        if isinstance(out, Command) and out.graph is None and isinstance(out.goto, str):
            update = dict(out.update or {}) if isinstance(out.update, dict) else {}
            return Command(goto=first_plugin, update={**update, "plugin_next": out.goto})
        return out

    node.__name__ = getattr(fn, "__name__", "node")
    node.__doc__ = fn.__doc__
    return node


def _add_nodes(builder: StateGraph[Any, Any, Any, Any], nodes: dict[str, Callable], specs: Sequence[Any]) -> None:
    """The nodes, each followed by the plugin nodes attached to it."""
    by_anchor: dict[str, list[Any]] = {}
    for spec in specs:
        by_anchor.setdefault(spec.after, []).append(spec)
    for name, fn in nodes.items():
        chain = by_anchor.get(name, [])
        targets = command_targets(fn)
        labels = route_labels(name, targets)
        if not chain:
            builder.add_node(name, fn, destinations=labels or None)
            continue
        first = chain[0].name
        if targets:
            builder.add_node(name, _through_plugins(fn, first), destinations={first: PLUGIN_LABEL})
        else:
            builder.add_node(name, fn)
            builder.add_edge(name, first)
        for spec, following in zip(chain, chain[1:]):
            builder.add_node(spec.name, spec.fn)
            builder.add_edge(spec.name, following.name)
        last = chain[-1]
        builder.add_node(last.name, last.fn)
        if targets:  # path map label -> target: the drawing shows the label
            builder.add_conditional_edges(last.name, _resume_route(labels), {v: k for k, v in labels.items()})
        elif name in STATIC_EDGES:
            builder.add_edge(last.name, STATIC_EDGES[name])


def route_labels(name: str, targets: Sequence[str]) -> dict[str, str]:
    """target -> when it is taken, for each of a node's Command targets (the target's own name when
    ROUTE_LABELS has no words for it, as for a plugin node's own Command)."""
    known = ROUTE_LABELS.get(name, {})
    return {t: known.get(t, t) for t in targets}


def _resume_route(labels: dict[str, str]) -> Callable[[dict], str]:
    """After the plugin chain: the label of the target the deciding node chose (the path map's key)."""

    def route(state: dict) -> str:
        target = state.get("plugin_next")
        if target not in labels:
            raise ValueError(f"no route '{target}' after the plugin nodes; expected one of {', '.join(labels)}")
        return labels[str(target)]

    return route


def _check_plugins(specs: Sequence[Any]) -> None:
    attach = [*OUTER_NODES, "fast", "tools", "measure", "critic"]
    taken = {*attach, "attempt", "leave"}
    for spec in specs:
        if spec.name in taken:
            raise GraphBuildError(f"plugin node '{spec.name}' clashes with a built-in node; rename it")
        if spec.after not in attach:
            raise GraphBuildError(f"plugin node '{spec.name}' wants to run after '{spec.after}', which is not a node "
                                  f"it can follow; nodes: {', '.join(sorted(attach))}")
        taken.add(spec.name)


def harness_error(exc: Exception) -> str:
    """A tool that raised instead of reporting failed on the harness's side, not the agent's: its answer says
    so (nodes.attempt.results leaves such runs out of a measured rate)."""
    text = f"{type(exc).__name__}: {exc}"[:500]
    return json.dumps({"ok": False, "failure_kind": "harness",
                       "error": f"the harness failed to run this tool ({text}); this is not the code's fault, "
                                f"and the run is not counted"}, ensure_ascii=True)


def build_attempt_graph(tools: Sequence[Any], specs: Sequence[Any] = (), context_schema: Any = RunContext):
    """The fast -> tools -> measure -> fast | critic loop of one attempt, with its own messages."""
    builder = StateGraph(AttemptState, context_schema=context_schema)
    inner_specs = [s for s in specs if s.after in ("fast", "tools", "measure", "critic")]
    _add_nodes(builder, ATTEMPT_NODES, inner_specs)
    tool_specs = [s for s in inner_specs if s.after == "tools"]
    builder.add_node("tools", ToolNode(list(tools), handle_tool_errors=harness_error))
    builder.add_edge("tools", tool_specs[0].name if tool_specs else "measure")
    for spec, following in zip(tool_specs, tool_specs[1:]):
        builder.add_node(spec.name, spec.fn)
        builder.add_edge(spec.name, following.name)
    if tool_specs:
        builder.add_node(tool_specs[-1].name, tool_specs[-1].fn)
        builder.add_edge(tool_specs[-1].name, "measure")
    builder.add_node("leave", leave)  # its Command goes to the outer graph (see the "attempt" node)
    builder.add_edge(START, "fast")
    return builder.compile()


def build_graph(checkpointer: Any = None, plugins: Any = None, input_schema: Any = None,
                context_schema: Any = RunContext):
    """The compiled graph. `plugins`: a graph.plugins.Plugins (extra tools for the fast agent, extra
    nodes). Invoke it with `context=run_context(settings, model, plugins)`. `input_schema`: what a run
    starts from when not the full state of `start_state`; `context_schema`: what LangGraph makes of a
    context given as plain data. graph.studio passes nodes.state.RunInput and None (its runs' contexts
    come from nodes.context's default)."""
    tools = core_tools() + list(getattr(plugins, "tools", []) or [])
    names = [t.name for t in tools]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise GraphBuildError(f"two tools share the name(s) {', '.join(dupes)}; rename the plugin tool")
    specs = list(getattr(plugins, "nodes", []) or [])
    _check_plugins(specs)

    builder = StateGraph(RLGPTState, context_schema=context_schema, input_schema=input_schema)
    outer_specs = [s for s in specs if s.after in OUTER_NODES]
    _add_nodes(builder, {k: v for k, v in OUTER_NODES.items() if k in ("planner", "subtask", "slow")}, outer_specs)
    builder.add_node("attempt", build_attempt_graph(tools, specs, context_schema), destinations=ATTEMPT_EXITS)
    _add_nodes(builder, {k: v for k, v in OUTER_NODES.items() if k in ("executor", "report")}, outer_specs)
    for name in ("executor", "report"):
        if not any(s.after == name for s in outer_specs):
            builder.add_edge(name, STATIC_EDGES[name])
    builder.add_edge(START, "planner")
    return builder.compile(checkpointer=checkpointer)


def run_context(settings: RunSettings, model: Any, plugins: Any = None) -> RunContext:
    """What the nodes get besides the state: the settings, the model, and the plugin tools to offer."""
    return RunContext(settings=settings, model=model, plugin_tools=tuple(getattr(plugins, "tools", []) or []))


def recursion_limit(settings: RunSettings) -> int:
    """Enough graph steps for every loop to reach its own limit first."""
    inner, outer = settings.max_inner_iters, settings.max_outer_iters
    per_attempt = 2 * MAX_TOOL_ROUNDS + 4 * (inner + 1) + 4
    per_subtask = outer * per_attempt + 3
    return 100 + 20 * per_subtask * (RECURSION_REPLANS + 1)


def run_config(settings: RunSettings) -> dict:
    """The RunnableConfig to invoke the graph with (thread id for the checkpointer, recursion limit)."""
    return {"configurable": {"thread_id": settings.run_id}, "recursion_limit": recursion_limit(settings)}


def start_state(settings: RunSettings, task_text: str | None = None) -> RLGPTState:
    """The input of a fresh run."""
    task = get_task(settings.task).name
    return initial_state(task, task_text or settings.task, int(settings.budget_steps))
