@coded_action(precondition=lambda game: game.can_collect("tree") and len(game.known("tree")) > 0,
              max_steps=80)
def collect_wood(game):
    """Walk to the nearest remembered tree and hit it until one more wood is in the inventory."""
    start = game.inventory["wood"]
    target = game.nearest("tree")
    if target is None:
        return  # nothing remembered: exploring first is another action's job
    yield from game.go_to(target, dig=True)
    if not game.is_facing("tree"):
        return  # no known way next to it, walking or mining
    for _ in range(5):
        yield "do"
        if game.inventory["wood"] > start:
            return
