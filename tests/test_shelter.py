"""Surviving the night: the game API's shelter and its memory of where cows were seen; the chain's
stations, which skeletons' arrows can destroy; and go_to's way mined through rock.

Zombies walk on grass, sand and path and hit only from a tile next to the player, so a pocket two
tiles long with solid tiles all around keeps them out. The player can face a free tile only by
stepping toward it from the opposite side, which is why the pocket needs its second tile.
"""

from __future__ import annotations

import itertools

import crafter.constants as crafter_constants
import numpy as np

from envs.coded import as_coded_action, execute
from envs.crafter_env import CrafterEnv
from envs.game_api import PLACE_RECIPES, GameAPI
from envs.observation import DIRECTIONS, MATERIAL_IDS, WALKABLE, PlayerObservation
from envs.seeds import train_seeds
from graph.evaluation.coded import pure_code_program
from prompts.fewshot import chain_source
from sandbox.loader import load_coded_actions
from tools.run_code import run_code

LETTERS = {"S": "stone", "P": "path", "G": "grass", "T": "tree", "W": "water", "B": "table", "L": "lava",
           "D": "diamond", "I": "iron"}


def _observation(rows: list[str], pos=(0, 0), creatures=(), daylight=1.0, facing=(0, 1), achievements=(),
                 step=0, **inventory) -> PlayerObservation:
    """A 9x7 view drawn as 7 rows of 9 letters; the player stands at row 3, column 4."""
    materials = np.array([[MATERIAL_IDS[LETTERS[ch]] for ch in row] for row in rows], dtype=np.uint8).T
    items = {name: 0 for name in crafter_constants.items}
    items.update(health=9, food=9, drink=9, energy=9)
    items.update(inventory)  # the bars too may be drawn otherwise
    return PlayerObservation(materials=materials, creatures=tuple(creatures), inventory=items, facing=facing,
                             pos=pos, daylight=daylight, sleeping=False, episode_step=step,
                             achievements=frozenset(achievements))


def _game(rows: list[str], **kwargs) -> GameAPI:
    game = GameAPI()
    game._reset(_observation(rows, **kwargs), helper_seed=0)
    return game


SEALED = ["SSSSSSSSS",
          "SSSSSSSSS",
          "SSSSSSSSS",
          "SSSSPPSSS",
          "SSSSSSSSS",
          "SSSSSSSSS",
          "SSSSSSSSS"]


def test_a_two_tile_pocket_walled_in_by_known_solid_tiles_is_a_shelter():
    assert _game(SEALED).is_sheltered()
    open_door = [row if i != 3 else "SSSGPPSSS" for i, row in enumerate(SEALED)]
    assert not _game(open_door).is_sheltered()  # a third walkable tile leads out
    water = [row if i != 3 else "SSSWPPTSS" for i, row in enumerate(SEALED)]
    assert _game(water).is_sheltered()  # zombies cannot walk on water or trees either
    at_the_edge = [row if i != 3 else "SSSSPPPPP" for i, row in enumerate(SEALED)]
    assert not _game(at_the_edge).is_sheltered()  # the path runs on into ground never seen


def test_a_shelter_site_needs_a_pickaxe_for_stone_and_something_to_seal_with():
    hillside = ["GGGGGSSSS"] * 7  # the player stands on grass at the foot of a stone hill
    assert _game(hillside)._shelter_site(60) == (  # no pickaxe: the stone cannot be dug
        "shelter: needs a wood pickaxe (to dig the pocket, and to mine the way out again)")
    entrance, direction = _game(hillside, wood_pickaxe=1)._shelter_site(60)
    assert (entrance, direction) == ((0, 0), (1, 0))  # dig two tiles into the hill from where it stands


