"""Leaving the attempt subgraph: a `Command` to a node of the outer graph, with what the attempt changed.

A subgraph that ends normally hands its whole state back, and the outer graph would append the
logs it already holds a second time. An attempt therefore leaves by `Command(graph=PARENT)` with
only what is new: the entries it appended to each log since it began (`log_marks`) and the current
value of every other outer key. Its own keys (the conversation, the last attempt) stay behind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from langgraph.types import Command

from nodes.state import LOG_KEYS, RLGPTState

OuterTarget = Literal["slow", "subtask", "planner", "executor"]
OUTER_TARGETS: tuple[str, ...] = get_args(OuterTarget)
OUTER_KEYS = tuple(RLGPTState.__annotations__)


class UnknownRoute(ValueError):
    """A node asked to go where the graph has no edge (a bug, never a silent jump elsewhere)."""


def leave_attempt(state: Mapping[str, Any], update: dict, target: str) -> Command:
    """Go to `target` in the outer graph. `state`: the attempt's state before this node; `update`: this
    node's own changes (log keys hold only their new entries, as for any node)."""
    if target not in OUTER_TARGETS:
        raise UnknownRoute(f"the attempt cannot leave for '{target}'; it leaves for one of {', '.join(OUTER_TARGETS)}")
    marks = update.get("log_marks") or state.get("log_marks") or {}
    out: dict[str, Any] = {}
    for key in OUTER_KEYS:
        if key in LOG_KEYS:
            earlier = list(state.get(key) or [])
            out[key] = earlier[int(marks.get(key, len(earlier))):] + list(update.get(key) or [])
        elif key in update:
            out[key] = update[key]
        elif key in state:
            out[key] = state[key]
    out["route"] = target
    return Command(graph=Command.PARENT, goto=target, update=out)


def leave(state: Mapping[str, Any]) -> Command:
    """The attempt's last node: leaves for the outer node the deciding node chose (`exit_to`)."""
    return leave_attempt(state, {}, str(state.get("exit_to")))


def exit_to(target: str, update: dict) -> Command:
    """From a node of the attempt: end the attempt and go to `target` in the outer graph (through `leave`,
    so that plugin nodes attached after the deciding node see the decision)."""
    if target not in OUTER_TARGETS:
        raise UnknownRoute(f"the attempt cannot leave for '{target}'; it leaves for one of {', '.join(OUTER_TARGETS)}")
    return Command(goto="leave", update={**update, "exit_to": target})
