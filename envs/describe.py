"""The player's situation in words, for reports a language model reads: what it sees, and what hurt it.

Everything here reads a PlayerObservation only (the local view, visible creatures, status bars,
inventory, daylight), never the simulator. The damage rules are Crafter's (crafter/objects.py):
stepping onto lava sets health to 0; a zombie next to the player hits for 2, or 7 while it sleeps; an
arrow hits for 2; an empty food or drink bar, or an empty energy bar while awake, costs 1 health at a
time. So a loss of 2 or more in one step is a hit, and a loss of 1 with an empty bar is most likely
the bar.
"""

from __future__ import annotations

from collections.abc import Mapping

from envs.observation import (
    CREATURES,
    MATERIAL_NAMES,
    STATUS_KEYS,
    VIEW_HEIGHT,
    VIEW_RADIUS_X,
    VIEW_RADIUS_Y,
    VIEW_WIDTH,
    WALKABLE,
    PlayerObservation,
)

NIGHT_BELOW = 0.4  # daylight under this counts as night: zombies crowd the grass (prompts/examples/stay_alive.py)
MAX_VIEW_CHARS = 600

SYMBOLS: dict[str, str] = {
    "unknown": "?", "void": "X", "grass": ".", "sand": ":", "path": "_", "water": "~", "stone": "#",
    "tree": "T", "lava": "L", "coal": "c", "iron": "i", "diamond": "D", "table": "t", "furnace": "f",
    "zombie": "Z", "skeleton": "S", "cow": "C", "arrow": "*", "plant": "p", "ripe_plant": "P",
}
PLAYER_SYMBOL = "@"
# empty bar -> what the player dies of when it stays empty
BAR_CAUSES: tuple[tuple[str, str], ...] = (("food", "starvation"), ("drink", "thirst"), ("energy", "exhaustion"))

if set(SYMBOLS) != set(MATERIAL_NAMES) | set(CREATURES):  # a new material or creature needs a symbol
    raise ImportError("envs/describe.py: SYMBOLS must name every material and creature of envs/observation.py")


def offset_text(dx: int, dy: int) -> str:
    """'2 left 1 up', 'here'."""
    parts = [f"{abs(dx)} {'right' if dx > 0 else 'left'}"] if dx else []
    parts += [f"{abs(dy)} {'down' if dy > 0 else 'up'}"] if dy else []
    return " ".join(parts) or "here"


def material_under(obs: PlayerObservation) -> str:
    return MATERIAL_NAMES[obs.materials[VIEW_RADIUS_X, VIEW_RADIUS_Y]]


def time_of_day(daylight: float) -> str:
    return f"{'night' if daylight < NIGHT_BELOW else 'day'} (daylight {daylight:.2f})"


def describe_view(obs: PlayerObservation, max_chars: int = MAX_VIEW_CHARS) -> str:
    """The 9x7 local view as a character grid with a legend, the nearest thing of each kind in sight,
    the status bars and the time of day; at most `max_chars` characters."""
    grid = [[MATERIAL_NAMES[obs.materials[x, y]] for x in range(VIEW_WIDTH)] for y in range(VIEW_HEIGHT)]
    for name, dx, dy in obs.creatures:
        grid[dy + VIEW_RADIUS_Y][dx + VIEW_RADIUS_X] = name
    rows = ["".join(SYMBOLS[name] for name in row) for row in grid]
    centre = rows[VIEW_RADIUS_Y]
    rows[VIEW_RADIUS_Y] = centre[:VIEW_RADIUS_X] + PLAYER_SYMBOL + centre[VIEW_RADIUS_X + 1:]
    # in reading order, without repeats; the player's own cell shows '@' (the first line names its ground)
    shown = dict.fromkeys(name for y, row in enumerate(grid) for x, name in enumerate(row)
                          if (x, y) != (VIEW_RADIUS_X, VIEW_RADIUS_Y))
    legend = ", ".join(f"{SYMBOLS[name]} {name}" for name in shown)
    bars = ", ".join(f"{bar} {obs.inventory.get(bar, 0)}" for bar in STATUS_KEYS)
    facing = {(-1, 0): "left", (1, 0): "right", (0, -1): "up", (0, 1): "down"}.get(obs.facing, str(obs.facing))
    head = (f"{PLAYER_SYMBOL} you, on {material_under(obs)}, facing {facing}{', asleep' if obs.sleeping else ''}; "
            f"{time_of_day(obs.daylight)}; {bars}")
    text = "\n".join([head, *rows, f"legend: {legend}"])
    nearest = _nearest_things(obs)
    line = "nearest: "
    for item in nearest:  # as many as fit
        if len(text) + len(line) + len(item) + 3 > max_chars:
            break
        line += item + "; "
    if nearest and line != "nearest: ":
        text += "\n" + line.removesuffix("; ")
    return text[:max_chars]


def _nearest_things(obs: PlayerObservation) -> list[str]:
    """'zombie 1 right', 'tree 2 left 1 up', ...: the nearest of each creature and non-walkable material."""
    found: dict[str, tuple[int, int]] = {}
    cells = [(name, dx, dy) for name, dx, dy in obs.creatures]
    cells += [(MATERIAL_NAMES[obs.materials[x, y]], x - VIEW_RADIUS_X, y - VIEW_RADIUS_Y)
              for x in range(VIEW_WIDTH) for y in range(VIEW_HEIGHT)]
    for name, dx, dy in sorted(cells, key=lambda c: (abs(c[1]) + abs(c[2]), c[0] not in CREATURES)):
        if name not in WALKABLE and name not in ("unknown", "void") and name not in found:
            found[name] = (dx, dy)
    return [f"{name} {offset_text(dx, dy)}" for name, (dx, dy) in found.items()]


UNSEEN_ATTACKER = "unseen attacker"


def damage_cause(obs: PlayerObservation, lost: int, before: Mapping[str, int] | None = None) -> str:
    """The likely cause of losing `lost` health in the step that ended in `obs`: 'lava', 'zombie',
    'skeleton arrow', 'starvation', 'thirst', 'exhaustion' (several empty bars are named together), or
    'unseen attacker': a hit with no zombie, arrow or skeleton in view, most often an arrow shot from out
    of sight. `before`, the inventory before the step, names a bar that was empty when the game took the
    health and was refilled in the same step (Crafter takes it before the player's action)."""
    if material_under(obs) == "lava":
        return "lava"
    empty = [cause for bar, cause in BAR_CAUSES
             if (obs.inventory.get(bar, 0) <= 0 or (before is not None and before.get(bar, 1) <= 0))
             and not (bar == "energy" and obs.sleeping)]
    if empty and lost < 2:  # the bars take one health at a time
        return empty[0] if len(empty) == 1 else f"{', '.join(empty[:-1])} and {empty[-1]}"

    def near(name: str, reach: int) -> bool:
        return any(n == name and abs(dx) + abs(dy) <= reach for n, dx, dy in obs.creatures)

    if near("zombie", 1):
        return "zombie"
    if near("arrow", 2) or near("skeleton", VIEW_WIDTH + VIEW_HEIGHT):
        return "skeleton arrow"
    return UNSEEN_ATTACKER
