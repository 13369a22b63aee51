@coded_action(max_steps=1000)
def obtain_wood_pickaxe(game):
    """A whole chain in one program: wood, a table, then a wood pickaxe, exploring when stuck."""
    for _ in range(200):
        if game.has("wood_pickaxe"):
            return
        have_table = len(game.known("table")) > 0
        if have_table and game.can_afford("wood_pickaxe"):
            yield from make_wood_pickaxe(game)
        elif not have_table and game.can_afford("table", extra=game.requirements("wood_pickaxe")):
            yield from place_table(game)
        elif len(game.known("tree")) > 0:
            yield from collect_wood(game)
        else:
            yield from explore(game)
