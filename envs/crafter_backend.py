"""Crafter behind the Backend protocol.

The symbolic observation never renders: the policy sees the 9x7 local view as one-hot materials
and creatures plus inventory and status, built straight from the simulator's tile arrays, which
is several times faster than drawing pixels.
"""

from __future__ import annotations

import crafter
import gymnasium as gym
import numpy as np
from crafter import objects as crafter_objects

from envs import fast_worldgen, saved_state
from envs.observation import (
    CREATURES,
    INVENTORY_KEYS,
    MATERIAL_IDS,
    MATERIAL_NAMES,
    MATERIALS,
    VIEW_HEIGHT,
    VIEW_RADIUS_X,
    VIEW_RADIUS_Y,
    VIEW_WIDTH,
    VOID,
    PlayerObservation,
)

PRIMITIVE_ACTIONS: tuple[str, ...] = tuple(crafter.constants.actions)
_FACINGS = ((-1, 0), (1, 0), (0, -1), (0, 1))
_INVENTORY_MAX = 9.0
SYMBOLIC_SIZE = (
    VIEW_WIDTH * VIEW_HEIGHT * (len(MATERIAL_NAMES) + len(CREATURES))
    + len(INVENTORY_KEYS) + len(_FACINGS) + 2  # + daylight, sleeping
)

if tuple(crafter.constants.materials) != MATERIALS:  # _view_ids relies on the ids coinciding
    raise ImportError(f"Crafter's materials changed ({crafter.constants.materials}); "
                      "update envs/observation.py to match")


