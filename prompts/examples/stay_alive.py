def stay_alive(game):
    """Fight a zombie next to the player, then drink, eat or sleep when a status bar runs low.

    Long chains outlast the status bars: food lasts about 200 steps, drink a little less.
    Uses collect_drink (filled from collect_wood with water/drink) and collect_food (cow/food)."""
    for name, dx, dy in game.creatures:
        if name == "zombie" and abs(dx) + abs(dy) == 1:
            x, y = game.pos
            yield from game.face((x + dx, y + dy))
            for _ in range(6):
                yield "do"
                if ("zombie", dx, dy) not in game.creatures:
                    break
            return
    if game.drink < 6 and len(game.known("water")) > 0:
        for _ in range(9 - game.drink):
            yield from collect_drink(game)
    if game.food < 6:
        for _ in range(30):
            if len(game.visible("cow")) > 0:
                yield from collect_food(game)
                break
            yield from game.explore(1)
    if game.energy < 3:
        for _ in range(400):
            yield "sleep"
            if not game.sleeping:
                return
