"""Preconditions the trusted side reads as data, so that a training's action mask costs no round trip.

PPO asks for the action mask after every decision; through the sandbox that is a round trip per primitive
step, about as costly as the step itself (issue 29). Most preconditions are one expression over the game
API's readers, such as ``lambda game: game.can_afford("table")``. For those, the host parses the source
(parsing runs nothing) and builds an evaluator of its own from the expression's syntax tree. The evaluator
calls only the members in READ_CALLS and READ_PROPERTIES, with constants from the source, on the host's
GameAPI. That is the same code the sandbox's mirror runs, on the same observations, so the mask is the one
the sandbox would answer. None of the agent's code runs here.

A precondition is translated only when its shape is certain:
- the action is a top-level ``def`` bound once in its source, with the single decorator
  ``@coded_action(precondition=lambda game: ...)``;
- ``coded_action``, ``len``, ``all`` and ``any`` are not rebound;
- the expression uses only the syntax in `_Translator`, and stays within MAX_NODES and MAX_CALLS (the
  host gives these calls no deadline, so their number is bounded).

Anything else, and a source that does not parse, leaves the mask to the sandbox, as before. Code that
defeats the translation (rebinding the action after its definition, say) changes only its own mask. The
sandbox checks the precondition again when a call begins, and a false one costs that call a `noop` step.
"""
from __future__ import annotations

import ast
import operator
from collections import Counter
from collections.abc import Callable
from typing import Any

from sandbox.lint import parse

Check = Callable[[Any], bool]  # game -> whether the action may be chosen
Scope = dict[str, Any]  # the variables of the generator expressions being evaluated
Node = Callable[[Any, Scope], Any]  # one translated node: (game, scope) -> its value

# Readers of the player's view that change nothing and draw no random numbers, and stay cheap: no path
# search (path_to, nearest), no acting helper (those are generators), not last_refusal (the sandbox's
# mirror sets it, the host's game never does).
READ_CALLS = frozenset({"has", "can_afford", "can_collect", "can_make", "can_place", "requirements", "stations",
                        "known", "is_near", "is_facing", "facing_material", "material_at", "tile", "visible",
                        "is_walkable", "is_sheltered", "local_view"})
READ_PROPERTIES = frozenset({"inventory", "health", "food", "drink", "energy", "daylight", "sleeping",
                             "step_count", "achievements", "pos", "facing", "facing_pos", "creatures"})
MAX_NODES = 48  # syntax nodes of one expression
MAX_CALLS = 6   # calls of the game API in one expression (a call inside a loop runs once per item: see generator)
MAX_TEXT = 64   # characters of a string constant
MAX_NEAR = 16   # is_near's distance: it looks at (2 * distance + 1) ** 2 tiles
# What a loop may call the game API for each item of: collections of a few items (a recipe's stations or needs)
SMALL_COLLECTIONS = frozenset({"stations", "requirements"})

_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Eq: operator.eq,
    ast.NotEq: operator.ne, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_, ast.IsNot: operator.is_not,  # only beside None, True or False (see compare)
}
_CONSTANT_TYPES = (str, int, float, bool, type(None))
BUILTINS: dict[str, Callable[[Any], Any]] = {"len": len, "all": all, "any": any}  # the names an expression may call


class _Untranslatable(Exception):
    """The expression leaves the shape the host evaluates: its action's mask stays with the sandbox."""


def host_preconditions(sources: list[str] | tuple[str, ...]) -> dict[str, Check]:
    """The actions of `sources` whose precondition the host can evaluate: name -> check(game) -> bool (a check
    that raises answers False, as a raising precondition does in the sandbox)."""
    found = [_translate_source(source) for source in sources]
    named = Counter(name for checks in found for name in checks)
    # an action named in two sources: which one the sandbox loaded is not certain from the text
    return {name: check for checks in found for name, check in checks.items() if named[name] == 1}


def _translate_source(source: str) -> dict[str, Check]:
    try:
        tree = parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError, SystemError):
        return {}
    bindings = _bindings(tree)
    if any(bindings.get(name) for name in BUILTINS) \
            or bindings.get("coded_action", 0) > _imports_of_coded_action(tree) or _decorates_elsewhere(tree):
        return {}
    checks: dict[str, Check] = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or bindings.get(node.name) != 1:
            continue
        lam = _decorator_precondition(node)
        if lam is None:
            continue
        try:
            checks[node.name] = _Translator(lam).check()
        except (_Untranslatable, RecursionError):
            continue
    return checks