class _Simulator(crafter.Env):
    """Crafter with rendering made lazy: its step() draws a frame every step otherwise."""

    def _obs(self):
        return None

    def reset(self):
        # Crafter's reset, with the array-based world generator (same worlds, ~6x faster).
        self._episode += 1
        self._step = 0
        self._world.reset(seed=hash((self._seed, self._episode)) % (2 ** 31 - 1))
        self._update_time()
        self._player = crafter_objects.Player(self._world, (self._world.area[0] // 2, self._world.area[1] // 2))
        self._last_health = self._player.health
        self._world.add(self._player)
        self._unlocked = set()
        fast_worldgen.generate_world(self._world, self._player)
        self._sem_view = _no_semantic_view  # Crafter's per-step full-map copy feeds only its info dict
        return None

    def step(self, action):
        # Crafter's step without its per-step frame and info dict, and with the distance test that
        # decides which objects update done on plain ints instead of one numpy call per object.
        # Objects only ever move themselves, so positions read before the loop are the positions
        # each object has at its turn; the player's position is read live. Same results, step for
        # step (tests/test_fast_worldgen.py replays both).
        self._step += 1
        self._update_time()
        player = self._player
        player.action = crafter.constants.actions[action]
        objs = self._world.objects
        positions = np.array([obj.pos for obj in objs]).tolist()
        reach = 2 * max(self._view)
        px, py = int(player.pos[0]), int(player.pos[1])
        for obj, (ox, oy) in zip(objs, positions):
            if obj is player:
                player.update()
                px, py = int(player.pos[0]), int(player.pos[1])
            elif abs(ox - px) + abs(oy - py) < reach:
                obj.update()
        if self._step % 10 == 0:
            for chunk, chunk_objs in self._world.chunks.items():
                self._balance_chunk(chunk, chunk_objs)
        reward = (player.health - self._last_health) / 10
        self._last_health = player.health
        unlocked = {name for name, count in player.achievements.items() if count > 0 and name not in self._unlocked}
        if unlocked:
            self._unlocked |= unlocked
            reward += 1.0
        return None, reward, player.health <= 0, {}

    def _balance_chunk(self, chunk, objs):
        # Crafter keeps each chunk's objects in a set ordered by memory address, and picks the
        # creature to despawn by index into it: sorting by position makes same-seed episodes replay.
        super()._balance_chunk(chunk, sorted(objs, key=lambda obj: (int(obj.pos[0]), int(obj.pos[1]))))


def _no_semantic_view():
    return None


def _creature_name(obj) -> str | None:
    if isinstance(obj, crafter_objects.Plant):
        return "ripe_plant" if obj.ripe else "plant"
    name = type(obj).__name__.lower()
    return name if name in CREATURES else None


class CrafterBackend:
    name = "crafter"
    primitive_actions = PRIMITIVE_ACTIONS

    def __init__(self) -> None:
        self._sim = self._new_simulator()
        self._spare: _Simulator | None = None  # a simulator not in play, to generate the next world on
        self._spare_world: tuple[int, int] | None = None  # the (seed, episode) the spare holds ready, if any
        self._start = (0, 0)
        self._onehot_materials = np.eye(len(MATERIAL_NAMES), dtype=np.float32)

    @staticmethod
    def _new_simulator() -> _Simulator:
        # Crafter's own length limit is off: TaskEnv truncates at the task's step limit.
        return _Simulator(area=(64, 64), view=(9, 9), size=(64, 64), reward=True, length=None, seed=0)

    @staticmethod
    def _generate(sim: _Simulator, seed: int, episode: int) -> None:
        # Crafter seeds each world from (seed, episode number); reset() increments the number.
        sim._seed, sim._episode = seed, episode
        sim.reset()

    def reset(self, seed: int, episode: int = 0) -> None:
        key = (int(seed), int(episode))
        if self._spare is not None and self._spare_world == key:
            self._sim, self._spare = self._spare, self._sim
            self._spare_world = None
        else:
            self._generate(self._sim, *key)
        x, y = self._sim._player.pos
        self._start = (int(x), int(y))

    def prepare(self, seed: int, episode: int = 0) -> None:
        """Generate the world of (seed, episode) now, on a spare simulator; a later reset(seed, episode) then
        only swaps it in. A reset's state depends on (seed, episode) alone (the world's random generator is
        seeded from them), so the episode is the same either way (tests/test_fast_worldgen.py). World
        generation is most of a reset's cost; an actor worker runs it while the learner updates."""
        key = (int(seed), int(episode))
        if self._spare_world == key:
            return
        if self._spare is None:
            self._spare = self._new_simulator()
        self._generate(self._spare, *key)
        self._spare_world = key

    def save(self) -> tuple[bytes, tuple[int, int]]:
        """The current world and player as bytes (envs.saved_state), and where the player spawned."""
        sim = self._sim
        return saved_state.dumps_world((sim._world, sim._player, sim._step, sim._last_health, set(sim._unlocked))), \
            self._start

    def restore(self, world: bytes, spawn: tuple[int, int], reseed: int) -> None:
        """Play on from a saved world. Its random generator, which every creature holds too, is seeded anew
        with `reseed`, so that episodes started from one state differ after it."""
        parts = saved_state.loads_world(world)
        if len(parts) != 5 or not isinstance(parts[0], crafter.engine.World) or \
                not isinstance(parts[1], crafter_objects.Player):
            raise saved_state.StateFileError("a saved world holds something else than a Crafter world and player")
        world_, player, step, last_health, unlocked = parts
        world_.random = np.random.RandomState(int(reseed) % (2 ** 32))
        for obj in world_.objects:  # each object keeps the generator it was made with
            obj.random = world_.random
        sim = self._sim  # the simulator in play takes the saved world; its textures are kept (no reload)
        item_rows = int(np.ceil(len(crafter.constants.items) / sim._view[0]))
        sim._world = world_  # the views draw the world they were built on: build them on this one
        sim._local_view = crafter.engine.LocalView(world_, sim._textures, [sim._view[0], sim._view[1] - item_rows])
        sim._sem_view = _no_semantic_view
        sim._player, sim._step, sim._last_health, sim._unlocked = player, int(step), last_health, set(unlocked)
        self._start = (int(spawn[0]), int(spawn[1]))

    def step(self, action: int) -> tuple[float, bool]:
        _, reward, dead, _ = self._sim.step(action)
        return float(reward), bool(dead)

    def achievements(self) -> set[str]:
        return {k for k, v in self._sim._player.achievements.items() if v > 0}

    def inventory(self) -> dict[str, int]:
        return dict(self._sim._player.inventory)

    def render(self) -> np.ndarray:
        """The player's view as Crafter draws it, for a human (debugging GIFs); like frame(), it leaves the
        simulation exactly as it was."""
        return self._drawn_aside(self._sim.render)

    def frame(self, size: int = 64) -> np.ndarray:
        """An RGB picture of the player's view, `size` x `size` pixels, for a human to watch (videos)."""
        if size < 9:
            raise ValueError(f"a frame needs at least 9 pixels a side (one per view cell), got {size}")
        return self._drawn_aside(lambda: self._sim.render((int(size), int(size))))  # a tuple: `size or self._size`

    def _drawn_aside(self, draw) -> np.ndarray:
        """Crafter draws its night-time noise from the world's random generator, the one that also moves the
        creatures, so a picture drawn mid-episode for a human would change what happens next. The
        generator's state is put back after drawing. (The pixel policy observation draws with it on every
        step, as Crafter itself does, so its dynamics stay Crafter's.)"""
        rng = self._sim._world.random
        state = rng.get_state()
        try:
            return draw()
        finally:
            rng.set_state(state)

    def policy_space(self, obs_kind: str) -> gym.Space:
        if obs_kind == "symbolic":
            return gym.spaces.Box(0.0, 1.0, (SYMBOLIC_SIZE,), np.float32)
        return gym.spaces.Box(0, 255, (64, 64, 3), np.uint8)

    def policy_observation(self, obs_kind: str, player_obs: PlayerObservation) -> np.ndarray:
        if obs_kind == "pixels":
            return self._sim.render()
        return symbolic_features(player_obs, self._onehot_materials)

    def player_observation(self, episode_step: int) -> PlayerObservation:
        player = self._sim._player
        pos = (int(player.pos[0]) - self._start[0], int(player.pos[1]) - self._start[1])
        return PlayerObservation(
            materials=self._view_ids(), creatures=self._visible_creatures(),
            inventory=dict(player.inventory), facing=(int(player.facing[0]), int(player.facing[1])),
            pos=pos, daylight=float(self._sim._world.daylight), sleeping=bool(player.sleeping),
            episode_step=episode_step, achievements=frozenset(self.achievements()))

    def _view_ids(self) -> np.ndarray:
        """Material ids of the 9x7 local view; cells beyond the world's edge are 'void'."""
        world = self._sim._world
        px, py = (int(v) for v in self._sim._player.pos)
        out = np.full((VIEW_WIDTH, VIEW_HEIGHT), MATERIAL_IDS[VOID], dtype=np.uint8)
        x0, y0 = px - VIEW_RADIUS_X, py - VIEW_RADIUS_Y
        w, h = world.area
        xa, ya = max(x0, 0), max(y0, 0)
        xb, yb = min(x0 + VIEW_WIDTH, w), min(y0 + VIEW_HEIGHT, h)
        out[xa - x0:xb - x0, ya - y0:yb - y0] = world._mat_map[xa:xb, ya:yb]
        return out

    def _visible_creatures(self) -> tuple[tuple[str, int, int], ...]:
        world = self._sim._world
        px, py = (int(v) for v in self._sim._player.pos)
        x0, y0 = max(px - VIEW_RADIUS_X, 0), max(py - VIEW_RADIUS_Y, 0)
        window = world._obj_map[x0:px + VIEW_RADIUS_X + 1, y0:py + VIEW_RADIUS_Y + 1]
        found = []
        for ix, iy in zip(*np.nonzero(window)):
            obj = world._objects[window[ix, iy]]
            name = _creature_name(obj) if obj is not self._sim._player else None
            if name:
                found.append((name, int(x0 + ix - px), int(y0 + iy - py)))
        return tuple(found)


def symbolic_features(obs: PlayerObservation, onehot_materials: np.ndarray | None = None) -> np.ndarray:
    """The policy's symbolic input: one-hot view materials and creatures, inventory, facing, time."""
    if onehot_materials is None:
        onehot_materials = np.eye(len(MATERIAL_NAMES), dtype=np.float32)
    materials = onehot_materials[obs.materials]                           # (9, 7, M)
    creatures = np.zeros((VIEW_WIDTH, VIEW_HEIGHT, len(CREATURES)), np.float32)
    for name, dx, dy in obs.creatures:
        creatures[dx + VIEW_RADIUS_X, dy + VIEW_RADIUS_Y, CREATURES.index(name)] = 1.0
    inventory = np.array([obs.inventory.get(k, 0) for k in INVENTORY_KEYS], np.float32) / _INVENTORY_MAX
    facing = np.array([obs.facing == f for f in _FACINGS], np.float32)
    extra = np.array([obs.daylight, float(obs.sleeping)], np.float32)
    return np.concatenate([materials.ravel(), creatures.ravel(), np.clip(inventory, 0, 1), facing, extra])
