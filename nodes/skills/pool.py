"""The coded-action library of a run: every definition written so far, by name, and what is built from it.

A program the model (or the expert) writes is stored as its top-level definitions, each once: a
function by its name, an import or a constant by the name it binds (`definitions`). Composed
programs are never stored: a code test, an action-head entry or a held-out chain is assembled at
load time from one `Pool`, by name, with the definitions the roots need and nothing else, so its
size grows with what was written, never with how often it was composed. The code tests, the
executor and PPO's action head build that pool the same way (`pool_of`): skills in plan order, then
the current subtask's code, and a later definition of a name replaces an earlier one.

The fast agent sees the pool by name and signature, never its sources (`listing`).
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from prompts.fewshot import (
    BUILTIN_ACTIONS,
    BUILTIN_PREFIX,
    CHAIN_HELPERS,
    builtin_alias,
    builtin_source,
    chain_as_action,
    chain_source,
    swords_after,
)
from sandbox.lint import coded_action_names, parse


class _Scope(ast.NodeVisitor):
    """Names a top-level statement binds in the module's namespace (not inside nested scopes)."""

    def __init__(self) -> None:
        self.bound: list[str] = []

    def _add(self, name: str) -> None:
        if name not in self.bound:
            self.bound.append(name)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store | ast.Del):
            self._add(node.id)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._add(node.name)  # the body is its own scope

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._add(node.name)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        return

    def _comprehension(self, node: ast.AST) -> None:
        return  # comprehension variables are local to it

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension  # type: ignore[assignment]

    def visit_alias(self, node: ast.alias) -> None:
        self._add((node.asname or node.name).split(".")[0])

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._add(node.target.id)
        self.visit(node.value)


def _bound_names(node: ast.stmt) -> list[str]:
    scope = _Scope()
    scope.visit(node)
    return scope.bound


def bound_names(source: str) -> list[str]:
    """Every name a definition's source binds at the top level."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return []
    return [name for node in tree.body for name in _bound_names(node)]


def _source_of(lines: list[str], node: ast.stmt) -> str:
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
    return "\n".join(lines[start:node.end_lineno])


def definitions(program: str) -> dict[str, str]:
    """The top-level definitions of a program, name -> source, in program order.

    A function or class is keyed by its name (a later one of the same name replaces it, as in Python).
    An import is split into one statement per name it binds. Any other statement is keyed by the first
    name it binds; statements of one program keyed alike stay together in order (`X = 0` then
    `X += 1`). A statement that binds no name (a docstring, a bare call) defines nothing and is left
    out. A program that does not parse defines nothing."""
    try:
        tree = parse(program)
    except (SyntaxError, ValueError):
        return {}
    lines = program.splitlines()
    out: dict[str, str] = {}
    statements: set[str] = set()  # keys of plain statements (not a def, a class or an import)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            key, text = node.name, _source_of(lines, node)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                one = ast.Import(names=[alias]) if isinstance(node, ast.Import) else ast.ImportFrom(
                    module=node.module, names=[alias], level=node.level)
                name = (alias.asname or alias.name).split(".")[0]
                out.pop(name, None)
                statements.discard(name)
                out[name] = ast.unparse(one)
            continue
        else:
            bound = _bound_names(node)
            if not bound:
                continue
            key, text = bound[0], _source_of(lines, node)
            if key in statements:
                out[key] = f"{out[key]}\n{text}"
                continue
            statements.add(key)
            out.pop(key, None)
            out[key] = text
            continue
        statements.discard(key)
        out.pop(key, None)  # redefined: the later one, in its own place
        out[key] = text
    return {name: source + "\n" for name, source in out.items()}


def only_delegates(source: str, callee: str) -> bool:
    """Whether `source` is one function whose body (a docstring aside) only plays `callee` with its own first
    argument: `yield from callee(game)`, or its value returned. A model goes back to a built-in chain helper so
    (the report says how), and that plays what stood before, so it is no rewrite to set beside it."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return False
    if len(tree.body) != 1 or not isinstance(fn := tree.body[0], ast.FunctionDef) or not fn.args.args:
        return False
    body = fn.body[1:] if ast.get_docstring(fn) is not None else fn.body
    if len(body) != 1 or not isinstance(body[0], ast.Expr | ast.Return) or body[0].value is None:
        return False
    played = body[0].value
    return (isinstance(played, ast.YieldFrom) and isinstance(call := played.value, ast.Call)
            and isinstance(call.func, ast.Name) and call.func.id == callee and not call.keywords
            and len(call.args) == 1 and isinstance(call.args[0], ast.Name) and call.args[0].id == fn.args.args[0].arg)


