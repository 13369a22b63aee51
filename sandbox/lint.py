"""Static (AST) check of agent-written code: a lint that gives the model an early, readable error.

It is not what keeps agent code in: the sandbox process (sandbox.host, sandbox.confine) holds even when
this check is switched off (`checker_disabled()`, reachable from tests, never from a tool argument).
Its rules name the usual escape routes from a restricted `exec` namespace, so a model learns the rules
before its code runs:

- imports only from a small allow-list of pure-computation modules;
- no attribute whose name starts with "_" (dunder walks such as `().__class__.__bases__`, and the
  private state of the game API), and no frame/code/traceback attributes (`gi_frame.f_back` would
  climb out of a generator into the trusted caller's frame);
- no names that reach the interpreter (`open`, `exec`, `eval`, `getattr`, `type`, `globals`, ...);
- no `str.format` / `format_map`, whose "{0.attr[key]}" fields read attributes by string;
- no assignment to attributes, no classes, no async code.

Every violation is reported with its line, so the fast agent can fix all of them in one go.
"""

from __future__ import annotations

import ast
import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from sandbox.wire import mark_lines, scrub

# Pure-computation modules, each inspected so that none of its public names is a module
# (which could lead on to os/sys): dataclasses, operator, string, typing are left out because
# they expose inspect/sys, attrgetter, or Formatter. `envs.coded` gives only `coded_action`.
ALLOWED_MODULES: dict[str, str] = {
    "math": "math functions",
    "random": "random numbers",
    "itertools": "iterator building blocks",
    "collections": "deque, Counter, defaultdict, namedtuple",
    "functools": "lru_cache, partial, reduce",
    "heapq": "priority queues for path search",
    "envs.coded": "the coded_action decorator",
}
# Names an import of `envs.coded` may bind.
ENVS_CODED_NAMES = frozenset({"coded_action"})

FORBIDDEN_NAMES: dict[str, str] = {
    name: "reaches the interpreter" for name in (
        "open", "exec", "eval", "compile", "globals", "locals", "vars", "dir", "getattr",
        "setattr", "delattr", "hasattr", "breakpoint", "input", "memoryview", "type", "object",
        "super", "help", "exit", "quit", "classmethod", "staticmethod", "property", "id",
        "__import__", "__builtins__", "__build_class__", "__loader__", "__spec__",
    )
}

# Attributes that lead from a generator, function, exception or traceback to interpreter frames.
FORBIDDEN_ATTRIBUTE_PREFIXES = ("gi_", "ag_", "cr_", "f_", "tb_", "co_")
FORBIDDEN_ATTRIBUTES: dict[str, str] = {
    "format": "str.format reads attributes by name; use an f-string",
    "format_map": "str.format_map reads attributes by name; use an f-string",
    "mro": "gives access to classes",
    "with_traceback": "gives access to interpreter frames",
}

MAX_SOURCE_CHARS = 100_000
SHAPING_HINT = "shaping code must define `def shaping(prev, curr): return <float>`"


class UnsafeCodeError(ValueError):
    """Agent code broke a sandbox rule (or does not parse). `violations` holds one line per issue."""

    def __init__(self, violations: list[str]):
        # a violation quotes the agent's code: one line of text, fit for a report (sandbox.wire.clean_text)
        self.violations = [mark_lines(scrub(v)) for v in violations]
        super().__init__("the code was rejected before running:\n"
                         + "\n".join(f"  - {v}" for v in self.violations))


@dataclass(frozen=True)
class Violation:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


