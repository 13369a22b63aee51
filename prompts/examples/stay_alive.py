def stay_alive(game):
    """Fight a zombie next to the player; shelter and sleep when daylight < 0.4 or energy < 3 (unless food or
    drink is below 2); drink when drink < 6, eat when food < 6.

    Nights (and rests when energy runs low) are spent in a sealed pocket (game.shelter), mined open at
    dawn."""
    for name, dx, dy in game.creatures:
        if name == "zombie" and abs(dx) + abs(dy) == 1:
            x, y = game.pos
            yield from game.face((x + dx, y + dy))
            for _ in range(6):
                yield "do"
                if ("zombie", dx, dy) not in game.creatures:
                    break
            return
    if (game.daylight < 0.4 or game.energy < 3) and game.food >= 2 and game.drink >= 2:
        yield from game.shelter()  # not when hungry or thirsty: it would leave the shelter at once
    if game.is_sheltered():
        for _ in range(300):
            awake = not game.sleeping
            if awake and ((game.daylight > 0.7 and game.energy > 4) or game.food < 2 or game.drink < 2):
                break
            yield "sleep" if game.energy < 9 else "noop"
        yield from game.leave_shelter()
        return
    if game.drink < 6 and len(game.known("water")) > 0:
        for _ in range(9 - game.drink):
            yield from collect_drink(game)
    if game.food < 6:
        start = game.food
        for _ in range(200 if game.food < 3 else 60):  # cows graze on grass, far from the mines
            if game.food > start:
                break
            steps = game.step_count
            if game.nearest("cow") is not None:  # seen now or before; it may walk off: try again
                yield from collect_food(game)
            if game.step_count == steps:  # no cow known, or none reachable now: look elsewhere
                yield from game.explore(1)
    if game.energy < 3:
        for _ in range(400):
            yield "sleep"
            if not game.sleeping:
                return