def function_names(program: str) -> list[str]:
    """The names of a program's top-level functions (none for a program that does not parse)."""
    try:
        tree = parse(program)
    except (SyntaxError, ValueError):
        return []
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


@lru_cache(maxsize=4096)  # a pool's definitions are read on every fast-agent call: parse each text once
def _is_function(source: str) -> bool:
    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return False
    return bool(tree.body) and isinstance(tree.body[0], ast.FunctionDef | ast.AsyncFunctionDef)


def _is_import(source: str) -> bool:
    return source.lstrip().startswith(("import ", "from "))


@lru_cache(maxsize=4096)
def references(source: str) -> frozenset[str]:
    """Every name a piece of code reads (candidates for the pool's definitions it needs)."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return frozenset()
    return frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name))


class Pool:
    """The one pool of definitions a run's programs are assembled from: name -> source, with where each
    came from. `add` a program: each of its definitions replaces the pool's of the same name."""

    def __init__(self) -> None:
        self.sources: dict[str, str] = {}
        self.origin: dict[str, dict[str, Any]] = {}
        self.binds: dict[str, str] = {}  # every name the definitions bind -> its definition's key

    def add(self, program: str, **origin: Any) -> list[str]:
        """Add a program's definitions (a later definition of a name replaces the earlier, in its place);
        the names it defined."""
        defined = definitions(program)
        for name, source in defined.items():
            self.sources[name] = source
            self.origin[name] = dict(origin)
            for bound in bound_names(source):
                self.binds[bound] = name
            self.binds[name] = name
        return list(defined)

    def copy(self) -> Pool:
        other = Pool()
        other.sources, other.origin = dict(self.sources), {k: dict(v) for k, v in self.origin.items()}
        other.binds = dict(self.binds)
        return other

    def __contains__(self, name: object) -> bool:
        return name in self.sources

    def functions(self) -> list[str]:
        """Names of the pool's functions (what can be called as a coded action), in pool order."""
        return [n for n, s in self.sources.items() if _is_function(s)]

    def closure(self, roots: Iterable[str]) -> list[str]:
        """`roots` and every definition they use, directly or not, in pool order."""
        seen: set[str] = set()
        todo = [self.binds.get(r, r) for r in roots if r in self.sources or r in self.binds]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            used = {self.binds[n] for n in references(self.sources[name]) if n in self.binds}
            todo += sorted(used - seen)
        return [n for n in self.sources if n in seen]

    def parts(self, roots: Iterable[str]) -> dict[str, str]:
        """name -> source of what `roots` need, imports first, each definition once."""
        needed = self.closure(roots)
        ordered = [n for n in needed if _is_import(self.sources[n])] + [
            n for n in needed if not _is_import(self.sources[n])]
        return {n: self.sources[n] for n in ordered}

    def program(self, roots: Iterable[str]) -> str:
        """One program holding `roots` and what they need."""
        return "\n\n".join(s.rstrip() for s in self.parts(roots).values()) + "\n"

    def largest(self, names: Iterable[str], n: int = 5) -> list[tuple[str, int, str]]:
        """(name, characters, where it came from) of the largest of `names`."""
        sized = sorted(((name, len(self.sources[name])) for name in names if name in self.sources),
                       key=lambda x: -x[1])[:n]
        return [(name, size, str(self.origin.get(name, {}).get("subtask") or "?")) for name, size in sized]


