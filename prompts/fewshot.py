"""The hand-written coded actions that both kinds of agent build on.

An LLM sees them verbatim in its prompt (`example_sources`); the rule-based expert writes new
coded actions by filling them in for another material or item (`fill`), so both start from
the same examples.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

EXAMPLES_DIR = Path(__file__).parent / "examples"

# Which example each kind of sub-action is filled in from, and its placeholders there.
_TEMPLATES = {
    "collect": ("collect_wood", {"material": "tree", "item": "wood"}),
    "place": ("place_table", {"item": "table"}),
    "make": ("make_wood_pickaxe", {"item": "wood_pickaxe"}),
    "explore": ("explore", {}),
}
KINDS = tuple(_TEMPLATES)


@lru_cache(maxsize=None)
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
    raise ValueError(f"unknown example kind '{kind}'; kinds: {', '.join(KINDS)}")


def fill(kind: str, **params: str) -> str:
    """Source of a new coded action made from the example of this kind.

    collect(material, item): walk to the nearest `material` and hit it until `item` increases.
    place(item): place `item` on an open tile. make(item): make `item` next to its stations.
    explore(): walk toward unknown ground.
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
        # Prose in the docstring reads "tree" / "wood pickaxe".
        source = re.sub(rf"\b{re.escape(old.replace('_', ' '))}\b", new.replace("_", " "), source)
    return source
