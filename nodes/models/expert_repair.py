"""The rule-based expert's code repairs, keyed on how the last code tests failed.

It reads the same test report a language model reads (per seed: how the episode ended, the failure
kind, the inventory at the end) and changes the code the way the failure asks:

- the step budget ran out (out_of_steps, timeout) -> the same code with twice the steps per test;
- the precondition was false (nothing to act on in view) -> explore until the action can act;
- a place_/make_ action lacked a material the library can collect -> gather it first;
- a collect_ action returned without its item (a drop that comes with a probability, a cow that walked
  off) -> call it again until the item is in the inventory;
- anything else (deaths, errors it has no rule for) -> the same code, which the graph does not test
  again: the critic judges it and the sub-action moves to RL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from envs.game_api import MAKE_RECIPES, PLACE_RECIPES
from nodes.entries import SubActionEntry
from prompts.facts import FastFacts

EXPLORE_ROUNDS = 25
GATHER_ROUNDS = 12
GAIN_ROUNDS = 10  # a sapling drops on 1 grass hit in 10 and the example hits 5 times a call: 10 calls miss 1%


def _failures(last: Mapping[str, Any]) -> list[dict]:
    return [p for p in (last.get("result") or {}).get("per_seed", []) if not p.get("success")]


def _share(failures: list[dict], kinds: tuple[str, ...]) -> float:
    if not failures:
        return 0.0
    hits = sum(1 for p in failures if p.get("ended") in kinds or p.get("failure") in kinds)
    return hits / len(failures)


def _missing_materials(item: str, failures: list[dict]) -> list[str]:
    uses = (MAKE_RECIPES.get(item) or PLACE_RECIPES.get(item) or ({}, ()))[0]
    missing = set()
    for p in failures:
        if p.get("success_step") is not None:  # made or placed, then died playing on: its materials were spent
            continue
        inventory = p.get("inventory_after") or {}
        missing |= {m for m, n in uses.items() if int(inventory.get(m, 0)) < int(n)}
    return sorted(missing)


def renamed(code: str, old: str, new: str) -> str:
    """`code` with the function `old` defined and called as `new` (an action named like the function,
    `yield "make_wood_pickaxe"`, is a string, not a call, and stays)."""
    return re.sub(rf"\b{re.escape(old)}\(", f"{new}(", code)


def explore_first(code: str, name: str) -> str:
    """Wrap `name` so that it explores until the original can act (it yields nothing when it cannot)."""
    inner = f"{name}_here"
    return (renamed(code, name, inner).rstrip() + f"""


@coded_action(max_steps=600)
def {name}(game):
    \"\"\"Explore until {inner} finds something to act on, then let it act.\"\"\"
    for _ in range({EXPLORE_ROUNDS}):
        acted = False
        for action in {inner}(game):
            acted = True
            yield action
        if acted:
            return
        yield from game.explore(15)
""")


def gather_first(code: str, name: str, item: str, collectors: Mapping[str, str]) -> str:
    """Wrap `name` so that it first collects what the recipe of `item` lacks, with the library's actions."""
    inner = f"{name}_here"
    branches = "\n".join(f"        if missing[0] == {m!r}:\n            yield from {fn}(game)\n            continue"
                         for m, fn in collectors.items())
    return (renamed(code, name, inner).rstrip() + f"""


@coded_action(max_steps=1500)
def {name}(game):
    \"\"\"Collect what {item} needs, then let {inner} act.\"\"\"
    for _ in range({GATHER_ROUNDS}):
        missing = [m for m, n in game.requirements({item!r}).items() if not game.has(m, n)]
        if not missing:
            break
{branches}
        break
    yield from {inner}(game)
""")


def until_gained(code: str, name: str, item: str) -> str:
    """Wrap `name` so that it is called again until one more `item` is in the inventory."""
    inner = f"{name}_once"
    return (renamed(code, name, inner).rstrip() + f"""


@coded_action(max_steps=400)
def {name}(game):
    \"\"\"Call {inner} until one more {item} is in the inventory (a call may end without it).\"\"\"
    start = game.inventory[{item!r}]
    for _ in range({GAIN_ROUNDS}):
        acted = False
        for action in {inner}(game):
            acted = True
            yield action
        if not acted or game.inventory[{item!r}] > start:
            return
""")


def repair(sub: SubActionEntry, last: Mapping[str, Any], c: FastFacts) -> dict[str, Any]:
    """The WriteCode arguments of the next attempt, with a note saying which rule fired."""
    name, code = sub["name"], str(last["code"])
    max_steps = int(last.get("max_steps") or c["limits"]["max_steps_per_test"])
    failures = _failures(last)
    left = int(c["limits"]["budget_left"])
    seeds = max(1, int(c["limits"]["test_seeds"]))
    if _share(failures, ("out_of_steps", "timeout")) >= 0.5:
        from tools.run_code import MAX_STEPS_LIMIT  # the sandbox and Crafter: only when this rule fires

        more = min(2 * max_steps, MAX_STEPS_LIMIT, max(left // seeds, 1))
        if more > max_steps:
            return {"code": code, "max_steps": more,
                    "note": f"tests ran out of steps: max_steps {max_steps} -> {more}"}
    item = sub.get("item")
    if sub.get("template") in ("place", "make") and item:
        missing = _missing_materials(item, failures)
        collectors = {m: f"collect_{m}" for m in missing if f"collect_{m}" in (c.get("sources") or {})}
        if collectors and f"{name}_here" not in code:
            return {"code": gather_first(code, name, item, collectors), "max_steps": max_steps,
                    "note": f"{item} lacked {', '.join(missing)}: gather first"}
    if (sub.get("template") == "collect" and item and _share(failures, ("action_returned",)) >= 0.5
            and f"{name}_once" not in code):
        return {"code": until_gained(code, name, item), "max_steps": max_steps,
                "note": f"the action returned without {item}: call it again until it gets one"}
    if _share(failures, ("precondition", "no_action")) >= 0.5 and f"{name}_here" not in code:
        return {"code": explore_first(code, name), "max_steps": max_steps,
                "note": "the precondition was false (nothing to act on in view): explore first"}
    return {"code": code, "max_steps": max_steps, "note": "no rule for this failure: unchanged"}
