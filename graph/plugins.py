"""Plug a new tool or node into the graph without editing the package.

Two ways in, both ending in the same registry:

1. In code, before the graph is built::

       from graph.plugins import register_node, register_tool

       @register_tool
       @tool
       def inventory_report(...): ...              # a LangChain tool the fast agent may call

       def logger(state): return {}                 # a LangGraph node: state -> partial update
       register_node("logger", logger, after="critic")

2. From an installed package, through the entry-point group ``rlgpt.plugins``::

       [project.entry-points."rlgpt.plugins"]
       my_plugin = "my_package.rlgpt_plugin"           # a module that registers on import
       other = "my_package.plugin:setup"               # or a function, called with no arguments

`load_plugins()` imports every entry point of the group, then returns a snapshot `Plugins(tools,
nodes)`; `graph.builder.build_graph(..., plugins=...)` adds the tools to the fast agent's tool
list and splices each node in right after the node named in `after`.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ENTRY_POINT_GROUP = "rlgpt.plugins"

NodeFn = Callable[..., Any]


class PluginError(RuntimeError):
    """A plugin could not be loaded or registered; the message names the plugin."""


@dataclass(frozen=True)
class NodeSpec:
    """A plugin node: `fn(state) -> dict` runs after node `after` and before what followed it."""

    name: str
    fn: NodeFn
    after: str
    description: str = ""


@dataclass
class Plugins:
    """What the builder consumes: extra tools for the fast agent and extra nodes for the graph."""

    tools: list[Any] = field(default_factory=list)
    nodes: list[NodeSpec] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.tools or self.nodes)

    def tool_names(self) -> list[str]:
        return [getattr(t, "name", getattr(t, "__name__", repr(t))) for t in self.tools]

    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes]


_lock = threading.Lock()
_registry = Plugins()
_loaded_entry_points: set[str] = set()  # an entry point is imported once per process


def _is_identifier(name: Any) -> bool:
    return isinstance(name, str) and name.isidentifier()


def register_tool(tool: Any) -> Any:
    """Add a tool the fast agent may call. Accepts a LangChain tool, or a plain function with a
    docstring (wrapped with langchain's `@tool`). Usable as a decorator; returns the tool."""
    from langchain_core.tools import BaseTool
    from langchain_core.tools import tool as as_tool

    if not isinstance(tool, BaseTool):
        if not callable(tool):
            raise PluginError(f"register_tool needs a LangChain tool or a function, got {type(tool).__name__}")
        if not (tool.__doc__ or "").strip():
            raise PluginError(f"tool function '{getattr(tool, '__name__', tool)}' needs a docstring: "
                              "it is the description the agent reads")
        tool = as_tool(tool)
    with _lock:
        if tool.name in _registry.tool_names():
            raise PluginError(f"a tool named '{tool.name}' is already registered")
        _registry.tools.append(tool)
    return tool


def register_node(name: str, fn: NodeFn | None = None, *, after: str, description: str = "") -> Any:
    """Add a node `fn(state) -> dict` that runs right after the node `after`.

    `register_node("logger", fn, after="critic")`, or as a decorator:
    `@register_node("logger", after="critic")`. Returns `fn` (or the decorator).
    """
    if not _is_identifier(name):
        raise PluginError(f"plugin node name must be a Python identifier, got {name!r}")
    if not _is_identifier(after):
        raise PluginError(f"plugin node '{name}': 'after' must name an existing node, got {after!r}")

    def add(f: NodeFn) -> NodeFn:
        if not callable(f):
            raise PluginError(f"plugin node '{name}' must be callable, got {type(f).__name__}")
        params = [p for p in inspect.signature(f).parameters.values()
                  if p.default is inspect.Parameter.empty
                  and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(params) > 2:
            raise PluginError(f"plugin node '{name}' must take (state) or (state, config), "
                              f"it takes {len(params)} required arguments")
        with _lock:
            if name in _registry.node_names():
                raise PluginError(f"a node named '{name}' is already registered")
            _registry.nodes.append(NodeSpec(name=name, fn=f, after=after,
                                            description=description or (f.__doc__ or "").strip()))
        return f

    return add if fn is None else add(fn)


def unregister(name: str) -> bool:
    """Remove a tool or node of that name (tests, notebooks); True if something was removed."""
    with _lock:
        before = len(_registry.tools) + len(_registry.nodes)
        _registry.tools[:] = [t for t in _registry.tools if getattr(t, "name", None) != name]
        _registry.nodes[:] = [n for n in _registry.nodes if n.name != name]
        return len(_registry.tools) + len(_registry.nodes) < before


def clear() -> None:
    """Forget every registration (tests)."""
    with _lock:
        _registry.tools.clear()
        _registry.nodes.clear()
        _loaded_entry_points.clear()


def _load_entry_point(ep: importlib.metadata.EntryPoint) -> None:
    try:
        obj = ep.load()
        if callable(obj) and not isinstance(obj, types.ModuleType):
            obj()
    except PluginError as e:
        raise PluginError(f"plugin '{ep.name}' ({ep.value}) from entry-point group "
                          f"'{ENTRY_POINT_GROUP}' failed to register: {e}") from e
    except Exception as e:  # any error inside third-party code: name the plugin, keep the cause
        raise PluginError(f"plugin '{ep.name}' ({ep.value}) from entry-point group '{ENTRY_POINT_GROUP}' "
                          f"failed to load: {type(e).__name__}: {e}. Fix or uninstall the package "
                          "that provides it.") from e


def load_plugins(entry_points: bool = True) -> Plugins:
    """Import the `rlgpt.plugins` entry points (once each), then return a snapshot of the registry."""
    if entry_points:
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            key = f"{ep.name}={ep.value}"
            if key in _loaded_entry_points:
                continue
            _load_entry_point(ep)
            _loaded_entry_points.add(key)
    with _lock:
        return Plugins(tools=list(_registry.tools), nodes=list(_registry.nodes))
