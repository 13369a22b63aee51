"""The hand-written coded actions that both kinds of agent build on.

An LLM sees them verbatim in its prompt (`example_sources`); the rule-based expert writes new
coded actions by filling them in for another material or item (`fill`), so both start from
the same examples.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

EXAMPLES_DIR = Path(__file__).parent / "examples"

# Which example each kind of sub-action is filled in from, and its placeholders there.
_TEMPLATES = {
    "collect": ("collect_wood", {"material": "tree", "item": "wood"}),
    "place": ("place_table", {"item": "table"}),
    "make": ("make_wood_pickaxe", {"item": "wood_pickaxe"}),
    "explore": ("explore", {}),
    "defeat": ("defeat_zombie", {"target": "zombie"}),
    "plant": ("eat_plant", {}),
}
KINDS = tuple(_TEMPLATES)


@cache
def example_sources() -> dict[str, str]:
    """Name -> source of every example coded action, in a stable order."""
    return {path.stem: path.read_text() for path in sorted(EXAMPLES_DIR.glob("*.py"))}


def combined_source(names: list[str] | tuple[str, ...] | None = None) -> str:
    """Several examples as one program (the chain example calls the others by name)."""
    sources = example_sources()
    names = list(names) if names is not None else list(sources)
    missing = [n for n in names if n not in sources]
    if missing:
        raise KeyError(f"no example named {missing}; examples: {', '.join(sources)}")
    return "\n\n".join(sources[n].rstrip() for n in names) + "\n"


# What a model sees after the example of its own kind: how coded actions call one another, then how
# a long program survives; a sub-action of no known kind starts from the simplest complete example.
_COMPOSITION = "obtain_wood_pickaxe"
_SURVIVAL = "stay_alive"
_GENERIC = "collect_wood"


def examples_for(template: str | None, limit_chars: int = 3000, limit: int = 3,
                 chain_survival: bool = False, repair: bool = False) -> dict[str, str]:
    """Name -> source of the few-shot examples worth showing for a sub-action of this template kind.

    The example of the kind comes first and is always given (a kind with none, e.g. 'custom', gets
    collect_wood), except to a `repair`: its own code, shown with its report, is the example then, and the
    call keeps within the window with the report. With `chain_survival` (its tests replay earlier skills,
    and the chain's stay_alive is still the built-in) stay_alive comes next and is always given too: it is
    the code that runs between the chain's steps, which the model can only improve on by seeing it. Then
    the chain example (coded actions calling each other with `yield from`) and stay_alive, each only while
    the sources stay within `limit_chars` and `limit` examples (none to a repair).
    """
    sources = example_sources()
    first = _TEMPLATES[template][0] if template in _TEMPLATES else _GENERIC
    chosen = {} if repair else {first: sources[first]}
    if chain_survival:
        chosen[_SURVIVAL] = sources[_SURVIVAL]
    if repair:
        return chosen
    for name in (_COMPOSITION, _SURVIVAL):
        if len(chosen) >= limit or name in chosen:
            continue
        if sum(map(len, chosen.values())) + len(sources[name]) <= limit_chars:
            chosen[name] = sources[name]
    return chosen


def action_name(kind: str, **params: str) -> str:
    """The function name `fill` gives a coded action of this kind."""
    if kind == "collect":
        return f"collect_{params['item']}"
    if kind == "place":
        return f"place_{params['item']}"
    if kind == "make":
        return f"make_{params['item']}"
    if kind == "explore":
        return "explore"
    if kind == "defeat":
        return f"defeat_{params['target']}"
    if kind == "plant":
        return "eat_plant"
    raise ValueError(f"unknown example kind '{kind}'; kinds: {', '.join(KINDS)}")


def fill(kind: str, **params: str) -> str:
    """Source of a new coded action made from the example of this kind.

    collect(material, item): walk to the nearest `material` and hit it until `item` increases.
    place(item): place `item` on an open tile. make(item): make `item` next to its stations.
    explore(): walk toward unknown ground. defeat(target): walk next to a creature in sight and hit it.
    plant(): plant a sapling sealed in by stone, wait near it until it ripens, eat it.
    """
    if kind not in _TEMPLATES:
        raise ValueError(f"unknown example kind '{kind}'; kinds: {', '.join(KINDS)}")
    example, placeholders = _TEMPLATES[kind]
    missing = sorted(set(placeholders) - set(params))
    if missing:
        raise ValueError(f"fill('{kind}') needs {', '.join(missing)}")
    source = example_sources()[example]
    source = source.replace(f"def {example}(", f"def {action_name(kind, **params)}(")
    for key, old in placeholders.items():
        new = params[key]
        if not re.fullmatch(r"[a-z_]+", new):
            raise ValueError(f"{key} must be a lower-case name like 'stone', got {new!r}")
        source = source.replace(f'"{old}"', f'"{new}"')
        source = source.replace(f'"{kind}_{old}"', f'"{kind}_{new}"')  # the action it yields
        # Prose in the docstring reads "tree" / "wood pickaxe".
        source = re.sub(rf"\b{re.escape(old.replace('_', ' '))}\b", new.replace("_", " "), source)
    return source


CHAIN_RETRIES = 200  # calls of one step's action before the chain gives up on that step
CHAIN_DRIVER = Path(__file__).with_name("chain_driver.py")


def _read_chain_driver() -> tuple[list[str], str]:
    """(the parameters after `game`, the body) of CHAIN_DRIVER's `play_chain`, its docstring left out: the
    body becomes a chain's `main`, after one assignment per parameter."""
    text = CHAIN_DRIVER.read_text()
    driver = next(node for node in ast.parse(text).body
                  if isinstance(node, ast.FunctionDef) and node.name == "play_chain")
    docstring = driver.body[0]
    if not (isinstance(docstring, ast.Expr) and isinstance(docstring.value, ast.Constant)):
        raise RuntimeError(f"{CHAIN_DRIVER.name}: play_chain must start with its docstring")
    lines = text.splitlines()[docstring.end_lineno:driver.end_lineno]
    while lines and not lines[0].strip():
        lines.pop(0)
    return [arg.arg for arg in driver.args.args[1:]], "\n".join(lines) + "\n"


# Read once, at import: parses on the trusted side run one at a time (sandbox.lint.parse), and chains are
# written from parallel threads.
CHAIN_DRIVER_PARAMETERS, CHAIN_DRIVER_BODY = _read_chain_driver()


def _stations_placed_together(steps, after=()) -> dict[str, list[str]]:
    """For each place_ step, the other stations a later make_ step needs next to it. `after`: steps
    that run after this chain, in another action (an executor plays one skill at a time)."""
    from envs.game_api import MAKE_RECIPES

    out: dict[str, list[str]] = {}
    steps = list(steps)
    for i, step in enumerate(steps):
        if not step.startswith("place_"):
            continue
        station = step.removeprefix("place_")
        for later in steps[i + 1:] + list(after):
            stations = MAKE_RECIPES.get(later.removeprefix("make_"), ({}, ()))[1] if later.startswith("make_") else ()
            if station in stations:
                out[step] = sorted(set(out.get(step, [])) | (set(stations) - {station}))
    return out


_SWORD_AFTER = {"make_wood_pickaxe": "make_wood_sword", "make_stone_pickaxe": "make_stone_sword"}

# The actions the chain driver brings when the library has no function of that name: its `main` calls
# the chain helpers between steps, and a sword is made after the pickaxe of its material. A function the
# model writes under one of these names replaces the built-in.
CHAIN_HELPERS = ("explore", "stay_alive", "collect_drink", "collect_food")
# the successes on the same seeds a rewrite of a chain helper must gain over the one before it to stand
# (nodes.attempt.rounds): one seed in REWRITE_SHARE of the round's, 2 of 8 (4 of 16 where the plan's last subtask
# tests on twice the seeds). The rewrites answerers kept on a seed or two cost their chains 5 points on average
# against the built-in over 100 other seeds (benchmarks.builtin_survival, eight runs: -8, -12, +4, -8, -2, -8,
# -1, -6), and one that won by 2 of 8 cost its chain 10 points over 200; 8 paired seeds cannot tell such a
# difference from chance, and a helper every skill plays has more to lose
REWRITE_SHARE = 4


def way_back_to_builtin(name: str) -> str:
    """How a model goes back to a built-in chain helper it rewrote, as reports and prompts say it."""
    return f"`def {name}(game): yield from {builtin_alias(name)}(game)` goes back to the built-in"


def rewrite_margin(seeds: int) -> int:
    """The successes more than the earlier helper's a rewrite needs on a round of `seeds` seeds: 2 of 8, 4 of 16."""
    return max(1, -(-int(seeds) // REWRITE_SHARE))


def rewrite_margin_text(*seeds: int) -> str:
    """The rule as the prompts state it for any round ("a quarter": REWRITE_SHARE), with its number for rounds of
    `seeds` seeds: 'a quarter of the seeds more successes (2 of 8, 4 of 16)'."""
    return f"a quarter of the seeds more successes ({', '.join(f'{rewrite_margin(n)} of {n}' for n in seeds)})"


# in the compact fast prompt (the 8,000-token budget): a report gives a 16-seed round's number
REWRITE_MARGIN_TEXT = rewrite_margin_text(8)
BUILTIN_ACTIONS = (*CHAIN_HELPERS, *_SWORD_AFTER.values())


BUILTIN_PREFIX = "builtin_"  # reserved: a model's code or sub-action may not define a name starting with it


def builtin_alias(name: str) -> str:
    """The name a built-in chain helper (CHAIN_HELPERS) keeps beside its own, so that a model that replaces it
    can still call it (to build on it, or to go back to it: an answerer pasted the built-in's source to undo its
    own `stay_alive`, against the 8,000-character answer); nodes.skills.pool.builtin_pool holds both."""
    return f"{BUILTIN_PREFIX}{name}"


def builtin_source(name: str) -> str:
    """Source of a built-in action (BUILTIN_ACTIONS)."""
    if name == "explore":
        return fill("explore")
    if name == "stay_alive":
        return example_sources()["stay_alive"]
    if name == "collect_drink":
        return fill("collect", material="water", item="drink")
    if name == "collect_food":
        return fill("collect", material="cow", item="food")
    if name in _SWORD_AFTER.values():
        return fill("make", item=name.removeprefix("make_"))
    raise KeyError(f"no built-in action '{name}'; built-ins: {', '.join(BUILTIN_ACTIONS)}")


def swords_after(steps: Sequence[str]) -> list[str]:
    """The swords a chain of `steps` makes besides its steps, one right after the pickaxe of the same
    material: zombies chase the player at night, and a sword kills one in fewer hits than it takes to lose
    the fight (Crafter: damage 2-3 vs 1)."""
    return [_SWORD_AFTER[step] for step in steps if step in _SWORD_AFTER and _SWORD_AFTER[step] not in steps]


def _with_swords(steps: list[str], sources: dict[str, str], after_last: bool = True) -> list[str]:
    """`steps` with the swords of `swords_after` in place (but after the last step only with `after_last`);
    a sword `sources` lacks plays the built-in."""
    added = set(swords_after(steps))
    out = []
    for k, step in enumerate(steps):
        out.append(step)
        sword = _SWORD_AFTER.get(step)
        if sword in added and (after_last or k < len(steps) - 1):
            sources.setdefault(sword, builtin_source(sword))
            out.append(sword)
    return out


def chain_as_action(sources: dict[str, str], steps: list[str] | tuple[str, ...], max_steps: int, name: str,
                    after: Sequence[str] = ()) -> str:
    """The chain of `chain_source` wrapped into one coded action called `name`: its helpers become
    nested functions, so a policy's action head gets one action that plays the whole chain."""
    if not name.isidentifier() or name.startswith("_"):
        raise ValueError(f"a coded action needs a plain Python name, got {name!r}")
    body = chain_source(sources, steps, max_steps, after)
    inner = "\n".join(("    " + line) if line.strip() else "" for line in body.splitlines())
    return (f"@coded_action(max_steps={int(max_steps)})\n"
            f"def {name}(game):\n"
            f"    \"\"\"Play {' -> '.join(steps)} as one action (the chain of the skills solved so far).\"\"\"\n"
            f"{inner}\n"
            f"    yield from main(game)\n")


def chain_source(sources: dict[str, str], steps: list[str] | tuple[str, ...], max_steps: int,
                 after: Sequence[str] = (), needs: Mapping[str, Sequence[str]] | None = None,
                 ends_with_last: bool = False) -> str:
    """Sources plus a `main` that plays `steps` (coded-action names) in order with the chain driver
    (prompts/chain_driver.py, which says how). `after` names the steps that follow in other actions, so
    that a station is still placed next to what they need. It generalises the chain example
    (examples/obtain_wood_pickaxe.py).

    With `needs` (step -> the achievements it needs first: a score plan), a step that fails is passed
    over instead of ending the chain, and so is a step whose needs did not unlock.

    With `ends_with_last` (a code test of the last step) `main` returns when the last step does: no sword
    after it.
    """
    from envs.tasks import ACHIEVEMENTS

    sources = dict(sources)
    steps = _with_swords(list(steps), sources, after_last=not ends_with_last)
    for name in ("explore", "collect_drink", "collect_food", "stay_alive"):
        sources.setdefault(name, builtin_source(name))
    unknown = [s for s in steps if s not in sources and not any(f"def {s}(" in src for src in sources.values())]
    if unknown:
        raise ValueError(f"chain steps {unknown} are not defined in the given sources")
    rows = "".join(f"        ({s}, {(s if s in ACHIEVEMENTS else None)!r}),\n" for s in steps)

    def actions_by(prefix: str) -> str:  # {'wood': collect_wood, ...}: the step functions themselves
        return "{" + ", ".join(f"{s.removeprefix(prefix)!r}: {s}" for s in steps if s.startswith(prefix)) + "}"

    data = {"steps": f"[\n{rows}    ]", "gather": actions_by("collect_"), "placers": actions_by("place_"),
            "place_near": repr(_stations_placed_together(steps, after)),
            "needs": repr(None if needs is None else dict(needs)), "retries": repr(CHAIN_RETRIES)}
    if set(data) != set(CHAIN_DRIVER_PARAMETERS):  # the driver's signature names the data it reads
        raise RuntimeError(f"play_chain takes {CHAIN_DRIVER_PARAMETERS}; chain_source gives {list(data)}")
    # Everything main needs lives inside it: top-level constants would be copied along with every
    # function when the program is split into skills and chained again.
    title = " -> ".join(steps) or "nothing"
    main = (f"@coded_action(max_steps={int(max_steps)})\n"
            "def main(game):\n"
            f'    """Chain: {title}; each step retried until its achievement unlocks."""\n'
            + "".join(f"    {name} = {data[name]}\n" for name in CHAIN_DRIVER_PARAMETERS)
            + "\n" + CHAIN_DRIVER_BODY)
    return "\n\n".join(s.rstrip() for s in sources.values()) + "\n\n\n" + main