def test_a_shelter_site_needs_a_way_out_again():
    """Tables, trees and water cannot be mined: a pocket walled and sealed only with them is a tomb."""
    grove = ["TTTTTTTTT", "TTTTTTTTT", "TTTTTTTTT", "TTTTGGGTT", "TTTTTTTTT", "TTTTTTTTT", "TTTTTTTTT"]
    assert _game(grove, wood=5, wood_pickaxe=1)._shelter_site(60) == (  # a table seal, no stone anywhere
        "shelter: the pocket at (0, 0) has no stone wall to mine the way out again, and no stone is held to seal it "
        "with")
    assert _game(grove, wood=5, wood_pickaxe=1, stone=1)._shelter_site(60) == ((0, 0), (1, 0))  # a stone seal
    stone_side = [row if i != 2 else "TTTTTSSTT" for i, row in enumerate(grove)]
    assert _game(stone_side, wood=5, wood_pickaxe=1)._shelter_site(60) == ((0, 0), (1, 0))  # a stone wall


def test_leave_shelter_mines_a_stone_wall_when_the_entrance_is_sealed_with_a_table():
    pocket = ["TTTTTTTTT", "TTTTTTTTT", "TTTTSTTTT", "TTTBPPTTT", "TTTTTTTTT", "TTTTTTTTT", "TTTTTTTTT"]
    game = _game(pocket, wood_pickaxe=1, facing=(-1, 0))  # facing the table it sealed the entrance with
    assert game.is_sheltered()
    assert list(itertools.islice(game.leave_shelter(), 2)) == ["move_up", "do"]  # turn to the stone, mine it
    assert list(_game(pocket, facing=(-1, 0)).leave_shelter()) == []  # no pickaxe: no way out, and it says so


def test_the_chain_places_a_station_again_when_the_one_it_placed_is_gone():
    """Crafter's arrows turn a table into path; a make_ step that needs it places one again, then makes."""
    sources = {"place_table": "def place_table(game):\n    yield 'place_table'\n",
               "make_wood_pickaxe": "def make_wood_pickaxe(game):\n    yield 'make_wood_pickaxe'\n",
               "stay_alive": "def stay_alive(game):\n    return\n    yield\n"}
    chain = chain_source(sources, ["place_table", "make_wood_pickaxe"], 100)
    main = {a.name: a for a in load_coded_actions(chain)}["main"]
    field, by_a_table = ["G" * 9] * 7, ["G" * 9] * 3 + ["GGGGGBGGG"] + ["G" * 9] * 3
    game = _game(field, achievements={"place_table"}, wood=5)  # the table was placed, and it is gone
    actions = main.fn(game)
    assert next(actions) == "place_table"
    game._observe(_observation(by_a_table, achievements={"place_table"}, wood=4, step=1))  # the step was taken
    assert next(actions) == "make_wood_pickaxe"
    standing = main.fn(_game(by_a_table, achievements={"place_table"}, wood=5))
    assert next(standing) == "make_wood_pickaxe"  # a table still there: no second one


def test_cows_are_remembered_where_they_were_last_seen():
    field = ["G" * 9] * 7
    game = _game(field, creatures=[("cow", 2, 0)])
    assert game.nearest("cow") == (2, 0)
    game._observe(_observation(field, pos=(10, 0)))  # walked away: the cow's spot is out of view
    assert game.nearest("cow") == (2, 0)
    game._observe(_observation(field, pos=(3, 0)))  # back in view and the cow is gone
    assert game.nearest("cow") is None


def _zombie_reachable_tiles(env) -> int:
    """Ground truth: how many tiles a zombie could walk to from the player's tile (capped at 10)."""
    sim = env.backend._sim
    start = tuple(int(v) for v in sim._player.pos)
    seen, queue = {start}, [start]
    while queue and len(seen) <= 10:
        x, y = queue.pop()
        for nxt in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if nxt not in seen and sim._world[nxt][0] in ("grass", "sand", "path"):
                seen.add(nxt)
                queue.append(nxt)
    return len(seen)


def _shelter(game):
    yield from game.shelter()


def _leave(game):
    yield from game.leave_shelter()


