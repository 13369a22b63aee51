"""The coded-action library of a run: every function written so far, by name, and what is built from it.

The fast agent writes one coded action per call and sees the library by name and signature, never
its sources (`listing`). This module turns the library into what runs: the program a code test
plays (the solved prefix of the plan, then the new action: `test_program`) and the self-contained
sources of a policy's action head (`action_head_sources`). Composing skills is library code, not
the model's job.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nodes.attempts import split_functions
from prompts.fewshot import chain_as_action, chain_source

# What a chain's `main` calls besides its steps (prompts.fewshot.chain_source adds them when missing).
CHAIN_HELPERS = ("explore", "stay_alive", "collect_drink", "collect_food")


def functions_of(sources: Iterable[str]) -> dict[str, str]:
    """name -> source of every top-level function in `sources`; a later definition wins."""
    pool: dict[str, str] = {}
    for source in sources:
        pool.update(split_functions(source))
    return pool


def signature_of(name: str, source: str) -> tuple[str, str]:
    """(`name(game, ...)`, first docstring line) of the function `name` in `source`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return f"{name}(game)", ""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            args = ", ".join(a.arg for a in node.args.args)
            doc = (ast.get_docstring(node) or "").strip().splitlines()
            return f"{name}({args})", doc[0] if doc else ""
    return f"{name}(game)", ""


def listing(pool: Mapping[str, str], origin: Mapping[str, dict] | None = None) -> list[dict[str, Any]]:
    """What the fast agent's prompt shows of the library: name, signature, one-line doc, where it came from."""
    out = []
    for name, source in pool.items():
        if name == "main":
            continue
        signature, doc = signature_of(name, source)
        out.append({"name": name, "signature": signature, "doc": doc, **dict((origin or {}).get(name, {}))})
    return out


def _references(source: str, names: Iterable[str]) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    wanted = set(names)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in wanted}


def closure(pool: Mapping[str, str], roots: Iterable[str]) -> list[str]:
    """`roots` and every library function they call, directly or not, in library order."""
    seen: set[str] = set()
    todo = [r for r in roots if r in pool]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += sorted(_references(pool[name], pool) - seen)
    return [name for name in pool if name in seen]


def test_program(pool: Mapping[str, str], prefix: Sequence[str], actions: Sequence[str],
                 max_steps: int) -> tuple[str, str | None]:
    """(code, action) of a code test: the prefix skills then `actions`, each retried until its achievement
    (prompts.fewshot.chain_source), or the single action itself when there is nothing before it, so that
    its precondition is checked and reported."""
    order = [*prefix, *actions]
    if len(order) == 1:
        needed = closure(pool, order)
        return "\n\n".join(pool[n].rstrip() for n in needed) + "\n", order[0]
    # only what the chain calls: the rest of the library would only lengthen the program
    needed = closure(pool, [*order, *CHAIN_HELPERS])
    return chain_source({n: pool[n] for n in needed}, order, max_steps), None


def with_library(pool: Mapping[str, str], code: str) -> str:
    """`code` after the library's functions it calls, as one program (the code's own definitions win)."""
    needed = [n for n in closure(pool, _references(code, pool)) if n not in split_functions(code)]
    return "\n\n".join([*(pool[n].rstrip() for n in needed), code.rstrip()]) + "\n"


def prefix_action(pool: Mapping[str, str], prefix: Sequence[str], max_steps: int, name: str,
                  after: Sequence[str] = ()) -> str:
    """One coded action that plays the solved prefix of the plan (a policy starts in a fresh world)."""
    needed = closure(pool, [*prefix, *CHAIN_HELPERS])
    return chain_as_action({n: pool[n] for n in needed}, list(prefix), max_steps, name, after)


def self_contained(pool: Mapping[str, str], name: str) -> str:
    """The source of coded action `name` with every library function it calls nested inside it, so that it
    is one entry of a policy's action head (each top-level generator of a source becomes an action)."""
    needed = closure(pool, [name])
    if needed == [name]:
        return pool[name]
    decorators = _decorator_lines(pool[name], name)
    inner = "\n\n".join(pool[n].rstrip() for n in needed)
    body = "\n".join(("    " + line) if line.strip() else "" for line in inner.splitlines())
    return "\n".join([*decorators, f"def {name}(game):", body, f"    yield from {name}(game)", ""])


def _decorator_lines(source: str, name: str) -> list[str]:
    """The decorator of `name` (its precondition and step limit), to repeat on the outer function."""
    tree = ast.parse(source)
    lines = source.splitlines()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name and node.decorator_list:
            first = min(d.lineno for d in node.decorator_list) - 1
            return lines[first:node.lineno - 1]
    return []


def action_head_sources(pool: Mapping[str, str], names: Sequence[str]) -> list[str]:
    """One self-contained source per chosen coded action, for an RL configuration."""
    return [self_contained(pool, n) for n in names]
