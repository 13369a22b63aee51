"""Crafter's recipe facts, read from the game's own data, as the planner and slow agent see them.

`requirements(achievement)` says what an achievement needs (tools, materials, stations);
`backward_chain(goal)` orders every achievement needed for `goal` so prerequisites come first,
and `prerequisites(achievement)` is that chain less the goal;
`template_for(achievement)` names the few-shot example a coded solution starts from;
`score_order()` orders all 22 achievements for the Crafter-score task.
"""

from __future__ import annotations

from functools import cache

from envs.rules import rules_from_crafter
from envs.tasks import ACHIEVEMENTS

# The installed Crafter's data, not envs.rules' snapshot of it (the two hold the same recipes,
# tests/test_recipe_sources.py): the snapshot's keys are sorted, and the order of the game's own data is
# the order backward_chain visits materials in, hence the order of every plan.
_CRAFTER = rules_from_crafter()
COLLECT = {m: dict(v) for m, v in _CRAFTER["collect"].items()}
PLACE = {i: dict(v) for i, v in _CRAFTER["place"].items()}
MAKE = {i: dict(v) for i, v in _CRAFTER["make"].items()}


@cache
def _producer() -> dict[str, str]:
    """Inventory item or station -> the achievement that first provides it."""
    out: dict[str, str] = {}
    for info in COLLECT.values():
        for item in info.get("receive", {}):
            out.setdefault(item, f"collect_{item}")
    for item in MAKE:
        out[item] = f"make_{item}"
    for item in PLACE:
        out.setdefault(item, f"place_{item}")  # a placed table/furnace is a station for make
    return out


def requirements(achievement: str) -> dict[str, list[str]]:
    """What an achievement needs: {'tools': [...], 'materials': [...], 'stations': [...]}."""
    kind, _, item = achievement.partition("_")
    tools: list[str] = []
    materials: list[str] = []
    stations: list[str] = []
    if kind == "collect":
        source = next((m for m, info in COLLECT.items() if item in info.get("receive", {})), None)
        if source is not None:
            tools = list(COLLECT[source].get("require", {}))
    elif kind == "place" and item in PLACE:
        materials = list(PLACE[item].get("uses", {}))
    elif kind == "make" and item in MAKE:
        materials = list(MAKE[item].get("uses", {}))
        stations = list(MAKE[item].get("nearby", []))
    elif achievement == "eat_plant":
        stations = ["plant"]  # eating needs a sapling planted earlier
        materials = ["stone"]  # not the game's recipe: the stone that seals the plant in while it ripens
    return {"tools": tools, "materials": materials, "stations": stations}


def backward_chain(goal: str) -> list[str]:
    """Every achievement needed for `goal`, prerequisites first, `goal` last (depth-first post-order)."""
    producer = _producer()
    order: list[str] = []
    visiting: set[str] = set()

    def visit(achievement: str) -> None:
        if achievement in order or achievement in visiting:
            return
        visiting.add(achievement)
        needs = requirements(achievement)
        for item in needs["tools"] + needs["materials"] + needs["stations"]:
            if item in producer and producer[item] != achievement:
                visit(producer[item])
        visiting.discard(achievement)
        order.append(achievement)

    visit(goal)
    return order


@cache
def prerequisites(achievement: str) -> tuple[str, ...]:
    """The achievements `achievement` needs unlocked before it, in plan order (backward_chain less the goal).

    The one source of a subtask's dependencies for the graph. envs.tasks.TASKS[...].prerequisites lists the
    same achievements by hand, in its own tech-tree order (envs sits below nodes and cannot derive them
    from here); tests/test_recipe_sources.py checks that the two agree."""
    return tuple(backward_chain(achievement)[:-1])


def template_for(achievement: str) -> dict[str, str] | None:
    """The few-shot example kind and its parameters for a coded solution, or None if none fits."""
    kind, _, item = achievement.partition("_")
    if kind == "collect":
        source = next((m for m, info in COLLECT.items() if item in info.get("receive", {})), None)
        # sapling drops with a probability and drink comes from water: still one 'collect' program
        return {"kind": "collect", "target": source, "item": item} if source else None
    if kind == "place" and item in PLACE:  # table, furnace, stone, and a sapling planted on grass
        return {"kind": "place", "item": item}
    if kind == "make" and item in MAKE:
        return {"kind": "make", "item": item}
    if kind == "defeat":  # a creature: walk next to one in sight and hit it
        return {"kind": "defeat", "target": item}
    if achievement == "eat_plant":  # plant a sapling sealed in by stone, wait near it, eat it ripe
        return {"kind": "plant"}
    return None


# Played after every other coded achievement of a score plan, in this order: a zombie comes to the player at
# night; a plant ripens where it is sealed in (about 300 steps of waiting near it); a skeleton must be sought
# in the tunnels, the longest search. Measured on 30 training seeds, the wait placed before the tunnels' hunt
# gave a Crafter score of 58.4 against 53.8 without it; placed after the stone sword, 40.4 (the chain lost
# its iron and diamonds to the wait).
LAST_CODED = ("defeat_zombie", "eat_plant", "defeat_skeleton")


def score_order() -> list[str]:
    """Every achievement once, for the Crafter-score task: what a few-shot example covers first (code
    is cheap and sure), shallow before deep (an episode that dies early keeps what it unlocked), then the
    long coded ones (LAST_CODED: they want the swords and stone, and one that fails costs the chain its time),
    then what must be learned (sleep, eating); each after its prerequisites."""
    from envs.tasks import TASKS

    depth = {a: len(backward_chain(a)) for a in ACHIEVEMENTS}

    def stage(a: str) -> tuple[int, int]:
        if template_for(a) is None:
            return (2, 0)
        return (1, LAST_CODED.index(a)) if a in LAST_CODED else (0, 0)

    goals = sorted(ACHIEVEMENTS, key=lambda a: (stage(a), depth[a], TASKS[a].max_steps, ACHIEVEMENTS.index(a)))
    order: list[str] = []
    for goal in goals:
        order += [a for a in backward_chain(goal) if a not in order]
    return order


def recipe_facts(achievement: str) -> dict:
    """The recipe data of one achievement, as shown to an LLM."""
    kind, _, item = achievement.partition("_")
    facts: dict = {"achievement": achievement, "needs": requirements(achievement)}
    if kind == "collect":
        source = next((m for m, info in COLLECT.items() if item in info.get("receive", {})), None)
        if source:
            facts["collect_from"] = source
    elif kind == "place" and item in PLACE:
        facts["uses"] = PLACE[item].get("uses", {})
        facts["where"] = PLACE[item].get("where", [])
    elif kind == "make" and item in MAKE:
        facts["uses"] = MAKE[item].get("uses", {})
        facts["nearby"] = MAKE[item].get("nearby", [])
    elif achievement == "eat_plant":
        # 17: Crafter updates an object only while |dx| + |dy| < 2 * 9 (its view) from the player
        facts["why_stone"] = ("a zombie, skeleton or cow beside a plant destroys it: a stone seals it in while it "
                              "ripens (about 300 steps, growing only while the player is within 17 moves of it)")
    return facts


def all_recipe_facts() -> list[dict]:
    """The recipe facts of every achievement (the game's manual), in the game's own order: what a planner
    derives a chain from, without being told the chain."""
    return [recipe_facts(a) for a in ACHIEVEMENTS]