def test_shelter_walls_the_player_in_and_leave_shelter_opens_the_way():
    """On real worlds, once the chain has a pickaxe and stone: the API's verdict matches the simulator."""
    program = {a.name: a for a in load_coded_actions(pure_code_program("collect_stone"))}["main"]
    sheltered = 0
    for seed in train_seeds(10, offset=3000):  # 7 shelter, with or without issue 26's helper seeds
        env = CrafterEnv("collect_diamond")
        env.reset(seed=seed)
        execute(env, program, max_steps=2000)
        if env.game.health <= 0 or "collect_stone" not in env.game.achievements:
            continue
        execute(env, as_coded_action(_shelter), max_steps=200)
        if not env.game.is_sheltered():
            continue
        sheltered += 1
        assert _zombie_reachable_tiles(env) <= 2  # no zombie can reach a tile next to the player
        execute(env, as_coded_action(_leave), max_steps=5)
        assert not env.game.is_sheltered() and _zombie_reachable_tiles(env) > 2
    assert sheltered >= 5


# -- why a helper did nothing: GameAPI.last_refusal ---------------------------------------------------------


class _World:
    """Just enough of Crafter around the player to step the helpers: a move turns the player and steps onto
    free grass, sand or path without a creature; `do` mines the stone in front into path (+1 stone) when
    `mines`; place_stone / place_table put one in front and use up its materials. Drawn as 7 rows of 9
    letters (`_observation`), the player starting at row 3, column 4, facing down; grass beyond them."""

    def __init__(self, rows: list[str], creatures: dict | None = None, mines: bool = True, **inventory):
        self.tiles = {(x - 4, y - 3): LETTERS[ch] for y, row in enumerate(rows) for x, ch in enumerate(row)}
        self.creatures = dict(creatures or {})  # absolute position -> name
        self.mines = mines
        self.pos, self.facing = (0, 0), (0, 1)
        self.inventory = {name: 0 for name in crafter_constants.items}
        self.inventory.update(health=9, food=9, drink=9, energy=9, **inventory)

    def material(self, pos) -> str:
        return self.tiles.get(pos, "grass")

    def observation(self) -> PlayerObservation:
        (px, py) = self.pos
        materials = np.array([[MATERIAL_IDS[self.material((px + dx, py + dy))] for dy in range(-3, 4)]
                              for dx in range(-4, 5)], dtype=np.uint8)
        creatures = tuple((name, x - px, y - py) for (x, y), name in self.creatures.items()
                          if abs(x - px) <= 4 and abs(y - py) <= 3)
        return PlayerObservation(materials=materials, creatures=creatures, inventory=dict(self.inventory),
                                 facing=self.facing, pos=self.pos, daylight=1.0, sleeping=False, episode_step=0,
                                 achievements=frozenset())

    def step(self, action: str) -> None:
        front = (self.pos[0] + self.facing[0], self.pos[1] + self.facing[1])
        if action.startswith("move_"):
            self.facing = DIRECTIONS[action.removeprefix("move_")]
            target = (self.pos[0] + self.facing[0], self.pos[1] + self.facing[1])
            if self.material(target) in WALKABLE and target not in self.creatures:
                self.pos = target
        elif action == "do" and self.mines and self.material(front) == "stone" and front not in self.creatures:
            self.tiles[front] = "path"
            self.inventory["stone"] += 1
        elif action.startswith("place_"):
            item = action.removeprefix("place_")
            self.tiles[front] = item
            for name, amount in PLACE_RECIPES[item][0].items():
                self.inventory[name] -= amount


def _play(world: _World, helper, before=None, limit: int = 100) -> tuple[list[str], str | None, GameAPI]:
    """Run one helper call (`helper(game)`, a generator) in `world`: the actions it took, the refusal it left,
    the game. `before(world, n)` changes the world before its n-th action (1, 2, ...) takes effect."""
    game = GameAPI()
    game._reset(world.observation(), helper_seed=0)
    actions: list[str] = []
    for action in helper(game):
        actions.append(action)
        if before is not None:
            before(world, len(actions))
        world.step(action)
        game._observe(world.observation())
        if len(actions) >= limit:
            break
    return actions, game.last_refusal, game


