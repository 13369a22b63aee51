"""Turn checked agent source into `CodedAction`s.

Which top-level functions are coded actions:
- every generator function (one that `yield`s) whose name does not start with "_", in the
  order the source defines them;
- helpers are everything else: plain functions, and generators named `_like_this` (meant for
  `yield from` inside actions);
- `@coded_action(...)` (available without import, or via `from envs.coded import coded_action`)
  attaches a precondition and a step limit; putting it on a non-generator is an error.

This runs the source's top level: only `sandbox.child`, inside the sandbox process, calls it.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import TypeGuard

from envs.coded import AGENT_CODE_FILENAME, CodedAction, as_coded_action, coded_action
from sandbox.lint import SHAPING_HINT, check_source
from sandbox.namespace import CodeLoadError, build_namespace, exec_agent_source


def _defined_here(value: object) -> TypeGuard[types.FunctionType]:
    return inspect.isfunction(value) and value.__code__.co_filename == AGENT_CODE_FILENAME


def load_coded_actions(source: str, output: Callable[[str], None] | None = None) -> list[CodedAction]:
    """Check, compile and run `source` with restricted builtins; return its coded actions in order.

    Raises UnsafeCodeError (rule violations, with lines) or CodeLoadError (the top level failed,
    a decorated function is not a generator, or no coded action is defined). `output` receives
    the text of every `print` call in the agent's code; by default it is dropped.
    """
    check_source(source)
    namespace = build_namespace(output, extra={"coded_action": coded_action})
    exec_agent_source(source, namespace)
    actions: list[CodedAction] = []
    for key, value in namespace.items():
        if not _defined_here(value) or value.__name__ != key or key.startswith("_"):
            continue
        decorated = "max_steps" in vars(value)
        if inspect.isgeneratorfunction(value):
            actions.append(as_coded_action(value, source=source))
        elif decorated:
            raise CodeLoadError(f"'{key}' is decorated with @coded_action but is not a generator: "
                                "a coded action must `yield` action names such as 'do' or 'move_left'")
    if not actions:
        raise CodeLoadError("the code defines no coded action: write a generator function such as "
                            "`def chop_tree(game): ... yield 'do'` (names starting with '_' are helpers)")
    return actions


def load_shaping(source: str, output: Callable[[str], None] | None = None) -> Callable[[dict, dict], float]:
    """The `shaping(prev, curr)` function a reward-shaping source defines (same rules as coded actions)."""
    check_source(source)
    namespace = build_namespace(output)
    exec_agent_source(source, namespace)
    fn = namespace.get("shaping")
    if not _defined_here(fn):
        raise CodeLoadError(SHAPING_HINT)
    return fn
