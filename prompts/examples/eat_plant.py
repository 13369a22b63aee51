PLANT_MOVES = {(1, 0): "move_right", (-1, 0): "move_left", (0, 1): "move_down", (0, -1): "move_up"}
PLANT_OPEN = ("grass", "sand", "path")  # where creatures walk: one beside a plant destroys it


def plant_site(game):
    """(tile, entry, way): grass with solid sides but `entry` = tile - way, open ground behind the entry."""
    tunnels = game.known("path")[:200]  # skeletons shoot from the tunnels
    for tile in game.known("grass")[:300]:
        if any(abs(p[0] - tile[0]) + abs(p[1] - tile[1]) < 9 for p in tunnels):
            continue
        sides = [(tile[0] + dx, tile[1] + dy) for dx, dy in PLANT_MOVES]
        ground = [game.material_at(p) for p in sides]
        if "unknown" in ground or sum(g in PLANT_OPEN for g in ground) != 1:
            continue
        entry = sides[[g in PLANT_OPEN for g in ground].index(True)]
        way = (tile[0] - entry[0], tile[1] - entry[1])
        back = (entry[0] - way[0], entry[1] - way[1])
        if (game.material_at((back[0] - way[0], back[1] - way[1])) in PLANT_OPEN and tuple(game.pos) != tuple(tile)
                and game.material_at(back) in PLANT_OPEN and game.path_to(back, adjacent=False) is not None):
            return tuple(tile), entry, way
    return None


def plant_walk(game, target, max_steps):
    for _ in range(max_steps):
        path = game.path_to(target, adjacent=False)
        if not path:
            break
        yield path[0]
    return tuple(game.pos) == tuple(target)


@coded_action(precondition=lambda game: game.can_collect("stone"), max_steps=1500)
def eat_plant(game):
    """Plant a sapling sealed in by a stone, wait near it (it grows only then), open the seal, eat it ripe."""
    ripe = game.visible("ripe_plant")
    if ripe:
        yield from game.go_to((game.pos[0] + ripe[0][0], game.pos[1] + ripe[0][1]), max_steps=30, dig=True)
        yield from ("do", "do") if game.is_facing("ripe_plant") else ()
        return
    for _ in range(40):
        if game.has("sapling") and game.has("stone"):
            break
        yield from collect_sapling(game) if not game.has("sapling") else collect_stone(game)
    site = plant_site(game)
    if site is None or not game.has("sapling") or not game.has("stone"):
        return
    tile, entry, way = site
    back = (entry[0] - way[0], entry[1] - way[1])
    if not (yield from plant_walk(game, back, 80)):
        return
    yield PLANT_MOVES[way]  # onto the entry, facing the tile: a free tile is faced only by walking at it
    if tuple(game.pos) != tuple(entry) or not game.can_place("plant"):
        return
    away = PLANT_MOVES[(-way[0], -way[1])]
    yield from ("place_plant", away, away, PLANT_MOVES[way])  # back two, forward one: facing the entry
    if tuple(game.pos) == back and game.can_place("stone"):
        yield "place_stone"
    for _ in range(900):
        rel = (tile[0] - game.pos[0], tile[1] - game.pos[1])
        if rel in game.visible("ripe_plant") or (max(abs(rel[0]) - 4, abs(rel[1]) - 3) <= 0
                                                 and rel not in game.visible("plant")):
            return  # the next call eats it, or plants another for one destroyed before the seal
        yield from stay_alive(game)
        before = game.step_count
        if game.drink < 4 and len(game.known("water")) == 0:
            yield from game.explore(10)  # stay_alive drinks only from water seen
        elif abs(tile[0] - game.pos[0]) + abs(tile[1] - game.pos[1]) > 3:
            yield from plant_walk(game, back, 20)  # wait behind the seal
        if game.step_count == before:
            yield "noop"
