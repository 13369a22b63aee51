@coded_action(precondition=lambda game: game.can_afford("wood_pickaxe")
              and all(len(game.known(s)) > 0 for s in game.stations("wood_pickaxe")),
              max_steps=60)
def make_wood_pickaxe(game):
    """Walk next to the stations a wood pickaxe needs and make it there."""
    if not game.can_make("wood_pickaxe"):
        yield from game.go_near(game.stations("wood_pickaxe"))
    if game.can_make("wood_pickaxe"):
        yield "make_wood_pickaxe"
