"""The game API handed to agent-written code: only what the player sees, plus its own memory.

A `GameAPI` is fed `PlayerObservation` snapshots by the environment and keeps no reference to
the simulator, so no attribute path leads from it to the world (tests/test_sandbox.py walks
them all). Everything it returns is a copy or an immutable value: changing what it returns
changes nothing in the game.

Coded actions are generators that yield primitive action names; the helpers that act
(`face`, `go_to`, `explore`) are generators too, meant for `yield from`.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from collections.abc import Generator, Iterator
from typing import Any

import numpy as np

from envs import rules
from envs.observation import (
    CREATURES,
    DIRECTIONS,
    MATERIAL_IDS,
    MATERIAL_NAMES,
    MOVE_FOR_DIRECTION,
    UNKNOWN,
    VIEW_RADIUS_X,
    VIEW_RADIUS_Y,
    WALKABLE,
    PlayerObservation,
)

# Recipe facts from Crafter's own data (data.yaml), which a player learns from the game's manual.
MAKE_RECIPES: dict[str, tuple[dict[str, int], tuple[str, ...]]] = {
    item: (dict(info["uses"]), tuple(info["nearby"])) for item, info in rules.MAKE.items()}
PLACE_RECIPES: dict[str, tuple[dict[str, int], tuple[str, ...]]] = {
    item: (dict(info["uses"]), tuple(info["where"])) for item, info in rules.PLACE.items()}
COLLECT_REQUIRES: dict[str, dict[str, int]] = {
    material: dict(info["require"]) for material, info in rules.COLLECT.items()}

_SYNC_WINDOW = 1024  # observations a mirror may lag behind and still catch up step by step
_instances = itertools.count(1)
_MEMORY_RADIUS = 80  # the world is 64x64, so odometry never leaves [-64, 64]
_MEMORY_SIZE = 2 * _MEMORY_RADIUS + 1
MEMORY_BYTES = _MEMORY_SIZE * _MEMORY_SIZE  # the map of seen tiles: one byte a tile
_SHELTER_SIZE = 2  # walkable tiles a shelter may hold: the pocket the player can seal from inside
# Tiles that do not wall a shelter in: what zombies walk on, what was never seen, and lava (arrows fly over it).
_NOT_A_WALL = frozenset(WALKABLE) | {UNKNOWN, "lava"}
# Solid tiles that mining turns into walkable path: a way out of a shelter.
_MINED_TO_PATH = frozenset({"stone", "coal", "iron", "diamond"})
_WALKABLE_TABLE = bytes(int(MATERIAL_NAMES[i] in WALKABLE) if i < len(MATERIAL_NAMES) else 0 for i in range(256))
_WALKABLE_OF = np.frombuffer(_WALKABLE_TABLE, dtype=np.uint8)  # material id -> 1 where walkable
_DIRTY_BOXES = 64  # view boxes written since the walkable table was last brought up to date, at most

Pos = tuple[int, int]


class GameAPI:
    """Read-only view of the game for coded actions. See the module docstring."""

    __slots__ = ("_obs", "_memory", "_rng", "_cows", "_helper_seed", "_identity", "_episode", "_version", "_recent",
                 "_refusal_text", "_refusals", "_tiles", "_seen", "_walkable", "_walkable_tiles_view",
                 "_walkable_dirty", "_last_patch", "_revision", "_known_memo", "_from_memory")

    def __init__(self, helper_seed: int = 0):
        self._obs: PlayerObservation | None = None
        self._memory = np.zeros((_MEMORY_SIZE, _MEMORY_SIZE), dtype=np.uint8)
        # Fast reads of the same memory: a flat view for the searches, which read it tile by tile (index
        # x * _MEMORY_SIZE + y), and the box of rows and columns ever written, all that known() scans.
        self._tiles = memoryview(self._memory.data).cast("B")
        self._seen: list[int] = [_MEMORY_SIZE, 0, _MEMORY_SIZE, 0]  # x0, x1, y0, y1 (empty)
        # What the searches and known() derive from the memory, brought up to date where it was written
        # rather than recomputed whole per call: 1 where walkable (flat view, as _tiles; the boxes written
        # since, or None for all of it), and known()'s last answer per name, good while the memory's
        # revision (bumped when a write changes a tile) and the position hold.
        self._walkable = np.zeros_like(self._memory)
        self._walkable_tiles_view = memoryview(self._walkable.data).cast("B")
        self._walkable_dirty: list[tuple[int, int, int, int]] | None = None
        self._last_patch: tuple[int, int, bytes] | None = None  # the last write: (x0, y0, its tiles)
        self._revision = 0
        self._known_memo: dict[str, tuple[int, Pos, list[Pos]]] = {}
        # The helpers' random stream (explore's tie-breaking). Its seed is drawn per episode by the trusted
        # env from a generator of its own, never from the world seed, which nothing here holds: agent code
        # that replays explore() learns this value and nothing about the world (docs/security.md).
        self._rng = random.Random(helper_seed)
        self._cows: set[Pos] = set()  # where cows were last seen: food the player can walk back to
        # What a mirror of this API (the sandbox's copy) needs to catch up: see _catch_up.
        self._helper_seed = helper_seed
        self._from_memory = False  # this episode's memory started from a saved map (_load_memory)
        self._identity = next(_instances)
        self._episode = 0
        self._version = 0
        self._recent: deque[PlayerObservation] = deque(maxlen=_SYNC_WINDOW)
        # Why the last helper that acts stopped short of its goal (last_refusal). It lives where the helpers
        # run (the sandbox's mirror for agent code) and is computed from the player's memory only.
        self._refusal_text: str | None = None
        # Every refusal set, in order, where someone collects them (the sandbox tells the host); else None.
        self._refusals: list[str] | None = None

    # -- fed by the environment (private: agent code cannot reach names starting with "_") --

    def _reset(self, obs: PlayerObservation, helper_seed: int) -> None:
        self._memory[:] = 0
        self._memory_rewritten()
        self._seen = [_MEMORY_SIZE, 0, _MEMORY_SIZE, 0]
        self._rng = random.Random(helper_seed)
        self._cows = set()
        self._helper_seed = helper_seed
        self._episode += 1
        self._version = 0
        self._recent.clear()
        self._refusal = None
        self._from_memory = False
        self._observe(obs)

    def _load_memory(self, raw: bytes, cows) -> None:
        """Start this episode's memory from a map saved earlier (envs.saved_state), after `_reset`: a mirror
        then catches up from the map, not from the observations (`_catch_up`)."""
        self._memory[:] = np.frombuffer(raw, dtype=np.uint8).reshape(self._memory.shape)
        self._memory_rewritten()
        xs, ys = np.nonzero(self._memory)
        if len(xs):
            self._seen = [int(xs.min()), int(xs.max()) + 1, int(ys.min()), int(ys.max()) + 1]
        self._cows = {(int(x), int(y)) for x, y in cows}
        self._from_memory = True
        self._observe(self._current())  # the view now, written over the saved map

    def _memory_bytes(self) -> bytes:
        """The map as raw bytes (MEMORY_BYTES of them), for a saved moment (envs.saved_state)."""
        return self._memory.tobytes()

    def _observe(self, obs: PlayerObservation) -> None:
        self._obs = obs
        self._version += 1
        self._recent.append(obs)
        x, y = obs.pos
        x0, y0 = x - VIEW_RADIUS_X + _MEMORY_RADIUS, y - VIEW_RADIUS_Y + _MEMORY_RADIUS
        patch = obs.materials
        x1, y1 = x0 + patch.shape[0], y0 + patch.shape[1]
        written = (x0, y0, patch.tobytes())
        if written != self._last_patch:  # else this box holds these tiles already: nothing changes
            self._memory[x0:x1, y0:y1] = patch
            self._last_patch = written
            self._revision += 1
            dirty = self._walkable_dirty
            if dirty is not None:
                if len(dirty) < _DIRTY_BOXES:
                    dirty.append((x0, x1, y0, y1))
                else:  # a game whose searches do not run (the trusted side's): rebuild all if one ever does
                    self._walkable_dirty = None
        seen = self._seen
        seen[:] = [min(seen[0], x0), max(seen[1], x1), min(seen[2], y0), max(seen[3], y1)]
        in_view = {c for c in self._cows if abs(c[0] - x) <= VIEW_RADIUS_X and abs(c[1] - y) <= VIEW_RADIUS_Y}
        self._cows -= in_view  # what is in view now replaces what was remembered there
        self._cows |= {(x + dx, y + dy) for name, dx, dy in obs.creatures if name == "cow"}

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (a saved env, a copied one): the flat views are rebuilt on the copy's own arrays."""
        return {name: getattr(self, name) for name in self.__slots__
                if name not in ("_tiles", "_walkable_tiles_view")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self._tiles = memoryview(self._memory.data).cast("B")
        self._walkable_tiles_view = memoryview(self._walkable.data).cast("B")

    def _memory_rewritten(self) -> None:
        """The memory changed as a whole (a reset, a resync): what is derived from it is rebuilt when next read."""
        self._walkable_dirty = None
        self._last_patch = None
        self._revision += 1

    @property
    def _refusal(self) -> str | None:
        return self._refusal_text

    @_refusal.setter
    def _refusal(self, text: str | None) -> None:
        self._refusal_text = text
        if text is not None and self._refusals is not None:
            self._refusals.append(text)

    # -- keeping a mirror in step (the trusted side feeds the sandbox's copy) --

    def _sync_point(self) -> tuple[int, int, int]:
        """Which state this is: (this API, its episode, observations seen in the episode)."""
        return (self._identity, self._episode, self._version)

    def _missed_by(self, point: tuple[int, int, int] | None) -> int:
        """Observations a mirror at `point` has not seen (the whole episode when it is in another one)."""
        if point is None or point[:2] != (self._identity, self._episode):
            return self._version
        return self._version - point[2]

    def _catch_up(self, point: tuple[int, int, int] | None) -> dict[str, Any] | None:
        """What a mirror that was at `point` needs to be at this state; None when it is there already.

        {"observe": [...]} the observations it missed in this episode; {"reset": helper seed, "observe":
        [...]} the whole episode so far; or, when that is longer than the window, {"state": ...} the memory
        map. None of it holds the world seed.
        """
        if self._obs is None:
            raise RuntimeError("the game has not been reset yet")
        if point == self._sync_point():
            return None
        missed = None if point is None or point[:2] != (self._identity, self._episode) else self._version - point[2]
        if missed is not None and 0 < missed <= len(self._recent):
            last = len(self._recent)
            return {"observe": [self._recent[i] for i in range(last - missed, last)]}
        if self._version <= len(self._recent) and not self._from_memory:
            return {"reset": self._helper_seed, "observe": list(self._recent)}
        return {"state": {"helper_seed": self._helper_seed, "memory": self._memory.tobytes().hex(),
                          "cows": sorted(self._cows)}, "observe": [self._obs]}

    def _apply(self, update: dict[str, Any]) -> None:
        """The mirror's side of _catch_up (observations already decoded)."""
        observations = update["observe"]
        if "state" in update:
            state = update["state"]
            self._reset(observations[0], helper_seed=int(state["helper_seed"]))
            self._load_memory(bytes.fromhex(state["memory"]), state["cows"])
            return
        if "reset" in update:
            self._reset(observations[0], helper_seed=int(update["reset"]))
            observations = observations[1:]
        for obs in observations:
            self._observe(obs)

    def _current(self) -> PlayerObservation:
        if self._obs is None:
            raise RuntimeError("the game has not been reset yet")
        return self._obs

    # -- what the player sees --

    @property
    def pos(self) -> Pos:
        """Player position (absolute: odometry from the episode start)."""
        return self._current().pos

    @property
    def facing(self) -> Pos:
        """Direction the player faces, e.g. (0, 1) is down."""
        return self._current().facing

    @property
    def facing_pos(self) -> Pos:
        (x, y), (dx, dy) = self.pos, self.facing
        return (x + dx, y + dy)

    @property
    def inventory(self) -> dict[str, int]:
        """A copy of the inventory, status bars included (health, food, drink, energy)."""
        return dict(self._current().inventory)

    @property
    def health(self) -> int:
        return self._current().inventory["health"]

    @property
    def food(self) -> int:
        return self._current().inventory["food"]

    @property
    def drink(self) -> int:
        return self._current().inventory["drink"]

    @property
    def energy(self) -> int:
        return self._current().inventory["energy"]

    @property
    def daylight(self) -> float:
        return self._current().daylight

    @property
    def sleeping(self) -> bool:
        return self._current().sleeping

    @property
    def step_count(self) -> int:
        """Primitive steps taken in this episode so far."""
        return self._current().episode_step

    @property
    def achievements(self) -> frozenset[str]:
        return self._current().achievements

    def has(self, item: str, amount: int = 1) -> bool:
        return self._current().inventory.get(item, 0) >= amount

    def tile(self, dx: int, dy: int) -> str | None:
        """Material at an offset inside the local view, or None outside it."""
        if abs(dx) > VIEW_RADIUS_X or abs(dy) > VIEW_RADIUS_Y:
            return None
        return MATERIAL_NAMES[self._current().materials[dx + VIEW_RADIUS_X, dy + VIEW_RADIUS_Y]]

    def local_view(self) -> list[list[str]]:
        """The 9x7 local view as rows (top to bottom) of material names; the player is at row 3, column 4."""
        mats = self._current().materials
        return [[MATERIAL_NAMES[mats[x, y]] for x in range(mats.shape[0])] for y in range(mats.shape[1])]

    @property
    def creatures(self) -> list[tuple[str, int, int]]:
        """Visible creatures and objects as (name, dx, dy) offsets from the player."""
        return list(self._current().creatures)

    def visible(self, name: str) -> list[Pos]:
        """Offsets (dx, dy) of every visible tile or creature called `name`, nearest first."""
        if name in CREATURES:
            found = [(dx, dy) for n, dx, dy in self._current().creatures if n == name]
        else:
            ids = self._current().materials
            xs, ys = np.nonzero(ids == MATERIAL_IDS.get(name, -1))
            found = [(int(x) - VIEW_RADIUS_X, int(y) - VIEW_RADIUS_Y) for x, y in zip(xs, ys)]
        return sorted(found, key=lambda d: (abs(d[0]) + abs(d[1]), d))

    # -- memory of this episode --

    def material_at(self, pos: Pos) -> str:
        """Remembered material at an absolute position."""
        x, y = pos[0] + _MEMORY_RADIUS, pos[1] + _MEMORY_RADIUS
        if not (0 <= x < _MEMORY_SIZE and 0 <= y < _MEMORY_SIZE):
            return UNKNOWN
        return MATERIAL_NAMES[self._tiles[x * _MEMORY_SIZE + y]]

    def known(self, name: str) -> list[Pos]:
        """Absolute positions of every remembered tile of a material, nearest first."""
        material = MATERIAL_IDS.get(name)
        if material is None:
            return []
        pos = self.pos
        memo = self._known_memo.get(name)
        if memo is not None and memo[0] == self._revision and memo[1] == pos:
            return list(memo[2])  # a copy: the caller may change its list
        found = self._known(material, pos)
        self._known_memo[name] = (self._revision, pos, found)
        return list(found)

    def _known(self, material: int, pos: Pos) -> list[Pos]:
        # tiles of a seen material lie in the box ever written; unknown ones anywhere
        x0, x1, y0, y1 = self._seen if material != MATERIAL_IDS[UNKNOWN] else (0, _MEMORY_SIZE, 0, _MEMORY_SIZE)
        xs, ys = np.nonzero(self._memory[x0:x1, y0:y1] == material)
        if not len(xs):
            return []
        xs, ys = xs + (x0 - _MEMORY_RADIUS), ys + (y0 - _MEMORY_RADIUS)
        px, py = pos
        order = np.lexsort((ys, xs, np.abs(xs - px) + np.abs(ys - py)))  # by distance, then position
        return list(zip(xs[order].tolist(), ys[order].tolist()))

    def nearest(self, name: str) -> Pos | None:
        """Absolute position of the nearest remembered material or visible creature, or None. For a
        cow out of view, where one was last seen in this episode.

        Prefers targets that can be reached over known walkable tiles."""
        px, py = self.pos
        if name in CREATURES:
            seen = self.visible(name)
            if seen:
                return (px + seen[0][0], py + seen[0][1])
            if name == "cow" and self._cows:  # cows graze slowly: where one was seen, one likely still is
                return min(self._cows, key=lambda c: (abs(c[0] - px) + abs(c[1] - py), c))
            return None
        candidates = self.known(name)
        if not candidates:
            return None
        reachable = self._reachable_adjacent_costs()
        best, best_cost = None, None
        for pos in candidates:
            at = _flat(pos)
            cost = min((reachable[n] for n in (at + _MEMORY_SIZE, at - _MEMORY_SIZE, at + 1, at - 1) if n in reachable),
                       default=None)
            if cost is not None and (best_cost is None or cost < best_cost):
                best, best_cost = pos, cost
        return best if best is not None else candidates[0]

    def is_walkable(self, pos: Pos) -> bool:
        return self.material_at(pos) in WALKABLE and pos not in self._creature_positions()

    def path_to(self, target: Pos, adjacent: bool = True) -> list[str] | None:
        """Moves that lead over known grass, sand and path tiles (never lava or water) to
        `target` (or next to it when `adjacent`), or None when no known path exists.
        [] means already there."""
        goals = set(_neighbours(target)) if adjacent else {tuple(target)}
        if self.pos in goals:
            return []
        # a goal outside the memory is never reached; 3.0 is the tile 3, as it compares equal
        flat_goals = {_flat((int(g[0]), int(g[1]))) for g in goals if _in_memory(g)}
        return self._search(flat_goals.__contains__)

    def is_facing(self, name: str) -> bool:
        """Whether the tile in front of the player holds this material or creature."""
        return self.facing_material() == name or name in self._facing_creatures()

    def facing_material(self) -> str:
        return self.material_at(self.facing_pos)

    def is_near(self, material: str, distance: int = 1) -> bool:
        """Whether a material lies within `distance` tiles (square area), as Crafter checks for crafting."""
        px, py = self.pos
        return any(
            self.material_at((px + dx, py + dy)) == material
            for dx in range(-distance, distance + 1) for dy in range(-distance, distance + 1))

    def requirements(self, item: str) -> dict[str, int]:
        """Inventory items that making or placing `item` uses up, e.g. {'wood': 1}."""
        if item in MAKE_RECIPES:
            return dict(MAKE_RECIPES[item][0])
        if item in PLACE_RECIPES:
            return dict(PLACE_RECIPES[item][0])
        raise ValueError(f"unknown item '{item}'; known: {', '.join(sorted({*MAKE_RECIPES, *PLACE_RECIPES}))}")

    def can_afford(self, item: str, extra: dict[str, int] | None = None) -> bool:
        """Whether the inventory covers `item`'s requirements (plus `extra` items on top)."""
        needs = self.requirements(item)
        for key, amount in (extra or {}).items():
            needs[key] = needs.get(key, 0) + amount
        return all(self.has(k, v) for k, v in needs.items())

    def stations(self, item: str) -> list[str]:
        """Materials that must stand within one tile to make `item`, e.g. ['table', 'furnace']."""
        if item not in MAKE_RECIPES:
            raise ValueError(f"unknown item '{item}'; makeable items: {', '.join(sorted(MAKE_RECIPES))}")
        return list(MAKE_RECIPES[item][1])

    def can_make(self, item: str) -> bool:
        """Whether `make_<item>` would succeed now: materials in the inventory and stations nearby."""
        if item not in MAKE_RECIPES:
            raise ValueError(f"unknown item '{item}'; makeable items: {', '.join(sorted(MAKE_RECIPES))}")
        uses, nearby = MAKE_RECIPES[item]
        return all(self.has(k, v) for k, v in uses.items()) and all(self.is_near(s) for s in nearby)

    def can_place(self, item: str) -> bool:
        """Whether `place_<item>` would succeed now: materials in hand and a free tile in front."""
        if item not in PLACE_RECIPES:
            raise ValueError(f"unknown item '{item}'; placeable items: {', '.join(sorted(PLACE_RECIPES))}")
        uses, where = PLACE_RECIPES[item]
        free = not self._facing_creatures()
        return all(self.has(k, v) for k, v in uses.items()) and free and self.facing_material() in where

    def can_collect(self, material: str) -> bool:
        """Whether the inventory holds the tool needed to collect this material."""
        needs = COLLECT_REQUIRES.get(material)
        return needs is not None and all(self.has(k, v) for k, v in needs.items())

    # -- helpers that act: use with `yield from` --

    @property
    def last_refusal(self) -> str | None:
        """Why the last face/go_to/go_near/shelter/leave_shelter stopped short, or None (test reports show it).

        Those helpers set it when they return without doing their whole job: nothing to do (already walled in),
        something missing (no pickaxe, no known path, a material never seen), or max_steps spent; e.g.
        'shelter: needs a wood pickaxe (to dig the pocket, and to mine the way out again)'. A call that does its
        job leaves None. Computed from what the player saw, where the helpers run."""
        return self._refusal

    def face(self, target: Pos) -> Iterator[str]:
        """Face an adjacent tile: yields the move toward it (which steps onto free grass, sand or path; never
        toward lava), or nothing when already facing it."""
        self._refusal = None
        px, py = self.pos
        delta = (target[0] - px, target[1] - py)
        if delta not in MOVE_FOR_DIRECTION:
            self._refusal = f"face: {_xy(target)} is not next to the player at {_xy(self.pos)}"
            return
        if self.facing != delta and self.material_at(_xy(target)) == "lava":  # Crafter walks onto it: death
            self._refusal = f"face: {_xy(target)} is lava; turning to it would step onto it"
            return
        if self.facing != delta:
            yield MOVE_FOR_DIRECTION[delta]

    def go_to(self, target: Pos, max_steps: int = 200, dig: bool = False) -> Iterator[str]:
        """Walk next to `target` (never over lava) and face it, re-planning as creatures move; stops early
        without a known path. With `dig`, it mines through known stone, coal, iron or diamond (what the
        pickaxes held can mine) where it cannot walk; never out of a shelter (leave_shelter does that).

        A dug route never crosses water, lava or unknown tiles; a mined tile costs two steps (mine, walk), three
        where the tunnel turns."""
        self._refusal = None
        for _ in range(max_steps):
            if (yield from self.defend()):
                continue
            path = self.path_to(target)
            if path is None and dig:
                if self.is_sheltered():  # a walled-in player stays in until it leaves
                    self._refusal = f"go_to: the player is walled in; leave_shelter first to go to {_xy(target)}"
                    return
                route = self._dig_route(target)
                if route:
                    tile = route[0]
                    if self.material_at(tile) in WALKABLE:
                        yield MOVE_FOR_DIRECTION[(tile[0] - self.pos[0], tile[1] - self.pos[1])]
                    else:  # a solid tile on the way: turn to it, mine it; the next step walks onto it
                        yield from self.face(tile)
                        yield "do"
                    continue
            if path is None:
                how = "walkable or minable" if dig else "walkable"
                self._refusal = (f"go_to: no path over known {how} tiles to next to {_xy(target)} "
                                 f"({self.material_at(target)} there)")
                return
            if not path:
                yield from self.face(target)
                return
            yield path[0]
        if self.facing_pos != _xy(target):
            self._refusal = f"go_to: max_steps={max_steps} ran out before it reached {_xy(target)}"

    def defend(self) -> Generator[str, Any, bool]:
        """Hit a zombie standing next to the player (turning to it first); returns whether it acted.

        The walking helpers call it before every step: zombies chase the player, most of all at night."""
        adjacent = [(dx, dy) for name, dx, dy in self._current().creatures
                    if name == "zombie" and abs(dx) + abs(dy) == 1]
        if not adjacent:
            return False
        # the one already faced first: turning to another with each hit (the view lists them in no fixed
        # order) spends half the steps turning, and neither dies
        dx, dy = self.facing if self.facing in adjacent else adjacent[0]
        if self.facing != (dx, dy):
            yield MOVE_FOR_DIRECTION[(dx, dy)]
        yield "do"
        return True

    def go_near(self, materials: list[str] | tuple[str, ...], max_steps: int = 200) -> Iterator[str]:
        """Walk to the nearest known tile from which every material lies within one tile (the
        area Crafter checks for crafting stations). Stops early when no such tile is known."""
        self._refusal = None
        wanted = list(materials)
        for _ in range(max_steps):
            if (yield from self.defend()):
                continue
            if all(self.is_near(m) for m in wanted):
                return
            path = self._path_to_spot_near(wanted)
            if not path:
                unseen = [m for m in wanted if not self.known(m)]
                self._refusal = (f"go_near: no {' or '.join(unseen)} seen in this episode" if unseen else
                                 f"go_near: no known tile within one tile of {' and '.join(wanted)} that the player "
                                 "can walk to")
                return
            yield path[0]
        if not all(self.is_near(m) for m in wanted):
            self._refusal = f"go_near: max_steps={max_steps} ran out before it got near {' and '.join(wanted)}"

    def is_sheltered(self) -> bool:
        """Whether the player is walled in: a few walkable tiles at most, every tile around them known and
        solid.

        Zombies walk on grass, sand and path only and hit only from a tile next to the player, so none can
        reach it there."""
        region, queue = {self.pos}, [self.pos]
        while queue:
            for n in _neighbours(queue.pop()):
                material = self.material_at(n)
                if material == UNKNOWN:
                    return False
                if material in WALKABLE and n not in region:
                    if len(region) >= _SHELTER_SIZE:
                        return False
                    region.add(n)
                    queue.append(n)
        return True

    def shelter(self, max_steps: int = 60) -> Iterator[str]:
        """Wall the player into a pocket two tiles long, for sleeping through the night; needs a wood pickaxe
        and a site among the tiles seen so far, else it returns at once.

        The player can face a free tile only by stepping toward it from the opposite side, so a
        pocket must be two tiles long: walk onto an entrance tile, go two tiles in (mining stone
        with a pickaxe where the pocket is stone), step back one tile, which turns the player to the
        entrance, and place a stone there (a table when no stone is at hand). Uses remembered
        tiles only; returns without acting when no site is known within `max_steps` of walking.
        A creature that blocks the way to the entrance makes it pick another site (up to 3 times); one in
        the pocket or its doorway is hit until it goes (`_dig_and_seal`). `last_refusal` says why it
        stopped short."""
        self._refusal = None
        if self.is_sheltered():
            self._refusal = "shelter: the player is already walled in (nothing to do)"
            return
        site = self._shelter_site(max_steps)
        if isinstance(site, str):
            self._refusal = site
            return
        entrance, (dx, dy) = site
        steps, repicked = 0, 0
        while self.pos != entrance:
            if steps >= max_steps:
                self._refusal = (f"shelter: max_steps={max_steps} ran out before it reached the entrance at "
                                 f"{_xy(entrance)}")
                return
            steps += 1
            if (yield from self.defend()):
                continue
            path = self.path_to(entrance, adjacent=False)
            if not path:  # a creature on the entrance or the way: another site, chosen around the creatures now seen
                other = self._shelter_site(max(max_steps - steps, 1)) if repicked < 3 else None
                if other is None or isinstance(other, str):
                    self._refusal = f"shelter: lost the way to the pocket's entrance at {_xy(entrance)} (blocked?)"
                    return
                repicked += 1
                entrance, (dx, dy) = other
                continue
            yield path[0]
        yield from self._dig_and_seal(entrance, (dx, dy))

    def _dig_and_seal(self, entrance: Pos, direction: Pos, budget: int = 30) -> Iterator[str]:
        """shelter's second half, from the entrance: mine the pocket's two tiles open, walk to its end, step back
        (which turns the player to the entrance) and seal the entrance. Re-reads the view at every step: a zombie
        that follows the player in, or stands in the doorway, is hit until it leaves or dies (defend), and a
        step that did not happen is tried again."""
        dx, dy = direction
        inner, end = (entrance[0] + dx, entrance[1] + dy), (entrance[0] + 2 * dx, entrance[1] + 2 * dy)
        been_at_end = False
        for _ in range(budget):
            pos = self.pos
            if pos == inner and self.material_at(entrance) not in WALKABLE:
                return  # sealed
            if (yield from self.defend()):
                continue
            if pos == end:
                been_at_end = True
            if pos == entrance:
                ahead = inner
            elif pos == inner:
                if been_at_end and self.facing == (-dx, -dy):  # facing the doorway: seal it
                    if self._facing_creatures():
                        yield "do"  # a creature in the doorway: hit it until it leaves or dies
                        continue
                    item = "stone" if self.has("stone") else "table"
                    if not self.can_place(item):
                        self._refusal = ("shelter: no stone, nor the wood for a table (a table takes "
                                         f"{_items(self.requirements('table'))}), to close the entrance")
                        return
                    yield f"place_{item}"
                    continue
                ahead = end
            elif pos == end:
                if self.facing == (-dx, -dy) and self._facing_creatures():
                    yield "do"  # a creature followed the player in: hit it until it leaves or dies
                else:
                    yield MOVE_FOR_DIRECTION[(-dx, -dy)]  # back to the inner tile, now facing the entrance
                continue
            else:
                self._refusal = self._off_the_pocket(inner)
                return
            if self.material_at(ahead) not in WALKABLE:  # mine it open; facing a solid tile takes one turn
                if self.facing != (dx, dy):
                    yield from self.face(ahead)
                yield "do"
            elif self._facing_creatures() and self.facing == (dx, dy):
                yield "do"  # a cow or a zombie in the pocket: hit it until it leaves or dies
            else:
                yield MOVE_FOR_DIRECTION[(dx, dy)]
        if self.material_at(entrance) in WALKABLE or self.pos != inner:
            self._refusal = (f"shelter: the pocket at {_xy(entrance)} is still open after {budget} steps of digging "
                             f"and sealing (a creature in it?; the player is at {_xy(self.pos)})")

    def leave_shelter(self, max_steps: int = 12) -> Iterator[str]:
        """Mine a way out of a shelter (a wall with known open ground behind it first) and step out; returns
        when out, or when no wall can be mined (a table seal and no pickaxe).

        Without such a wall it mines any wall the pickaxes held can mine. It tries from either tile of the
        pocket; stone, coal, iron and diamond turn to path when mined."""
        self._refusal = None
        if not self.is_sheltered():
            self._refusal = "leave_shelter: the player is not walled in (nothing to do)"
            return
        moved = False
        for _ in range(max_steps):
            if not self.is_sheltered():
                return
            if not self.can_collect("stone"):  # each wall it can mine needs a pickaxe at least
                self._refusal = "leave_shelter: needs a wood pickaxe to mine a wall of the pocket"
                return
            px, py = self.pos
            exits, minable = [], self._minable()
            for d in [self.facing] + [d for d in MOVE_FOR_DIRECTION if d != self.facing]:
                wall, beyond = (px + d[0], py + d[1]), (px + 2 * d[0], py + 2 * d[1])
                material = self.material_at(wall)
                if material in minable:
                    exits.append((self.material_at(beyond) not in WALKABLE, d))
            if exits:
                d = min(exits, key=lambda e: e[0])[1]
                yield from self.face((px + d[0], py + d[1]))
                yield "do"
                if self.material_at((px + d[0], py + d[1])) in WALKABLE:
                    yield MOVE_FOR_DIRECTION[d]
                continue
            inside = [n for n in _neighbours(self.pos) if self.material_at(n) in WALKABLE]
            if not inside or moved:
                self._refusal = ("leave_shelter: no wall of the pocket can be mined with the pickaxes held (only "
                                 "stone, coal, iron and diamond turn to path)")
                return
            moved = True
            yield MOVE_FOR_DIRECTION[(inside[0][0] - px, inside[0][1] - py)]  # try from the pocket's other tile
        if self.is_sheltered():
            self._refusal = f"leave_shelter: still walled in after max_steps={max_steps}"

    def explore(self, steps: int = 20) -> Iterator[str]:
        """Head for the nearest edge of the known map to uncover new tiles."""
        for _ in range(steps):
            if (yield from self.defend()):
                continue
            move = self._step_toward_frontier()
            if move is None:  # no frontier within reach: a random step, never into lava (walking onto it kills)
                px, py = self.pos
                safe = [m for (dx, dy), m in MOVE_FOR_DIRECTION.items()
                        if self.material_at((px + dx, py + dy)) != "lava"]
                move = self._rng.choice(safe or ["noop"])
            yield move

    # -- internals --

    def _walkable_tiles(self) -> memoryview:
        """1 where the remembered tile is walkable, by flat index (`_flat`), kept as the memory is written:
        it spares a search a lookup per tile. A search only steps onto walkable tiles, and those lie at least
        the memory's margin inside its edge (odometry stays within the 64-tile world), so every neighbour
        it looks at is inside the memory."""
        dirty = self._walkable_dirty
        if dirty is None:
            self._walkable_tiles_view[:] = self._tiles.tobytes().translate(_WALKABLE_TABLE)
            self._walkable_dirty = []
        else:
            for x0, x1, y0, y1 in dirty:
                self._walkable[x0:x1, y0:y1] = _WALKABLE_OF[self._memory[x0:x1, y0:y1]]
            dirty.clear()
        return self._walkable_tiles_view

    def _creature_positions(self) -> set[Pos]:
        px, py = self.pos
        return {(px + dx, py + dy) for _, dx, dy in self._current().creatures}

    def _facing_creatures(self) -> list[str]:
        fdx, fdy = self.facing
        return [n for n, dx, dy in self._current().creatures if (dx, dy) == (fdx, fdy)]

    def _reachable_adjacent_costs(self, limit: int = 4000) -> dict[int, int]:
        """Walking distance to every tile reachable over known walkable ground, by flat index (`_flat`)."""
        start = _flat(self.pos)
        cost = {start: 0}
        queue = deque([start])
        blocked = {_flat(p) for p in self._creature_positions()}
        walkable = self._walkable_tiles()
        deltas = [dx * _MEMORY_SIZE + dy for dx, dy in MOVE_FOR_DIRECTION]
        while queue and len(cost) < limit:
            cur = queue.popleft()
            for delta in deltas:
                nxt = cur + delta
                if nxt not in cost and nxt not in blocked and walkable[nxt]:
                    cost[nxt] = cost[cur] + 1
                    queue.append(nxt)
        return cost

    def _shelter_site(self, max_walk: int) -> tuple[Pos, Pos] | str:
        """The nearest (entrance, direction) whose next two tiles can form a sealed pocket: each free
        or stone the player can mine, with known solid tiles on their other sides, and something to
        seal the entrance with (a stone already held or mined from the pocket, else a table), and a
        way out again: a pickaxe and a wall or seal of stone (a pocket of tables and trees is a tomb).
        When there is none, why (shelter's refusal): what the walled pockets found lacked, else that none
        was found."""
        if not self.can_collect("stone"):
            return "shelter: needs a wood pickaxe (to dig the pocket, and to mine the way out again)"
        creatures = self._creature_positions()
        holds_stone = self.has("stone")
        has_seal = holds_stone or self.can_afford("table")
        reachable = self._reachable_adjacent_costs()
        no_seal = no_way_out = None  # the nearest walled pocket that lacked only that
        # by walking distance, then position (flat indices order as positions do)
        for entrance in [_unflat(at) for at in sorted((at for at, c in reachable.items() if c <= max_walk),
                                                        key=lambda at: (reachable[at], at))]:
            for dx, dy in MOVE_FOR_DIRECTION:
                pocket = [(entrance[0] + k * dx, entrance[1] + k * dy) for k in (1, 2)]
                kinds = [self.material_at(t) for t in pocket]
                if any(t in creatures for t in pocket) or not all(
                        k in WALKABLE or k == "stone" for k in kinds):
                    continue
                end = pocket[1]
                walls = [(t[0] + sx, t[1] + sy) for t in pocket for sx, sy in ((dy, dx), (-dy, -dx))]
                walls.append((end[0] + dx, end[1] + dy))
                wall_kinds = [self.material_at(w) for w in walls]
                if any(k in _NOT_A_WALL for k in wall_kinds):
                    continue
                if not (has_seal or "stone" in kinds):
                    no_seal = no_seal or entrance
                elif not (holds_stone or "stone" in kinds or any(k in _MINED_TO_PATH for k in wall_kinds)):
                    no_way_out = no_way_out or entrance
                else:
                    return entrance, (dx, dy)
        if no_seal is not None:
            table = _items(self.requirements("table"))
            return (f"shelter: no stone, nor the wood for a table (a table takes {table}), to close the entrance of "
                    f"the pocket at {_xy(no_seal)}")
        if no_way_out is not None:
            return (f"shelter: the pocket at {_xy(no_way_out)} has no stone wall to mine the way out again, "
                    "and no stone is held to seal it with")
        return (f"shelter: no pocket site remembered within {max_walk} steps of walking (two free or stone tiles "
                "in a row, walled in by solid tiles already seen)")

    def _off_the_pocket(self, tile: Pos) -> str:
        """shelter's refusal when the player did not get onto a tile of the pocket."""
        return (f"shelter: could not get onto the pocket's tile {_xy(tile)} ({self.material_at(tile)} there; the "
                f"player is at {_xy(self.pos)})")

    def _minable(self) -> frozenset[str]:
        """The solid materials the pickaxes held can mine, which turn to path."""
        return frozenset(m for m in _MINED_TO_PATH if self.can_collect(m))

    def _dig_route(self, target: Pos) -> list[Pos] | None:
        """The cheapest route to a tile next to `target` (its tiles in order, the player's own left out; [] when
        already there), over known walkable tiles (one step each) and known tiles the pickaxes held can mine
        (two: mine, then step), not through creatures; None when there is none. It only enters seen tiles, so
        it searches at most the seen part of the 64x64 world."""
        goals = {_flat(n) for n in _neighbours(target) if _in_memory(n)}
        start = _flat(self.pos)
        if start in goals:
            return []
        minable = {MATERIAL_IDS[m] for m in self._minable()}
        walkable, tiles = self._walkable_tiles(), self._tiles
        blocked = {_flat(p) for p in self._creature_positions()}
        cost, frontier = {start: 0}, [(0, start)]
        came_from: dict[int, int] = {}
        while frontier:
            so_far, cur = heapq.heappop(frontier)
            if cur in goals:
                route = []
                while cur != start:
                    route.append(_unflat(cur))
                    cur = came_from[cur]
                return route[::-1]
            if so_far > cost[cur]:
                continue
            for nxt in (cur + 1, cur - 1, cur + _MEMORY_SIZE, cur - _MEMORY_SIZE):
                if nxt in blocked:
                    continue
                step = 1 if walkable[nxt] else 2 if tiles[nxt] in minable else 0
                if step and so_far + step < cost.get(nxt, so_far + step + 1):
                    cost[nxt], came_from[nxt] = so_far + step, cur
                    heapq.heappush(frontier, (so_far + step, nxt))
        return None

    def _path_to_spot_near(self, materials: list[str], limit: int = 4000) -> list[str] | None:
        wanted = [MATERIAL_IDS.get(m) for m in materials]
        if None in wanted:  # a name that is no material is never near: no tile is a goal
            return None
        t = self._tiles
        s = _MEMORY_SIZE

        def near_all(at: int) -> bool:  # each wanted material on one of the 3x3 tiles around `at`
            a, b = at - s, at + s  # the rows beside; written out: the test runs for every tile a search reaches
            for m in wanted:
                if not (t[a - 1] == m or t[a] == m or t[a + 1] == m or t[at - 1] == m or t[at] == m
                        or t[at + 1] == m or t[b - 1] == m or t[b] == m or t[b + 1] == m):
                    return False
            return True

        return self._search(near_all, limit=limit)

    def _step_toward_frontier(self) -> str | None:
        """First move of a shortest known path to a walkable tile that borders unknown ground."""
        moves = list(MOVE_FOR_DIRECTION.items())
        self._rng.shuffle(moves)  # varied tie-breaking between equal frontiers, replayable per episode
        tiles, unknown = self._tiles, MATERIAL_IDS[UNKNOWN]

        def borders_unknown(at: int) -> bool:
            return unknown in (tiles[at - _MEMORY_SIZE], tiles[at + _MEMORY_SIZE], tiles[at - 1], tiles[at + 1])

        path = self._search(borders_unknown, moves=moves)
        return path[0] if path else None

    def _search(self, is_goal, limit: int | None = None, moves=None) -> list[str] | None:
        """Breadth-first search from the player over known walkable tiles free of creatures: the
        moves to the nearest tile (other than the player's own) where `is_goal(flat index)` holds, or None.
        Tiles go by flat index (`_flat`): the search only adds and compares ints. It runs at nearly every
        step of a coded action that walks, so the loop is written for speed: the four neighbours spelt
        out, and each tile's predecessor stored alone (its move follows from the difference)."""
        start = _flat(self.pos)
        # 1 where the search may still step: walkable, free of creatures, not reached yet (one test per tile)
        free = bytearray(self._walkable_tiles())
        for at in {_flat(p) for p in self._creature_positions()}:
            free[at] = 0
        free[start] = 0
        move_of = {d[0] * _MEMORY_SIZE + d[1]: move for d, move in (moves or MOVE_FOR_DIRECTION.items())}
        # the four directions in the order given (`moves`: a shuffle of MOVE_FOR_DIRECTION's items): ties between
        # equal paths go to the earlier move
        d0, d1, d2, d3 = move_of
        came_from = {start: start}
        queue = deque([start])
        cap = len(free) + 1 if limit is None else limit  # no search reaches more tiles than the memory holds
        popleft, append = queue.popleft, queue.append
        while queue and len(came_from) < cap:
            cur = popleft()
            if cur != start and is_goal(cur):
                moves_back = []
                while cur != start:
                    before = came_from[cur]
                    moves_back.append(move_of[cur - before])
                    cur = before
                return moves_back[::-1]
            nxt = cur + d0
            if free[nxt]:
                free[nxt] = 0
                came_from[nxt] = cur
                append(nxt)
            nxt = cur + d1
            if free[nxt]:
                free[nxt] = 0
                came_from[nxt] = cur
                append(nxt)
            nxt = cur + d2
            if free[nxt]:
                free[nxt] = 0
                came_from[nxt] = cur
                append(nxt)
            nxt = cur + d3
            if free[nxt]:
                free[nxt] = 0
                came_from[nxt] = cur
                append(nxt)
        return None


def _flat(pos: Pos) -> int:
    """A position's index in the flat memory (`GameAPI._tiles`): x-major, so flat order is position order."""
    return (pos[0] + _MEMORY_RADIUS) * _MEMORY_SIZE + pos[1] + _MEMORY_RADIUS


def _unflat(at: int) -> Pos:
    x, y = divmod(at, _MEMORY_SIZE)
    return (x - _MEMORY_RADIUS, y - _MEMORY_RADIUS)


def _in_memory(pos) -> bool:
    """Whether `pos` (say, a target agent code named) is a whole-numbered tile inside the memory."""
    try:
        return all(float(c).is_integer() and 0 <= c + _MEMORY_RADIUS < _MEMORY_SIZE for c in pos) and len(pos) == 2
    except (TypeError, ValueError, OverflowError):
        return False


def _xy(pos: Pos) -> Pos:
    """A position as plain ints: what a refusal names (a numpy int would print as np.int64(3))."""
    return (int(pos[0]), int(pos[1]))


def _items(amounts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in amounts.items())


def _neighbours(pos: Pos) -> list[Pos]:
    return [(pos[0] + dx, pos[1] + dy) for dx, dy in DIRECTIONS.values()]