FIELD = ["G" * 9] * 7
# a pocket of path right of the player, walled in by stone: (0, 0) is its entrance
POCKET = ["GGGGGGGGG", "GGGGGGGGG", "GGGGGSSGG", "GGGGGPPSG", "GGGGGSSGG", "GGGGGGGGG", "GGGGGGGGG"]
# a corridor between trees: the pocket's entrance is (1, 0), one step right of the player
CORRIDOR = ["TTTTTTTTT", "TTTTTTTTT", "TTTTTTTTT", "TTTTGGPPT", "TTTTTTTTT", "TTTTTTTTT", "TTTTTTTTT"]


def test_shelter_walls_the_player_in_and_leaves_no_refusal():
    world = _World(POCKET, wood_pickaxe=1, stone=1)
    game = GameAPI()
    game._reset(world.observation(), helper_seed=0)
    assert list(game.leave_shelter()) == [] and game.last_refusal == (
        "leave_shelter: the player is not walled in (nothing to do)")
    actions, refusal, game = _play(world, _shelter)
    assert actions == ["move_right", "move_right", "move_left", "place_stone"]
    assert refusal is None and game.is_sheltered()


def test_shelter_says_why_it_did_not_start():
    def refusal_of(world, max_steps=60):
        actions, refusal, _ = _play(world, lambda game: game.shelter(max_steps))
        assert actions == []
        return refusal

    assert refusal_of(_World(SEALED, wood_pickaxe=1)) == "shelter: the player is already walled in (nothing to do)"
    assert refusal_of(_World(POCKET, stone=1)) == (
        "shelter: needs a wood pickaxe (to dig the pocket, and to mine the way out again)")
    assert refusal_of(_World(POCKET, wood_pickaxe=1, wood=1)) == (
        "shelter: no stone, nor the wood for a table (a table takes wood 2), to close the entrance of the pocket "
        "at (0, 0)")
    assert refusal_of(_World(FIELD, wood_pickaxe=1, stone=1), max_steps=30) == (
        "shelter: no pocket site remembered within 30 steps of walking (two free or stone tiles in a row, walled "
        "in by solid tiles already seen)")


def test_shelter_says_where_it_stopped_on_the_way():
    def cow_at(pos, at_action):
        return lambda world, n: world.creatures.update({pos: "cow"}) if n == at_action else None

    # a cow steps into the corridor: the entrance cannot be reached any more
    assert _play(_World(CORRIDOR, wood_pickaxe=1, stone=1), _shelter, before=cow_at((1, 0), 1))[:2] == (
        ["move_right"], "shelter: lost the way to the pocket's entrance at (1, 0) (blocked?)")
    # a zombie next to the player takes every step of the walk
    zombie = _World(CORRIDOR, creatures={(0, 1): "zombie"}, wood_pickaxe=1, stone=1)
    assert _play(zombie, lambda game: game.shelter(3))[:2] == (
        ["do", "do", "do"], "shelter: max_steps=3 ran out before it reached the entrance at (1, 0)")


def _visitor(pos, arrives: int, leaves: int | None = None, name: str = "cow"):
    """A creature that steps onto `pos` before the player's `arrives`-th action and leaves before its `leaves`-th
    (the toy world's hits do not hurt it), for `_play`'s `before`."""
    def before(world, n):
        if n == arrives:
            world.creatures[pos] = name
        if n == leaves:
            world.creatures.pop(pos, None)
    return before


