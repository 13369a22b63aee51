"""Task definitions: a name, a success condition over achievements, a step limit, a tech-tree chain.

Every Crafter achievement is a task of its own name. Plain-words aliases ("obtain diamond",
"harvest log") map onto them, and `crafter_score` is the benchmark's own task: all 22 achievements
in a 10000-step episode, scored by the geometric mean of success rates.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

ACHIEVEMENTS: tuple[str, ...] = (
    "collect_coal", "collect_diamond", "collect_drink", "collect_iron", "collect_sapling",
    "collect_stone", "collect_wood", "defeat_skeleton", "defeat_zombie", "eat_cow", "eat_plant",
    "make_iron_pickaxe", "make_iron_sword", "make_stone_pickaxe", "make_stone_sword",
    "make_wood_pickaxe", "make_wood_sword", "place_furnace", "place_plant", "place_stone",
    "place_table", "wake_up",
)

CRAFTER_SCORE = "crafter_score"


class UnknownTaskError(ValueError):
    """A task name that matches no task or alias; the message lists the close matches."""


@dataclass(frozen=True)
class Task:
    name: str
    description: str
    achievement: str | None          # None: no single success achievement (crafter_score)
    max_steps: int
    prerequisites: tuple[str, ...] = field(default=())  # tech-tree chain before this task, in order

    def is_success(self, achievements: set[str] | frozenset[str], inventory: dict | None = None) -> bool:
        return self.achievement is not None and self.achievement in achievements

    @property
    def is_score(self) -> bool:
        """A task scored over many achievements (crafter_score) rather than by one: its plan lists
        achievements, and a step that fails is passed over instead of ending the episode."""
        return self.achievement is None

    @property
    def chain(self) -> tuple[str, ...]:
        """Every task from the first prerequisite to this one, in tech-tree order."""
        return (*self.prerequisites, self.name)


# Tech-tree chains, each a prefix-closed path through Crafter's recipes (data.yaml):
# wood -> table -> wood pickaxe -> stone -> stone pickaxe, coal, iron, furnace -> iron pickaxe -> diamond.
_WOOD = ("collect_wood",)
_TABLE = _WOOD + ("place_table",)
_WOOD_PICK = _TABLE + ("make_wood_pickaxe",)
_STONE = _WOOD_PICK + ("collect_stone",)
_STONE_PICK = _STONE + ("make_stone_pickaxe",)
_IRON_PICK_INPUTS = _STONE_PICK + ("collect_coal", "collect_iron", "place_furnace")

# name: (description, step limit, prerequisites). Limits grow with depth in the tech tree.
_SPECS: dict[str, tuple[str, int, tuple[str, ...]]] = {
    "collect_wood": ("collect one piece of wood from a tree", 500, ()),
    "place_table": ("place a crafting table (needs wood)", 1000, _WOOD),
    "make_wood_pickaxe": ("make a wood pickaxe at a table", 1500, _TABLE),
    "make_wood_sword": ("make a wood sword at a table", 1500, _TABLE),
    "collect_stone": ("mine one stone (needs a wood pickaxe)", 2000, _WOOD_PICK),
    "place_stone": ("place a stone block", 2500, _STONE),
    "make_stone_pickaxe": ("make a stone pickaxe at a table", 3000, _STONE),
    "make_stone_sword": ("make a stone sword at a table", 3000, _STONE),
    "collect_coal": ("mine coal (needs a wood pickaxe)", 3000, _WOOD_PICK),
    "collect_iron": ("mine iron (needs a stone pickaxe)", 5000, _STONE_PICK),
    # the game allows a furnace anywhere (an answerer read "near the table" as a rule the manual contradicts)
    "place_furnace": ("place a furnace (needs stone; the game allows it anywhere, but place it near the table: the "
                      "iron pickaxe is made with both within 1 tile)", 3000, _STONE),
    "make_iron_pickaxe": ("make an iron pickaxe near a table and a furnace", 8000, _IRON_PICK_INPUTS),
    "make_iron_sword": ("make an iron sword near a table and a furnace", 8000, _IRON_PICK_INPUTS),
    "collect_diamond": ("mine a diamond (needs an iron pickaxe)", 10000,
                        _IRON_PICK_INPUTS + ("make_iron_pickaxe",)),
    "collect_drink": ("drink water", 500, ()),
    "collect_sapling": ("collect a sapling from grass", 500, ()),
    "place_plant": ("plant a sapling on grass", 1000, ("collect_sapling",)),
    # the stone seals the plant in while it ripens (nodes.recipes.requirements): not the game's recipe
    "eat_plant": ("eat a ripe plant that you planted", 5000, _STONE + ("collect_sapling", "place_plant")),
    "eat_cow": ("hit a cow until you eat it", 1000, ()),
    "defeat_zombie": ("defeat a zombie", 3000, ()),
    "defeat_skeleton": ("defeat a skeleton in a cave", 5000, ()),
    "wake_up": ("sleep and wake up", 3000, ()),
}

TASKS: dict[str, Task] = {
    name: Task(name=name, description=desc, achievement=name, max_steps=limit, prerequisites=pre)
    for name, (desc, limit, pre) in _SPECS.items()
}
TASKS[CRAFTER_SCORE] = Task(
    name=CRAFTER_SCORE,
    description="the Crafter benchmark: unlock as many of the 22 achievements as possible",
    achievement=None, max_steps=10000, prerequisites=(),
)
assert set(ACHIEVEMENTS) <= set(TASKS)

# Plain-words names. Keys are normalised (see _normalise) before lookup.
ALIASES: dict[str, str] = {
    "obtain diamond": "collect_diamond", "get diamond": "collect_diamond",
    "mine diamond": "collect_diamond", "diamond": "collect_diamond",
    "harvest log": "collect_wood", "harvest wood": "collect_wood", "chop tree": "collect_wood",
    "get wood": "collect_wood", "obtain wood": "collect_wood", "wood": "collect_wood",
    "obtain log": "collect_wood", "log": "collect_wood",
    "craft table": "place_table", "craft crafting table": "place_table",
    "place crafting table": "place_table", "crafting table": "place_table", "table": "place_table",
    "craft wood pickaxe": "make_wood_pickaxe", "wood pickaxe": "make_wood_pickaxe",
    "obtain wood pickaxe": "make_wood_pickaxe",
    "craft wood sword": "make_wood_sword",
    "mine stone": "collect_stone", "obtain stone": "collect_stone", "get stone": "collect_stone",
    "stone": "collect_stone", "cobblestone": "collect_stone", "obtain cobblestone": "collect_stone",
    "craft stone pickaxe": "make_stone_pickaxe", "stone pickaxe": "make_stone_pickaxe",
    "obtain stone pickaxe": "make_stone_pickaxe", "craft stone sword": "make_stone_sword",
    "mine coal": "collect_coal", "obtain coal": "collect_coal", "coal": "collect_coal",
    "mine iron": "collect_iron", "obtain iron": "collect_iron", "iron": "collect_iron",
    "iron ore": "collect_iron", "obtain iron ore": "collect_iron",
    "craft furnace": "place_furnace", "furnace": "place_furnace", "build furnace": "place_furnace",
    "craft iron pickaxe": "make_iron_pickaxe", "iron pickaxe": "make_iron_pickaxe",
    "obtain iron pickaxe": "make_iron_pickaxe", "craft iron sword": "make_iron_sword",
    "drink water": "collect_drink", "drink": "collect_drink",
    "collect sapling": "collect_sapling", "sapling": "collect_sapling",
    "plant sapling": "place_plant", "eat plant": "eat_plant",
    "eat cow": "eat_cow", "obtain beef": "eat_cow", "hunt cow": "eat_cow", "kill cow": "eat_cow",
    "kill zombie": "defeat_zombie", "combat zombie": "defeat_zombie",
    "kill skeleton": "defeat_skeleton", "combat skeleton": "defeat_skeleton",
    "sleep": "wake_up",
    "crafter": CRAFTER_SCORE, "crafter score": CRAFTER_SCORE, "all achievements": CRAFTER_SCORE,
}

_FILLER = {"a", "an", "the", "one", "some", "please"}
_WORD_FORMS = {"wooden": "wood", "logs": "log", "diamonds": "diamond", "pick": "pickaxe"}


def _normalise(text: str) -> str:
    words = re.sub(r"[^a-z0-9]+", " ", text.lower()).split()
    words = [_WORD_FORMS.get(w, w) for w in words if w not in _FILLER]
    return " ".join(words)


_LOOKUP: dict[str, str] = {_normalise(k): v for k, v in ALIASES.items()}
_LOOKUP.update({_normalise(name): name for name in TASKS})


def get_task(name: str) -> Task:
    """The task for a name or plain-words alias; UnknownTaskError lists close matches."""
    if not isinstance(name, str) or not name.strip():
        raise UnknownTaskError("a task name is required, for example 'collect_wood' or 'obtain diamond'")
    if name in TASKS:
        return TASKS[name]
    key = _normalise(name)
    if key in _LOOKUP:
        return TASKS[_LOOKUP[key]]
    candidates = sorted(set(_LOOKUP) | set(TASKS))
    close = difflib.get_close_matches(key, candidates, n=5, cutoff=0.5)
    close_names = list(dict.fromkeys(f"'{c}'" if c in TASKS else f"'{c}' ({_LOOKUP[c]})" for c in close))
    hint = f" Did you mean: {', '.join(close_names)}?" if close_names else ""
    raise UnknownTaskError(
        f"unknown task '{name}'.{hint} Known tasks: {', '.join(sorted(TASKS))} "
        "(plain words such as 'obtain diamond' or 'harvest log' work too).")


def task_names() -> list[str]:
    return sorted(TASKS)
