"""The graph that `langgraph.json` points LangGraph's own dev tools at (`langgraph dev`, Studio).

`langgraph dev` (from `pip install "langgraph-cli[inmem]"`) imports this file in a worker thread, then
serves every request on its event loop, where its blocking-call detector refuses file reads, `os`
calls and imports. So all such work happens here, once, at import: the settings (the RLGPT_CONFIG
file, TOML/JSON, over the defaults of `python -m graph.run`; the model named by RLGPT_MODEL, unset =
the offline expert), the installed `rlgpt.plugins`, the tools (which import torch and the sandbox)
and the compiled `graph`, which `make_graph` only hands over. The server brings its own persistence,
so no checkpointer is attached.

A run starts from its task, `{"task": "collect wood"}` (nodes.state.RunInput, `budget_steps`
optional); the planner completes the start state from the settings. The server cannot send Python
objects with a run, so the nodes get their context from here (nodes.context.set_default_context):
each LangGraph thread its own, with the thread id as run id and a model of its own, so that a run's
model-call limit and usage count that run alone, as on the command line. One default differs from
the command line's: with no out_dir in RLGPT_CONFIG, runs write outside the project (`dev_out_dir`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from graph.builder import build_graph, run_context
from graph.plugins import load_plugins
from graph.settings import make_settings
from nodes.context import RunContext, set_default_context
from nodes.models.factory import SMOLLM2_NAME, make_model
from nodes.settings import RUN_ID_PATTERN, RunSettings, new_run_id
from nodes.state import RunInput

log = logging.getLogger(__name__)

MAX_THREAD_CONTEXTS = 256  # threads whose context is kept; the oldest is dropped beyond that


class ThreadContexts:
    """The RunContext of each LangGraph thread: the settings with the thread id as run id, and its own
    model (one model object for all only when it is a local server this process started: smollm2)."""

    def __init__(self, settings: RunSettings, plugins: object, model: object):
        self.settings, self.plugins, self.model = settings, plugins, model
        self.shared_model = (settings.model or "").strip().lower() == SMOLLM2_NAME
        self.base = run_context(settings, model, plugins)  # outside a thread (a plain invoke)
        self._lock = threading.Lock()
        self._contexts: OrderedDict[str, RunContext] = OrderedDict()

    def __call__(self, thread_id: str | None) -> RunContext:
        if not thread_id:
            return self.base
        with self._lock:
            context = self._contexts.get(thread_id)
            if context is None:
                run_id = thread_id if RUN_ID_PATTERN.match(thread_id) else new_run_id("studio")
                settings = self.settings.model_copy(update={"run_id": run_id})
                model = self.model if self.shared_model else make_model(settings.model)
                context = self._contexts[thread_id] = run_context(settings, model, self.plugins)
                while len(self._contexts) > MAX_THREAD_CONTEXTS:
                    self._contexts.popitem(last=False)
            self._contexts.move_to_end(thread_id)
            return context


def dev_out_dir() -> Path:
    """Where the server's runs write when RLGPT_CONFIG names no out_dir: outside the project, because
    `langgraph dev` restarts (ending the runs under way) whenever a .py file changes below the folder it
    was started in, and every skill a run saves is one (its code)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "rlgpt" / "langgraph-dev"


def load_settings() -> RunSettings:
    """The settings of every run of the server: RLGPT_CONFIG over the defaults of `python -m graph.run`
    (out_dir: `dev_out_dir()`), the model from RLGPT_MODEL."""
    settings = make_settings(os.environ.get("RLGPT_CONFIG") or None,
                             {"model": os.environ.get("RLGPT_MODEL") or None})
    if "out_dir" not in settings.model_fields_set:
        settings.out_dir = dev_out_dir()
    elif settings.out_dir.resolve().is_relative_to(Path.cwd()):
        log.warning("out_dir %s is inside %s: under `langgraph dev` every skill a run saves there restarts the "
                    "server; start it with --no-reload or set out_dir elsewhere", settings.out_dir, Path.cwd())
    return settings


SETTINGS = load_settings()
PLUGINS = load_plugins()
# built now: a model that is not configured fails the server's start with its message, not a run
contexts = ThreadContexts(SETTINGS, PLUGINS, make_model(SETTINGS.model))
set_default_context(contexts)
# no context schema: the API sends each run its assistant's context, plain data ({}), which LangGraph would
# otherwise try to turn into a RunContext
graph = build_graph(plugins=PLUGINS, input_schema=RunInput, context_schema=None)


def make_graph() -> Any:
    """The graph, for langgraph.json. The server calls this for every request on its event loop, so it
    hands over what the import built and does nothing that blocks."""
    return graph
