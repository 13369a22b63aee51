@coded_action(precondition=lambda game: game.can_afford("table"), max_steps=30)
def place_table(game):
    """Place a table on an open tile in front of the player, stepping aside if needed."""
    moves = {"move_left": (-1, 0), "move_right": (1, 0), "move_up": (0, -1), "move_down": (0, 1)}
    for _ in range(10):
        if game.can_place("table"):
            yield "place_table"
            return
        x, y = game.pos
        # Step onto an open neighbour whose next tile is open too: we then face that tile.
        options = [move for move, (dx, dy) in moves.items()
                   if game.is_walkable((x + dx, y + dy))
                   and game.material_at((x + 2 * dx, y + 2 * dy)) in ("grass", "sand", "path")]
        if options:
            yield options[0]
        else:
            yield from game.explore(2)
