"""A run read back from its checkpoints: which nodes ran in what order, the attempt subgraph's own nodes
included, how long each took, the env steps it spent, and how often the run took each edge.

The outer graph's checkpoints (namespace '') form one chain per run (thread id = run id); every step
of it ran the tasks its checkpoint had pending. A step that ran the `attempt` subgraph is replaced by
the subgraph's own chain, kept under the namespace 'attempt:<task id>'; its last node (`leave`) jumps
to the outer graph and leaves no checkpoint of its own: it ran when the outer step finished.

Node ids are the drawing's (`get_graph(xray=1)`): 'planner', 'attempt:fast'. A node's time is the
time between the checkpoint its step started from and the one it wrote (Graphviz and matplotlib draw
it); the hours a stopped run lay idle between two sessions (sessions.json) are not counted. Env steps
are those its tool calls reported (the `tools` node; the budget counts them when fast or the critic
reads the round), and evaluation steps the held-out evaluation's (the executor).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from langchain_core.messages import ToolMessage

from nodes.attempt.results import steps_of
from nodes.attempt.rounds import round_id

START, END = "__start__", "__end__"


@dataclass(frozen=True)
class NodeRun:
    """One visit of a node."""

    node: str                 # the drawing's id: 'planner', 'attempt:fast'
    started: float            # epoch seconds
    seconds: float
    env_steps: int = 0        # steps its tool calls spent (training and code tests)
    eval_steps: int = 0       # held-out evaluation steps


@dataclass
class NodeStats:
    visits: int = 0
    seconds: float = 0.0
    env_steps: int = 0
    eval_steps: int = 0


@dataclass
class RunHistory:
    run_id: str
    runs: list[NodeRun] = field(default_factory=list)
    finished: bool = False            # the graph reached its end
    values: dict[str, Any] = field(default_factory=dict)   # the outer state at the last checkpoint

    def path(self) -> list[str]:
        """The nodes in the order they ran, from __start__ (to __end__ when the run finished), with a
        subgraph's start point where the run entered it."""
        out = [START]
        for r in self.runs:
            prefix = r.node.rsplit(":", 1)[0] if ":" in r.node else ""
            if prefix and not out[-1].startswith(prefix + ":"):
                out.append(f"{prefix}:{START}")
            out.append(r.node)
        if self.finished:
            out.append(END)
        return out

    def edge_counts(self) -> Counter[tuple[str, str]]:
        """(source, target) -> how often the run went that way."""
        p = self.path()
        return Counter(zip(p, p[1:]))

    def node_stats(self) -> dict[str, NodeStats]:
        stats: dict[str, NodeStats] = {}
        for r in self.runs:
            s = stats.setdefault(r.node, NodeStats())
            s.visits += 1
            s.seconds += r.seconds
            s.env_steps += r.env_steps
            s.eval_steps += r.eval_steps
        return stats

    def collapsed(self) -> RunHistory:
        """The same run with each stay inside a subgraph as one visit of the subgraph's node."""
        runs: list[NodeRun] = []
        last_stay = -1  # index in `runs` of the stay the previous node belonged to, -1 outside one
        for r in self.runs:
            outer = r.node.split(":", 1)[0]
            if ":" in r.node and last_stay >= 0 and runs[last_stay].node == outer:
                a = runs[last_stay]
                runs[last_stay] = NodeRun(outer, a.started, a.seconds + r.seconds, a.env_steps + r.env_steps,
                                          a.eval_steps + r.eval_steps)
                continue
            runs.append(NodeRun(outer, r.started, r.seconds, r.env_steps, r.eval_steps))
            last_stay = len(runs) - 1 if ":" in r.node else -1
        return RunHistory(self.run_id, runs, self.finished, self.values)


# ---- reading ---------------------------------------------------------------------------------------
def _ts(snapshot: Any) -> float:
    return datetime.fromisoformat(str(snapshot.created_at)).timestamp() if snapshot.created_at else 0.0