def test_shelter_hits_a_creature_out_of_the_pocket_and_seals_it_all_the_same():
    def sealed(before):
        actions, refusal, game = _play(_World(POCKET, wood_pickaxe=1, stone=1), _shelter, before=before)
        assert refusal is None and game.is_sheltered(), (actions, refusal)
        return actions

    # a cow walks into the pocket's first tile, its second, or back into the first as the player turns to seal it:
    # the player hits it until it goes and carries on where it was (it used to give up at once)
    assert sealed(_visitor((1, 0), 1, 3)) == ["move_right", "do", "do", "move_right", "move_right", "move_left",
                                              "place_stone"]
    assert sealed(_visitor((2, 0), 2, 4)) == ["move_right", "move_right", "do", "do", "move_right", "move_left",
                                              "place_stone"]
    assert sealed(_visitor((1, 0), 3, 5)) == ["move_right", "move_right", "move_left", "do", "do", "move_left",
                                              "place_stone"]
    # one that never goes: the pocket's own budget of steps ends it, and the refusal says so
    actions, refusal, game = _play(_World(POCKET, wood_pickaxe=1, stone=1), _shelter, before=_visitor((1, 0), 1))
    assert actions == ["move_right"] + ["do"] * 29 and not game.is_sheltered()
    assert refusal == ("shelter: the pocket at (0, 0) is still open after 30 steps of digging and sealing (a "
                       "creature in it?; the player is at (0, 0))")


def test_shelter_goes_to_another_pocket_when_a_creature_blocks_the_way_to_the_first():
    # two pockets in a row of stone, one each side of the player; the left one is picked first
    rows = ["GGGGGGGGG", "GGGGGGGGG", "GSSGGGSSG", "SPPGGGPPS", "GSSGGGSSG", "GGGGGGGGG", "GGGGGGGGG"]
    assert _game(rows, wood_pickaxe=1, stone=1)._shelter_site(60) == ((-1, 0), (-1, 0))
    # a cow steps onto its entrance and stays: the player turns to the other pocket (it used to give up)
    actions, refusal, game = _play(_World(rows, wood_pickaxe=1, stone=1), _shelter, before=_visitor((-1, 0), 1))
    assert actions == ["move_left", "move_right", "move_right", "move_right", "move_left", "place_stone"]
    assert refusal is None and game.is_sheltered() and game.pos == (2, 0)


def test_shelter_says_why_the_entrance_stayed_open():
    def lose_wood(world, n):
        if n == 3:
            world.inventory["wood"] = 0

    assert _play(_World(POCKET, wood_pickaxe=1, wood=2), _shelter, before=lose_wood)[:2] == (
        ["move_right", "move_right", "move_left"],
        "shelter: no stone, nor the wood for a table (a table takes wood 2), to close the entrance")

    # a zombie in the doorway as the player turns to seal it: hit until it dies, or until the pocket's budget ends
    actions, refusal, game = _play(_World(POCKET, wood_pickaxe=1, stone=1), _shelter,
                                   before=_visitor((0, 0), 3, 5, name="zombie"))
    assert actions == ["move_right", "move_right", "move_left", "do", "do", "place_stone"] and refusal is None
    actions, refusal, _ = _play(_World(POCKET, wood_pickaxe=1, stone=1), _shelter,
                                before=_visitor((0, 0), 3, name="zombie"))
    assert actions == ["move_right", "move_right", "move_left"] + ["do"] * 27
    assert refusal == ("shelter: the pocket at (0, 0) is still open after 30 steps of digging and sealing (a "
                       "creature in it?; the player is at (1, 0))")


def test_leave_shelter_says_why_it_stayed_in():
    grove_pocket = ["TTTTTTTTT", "TTTTTTTTT", "TTTTTTTTT", "TTTBPPTTT", "TTTTTTTTT", "TTTTTTTTT", "TTTTTTTTT"]
    assert _play(_World(grove_pocket), lambda game: game.leave_shelter())[:2] == (
        [], "leave_shelter: needs a wood pickaxe to mine a wall of the pocket")
    # trees and a table all around: it tries from the pocket's other tile, then gives up
    assert _play(_World(grove_pocket, wood_pickaxe=1), lambda game: game.leave_shelter())[:2] == (
        ["move_right"], "leave_shelter: no wall of the pocket can be mined with the pickaxes held (only stone, coal, "
                        "iron and diamond turn to path)")
    stuck = _World(SEALED, wood_pickaxe=1, mines=False)  # every `do` misses
    assert _play(stuck, lambda game: game.leave_shelter(2))[:2] == (
        ["do", "do"], "leave_shelter: still walled in after max_steps=2")
    assert _play(_World(SEALED, wood_pickaxe=1), lambda game: game.leave_shelter())[:2] == (
        ["do", "move_down"], None)


