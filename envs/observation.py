"""What the player observes at one step, as plain data with no link back to the simulator.

Coordinates are (x, y) with x to the right and y downward, as on the screen: `move_down`
increases y. The local view covers dx in [-4, 4] and dy in [-3, 3] around the player.
Positions in the memory map are odometry: offsets from where the player stood at the start of
the episode, which a player reconstructs by watching its own view shift as it moves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Crafter's material order (constants.materials). Id 0 is "unknown" (never seen); the last id,
# "void", is beyond the edge of the world, which the player sees as an empty grey tile.
MATERIALS: tuple[str, ...] = (
    "water", "grass", "stone", "path", "sand", "tree", "lava", "coal", "iron", "diamond",
    "table", "furnace",
)
UNKNOWN = "unknown"
VOID = "void"
MATERIAL_NAMES: tuple[str, ...] = (UNKNOWN, *MATERIALS, VOID)
MATERIAL_IDS: dict[str, int] = {name: i for i, name in enumerate(MATERIAL_NAMES)}

CREATURES: tuple[str, ...] = ("zombie", "skeleton", "cow", "arrow", "plant", "ripe_plant")

WALKABLE: frozenset[str] = frozenset({"grass", "sand", "path"})

VIEW_WIDTH, VIEW_HEIGHT = 9, 7
VIEW_RADIUS_X, VIEW_RADIUS_Y = VIEW_WIDTH // 2, VIEW_HEIGHT // 2

DIRECTIONS: dict[str, tuple[int, int]] = {
    "left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1),
}
MOVE_FOR_DIRECTION: dict[tuple[int, int], str] = {d: f"move_{name}" for name, d in DIRECTIONS.items()}

STATUS_KEYS: tuple[str, ...] = ("health", "food", "drink", "energy")
INVENTORY_KEYS: tuple[str, ...] = (
    "health", "food", "drink", "energy", "sapling", "wood", "stone", "coal", "iron", "diamond",
    "wood_pickaxe", "stone_pickaxe", "iron_pickaxe", "wood_sword", "stone_sword", "iron_sword",
)


@dataclass(frozen=True)
class PlayerObservation:
    """One step's observation. `materials[x, y]` holds material ids for view cell (x, y),
    whose offset from the player is (x - 4, y - 3)."""

    materials: np.ndarray                          # (9, 7) uint8 ids into MATERIAL_NAMES
    creatures: tuple[tuple[str, int, int], ...]    # (name, dx, dy), the player excluded
    inventory: dict[str, int]
    facing: tuple[int, int]
    pos: tuple[int, int]                           # odometry from the episode start
    daylight: float
    sleeping: bool
    episode_step: int
    achievements: frozenset[str] = field(default_factory=frozenset)
