"""What every node gets besides the state: the run's settings and its model (LangGraph's runtime context).

They are not state: the settings are fixed for a run and the model is a live object (a server
connection, the expert's rules). The graph is invoked with `context=RunContext(settings, model)`,
and a resumed run passes them again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nodes.settings import RunSettings


@dataclass(frozen=True)
class RunContext:
    settings: RunSettings
    model: Any  # a nodes.models.AgentModel
    plugin_tools: tuple[Any, ...] = field(default=())  # extra tools the fast agent may call (graph.plugins)


_default: RunContext | None = None


def set_default_context(context: RunContext | None) -> None:
    """The context for runs started without one: LangGraph's dev server (graph.studio) cannot send Python
    objects with a run, so its graph factory sets this once."""
    global _default
    _default = context


def context_of(runtime: Any) -> RunContext:
    """The run's context; a clear error when the graph was invoked without one."""
    context = getattr(runtime, "context", None)
    if isinstance(context, RunContext):
        return context
    if _default is not None:
        return _default
    raise RuntimeError("the graph was invoked without its runtime context: pass "
                       "context=graph.builder.run_context(settings, model) to invoke/stream")