def test_walking_helpers_say_why_they_stopped():
    assert _play(_World(FIELD), lambda game: game.face((2, 0)))[:2] == (
        [], "face: (2, 0) is not next to the player at (0, 0)")
    assert _play(_World(FIELD), lambda game: game.go_to((30, 0)))[:2] == (
        [], "go_to: no path over known walkable tiles to next to (30, 0) (unknown there)")
    assert _play(_World(FIELD), lambda game: game.go_to((3, 0), max_steps=1))[:2] == (
        ["move_right"], "go_to: max_steps=1 ran out before it reached (3, 0)")
    assert _play(_World(FIELD), lambda game: game.go_to((3, 0)))[:2] == (["move_right", "move_right"], None)
    assert _play(_World(FIELD), lambda game: game.go_near(["furnace"]))[:2] == (
        [], "go_near: no furnace seen in this episode")
    fenced = ["GGGGGGGGG", "GGGGGGGGG", "GGGGGGTTT", "GGGGGGTBT", "GGGGGGTTT", "GGGGGGGGG", "GGGGGGGGG"]
    assert _play(_World(fenced), lambda game: game.go_near(["table"]))[:2] == (
        [], "go_near: no known tile within one tile of table that the player can walk to")
    table = ["GGGGGGGGG", "GGGGGGGGG", "GGGGGGGGG", "GGGGGGGGB", "GGGGGGGGG", "GGGGGGGGG", "GGGGGGGGG"]
    assert _play(_World(table), lambda game: game.go_near(["table"], max_steps=1))[:2] == (
        ["move_right"], "go_near: max_steps=1 ran out before it got near table")


def test_agent_code_reads_the_refusal_and_its_print_reaches_the_test_report():
    """The helpers run in the sandbox's mirror of the game: the refusal is there for the code to read."""
    code = ("def main(game):\n"
            "    yield from game.shelter()\n"
            "    print(game.last_refusal)\n"
            "    yield 'noop'\n")
    report = run_code(code, task="collect_wood", seed=0, max_steps=5)
    assert report.ok, report.error
    assert ("print at step 0: shelter: needs a wood pickaxe (to dig the pocket, and to mine the way out again)"
            in report.trace)


def test_a_refusal_reaches_the_test_report_without_a_print():
    """The sandbox tells the host each new reason a helper stopped short during a call: the report's trace,
    its field and its text say it, with no print in the code; a reason from before the call is not repeated."""
    code = ("def main(game):\n"
            "    yield from game.shelter()\n"
            "    yield from game.shelter()\n"  # the same reason again: told once
            "    yield from game.go_to((game.pos[0] + 30, game.pos[1]))\n"
            "    yield 'noop'\n")
    report = run_code(code, task="collect_wood", seed=0, max_steps=5)
    assert report.ok, report.error
    shelter = "shelter: needs a wood pickaxe (to dig the pocket, and to mine the way out again)"
    assert report.trace.count(f"step 0: a helper stopped short: {shelter}") == 1
    assert report.last_refusal is not None and report.last_refusal.startswith("go_to: no path")
    assert f"a helper stopped short: {report.last_refusal}" in report.to_text()
    quiet = run_code("def main(game):\n    yield 'noop'\n", task="collect_wood", seed=0, max_steps=5)
    assert quiet.last_refusal is None and "stopped short" not in quiet.trace


WALLED_DIAMOND = ["GGGGSSSSS",
                  "GGGGSSSSS",
                  "GGGGSSSSS",
                  "GGGGGSSDS",  # the player on grass at (0, 0); a diamond at (3, 0), two stones in between
                  "GGGGSSSSS",
                  "GGGGSSSSS",
                  "GGGGSSSSS"]