def builtin_pool() -> Pool:
    """A pool of the built-in actions (prompts.fewshot.BUILTIN_ACTIONS), which any definition of the same
    name replaces: they are listed, callable and offered to an action head like written code. Each chain
    helper (what a chain's `main` calls besides its steps) is there under its `builtin_alias` too, for code
    that calls it after a rewrite (listed only then); a program holds the alias only where its code calls it."""
    pool = Pool()
    for name in BUILTIN_ACTIONS:
        pool.add(builtin_source(name), kind="built-in")
    for name in CHAIN_HELPERS:
        alias = re.sub(rf"^def {name}\(", f"def {builtin_alias(name)}(", builtin_source(name), count=1, flags=re.M)
        pool.add(alias, kind="built-in", alias_of=name)
    return pool


def restored(pool: Pool, names: Iterable[str], before: Pool) -> Pool:
    """A copy of `pool` whose definitions of `names` are `before`'s again (a helper `before` lacks stays as it is)."""
    out = pool.copy()
    for name in names:
        if name in before:
            out.add(before.sources[name], **before.origin.get(name, {}))
    return out


def without_definitions(program: str, names: Iterable[str]) -> str:
    """`program` less its definitions of `names`: exactly `program` when it defines none of them."""
    defined = definitions(program)
    dropped = set(names) & set(defined)
    if not dropped:
        return program
    kept = [source.rstrip() for key, source in defined.items() if key not in dropped]
    return "\n\n\n".join(kept) + "\n" if kept else ""


def pool_from(programs: Iterable[str], **origin: Any) -> Pool:
    """A pool of these programs' definitions, in order (a later definition replaces an earlier one)."""
    pool = Pool()
    for program in programs:
        pool.add(program, **origin)
    return pool


def revised(previous: str | None, answer: str) -> str:
    """A sub-action's code after the answer `answer` to it: the answer's definitions, and those of its `previous`
    version that the answer does not define again, as one program. A code test loads both (the subtask's pool
    holds the previous version), so this is what the test ran, and what a skill made of it keeps: a helper the
    answer did not send again is neither lost later nor silently different. An answer that defines nothing (it
    does not parse) changes nothing: the previous version stays, where one defines something (the sandbox says
    what is wrong with the answer, and the next revision still builds on the code that loaded)."""
    sent = definitions(answer)
    if not sent:
        return previous if previous and definitions(previous) else answer
    if not previous:
        return answer
    pool = pool_from([previous, answer])
    if set(pool.sources) == set(sent):  # nothing carried over: the answer as it was written
        return answer
    return pool.program(pool.sources)


def pool_of(skills_in_order: Iterable[tuple[str, Mapping[str, Any]]]) -> Pool:
    """The built-in actions, then every coded definition of these skills (subtask, Skill dump) in plan
    order: the one rule the code tests, the executor and the action head share. A learned skill's coded actions are
    self-contained entries of its head: they are added too (a later subtask may call them by name)."""
    pool = builtin_pool()
    for subtask, skill in skills_in_order:
        for source in skill.get("sources") or []:
            pool.add(source, subtask=subtask, kind=skill.get("kind", "code"))
    return pool


