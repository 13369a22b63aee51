"""The graph factory that `langgraph.json` points at, for LangGraph's own dev tools.

`langgraph dev` (from `pip install "langgraph-cli[inmem]"`) imports this file and calls
`make_graph()`; the LangGraph server brings its own persistence, so no checkpointer is attached
here. The model comes from RLGPT_MODEL (unset = the offline expert), other settings from an
optional RLGPT_CONFIG file (TOML/JSON, see graph.settings). Installed `rlgpt.plugins` are added.
"""

from __future__ import annotations

import os
from typing import Any

from graph.builder import build_graph, run_context
from graph.plugins import load_plugins
from graph.settings import make_settings
from nodes.context import set_default_context
from nodes.model_factory import make_model


def make_graph(config: Any = None) -> Any:
    settings = make_settings(os.environ.get("RLGPT_CONFIG") or None,
                             {"model": os.environ.get("RLGPT_MODEL") or None})
    plugins = load_plugins()
    # the dev server starts runs without a Python context: every run of this graph uses these
    set_default_context(run_context(settings, make_model(settings.model), plugins))
    return build_graph(plugins=plugins)