def _bindings(tree: ast.Module) -> dict[str, int]:
    """How often each name is bound anywhere in the source (a `global` statement counts as a binding)."""
    counts: dict[str, int] = {}

    def bind(name: str) -> None:
        counts[name] = counts.get(name, 0) + 1

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(node.name)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bind(node.id)
        elif isinstance(node, ast.alias):
            bind((node.asname or node.name).split(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                bind(name)
        elif isinstance(node, ast.arg):
            bind(node.arg)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bind(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bind(node.rest)
    return counts


def _imports_of_coded_action(tree: ast.Module) -> int:
    """`from envs.coded import coded_action` statements: the one binding of the name that changes nothing."""
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module == "envs.coded"
               for alias in node.names if alias.name == "coded_action" and alias.asname in (None, "coded_action"))


def _decorates_elsewhere(tree: ast.Module) -> bool:
    """Whether `coded_action` is used other than as a top-level function's decorator, or a precondition is
    reached as an attribute: then the precondition a function ends up with is not certain from its decorator."""
    decorators = {id(d.func) for node in tree.body if isinstance(node, ast.FunctionDef)
                  for d in node.decorator_list if isinstance(d, ast.Call)}
    return any(isinstance(node, ast.Name) and node.id == "coded_action" and id(node) not in decorators
               and isinstance(node.ctx, ast.Load)
               or isinstance(node, ast.Attribute) and node.attr in ("coded_action", "precondition")
               for node in ast.walk(tree))


def _decorator_precondition(node: ast.FunctionDef) -> ast.Lambda | None:
    if len(node.decorator_list) != 1:
        return None
    call = node.decorator_list[0]
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "coded_action"):
        return None
    given = [k for k in call.keywords if k.arg == "precondition"]
    if call.args or len(given) != 1 or any(k.arg is None for k in call.keywords):
        return None
    lam = given[0].value
    if not isinstance(lam, ast.Lambda):
        return None
    args = lam.args
    if args.posonlyargs or args.vararg or args.kwonlyargs or args.kwarg or args.defaults or len(args.args) != 1:
        return None
    return lam


class _Translator:
    """Builds a check from one lambda's body, node by node, with Python's own semantics (`and`/`or` return
    an operand, comparisons chain, `all`/`any` stop at the first item that decides)."""

    def __init__(self, lam: ast.Lambda):
        self.game = lam.args.args[0].arg
        self.body = lam.body
        self.nodes = self.calls = 0
        self.in_loop, self.calls_allowed = False, True  # inside a generator, and whether it may call the game

    def check(self) -> Check:
        value = self.expr(self.body, frozenset())

        def check(game: Any) -> bool:
            try:
                return bool(value(game, {}))
            except Exception:  # noqa: BLE001 - a precondition that raises is false (envs.coded.check_precondition)
                return False

        return check

    def expr(self, node: ast.expr, names: frozenset[str]) -> Node:
        """`names`: the generator expressions' variables in scope here."""
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _Untranslatable("too large")
        if isinstance(node, ast.Constant) and isinstance(node.value, _CONSTANT_TYPES):
            constant = node.value
            if isinstance(constant, str) and len(constant) > MAX_TEXT:
                raise _Untranslatable("long text")
            return lambda g, v: constant
        if isinstance(node, ast.Name) and node.id in names:
            name = node.id
            return lambda g, v: v[name]
        if isinstance(node, (ast.Tuple, ast.List)) and isinstance(node.ctx, ast.Load):
            items = [self.expr(item, names) for item in node.elts]
            make = tuple if isinstance(node, ast.Tuple) else list
            return lambda g, v: make(item(g, v) for item in items)
        if isinstance(node, ast.UnaryOp):
            operand = self.expr(node.operand, names)
            if isinstance(node.op, ast.Not):
                return lambda g, v: not operand(g, v)
            if isinstance(node.op, ast.USub):
                return lambda g, v: -operand(g, v)
            raise _Untranslatable("operator")
        if isinstance(node, ast.BoolOp):
            return self.boolean(node, names)
        if isinstance(node, ast.Compare):
            return self.compare(node, names)
        if isinstance(node, ast.Subscript):
            container, key = self.expr(node.value, names), self.expr(node.slice, names)
            return lambda g, v: container(g, v)[key(g, v)]
        if isinstance(node, ast.Attribute) and self.is_game(node.value, names) and node.attr in READ_PROPERTIES:
            attr = node.attr
            return lambda g, v: getattr(g, attr)
        if isinstance(node, ast.Call):
            return self.call(node, names)
        raise _Untranslatable(type(node).__name__)

    def is_game(self, node: ast.expr, names: frozenset[str]) -> bool:
        return isinstance(node, ast.Name) and node.id == self.game and node.id not in names

    def boolean(self, node: ast.BoolOp, names: frozenset[str]) -> Node:
        """Python's own `and` / `or`, folded from the right: `a and (b and c)`."""
        values = [self.expr(value, names) for value in node.values]
        both = _both if isinstance(node.op, ast.And) else _either
        chained = values[-1]
        for value in reversed(values[:-1]):
            chained = both(value, chained)
        return chained

    def compare(self, node: ast.Compare, names: frozenset[str]) -> Node:
        left = self.expr(node.left, names)
        steps: list[tuple[Callable[[Any, Any], Any], Node]] = []
        operands = [node.left, *node.comparators]
        for i, (op, comparator) in enumerate(zip(node.ops, node.comparators)):
            if type(op) not in _COMPARE:
                raise _Untranslatable("comparison")
            # identity of other values depends on how Python built them (interned text, cached ints)
            if isinstance(op, (ast.Is, ast.IsNot)) and not any(map(_singleton, operands[i:i + 2])):
                raise _Untranslatable("identity")
            steps.append((_COMPARE[type(op)], self.expr(comparator, names)))
        if len(steps) == 1:  # the common case, without the chain's loop
            (compare, right), = steps
            constant = _constant(node.comparators[0])
            if constant is not None:
                fixed = constant[0]
                return lambda g, v: compare(left(g, v), fixed)
            return lambda g, v: compare(left(g, v), right(g, v))

        def chained(g: Any, v: Scope) -> Any:
            a = left(g, v)
            result: Any = True
            for compare_next, next_value in steps:
                b = next_value(g, v)
                result = compare_next(a, b)
                if not result:
                    return result
                a = b
            return result
        return chained

    def call(self, node: ast.Call, names: frozenset[str]) -> Node:
        func = node.func
        if node.keywords or (isinstance(func, ast.Name) and func.id in names):
            raise _Untranslatable("call")
        if isinstance(func, ast.Name) and func.id in BUILTINS and len(node.args) == 1:
            builtin: Callable[[Any], Any] = BUILTINS[func.id]
            arg = node.args[0]
            only = self.generator(arg, names) if isinstance(arg, ast.GeneratorExp) else self.expr(arg, names)
            return lambda g, v: builtin(only(g, v))
        if isinstance(func, ast.Attribute) and self.is_game(func.value, names) and func.attr in READ_CALLS:
            self.calls += 1
            if self.calls > MAX_CALLS or not self.calls_allowed:
                raise _Untranslatable("too many calls")
            if func.attr == "is_near" and len(node.args) > 1 and not (
                    isinstance(node.args[1], ast.Constant) and type(node.args[1].value) is int
                    and 0 <= node.args[1].value <= MAX_NEAR):
                raise _Untranslatable("distance")
            args = [self.expr(a, names) for a in node.args]
            attr = func.attr
            constants = [_constant(a) for a in node.args]
            if all(c is not None for c in constants):  # the common case: the member and its arguments, fixed
                call = operator.methodcaller(attr, *(c[0] for c in constants if c is not None))
                return lambda g, v: call(g)
            return lambda g, v: getattr(g, attr)(*[a(g, v) for a in args])
        raise _Untranslatable("call")

    def generator(self, node: ast.GeneratorExp, names: frozenset[str]) -> Node:
        """`(elt for name in iterable if ...)`, one `for` over a plain name: a generator, as Python makes it
        (the iterable read at once, each item's test and value when the consumer asks)."""
        if len(node.generators) != 1 or self.in_loop:
            raise _Untranslatable("nested loops")
        loop = node.generators[0]
        if loop.is_async or not isinstance(loop.target, ast.Name):
            raise _Untranslatable("loop target")
        name = loop.target.id
        iterable = self.expr(loop.iter, names)
        inner = names | {name}
        # the cost stays bounded: a loop over a literal or a recipe's few stations may call the game for each
        # item; a loop over anything else (known tiles, a view) only compares
        few = isinstance(loop.iter, (ast.Tuple, ast.List)) or (
            isinstance(loop.iter, ast.Call) and isinstance(loop.iter.func, ast.Attribute)
            and self.is_game(loop.iter.func.value, names) and loop.iter.func.attr in SMALL_COLLECTIONS)
        self.in_loop, self.calls_allowed = True, few
        try:
            tests = [self.expr(test, inner) for test in loop.ifs]
            elt = self.expr(node.elt, inner)
        finally:
            self.in_loop, self.calls_allowed = False, True

        def items(g: Any, v: Scope):
            for item in iterable(g, v):
                scope = {**v, name: item}
                if all(test(g, scope) for test in tests):
                    yield elt(g, scope)
        return items


def _both(first: Node, rest: Node) -> Node:
    return lambda g, v: first(g, v) and rest(g, v)


def _either(first: Node, rest: Node) -> Node:
    return lambda g, v: first(g, v) or rest(g, v)


def _constant(node: ast.expr) -> tuple[Any] | None:
    """(value,) for a constant of the shapes `expr` reads as one, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, _CONSTANT_TYPES):
        return (node.value,)
    if isinstance(node, ast.Tuple) and isinstance(node.ctx, ast.Load):
        items = [_constant(item) for item in node.elts]
        if all(item is not None for item in items):
            return (tuple(item[0] for item in items if item is not None),)
    return None


def _singleton(node: ast.expr) -> bool:
    """None, True or False written as a constant: the only values whose identity Python fixes."""
    return isinstance(node, ast.Constant) and (node.value is None or node.value is True or node.value is False)