def _allowed_list() -> str:
    return ", ".join(ALLOWED_MODULES)


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.violations: list[Violation] = []

    def _add(self, node: ast.AST, message: str) -> None:
        self.violations.append(Violation(getattr(node, "lineno", 0), message))

    # --- imports -------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name == "envs.coded":
                # `import envs.coded` would bind the real `envs` package; only the from-form is served.
                self._add(node, "write `from envs.coded import coded_action` to get the decorator")
            elif alias.name not in ALLOWED_MODULES:
                self._add(node, f"import of '{alias.name}' is not allowed (allowed: {_allowed_list()})")
            self._check_identifier(node, alias.asname or "", "name")
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level or module not in ALLOWED_MODULES:
            shown = "." * node.level + module
            self._add(node, f"import from '{shown}' is not allowed (allowed: {_allowed_list()})")
        for alias in node.names:
            if alias.name == "*":
                self._add(node, f"'from {module} import *' is not allowed; import the names you use")
            elif alias.name.startswith("_"):
                self._add(node, f"importing the private name '{alias.name}' is not allowed")
            elif module == "envs.coded" and alias.name not in ENVS_CODED_NAMES:
                self._add(node, f"only 'coded_action' can be imported from envs.coded, not '{alias.name}'")
            self._check_identifier(node, alias.asname or "", "name")
        self.generic_visit(node)

    # --- names and attributes ------------------------------------------------------------
    def _check_identifier(self, node: ast.AST, name: str, kind: str) -> None:
        if name in FORBIDDEN_NAMES:
            self._add(node, f"the name '{name}' is not allowed ({FORBIDDEN_NAMES[name]})")
        elif name.startswith("__"):
            self._add(node, f"the {kind} '{name}' is not allowed (names starting with '__' are reserved)")

    def visit_Name(self, node: ast.Name) -> None:
        self._check_identifier(node, node.id, "name")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr.startswith("_"):
            self._add(node, f"access to the attribute '{attr}' is not allowed "
                            "(attributes starting with '_' are private or reach the interpreter)")
        elif attr in FORBIDDEN_ATTRIBUTES:
            self._add(node, f"the attribute '{attr}' is not allowed ({FORBIDDEN_ATTRIBUTES[attr]})")
        elif attr.startswith(FORBIDDEN_ATTRIBUTE_PREFIXES):
            self._add(node, f"the attribute '{attr}' is not allowed (frame, code and traceback "
                            "attributes reach the interpreter)")
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self._add(node, f"assigning or deleting the attribute '{attr}' is not allowed "
                            "(the game API is read-only; keep your own state in local variables or dicts)")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._check_identifier(node, node.name, "function name")
        self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> None:
        self._check_identifier(node, node.arg, "argument name")
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg is not None:
            self._check_identifier(node, node.arg, "keyword")
        self.generic_visit(node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._check_identifier(node, node.name, "name")
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        for name in node.names:
            self._check_identifier(node, name, "name")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        for name in node.names:
            self._check_identifier(node, name, "name")

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        # `case C(attr=x)` reads attributes by name, like `x.attr`: the same rules apply.
        for attr in node.kwd_attrs:
            if attr.startswith("_") or attr in FORBIDDEN_ATTRIBUTES or attr.startswith(FORBIDDEN_ATTRIBUTE_PREFIXES):
                self._add(node, f"matching on the attribute '{attr}' is not allowed")
        self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.name:
            self._check_identifier(node, node.name, "name")
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self._check_identifier(node, node.name, "name")
        self.generic_visit(node)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest:
            self._check_identifier(node, node.rest, "name")
        self.generic_visit(node)

    # --- constructs with no place in a coded action --------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._add(node, f"class definitions are not allowed ('{node.name}'); use functions, dicts and tuples")
        self.generic_visit(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._add(node, "async functions are not allowed; a coded action is a plain generator")
        self.generic_visit(node)

    def visit_Await(self, node: ast.Await) -> None:
        self._add(node, "'await' is not allowed")
        self.generic_visit(node)


# CPython's parser keeps per-interpreter state that concurrent parses in threads can trip over
# ("SystemError: AST constructor recursion depth mismatch"): code tests of one round run in parallel
# threads (LangGraph's ToolNode), so every parse on the trusted side goes through this lock.
_PARSE_LOCK = threading.Lock()


def parse(source: str, filename: str = "<agent code>") -> ast.Module:
    """ast.parse, one thread at a time."""
    with _PARSE_LOCK:
        return ast.parse(source, filename=filename)


def find_violations(source: str) -> list[Violation]:
    """All rule violations in `source`, sorted by line; a syntax error is one violation."""
    if not isinstance(source, str):
        return [Violation(0, f"the code must be a string, got {type(source).__name__}")]
    if len(source) > MAX_SOURCE_CHARS:
        return [Violation(0, f"the code is {len(source)} characters long; the limit is {MAX_SOURCE_CHARS}")]
    if not source.strip():
        return [Violation(
            0, "the code is empty; write at least one generator function `def name(game): ... yield 'noop'`")]
    try:
        tree = parse(source)
    except SyntaxError as exc:
        text = (exc.text or "").strip()
        shown = f" in `{text}`" if text else ""
        return [Violation(exc.lineno or 0, f"syntax error: {exc.msg}{shown}")]
    except (RecursionError, MemoryError, ValueError) as exc:
        # ValueError: null bytes in the source; RecursionError/MemoryError: absurdly nested code.
        return [Violation(0, f"the code could not be parsed ({type(exc).__name__}: {exc})")]
    checker = _Checker()
    try:
        checker.visit(tree)
    except RecursionError:
        return [Violation(0, "the code is nested too deeply to check")]
    return sorted(checker.violations, key=lambda v: v.line)


_enforced = True


def lint_enforced() -> bool:
    return _enforced


@contextlib.contextmanager
def checker_disabled() -> Iterator[None]:
    """For tests of the boundary: check_source passes everything, here and in the sandbox processes
    started meanwhile (the host tells each one). Not reachable from a tool's arguments."""
    global _enforced
    previous, _enforced = _enforced, False
    try:
        yield
    finally:
        _enforced = previous


def check_source(source: str) -> None:
    """Raise UnsafeCodeError listing every violation (with its line) if `source` breaks a rule."""
    if not _enforced:
        return
    violations = find_violations(source)
    if violations:
        raise UnsafeCodeError([str(v) for v in violations])


def coded_action_names(source: str, generators: bool = True) -> list[str]:
    """The coded actions a source defines, read from its syntax: top-level generator functions whose name
    does not start with "_" (the loader's rule, sandbox.loader). With generators=False, every top-level
    function. Empty when the source does not parse."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    return [node.name for node in tree.body
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")
            and (not generators or _yields(node))]


def _yields(function: ast.FunctionDef) -> bool:
    """A yield in the function's own body (not in a nested function or lambda)."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return False
