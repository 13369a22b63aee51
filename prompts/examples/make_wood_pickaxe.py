@coded_action(precondition=lambda game: game.can_afford("wood_pickaxe") and len(game.known("table")) > 0,
              max_steps=60)
def make_wood_pickaxe(game):
    """Walk next to the nearest remembered table and make a wood pickaxe there."""
    if not game.can_make("wood_pickaxe"):
        table = game.nearest("table")
        if table is None:
            return
        yield from game.go_to(table)
    if game.can_make("wood_pickaxe"):
        yield "make_wood_pickaxe"
