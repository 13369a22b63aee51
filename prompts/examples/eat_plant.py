PLANT_STEPS = {(1, 0): "move_right", (-1, 0): "move_left", (0, 1): "move_down", (0, -1): "move_up"}
CREATURE_GROUND = ("grass", "sand", "path")  # zombies and cows walk here; one beside a plant destroys it


def plant_site(game):
    """(tile, entry, way): known grass with solid ground on three sides, entered from `entry` = tile - way,
    two open tiles behind the entry (to step back and seal it), far from tunnels (skeletons); or None."""
    tunnels = game.known("path")[:200]
    for tile in game.known("grass")[:300]:
        if tuple(tile) == tuple(game.pos) or any(abs(p[0] - tile[0]) + abs(p[1] - tile[1]) < 9 for p in tunnels):
            continue
        sides = [(tile[0] + dx, tile[1] + dy) for dx, dy in PLANT_STEPS]
        grounds = [game.material_at(p) in CREATURE_GROUND for p in sides]
        if "unknown" in [game.material_at(p) for p in sides] or sum(grounds) != 1:
            continue
        entry = sides[grounds.index(True)]
        way = (tile[0] - entry[0], tile[1] - entry[1])
        back = (entry[0] - way[0], entry[1] - way[1])
        if (game.material_at(back) in CREATURE_GROUND
                and game.material_at((back[0] - way[0], back[1] - way[1])) in CREATURE_GROUND
                and game.path_to(back, adjacent=False) is not None):
            return tuple(tile), entry, way
    return None


def plant_walk_onto(game, target, max_steps):
    """Stand on `target`; returns whether the player got there."""
    for _ in range(max_steps):
        path = game.path_to(target, adjacent=False)
        if not path:
            return tuple(game.pos) == tuple(target)  # [] when there
        yield path[0]
    return tuple(game.pos) == tuple(target)


@coded_action(precondition=lambda game: game.can_collect("stone"), max_steps=1500)
def eat_plant(game):
    """Plant a sapling where no creature can stand beside it, seal it in with a stone, stay near while it
    ripens (it grows only while the player is near), then mine the seal open and eat it."""
    ripe = game.visible("ripe_plant")
    if ripe:  # planted by an earlier call: open the seal and eat it
        yield from game.go_to((game.pos[0] + ripe[0][0], game.pos[1] + ripe[0][1]), max_steps=30, dig=True)
        yield from ("do", "do") if game.is_facing("ripe_plant") else ()
        return
    for _ in range(40):  # a grass hit drops a sapling one time in ten
        if game.has("sapling") and game.has("stone"):
            break
        yield from collect_sapling(game) if not game.has("sapling") else collect_stone(game)
    site = plant_site(game)
    if site is None or not game.has("sapling") or not game.has("stone"):
        return  # the chain explores and calls again
    tile, entry, way = site
    back = (entry[0] - way[0], entry[1] - way[1])
    if not (yield from plant_walk_onto(game, back, 80)):
        return
    yield PLANT_STEPS[way]  # onto the entry, facing the site: a free tile is faced only by walking at it
    if tuple(game.pos) != tuple(entry) or not game.can_place("plant"):
        return
    yield "place_plant"
    away = PLANT_STEPS[(-way[0], -way[1])]
    yield from (away, away, PLANT_STEPS[way])  # two steps back, one forward: facing the entry
    if tuple(game.pos) == back and game.can_place("stone"):
        yield "place_stone"
    for _ in range(900):
        rel = (tile[0] - game.pos[0], tile[1] - game.pos[1])
        if "eat_plant" in game.achievements or rel in game.visible("ripe_plant"):
            return  # the next call eats it
        if abs(rel[0]) <= 4 and abs(rel[1]) <= 3 and rel not in game.visible("plant"):
            return  # destroyed before the seal closed: the next call plants another
        yield from stay_alive(game)
        before = game.step_count
        if (game.drink < 4 and len(game.known("water")) == 0) or (game.food < 4 and game.nearest("cow") is None):
            yield from game.explore(10)  # nothing to drink or eat seen yet: the plant waits, the player cannot
        elif abs(tile[0] - game.pos[0]) + abs(tile[1] - game.pos[1]) > 3:
            yield from plant_walk_onto(game, back, 20)  # the plant has no open side: wait behind the seal
        if game.step_count == before:
            yield "noop"