def test_go_to_with_dig_mines_through_rock_it_cannot_walk_around():
    assert list(_game(WALLED_DIAMOND, iron_pickaxe=1).go_to((3, 0))) == []  # walking only: no way there
    game = _game(WALLED_DIAMOND, wood_pickaxe=1, iron_pickaxe=1)
    assert game._dig_route((3, 0)) == [(1, 0), (2, 0)]
    assert list(itertools.islice(game.go_to((3, 0), dig=True), 2)) == ["move_right", "do"]  # turn, then mine
    stuck = _game(WALLED_DIAMOND)  # no pickaxe: nothing can be mined, and it says so
    assert list(stuck.go_to((3, 0), dig=True)) == []
    assert stuck.last_refusal == "go_to: no path over known walkable or minable tiles to next to (3, 0) (diamond there)"
    walled_in = _game(SEALED, wood_pickaxe=1)
    assert walled_in._dig_route((4, 0)) and list(walled_in.go_to((4, 0), dig=True)) == []  # leave_shelter's job
    assert walled_in.last_refusal == "go_to: the player is walled in; leave_shelter first to go to (4, 0)"


def test_a_dug_route_mines_only_what_the_pickaxes_held_can_and_never_crosses_lava_or_unknown_ground():
    iron_wall = [row[:5] + "II" + row[7:] for row in WALLED_DIAMOND]
    assert _game(iron_wall, wood_pickaxe=1)._dig_route((3, 0)) is None  # iron needs a stone pickaxe
    assert _game(iron_wall, wood_pickaxe=1, stone_pickaxe=1)._dig_route((3, 0)) == [(1, 0), (2, 0)]
    lava = ["GGGGSSSSS", "GGGGSSSSS", "GGGGSSSSS", "GGGGGLLDS", "GGGGSSSSS", "GGGGSSSSS", "GGGGSSSSS"]
    route = _game(lava, wood_pickaxe=1, iron_pickaxe=1)._dig_route((3, 0))
    assert route is not None and len(route) == 4  # around the lava through the stone above or below it
    moat = ["GGGGGGGGG", "GGGGGLLLG", "GGGGGLSLG", "GGGGGLDLG", "GGGGGLSLG", "GGGGGLLLG", "GGGGGGGGG"]
    assert _game(moat, wood_pickaxe=1, iron_pickaxe=1)._dig_route((2, 0)) is None  # lava all round it
    edge = _game(["GGGGGGGSD"] * 7, wood_pickaxe=1, iron_pickaxe=1)
    assert edge._dig_route((4, 0)) == [(1, 0), (2, 0), (3, 0)]  # next to it from the west, over known tiles
    assert edge._dig_route((6, 0)) is None  # beyond the view nothing is known: no route over unknown ground


def test_explore_with_no_frontier_in_reach_never_steps_into_lava():
    """Crafter lets the player walk onto lava, which kills it; explore's random step must not be that one."""
    walled = ["SSSSSSSSS", "SSSSSSSSS", "SSSSSSSSS", "SSSSPLSSS", "SSSSSSSSS", "SSSSSSSSS", "SSSSSSSSS"]
    moves = list(_game(walled).explore(40))
    assert len(moves) == 40 and "move_right" not in moves
    assert {"move_left", "move_up", "move_down"} <= set(moves)  # still random among the others


def test_no_walking_helper_turns_the_player_onto_lava():
    """A move toward lava steps onto it (Crafter's rule), so facing it kills: face and go_to refuse and say so."""
    field = ["GGGGGGGGG", "GGGGGGGGG", "GGGGGGGGG", "GGGGGLGGG", "GGGGGGGGG", "GGGGGGGGG", "GGGGGGGGG"]
    game = _game(field)  # the player faces down; lava lies to its right
    assert list(game.face((1, 0))) == []
    assert game.last_refusal == "face: (1, 0) is lava; turning to it would step onto it"
    assert "move_right" not in list(game.go_to((1, 0)))
    assert list(game.face((-1, 0))) == ["move_left"]  # grass: the move as before
    assert game.last_refusal is None


