"""Turning agent-written source (coded actions, reward shaping) into callables, under the sandbox rules.

This is the one seam between rl/ and tools.sandbox: every source string is checked by
``tools.sandbox.check_source`` and compiled with restricted builtins before the PPO workers run it.
"""
from __future__ import annotations

import math
from typing import Any, Callable

# The shaping function is pure arithmetic over two snapshots: these builtins are all it needs.
SHAPING_BUILTINS: dict[str, Any] = {
    name: __builtins__[name] if isinstance(__builtins__, dict) else getattr(__builtins__, name)
    for name in ("abs", "min", "max", "sum", "len", "float", "int", "bool", "range", "dict", "list", "set",
                 "tuple", "sorted", "round", "enumerate", "zip", "any", "all", "isinstance", "str")
}


def _sandbox():
    try:
        import tools.sandbox as sandbox
    except ImportError as exc:  # pragma: no cover - only while tools/sandbox.py is missing
        raise RuntimeError("tools.sandbox is not available, so agent-written code cannot be checked; "
                           f"install the full rlgpt package ({exc})") from exc
    return sandbox


def load_sources(sources: list[str]) -> list:
    """All coded actions defined by the given sources, in order. Errors name the failing source."""
    if not sources:
        return []
    sandbox = _sandbox()
    actions = []
    for i, src in enumerate(sources):
        if not isinstance(src, str) or not src.strip():
            raise ValueError(f"coded_actions[{i}] is empty: give the Python source of a generator function")
        try:
            found = sandbox.load_coded_actions(src)
        except Exception as exc:
            raise ValueError(f"coded_actions[{i}] cannot be loaded: {exc}") from exc
        if not found:
            raise ValueError(f"coded_actions[{i}] defines no coded action: write `def name(game): ... yield \"do\"`")
        actions.extend(found)
    return actions


def compile_shaping(source: str) -> Callable[[dict, dict], float]:
    """Compile ``def shaping(prev, curr) -> float`` with restricted builtins; ValueError on any problem."""
    sandbox = _sandbox()
    try:
        sandbox.check_source(source)
    except Exception as exc:
        raise ValueError(f"shaping code is not allowed: {exc}") from exc
    namespace: dict[str, Any] = {"__builtins__": dict(SHAPING_BUILTINS), "math": math}
    try:
        exec(compile(source, "<shaping>", "exec"), namespace)  # checked above; builtins restricted
    except Exception as exc:
        raise ValueError(f"shaping code fails to run: {type(exc).__name__}: {exc}") from exc
    fn = namespace.get("shaping")
    if not callable(fn):
        raise ValueError("shaping code must define `def shaping(prev, curr): return <float>`")
    return fn
