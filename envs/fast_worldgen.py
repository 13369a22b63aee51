"""Crafter's world generation with the noise computed for the whole map at once.

Crafter draws its terrain from OpenSimplex noise one tile at a time, which makes every reset
cost about a third of a second even with numba. Every noise term it uses is a function of
(x / size, y / size) on the integer grid, so it can be evaluated as whole arrays with
`noise3array`; the per-tile decisions and the random draws then run in Crafter's exact order,
so the worlds are the same tile for tile (tests/test_fast_worldgen.py compares them).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import opensimplex
from crafter import constants, objects


class _NoiseGrid:
    """Crafter's `_simplex(x, y, z, sizes, normalize)` evaluated for every tile of the map."""

    def __init__(self, simplex: opensimplex.OpenSimplex, area: tuple[int, int]):
        self._simplex = simplex
        self._xs = np.arange(area[0], dtype=np.float64)
        self._ys = np.arange(area[1], dtype=np.float64)

    def __call__(self, z, sizes, normalize=True, xs=None, ys=None) -> np.ndarray:
        xs = self._xs if xs is None else xs
        ys = self._ys if ys is None else ys
        if not isinstance(sizes, dict):
            sizes = {sizes: 1}
        value: Any = 0  # an array once the first octave is added
        for size, weight in sizes.items():
            # noise3array returns [z, y, x]; Crafter indexes tiles as [x, y].
            grid = self._simplex.noise3array(
                xs / size, ys / size, np.array([float(z)]))
            value = value + weight * grid[0].T
        if normalize:
            value = value / sum(sizes.values())
        return value


class _Draws:
    """Crafter's sequence of `world.random.uniform()` draws, fetched as one block.

    A block of n draws equals n scalar draws from the same RandomState; when done, the state is
    rewound and advanced by exactly the draws used, as if they had been drawn one by one."""

    def __init__(self, random: np.random.RandomState, most: int):
        self._random = random
        self._state = random.get_state()
        self._block = random.uniform(size=most).tolist()
        self.used = 0

    def __call__(self) -> float:
        value = self._block[self.used]
        self.used += 1
        return value

    def finish(self) -> None:
        self._random.set_state(self._state)
        if self.used:
            self._random.uniform(size=self.used)


def generate_world(world, player) -> None:
    """Drop-in replacement for crafter.worldgen.generate_world."""
    simplex = opensimplex.OpenSimplex(seed=world.random.randint(0, 2 ** 31 - 1))
    # numba's thread count is left alone: setting it also resets the OpenMP count torch uses.
    fields = _noise_fields(simplex, world.area, player.pos)
    material_ids, tunnels = _materials(world, fields)
    world._mat_map[:, :] = material_ids
    _creatures(world, player, material_ids, tunnels, fields["dist"])


def _noise_fields(simplex, area, player_pos) -> dict[str, np.ndarray]:
    noise = _NoiseGrid(simplex, area)
    w, h = area
    xs, ys = np.meshgrid(np.arange(w), np.arange(h), indexing="ij")
    dist = np.sqrt((xs - player_pos[0]) ** 2 + (ys - player_pos[1]) ** 2)
    # The same arithmetic, in the same order, as crafter.worldgen._set_material.
    start = 4 - dist + 2 * noise(8, 3)
    start = 1 / (1 + np.exp(-start))
    water = noise(3, {15: 1, 5: 0.15}, False) + 0.1 - 2 * start
    mountain = noise(0, {15: 1, 5: 0.3}) - (4 * start + 0.3 * water)
    grid_x, grid_y = np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64)
    return {
        "dist": dist, "start": start, "water": water, "mountain": mountain,
        "cave": noise(6, 7),
        "tunnel_h": noise(7, 3, xs=2 * grid_x, ys=grid_y / 5),  # Crafter: simplex(2 * x, y / 5, 7, 3)
        "tunnel_v": noise(7, 3, xs=grid_x / 5, ys=2 * grid_y),
        "coal": noise(1, 8), "iron": noise(2, 6), "lava": noise(6, 5),
        "sand": noise(4, 9), "tree": noise(5, 7),
    }