def test_the_chain_sees_to_the_night_again_before_it_explores():
    """A step with nothing to act on sends the player exploring; the eating before it may have run into the
    night, so stay_alive comes first again (it shelters in the dark) rather than a walk on the night's grass."""
    sources = {"collect_diamond": "def collect_diamond(game):\n    return\n    yield\n",
               "explore": "def explore(game):\n    yield 'move_left'\n",
               "stay_alive": ("def stay_alive(game):\n    if game.daylight < 0.4:\n        yield 'sleep'\n"
                              "    elif game.food < 5:\n        yield 'do'\n")}
    main = {a.name: a for a in load_coded_actions(chain_source(sources, ["collect_diamond"], 100))}["main"]
    field = ["G" * 9] * 7
    game = _game(field, food=3)
    actions = main.fn(game)
    assert next(actions) == "do"  # stay_alive eats by day
    game._observe(_observation(field, daylight=0.2, step=1))  # and night has fallen meanwhile
    assert next(actions) == "sleep"  # the step found nothing: stay_alive again, not explore
    game._observe(_observation(field, step=2))  # day again, fed: nothing left to do but explore
    assert next(actions) == "move_left"


def test_go_to_with_dig_tunnels_all_the_way_and_ends_facing_the_target():
    """Played out on a drawn world that answers each action as Crafter would: walk onto grass or path, turn
    toward stone, mine stone into path; the player ends next to the diamond, facing it."""
    world = {(x, y): "G" if x <= 0 else "S" for x in range(-8, 14) for y in range(-7, 8)}
    world[(5, 1)] = "D"
    pos, facing = (0, 0), (0, 1)

    def seen(step):
        rows = ["".join(world.get((pos[0] + dx, pos[1] + dy), "S") for dx in range(-4, 5)) for dy in range(-3, 4)]
        return _observation(rows, pos=pos, facing=facing, step=step, wood_pickaxe=1, stone_pickaxe=1,
                            iron_pickaxe=1)

    game = GameAPI()
    game._reset(seen(0), helper_seed=0)
    actions = []
    for action in game.go_to((5, 1), dig=True):
        actions.append(action)
        ahead = (pos[0] + facing[0], pos[1] + facing[1])
        if action.startswith("move_"):
            facing = DIRECTIONS[action.removeprefix("move_")]
            ahead = (pos[0] + facing[0], pos[1] + facing[1])
            if world[ahead] in "GP":
                pos = ahead
        elif action == "do" and world[ahead] in "SD":
            world[ahead] = "P"
        game._observe(seen(len(actions)))
        assert len(actions) < 40, actions
    assert abs(pos[0] - 5) + abs(pos[1] - 1) == 1 and game.facing_pos == (5, 1) and world[(5, 1)] == "D"
    assert actions.count("do") == 4 and game.last_refusal is None  # four stones mined on the way, none spare


def test_a_stay_alive_that_always_steps_does_not_stop_the_chain_exploring():
    """A model's stay_alive may take a step at every call; the chain still explores when a step found
    nothing to act on (it once explored only when that second stay_alive took no step)."""
    sources = {"collect_diamond": "def collect_diamond(game):\n    return\n    yield\n",
               "explore": "def explore(game):\n    yield 'move_left'\n",
               "stay_alive": "def stay_alive(game):\n    yield 'noop'\n"}
    main = {a.name: a for a in load_coded_actions(chain_source(sources, ["collect_diamond"], 100))}["main"]
    field = ["G" * 9] * 7
    game = _game(field)
    play, actions = main.fn(game), []
    for step in range(1, 31):
        actions.append(next(play))
        game._observe(_observation(field, step=step))  # each action is a step taken
    assert actions[:3] == ["noop", "noop", "move_left"] and actions.count("move_left") == 10
