@coded_action(max_steps=20)
def explore(game):
    """Walk toward the nearest edge of the remembered map to uncover new ground."""
    yield from game.explore(20)
