"""The restricted namespace agent code runs in (inside the sandbox process): safe builtins, proxied
modules, a captured print.

Like the lint, a courtesy rather than the wall: it keeps honest code away from `open` or `__import__`
with a clear error. Code that gets past it is still in the confined process (sandbox.confine).
"""

from __future__ import annotations

import builtins
import collections
import functools
import heapq
import itertools
import math
import random
import types
from collections.abc import Callable
from typing import Any

from envs.coded import AGENT_CODE_FILENAME, describe_agent_error
from sandbox.lint import ALLOWED_MODULES

_SAFE_BUILTIN_NAMES = (
    # values and containers
    "bool", "int", "float", "str", "list", "dict", "set", "frozenset", "tuple", "slice",
    # iteration and arithmetic
    "range", "len", "min", "max", "abs", "sum", "sorted", "reversed", "enumerate", "zip", "map",
    "filter", "any", "all", "iter", "next", "round", "divmod", "pow", "chr", "ord", "repr",
    "hash", "isinstance", "callable",
    # exceptions agent code may raise or catch
    "Exception", "ArithmeticError", "AssertionError", "AttributeError", "IndexError", "KeyError", "LookupError",
    "NameError", "NotImplementedError", "RuntimeError", "StopIteration", "TypeError", "ValueError",
    "ZeroDivisionError",
)
SAFE_BUILTINS: dict[str, Any] = {name: getattr(builtins, name) for name in _SAFE_BUILTIN_NAMES}

_REAL_MODULES = {m.__name__: m for m in (math, random, itertools, collections, functools, heapq)}


class CodeLoadError(ValueError):
    """Checked agent code failed while its top level ran, or defines no usable coded action."""


# Public names that still read or write attributes by string (functools.wraps copies __globals__).
_HIDDEN = frozenset({"wraps", "update_wrapper", "singledispatch", "singledispatchmethod", "WRAPPER_ASSIGNMENTS"})


def module_proxy(module: types.ModuleType) -> types.SimpleNamespace:
    """The public, non-module names of `module`: a submodule (collections.abc) or a private
    name (random._os) could lead on to os or sys."""
    return types.SimpleNamespace(**{
        k: v for k, v in vars(module).items()
        if not k.startswith("_") and k not in _HIDDEN and not isinstance(v, types.ModuleType)})


def _restricted_import(modules: dict[str, Any]) -> Callable:
    def _import(name, globals=None, locals=None, fromlist=(), level=0):
        if level or name not in modules:
            raise ImportError(f"import of '{name}' is not allowed (allowed: {', '.join(ALLOWED_MODULES)})")
        return modules[name]
    return _import


def make_print(output: Callable[[str], None] | None) -> Callable[..., None]:
    """A `print` that hands each printed text to `output` (or drops it) instead of writing to stdout."""
    def agent_print(*args, sep=" ", end="\n", **_ignored):
        if output is not None:
            output(str(sep).join(str(a) for a in args) + ("" if end == "\n" else str(end)))
    return agent_print


def build_namespace(output: Callable[[str], None] | None = None,
                    extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fresh globals for one piece of agent code; `extra` adds names (e.g. `coded_action`)."""
    modules: dict[str, Any] = {name: module_proxy(mod) for name, mod in _REAL_MODULES.items()}
    extra = dict(extra or {})
    if "coded_action" in extra:
        modules["envs.coded"] = types.SimpleNamespace(coded_action=extra["coded_action"])
    safe = dict(SAFE_BUILTINS)
    safe["print"] = make_print(output)
    safe["__import__"] = _restricted_import(modules)
    namespace: dict[str, Any] = {"__builtins__": safe, "__name__": "agent_code"}
    namespace.update(extra)
    return namespace


def exec_agent_source(source: str, namespace: dict[str, Any]) -> None:
    """Compile and run the (already checked) top level of agent code in `namespace`."""
    code = compile(source, AGENT_CODE_FILENAME, "exec")
    try:
        exec(code, namespace)  # noqa: S102 - checked source, restricted builtins
    except MemoryError:
        raise  # the sandbox reports it as the memory limit
    except Exception as exc:
        described = describe_agent_error(exc, source)
        raise CodeLoadError(f"the code failed while defining its functions: {described}") from None
