"""What every node gets besides the state: the run's settings and its model (LangGraph's runtime context).

They are not state: the settings are fixed for a run and the model is a live object (a server
connection, the expert's rules). The graph is invoked with `context=RunContext(settings, model)`,
and a resumed run passes them again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nodes.settings import RunSettings


@dataclass(frozen=True)
class RunContext:
    settings: RunSettings
    model: Any  # a nodes.models.base.AgentModel
    plugin_tools: tuple[Any, ...] = field(default=())  # extra tools the fast agent may call (graph.plugins)


# What runs started without a context get: one RunContext for all, or a function of the LangGraph
# thread id (None outside a thread) that gives each thread its own.
DefaultContext = RunContext | Callable[[str | None], RunContext]
_default: DefaultContext | None = None


def set_default_context(context: DefaultContext | None) -> None:
    """The context for runs started without one: LangGraph's dev server (graph.studio) cannot send Python
    objects with a run, so its graph module sets this once, as a function that gives every thread (one
    run through the server's API) its own settings and model."""
    global _default
    _default = context


def context_of(runtime: Any) -> RunContext:
    """The run's context; a clear error when the graph was invoked without one."""
    context = getattr(runtime, "context", None)
    if isinstance(context, RunContext):
        return context
    default = _default
    if default is not None and context:  # plain data, as LangGraph's API sends a run's `context`
        keys = ", ".join(map(str, context)) if isinstance(context, dict) else type(context).__name__
        raise RuntimeError(f"this graph takes no run context (got: {keys}); its runs use the settings and model "
                           "its server was started with (graph.studio: RLGPT_CONFIG, RLGPT_MODEL)")
    if isinstance(default, RunContext):
        return default
    if default is not None:
        return default(getattr(getattr(runtime, "execution_info", None), "thread_id", None))
    raise RuntimeError("the graph was invoked without its runtime context: pass "
                       "context=graph.builder.run_context(settings, model) to invoke/stream")