def signature_of(name: str, source: str) -> tuple[str, str]:
    """(`name(game, ...)`, first docstring line) of the function `name` in `source`."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return f"{name}(game)", ""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            args = ", ".join(a.arg for a in node.args.args)
            first = (ast.get_docstring(node) or "").strip().split("\n\n")[0]  # its first paragraph, whole
            return f"{name}({args})", " ".join(first.split())
    return f"{name}(game)", ""


def listing(pool: Pool, composed: Sequence[tuple[str, str]] = ()) -> list[dict[str, Any]]:
    """What the fast agent's prompt shows of the library, the same way every call: every callable function
    of the pool (built-ins included, `pool_of`) with where it came from (a rewritten chain helper's line names
    the alias the built-in is called by), then the actions the graph composes for an action head, as (name, what it
    does) (nodes.fast.SubtaskCode.graph_actions)."""
    out = []
    for name in pool.functions():
        origin = dict(pool.origin.get(name, {}))
        if name == "main" or origin.get("alias_of"):  # an alias is named on the line of what replaced it
            continue
        signature, doc = signature_of(name, pool.sources[name])
        alias = builtin_alias(name)
        if (name in CHAIN_HELPERS and origin.get("kind") != "built-in"  # a learned head's own copy is no rewrite
                and pool.sources[name].strip() != builtin_source(name).strip()
                and (pool.origin.get(alias) or {}).get("alias_of") == name):
            origin["builtin_alias"] = alias
        helper = name not in coded_action_names(pool.sources[name])  # a plain function, not a coded action
        out.append({"name": name, "signature": signature, "doc": doc, **origin, **({"helper": True} if helper else {})})
    for name, doc in composed:
        out.append({"name": name, "signature": f"{name}(game)", "kind": "built-in",
                    "doc": f"{doc}, for an action head"})
    return out


def module_names(pool: Pool) -> list[dict[str, Any]]:
    """The pool's module-level names that are no function (constants, imports) written by a model or the expert,
    each with where it came from as `listing` gives it: any code that reads one gets its definition
    (Pool.closure). Answerers sent their constants again, unsure whether they carried over."""
    return [{"name": name, **pool.origin.get(name, {})} for name, source in pool.sources.items()
            if not _is_function(source) and (pool.origin.get(name) or {}).get("kind") != "built-in"]


def chain_parts(pool: Pool, steps: Sequence[str]) -> dict[str, str]:
    """What a chain of `steps` plays, from the pool: the steps, the driver's helpers and the swords it makes
    after the pickaxes, so that a model's rewrite of any of them plays there (a sword the pool lacks plays
    the built-in)."""
    return pool.parts([*steps, *CHAIN_HELPERS, *swords_after(steps)])


def test_program(pool: Pool, prefix: Sequence[str], actions: Sequence[str],
                 max_steps: int) -> tuple[str, str | None]:
    """(code, action) of a code test: the prefix skills then `actions`, each retried until its achievement
    (prompts.fewshot.chain_source), or the single action itself when there is nothing before it, so that
    its precondition is checked and reported. The test ends when the last action returns."""
    order = [*prefix, *actions]
    if len(order) == 1:
        return pool.program(order), order[0]
    # only what the chain calls: the rest of the library would only lengthen the program
    return chain_source(chain_parts(pool, order), order, max_steps, ends_with_last=True), None


def with_library(pool: Pool, code: str) -> str:
    """`code` after the pool's definitions it uses, as one program (the code's own definitions win)."""
    own = set(definitions(code))
    needed = [n for n in pool.closure(references(code)) if n not in own]
    parts = pool.parts(needed)
    return "\n\n".join([*(parts[n].rstrip() for n in parts if n in needed), code.rstrip()]) + "\n"


def prefix_action(pool: Pool, prefix: Sequence[str], max_steps: int, name: str,
                  after: Sequence[str] = ()) -> str:
    """One coded action that plays the solved prefix of the plan (a policy starts in a fresh world)."""
    return chain_as_action(chain_parts(pool, prefix), list(prefix), max_steps, name, after)


def self_contained(pool: Pool, name: str) -> str:
    """The source of coded action `name` with every definition it uses nested inside it, so that it is one
    entry of a policy's action head (each top-level generator of a source becomes an action)."""
    parts = pool.parts([name])
    if list(parts) == [name]:
        return parts[name]
    decorators = _decorator_lines(parts[name], name)
    inner = "\n\n".join(s.rstrip() for s in parts.values())
    body = "\n".join(("    " + line) if line.strip() else "" for line in inner.splitlines())
    return "\n".join([*decorators, f"def {name}(game):", body, f"    yield from {name}(game)", ""])


def _decorator_lines(source: str, name: str) -> list[str]:
    """The decorator of `name` (its precondition and step limit), to repeat on the outer function."""
    tree = parse(source)
    lines = source.splitlines()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name and node.decorator_list:
            first = min(d.lineno for d in node.decorator_list) - 1
            return lines[first:node.lineno - 1]
    return []