def _chain(snapshots: Iterable[Any]) -> list[Any]:
    """The checkpoints leading to the latest one, oldest first (a fork's abandoned branch left out)."""
    items = list(snapshots)
    if not items:
        return []
    by_id = {s.config["configurable"]["checkpoint_id"]: s for s in items}
    chain, current = [], items[0]  # newest first
    while current is not None:
        chain.append(current)
        parent = (current.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        current = by_id.get(parent) if parent else None
    return chain[::-1]


def _idle_gaps(run_dir: Path | None) -> list[tuple[float, float]]:
    """(from, to) wall-clock spans between the sessions of a resumed run (sessions.json)."""
    path = run_dir / "sessions.json" if run_dir else None
    if path is None or not path.is_file():
        return []
    try:
        sessions = sorted(json.loads(path.read_text(encoding="utf-8")), key=lambda s: s["started"])
    except (ValueError, KeyError, TypeError):
        return []
    return [(a["ended"], b["started"]) for a, b in zip(sessions, sessions[1:]) if b["started"] > a["ended"]]


def _busy(start: float, end: float, gaps: Sequence[tuple[float, float]]) -> float:
    """Seconds from `start` to `end` less the idle gaps inside."""
    idle = sum(max(0.0, min(end, b) - max(start, a)) for a, b in gaps)
    return max(0.0, end - start - idle)


def _steps_between(before: dict[str, Any], after: dict[str, Any]) -> tuple[int, int]:
    """(env steps a new tool round reported, evaluation steps added) between two states."""
    messages = list(after.get("messages") or [])
    env = 0
    if messages and isinstance(messages[-1], ToolMessage):
        rid = round_id(messages)
        if rid is not None and rid != round_id(list(before.get("messages") or [])):
            env = steps_of(messages)
    evals = int(after.get("eval_steps") or 0) - int(before.get("eval_steps") or 0)
    return env, max(evals, 0)


def _task_names(snapshot: Any) -> list[str]:
    return [t.name for t in snapshot.tasks if not t.name.startswith("__")]


def _subgraph_runs(graph: Any, config: dict, task: Any, prefix: str, end_ts: float | None,
                   gaps: Sequence[tuple[float, float]]) -> list[NodeRun] | None:
    """The runs inside one stay in a subgraph, or None when it left no checkpoints."""
    ns = task.state["configurable"]["checkpoint_ns"] if isinstance(getattr(task, "state", None), dict) \
        else f"{task.name}:{task.id}"
    sub_config = {"configurable": {"thread_id": config["configurable"]["thread_id"], "checkpoint_ns": ns}}
    chain = _chain(graph.get_state_history(sub_config))
    if not chain:
        return None
    runs: list[NodeRun] = []
    for before, after in zip(chain, chain[1:]):
        env, evals = _steps_between(before.values, after.values)
        t0, t1 = _ts(before), _ts(after)
        names = _task_names(before)
        for i, name in enumerate(names):  # one task per step here; steps split evenly if ever more
            runs.append(NodeRun(f"{prefix}:{name}", t0, _busy(t0, t1, gaps) / len(names),
                                env if i == 0 else 0, evals if i == 0 else 0))
    last = chain[-1]
    if end_ts is not None:  # the subgraph's last step (its exit) ran when the outer step ended
        names = _task_names(last)
        t0 = _ts(last)
        for name in names:
            runs.append(NodeRun(f"{prefix}:{name}", t0, _busy(t0, end_ts, gaps) / len(names)))
    return runs


def read_history(graph: Any, config: dict, run_dir: Path | None = None) -> RunHistory:
    """The run under `config`'s thread id, from the checkpointer `graph` was compiled with."""
    chain = _chain(graph.get_state_history(config))
    run_id = str(config["configurable"]["thread_id"])
    if not chain:
        return RunHistory(run_id)
    gaps = _idle_gaps(run_dir)
    subgraphs = {name for name, _ in graph.get_subgraphs()}
    runs: list[NodeRun] = []
    for before, after in zip(chain, chain[1:]):
        t0, t1 = _ts(before), _ts(after)
        tasks = [t for t in before.tasks if not t.name.startswith("__")]
        for task in tasks:
            inner = _subgraph_runs(graph, config, task, task.name, t1, gaps) if task.name in subgraphs else None
            if inner is not None:
                runs += inner
                continue
            env, evals = _steps_between(before.values, after.values)
            runs.append(NodeRun(task.name, t0, _busy(t0, t1, gaps) / len(tasks), env, evals))
    last = chain[-1]
    for task in last.tasks:  # a run stopped inside a subgraph: the nodes it finished there
        if task.name in subgraphs:
            runs += _subgraph_runs(graph, config, task, task.name, None, gaps) or []
    finished = not last.next and not last.tasks
    return RunHistory(run_id, runs, finished, dict(last.values))

