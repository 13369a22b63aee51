"""The rule sheet every agent reads: the game's recipes, generated from its data, and a few game facts.

The recipes (what collecting, placing and making need and give) come from `envs.rules`, Crafter's own
data as the game's manual states it, so they never drift from the game. The facts that data does not
hold (where things are, creatures, status bars, day and night) are written in prompts/game_facts.md:
only what a player learns from the manual or from playing, never hidden simulator state.
"""

from __future__ import annotations

from functools import cache

from envs import rules
from envs.observation import MOVE_FOR_DIRECTION
from envs.tasks import ACHIEVEMENTS
from prompts.loader import render


def _amounts(items: dict[str, int]) -> str:
    return ", ".join(f"{n} {item}" for item, n in items.items())


def _collect_lines() -> list[str]:
    out = []
    for material, info in rules.COLLECT.items():
        gives = _amounts(info["receive"])
        if "probability" in info:
            gives += f" ({info['probability']:.0%} of the time)"
        needs = f", needs {_amounts(info['require'])}" if info["require"] else ""
        leaves = f", leaves {info['leaves']}" if info["leaves"] != material else ""
        out.append(f"- {material}: +{gives}{needs}{leaves}")
    return out


def _place_lines() -> list[str]:
    return [f"- {item}: uses {_amounts(info['uses'])}; onto {', '.join(info['where'])}"
            for item, info in rules.PLACE.items()]


def _make_lines() -> list[str]:
    return [f"- {item}: uses {_amounts(info['uses'])}; near {' and '.join(info['nearby'])}"
            for item, info in rules.MAKE.items()]


@cache
def recipes() -> str:
    """The recipe part of the sheet, one line per material or item."""
    return "\n".join([
        "Collect (face the tile and `do`; the tool is kept, not used up):", *_collect_lines(),
        "Place (`place_<item>` onto the faced tile, which must be one of these):", *_place_lines(),
        "Make (`make_<item>` with every station within 1 tile, diagonals included):", *_make_lines(),
    ])


def primitive_actions() -> list[str]:
    """The primitive action names, built from the recipes: one place_/make_ action per recipe."""
    return ["noop", *MOVE_FOR_DIRECTION.values(), "do", "sleep",
            *(f"place_{item}" for item in rules.PLACE), *(f"make_{item}" for item in rules.MAKE)]


@cache
def achievements() -> str:
    """The achievement names, which are also the task and subtask names."""
    return ("Achievements (each unlocks the first time it happens; these names are the subtask names): "
            + ", ".join(ACHIEVEMENTS) + ".")


@cache
def game_facts() -> str:
    """The hand-written facts (prompts/game_facts.md)."""
    return render("game_facts").rstrip()


@cache
def rule_sheet() -> str:
    """Primitive actions, recipes and game facts, as one text (the achievement names are the planner's)."""
    actions = primitive_actions()
    return "\n".join([f"Primitive actions ({len(actions)}): {', '.join(actions)}.", recipes(), game_facts()])