def _materials(world, f) -> tuple[np.ndarray, np.ndarray]:
    """Material ids of every tile. Tiles whose material needs no random draw are decided as
    arrays; the rest are visited in Crafter's x-major order so the draws happen identically."""
    ids = world._mat_ids
    start, water, mountain = f["start"], f["water"], f["mountain"]
    grass = start > 0.5
    mountains = ~grass & (mountain > 0.15)
    cave = mountains & (f["cave"] > 0.15) & (mountain > 0.3)
    tunnel = mountains & ~cave & ((f["tunnel_h"] > 0.4) | (f["tunnel_v"] > 0.4))
    rock = mountains & ~cave & ~tunnel            # coal, iron, diamond, lava or stone: may draw
    lowland = ~grass & ~mountains
    sand = lowland & (0.25 < water) & (water <= 0.35) & (f["sand"] > -0.2)
    lake = lowland & ~sand & (0.3 < water)
    meadow = lowland & ~sand & ~lake              # tree or grass: may draw

    out = np.full(world.area, ids["grass"], dtype=np.uint8)
    out[cave | tunnel] = ids["path"]
    out[sand] = ids["sand"]
    out[lake] = ids["water"]
    xs, ys = np.nonzero(rock | meadow)  # np.nonzero walks in x-major order, as Crafter's loops do
    uniform = _Draws(world.random, 3 * len(xs))  # at most three draws a tile
    is_meadow = meadow[xs, ys].tolist()
    m_values, coal, iron = mountain[xs, ys].tolist(), f["coal"][xs, ys].tolist(), f["iron"][xs, ys].tolist()
    lava, tree = f["lava"][xs, ys].tolist(), f["tree"][xs, ys].tolist()
    chosen = []
    for i in range(len(xs)):
        if is_meadow[i]:
            chosen.append("tree" if tree[i] > 0 and uniform() > 0.8 else "grass")
            continue
        m = m_values[i]
        if coal[i] > 0 and uniform() > 0.85:
            chosen.append("coal")
        elif iron[i] > 0.4 and uniform() > 0.75:
            chosen.append("iron")
        elif m > 0.18 and uniform() > 0.994:
            chosen.append("diamond")
        elif m > 0.3 and lava[i] > 0.35:
            chosen.append("lava")
        else:
            chosen.append("stone")
    uniform.finish()
    out[xs, ys] = [ids[name] for name in chosen]
    return out, tunnel


def _creatures(world, player, material_ids, tunnels, dist) -> None:
    """Crafter's _set_object pass: only walkable tiles can draw, visited in x-major order."""
    ids = world._mat_ids
    walkable = np.isin(material_ids, [ids[m] for m in constants.walkable])
    xs, ys = np.nonzero(walkable)
    uniform = _Draws(world.random, 2 * len(xs))  # at most two draws a tile
    grass_id, path_id = ids["grass"], ids["path"]
    materials, dists = material_ids[xs, ys].tolist(), dist[xs, ys].tolist()
    tunnel = tunnels[xs, ys].tolist()
    spawns = []
    for i, (x, y) in enumerate(zip(xs.tolist(), ys.tolist())):
        material, d = materials[i], dists[i]
        if d > 3 and material == grass_id and uniform() > 0.985:
            spawns.append((objects.Cow, (x, y)))
        elif d > 10 and uniform() > 0.993:
            spawns.append((objects.Zombie, (x, y)))
        elif material == path_id and tunnel[i] and uniform() > 0.95:
            spawns.append((objects.Skeleton, (x, y)))
    uniform.finish()
    for cls, pos in spawns:
        world.add(cls(world, pos, player) if cls is not objects.Cow else cls(world, pos))
