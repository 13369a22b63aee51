@coded_action(precondition=lambda game: game.nearest("zombie") is not None, max_steps=60)
def defeat_zombie(game):
    """Walk next to the nearest zombie in sight and hit it until it dies."""
    target = game.nearest("zombie")
    if target is None:
        return  # none in sight: the chain explores, then calls this again
    yield from game.go_to(target, max_steps=20, dig=True)
    for _ in range(6):  # up to 6 hits: bare hands deal 1 damage, a sword more
        if not game.is_facing("zombie"):
            return  # it moved: the next call walks to it again
        yield "do"
