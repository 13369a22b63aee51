"""The ripe plant, coded (prompts/examples/eat_plant.py): a sapling planted where no creature can stand beside
it (a zombie, skeleton or cow there destroys it), sealed in with a stone, eaten once ripe.

Played on a real Crafter world with a site drawn next to the player; the wait for the plant to ripen (about
300 steps) is skipped by ripening it in the simulator once the seal is closed."""

from __future__ import annotations

import crafter.objects as crafter_objects
import pytest

from envs.coded import execute
from envs.crafter_env import ACTION_INDEX, CrafterEnv
from envs.seeds import train_seeds
from nodes.models.expert import write_source
from nodes.recipes import prerequisites, recipe_facts, template_for
from prompts.fewshot import chain_source
from sandbox.loader import load_coded_actions

CREATURE_GROUND = ("grass", "sand", "path")


def _draw_site(env, stone: int) -> tuple[int, int]:
    """Grass all around the player, trees on three sides of the tile two above it, a stone block in view 9 tiles
    from it (mined, it leaves path, which the site keeps away from), no creature near; a sapling, `stone`
    stones and a wood pickaxe in hand. Returns the site."""
    sim = env.backend._sim
    px, py = (int(v) for v in sim._player.pos)
    for obj in list(sim._world.objects):
        if obj is not sim._player and abs(obj.pos[0] - px) + abs(obj.pos[1] - py) < 20:
            sim._world.remove(obj)
    for x in range(px - 10, px + 11):
        for y in range(py - 8, py + 9):
            sim._world[(x, y)] = "grass"
    site = (px, py - 2)
    for dx, dy in ((-1, 0), (1, 0), (0, -1)):
        sim._world[(site[0] + dx, site[1] + dy)] = "tree"
    sim._world[(px + 4, py + 3)] = "stone"
    sim._player.inventory.update(sapling=1, stone=stone, wood_pickaxe=1)
    return site


def _plants(env) -> list:
    return [obj for obj in env.backend._sim._world.objects if isinstance(obj, crafter_objects.Plant)]


def _program() -> str:
    def source(name: str) -> str:
        template = template_for(name) or {"kind": name}
        return write_source({"name": name, "template": template["kind"], "target": template.get("target"),
                             "item": template.get("item")})

    return chain_source({name: source(name) for name in ("eat_plant", "collect_sapling", "collect_stone",
                                                         "explore")}, ["eat_plant"], 2000)


@pytest.mark.parametrize("stone", [1, 0])
def test_the_plant_is_sealed_where_no_creature_can_reach_it_then_eaten_ripe(stone):
    """With a stone in hand, or after mining one. A call that sees its plant ripe returns, and the next call
    (the chain calls a step again until its achievement unlocks) opens the seal and eats it."""
    action = {a.name: a for a in load_coded_actions(_program())}["eat_plant"]
    env = CrafterEnv("eat_plant")
    env.reset(seed=train_seeds(1, offset=8500)[0])
    site = _draw_site(env, stone)
    env.step(ACTION_INDEX["noop"])  # the drawn site is seen
    sealed = []

    def on_step(*_):
        world = env.backend._sim._world
        plants = _plants(env)
        if plants and not sealed and all(world[(site[0] + dx, site[1] + dy)][0] not in CREATURE_GROUND
                                         for dx, dy in ((-1, 0), (1, 0), (0, -1), (0, 1))):
            sealed.append(env.game.step_count)
            plants[0].grown = 301  # ripe now: the wait is not what this test is about

    for _ in range(3):
        execute(env, action, on_step=on_step, max_steps=200)
        if "eat_plant" in env.game.achievements:
            break
    assert sealed, "the sapling was never sealed in"
    assert [tuple(int(v) for v in p.pos) for p in _plants(env)] == [site]  # planted on the site, still there
    assert "eat_plant" in env.game.achievements


def test_the_plant_brings_the_stone_and_pickaxe_its_seal_needs():
    """The stone is the code's need, not the game's recipe: the plan brings it and the pickaxe that opens the
    seal, and the recipe facts say why (the order among the late coded achievements: tests/test_expert.py)."""
    assert template_for("eat_plant") == {"kind": "plant"}
    assert {"collect_stone", "make_wood_pickaxe", "place_plant"} <= set(prerequisites("eat_plant"))
    assert "seals it in" in recipe_facts("eat_plant")["why_stone"]


def test_a_plant_grows_only_while_the_player_is_within_17_moves_as_the_recipe_fact_says():
    """The fact the prompts give (nodes/recipes.py) against the game: an answerer asked how near 'near' is."""
    assert "within 17 moves" in recipe_facts("eat_plant")["why_stone"]
    env = CrafterEnv(task="eat_plant", obs_kind="symbolic", max_steps=100)
    env.reset(seed=train_seeds(1)[0])
    sim = env.backend._sim
    px, py = (int(v) for v in sim._player.pos)
    for obj in list(sim._world.objects):
        if obj is not sim._player:
            sim._world.remove(obj)
    grown = {}
    for moves in (17, 18):  # |dx| + |dy| from the player, along its row
        pos = (px + moves, py)
        sim._world[pos] = "grass"
        sim._world.add(crafter_objects.Plant(sim._world, pos))
        grown[moves] = next(p for p in _plants(env) if tuple(p.pos) == pos)
    for _ in range(5):
        sim._player.inventory.update(food=9, drink=9, energy=9)
        env.step(ACTION_INDEX["noop"])
    assert (grown[17].grown, grown[18].grown) == (5, 0)