def action_head_sources(pool: Pool, names: Sequence[str]) -> list[str]:
    """One self-contained source per chosen coded action, for an RL configuration."""
    return [self_contained(pool, n) for n in names]


def size_problem(pool: Pool, program: str, roots: Iterable[str], limit: int) -> str | None:
    """Why a composed program cannot be tested (it exceeds the sandbox's size limit), naming its largest
    definitions and what to do; None when it fits."""
    if len(program) <= limit:
        return None
    big = ", ".join(f"{name} ({size:,} characters, from {where})" for name, size, where in
                    pool.largest(pool.closure(roots)))
    return (f"the program to test would be {len(program):,} characters long (the sandbox's limit is {limit:,}); "
            f"it is your code plus the library functions it calls. Largest: {big}. Nothing was run and no "
            f"step was spent: shorten your code, or call fewer or shorter library functions.")


def _bound_anywhere(tree: ast.AST) -> set[str]:
    """Every name the program binds in any scope: definitions, parameters, assignments, imports, handlers."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bound.add(node.id)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            bound.update(node.names)
    return bound


def undefined_calls(program: str) -> list[str]:
    """Functions the program calls by a name it binds nowhere, in any scope, and no builtin has: each call
    of one raises NameError. A function written for a sub-action goes with it when a new decomposition
    leaves that sub-action out, while code that still calls it may stay (an answerer's whole test round
    failed so); the check is kept this narrow so that it never refuses a program that could run."""
    try:
        tree = parse(program)
    except (SyntaxError, ValueError):
        return []  # the sandbox's loader reports it, with its line
    known = _bound_anywhere(tree) | set(dir(builtins)) | {"coded_action"}
    called = [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    return sorted(set(called) - known)


def missing_problem(program: str) -> str | None:
    """Why a composed program cannot be tested (it calls functions nothing defines); None when none."""
    missing = undefined_calls(program)
    if not missing:
        return None
    return (f"the program to test calls {', '.join(missing[:8])}, which neither your code nor the library "
            f"defines (a function written for a sub-action is dropped with it when a new decomposition leaves "
            f"that sub-action out). Nothing was run and no step was spent: define it in your code, or stop "
            f"calling it.")


def reserved_problem(code: str) -> str | None:
    """Why the model's code cannot be used: it defines a name starting with `builtin_`, which the library keeps
    for the built-ins a model may replace (`builtin_stay_alive`, ...: a definition would take the built-in's
    place under that name, and the reports would still call it the built-in). None when it defines none."""
    taken = [name for name in definitions(code) if name.startswith(BUILTIN_PREFIX)]
    if not taken:
        return None
    return (f"your code defines {', '.join(taken)}: names starting with `{BUILTIN_PREFIX}` are the library's, for "
            f"the built-ins a rewrite replaces (call them, do not define them). Nothing was run and no step was "
            f"spent: rename it, or write the helper under its own name (e.g. `stay_alive`) to replace the built-in.")


_LINE_IN = re.compile(r"\bline (\d+) in ([A-Za-z_][A-Za-z0-9_]*)\b")


def _def_lines(program: str) -> dict[str, int]:
    """Function name -> the line of its `def` in `program`, for top-level and nested functions."""
    try:
        tree = parse(program)
    except (SyntaxError, ValueError):
        return {}
    out: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out.setdefault(node.name, node.lineno)
    return out


def relocate_lines(text: str, program: str, own_code: str) -> str:
    """Error lines of a composed program ("line 506 in survive") as the model can find them: the line in
    its own code when the function is its own, else the line within the library function."""
    in_program, in_own = _def_lines(program), _def_lines(own_code)

    def where(match: re.Match[str]) -> str:
        line, name = int(match.group(1)), match.group(2)
        if name not in in_program or line < in_program[name]:
            return match.group(0)
        offset = line - in_program[name]
        if name in in_own:
            return f"line {in_own[name] + offset} of your code, in {name}"
        return f"line {offset + 1} of library function {name}"

    return _LINE_IN.sub(where, text)
