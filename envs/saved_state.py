"""Moments of Crafter episodes saved on the trusted side, to start later episodes from.

A code test that ends in success saves where it stopped (nodes.measure), and a training for a later
sub-action starts its episodes there instead of a fresh world (rl.env_factory.TrainingSeeds): its
steps then go to the part being learned, not to replaying the chain before it. Those replayed steps were
counted when the code test spent them.

The world is a pickle, so it is read back by an unpickler that builds only the game's own classes,
numpy's arrays and random generators, and a set: a blob that names anything else is refused, never run.
Agent code never sees these files (the sandbox cannot open any file) and no seed of a world is stored
where the player could read it.

A state also holds the game API's map of the tiles seen so far and where cows were seen, so that code
played from it knows what the chain before it saw. A start-set file holds several states: per state, one
JSON line (its facts and the lengths of its world and map) and then the world's and the map's bytes.
"""
from __future__ import annotations

import io
import json
import pickle
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"rlgpt start states 1\n"
MAX_WORLD_BYTES = 4 << 20  # a compressed Crafter world is about 15 KB; anything far larger is not one
MAX_RAW_WORLD_BYTES = 16 << 20  # inflated, about 90 KB

# What a saved world may be built from: the simulator's world and creatures, numpy arrays and random state.
_ALLOWED = {
    "builtins": {"set", "frozenset"},
    "collections": {"defaultdict"},
    "crafter.engine": {"World"},
    "crafter.objects": {"Player", "Cow", "Zombie", "Skeleton", "Arrow", "Plant", "Fence"},
    "numpy": {"dtype", "ndarray"},
    "numpy.core.multiarray": {"_reconstruct", "scalar"},
    "numpy._core.multiarray": {"_reconstruct", "scalar"},
    "numpy.core.numeric": {"_frombuffer"},
    "numpy._core.numeric": {"_frombuffer"},
    "numpy.random._pickle": {"__randomstate_ctor", "__bit_generator_ctor"},
    "numpy.random._mt19937": {"MT19937"},
    "numpy.random.mtrand": {"RandomState"},
}


class StateFileError(ValueError):
    """A start-state file that is missing, damaged, or holds something else than saved worlds."""


class _WorldUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if name not in _ALLOWED.get(module, ()):
            raise StateFileError(f"a saved world may not contain {module}.{name}")
        return super().find_class(module, name)


def dumps_world(parts: tuple) -> bytes:
    return zlib.compress(pickle.dumps(parts, protocol=5), 6)


def loads_world(blob: bytes) -> tuple:
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(blob, MAX_RAW_WORLD_BYTES)
        if inflate.unconsumed_tail:
            raise StateFileError(f"a saved world inflates past {MAX_RAW_WORLD_BYTES} bytes: not a Crafter world")
        parts = _WorldUnpickler(io.BytesIO(raw)).load()
    except StateFileError:
        raise
    except Exception as exc:  # damaged bytes: say so, whatever the decoder raised
        raise StateFileError(f"a saved world could not be read: {type(exc).__name__}: {exc}") from exc
    if not isinstance(parts, tuple):
        raise StateFileError("a saved world holds something else than the simulator's parts")
    return parts


@dataclass(frozen=True)
class SavedState:
    """One moment of an episode: the world and player (``world``, see CrafterBackend.save), the training
    seed of the world it came from, the episode step it was saved at, what the player had unlocked, and
    where the player spawned (positions the game API reports are relative to it)."""

    world: bytes
    seed: int
    steps: int
    achievements: tuple[str, ...]
    spawn: tuple[int, int]
    source: str = ""
    """what played it: e.g. 'code test of collect_coal'"""
    memory: bytes = b""
    """the game API's map of every tile seen so far in the episode (zlib-compressed), so that code played
    from here knows what the chain before it saw, as it would in held-out play"""
    cows: tuple[tuple[int, int], ...] = ()
    """where the game API last saw cows"""

    def facts(self) -> dict:
        return {"seed": self.seed, "steps": self.steps, "achievements": list(self.achievements),
                "spawn": list(self.spawn), "source": self.source, "cows": [list(c) for c in self.cows],
                "bytes": len(self.world), "memory_bytes": len(self.memory)}

    def memory_map(self, size: int) -> bytes:
        """The raw map of `size` bytes; StateFileError when the saved one is not that."""
        try:
            raw = zlib.decompressobj().decompress(self.memory, size + 1) if self.memory else b""
        except zlib.error as exc:
            raise StateFileError(f"a saved game map could not be read: {exc}") from exc
        if raw and len(raw) != size:
            raise StateFileError(f"a saved game map holds {len(raw)} bytes, not {size}")
        return raw


def write_states(path: str | Path, states: Iterable[SavedState]) -> int:
    """Write the states to one start-set file (replaced whole); returns how many."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("wb") as out:
        out.write(MAGIC)
        for state in states:
            out.write(json.dumps(state.facts()).encode() + b"\n")
            out.write(state.world)
            out.write(state.memory)
            count += 1
    tmp.replace(path)  # a reader never sees half a file
    return count


def read_states(path: str | Path) -> list[SavedState]:
    """The states of a start-set file; StateFileError naming the problem when it is not one."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise StateFileError(f"the start states {str(path)!r} cannot be read: {exc.strerror or exc}") from exc
    if not data.startswith(MAGIC):
        raise StateFileError(f"{str(path)!r} is not a start-state file")
    states, at = [], len(MAGIC)
    while at < len(data):
        end = data.find(b"\n", at)
        try:
            facts = json.loads(data[at:end]) if end > at else {}
            size, memory = int(facts["bytes"]), int(facts.get("memory_bytes", 0))
            if not 0 < size <= MAX_WORLD_BYTES or not 0 <= memory <= MAX_WORLD_BYTES or \
                    end + 1 + size + memory > len(data):
                raise ValueError(f"a world of {size} bytes and a map of {memory}")
            world_at = end + 1
            states.append(SavedState(
                world=data[world_at:world_at + size], seed=int(facts["seed"]), steps=int(facts["steps"]),
                achievements=tuple(str(a) for a in facts["achievements"]),
                spawn=(int(facts["spawn"][0]), int(facts["spawn"][1])), source=str(facts["source"]),
                memory=data[world_at + size:world_at + size + memory],
                cows=tuple((int(c[0]), int(c[1])) for c in facts.get("cows", []))))
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise StateFileError(f"{str(path)!r} is damaged at byte {at}: {exc}") from exc
        at = end + 1 + size + memory
    if not states:
        raise StateFileError(f"{str(path)!r} holds no state")
    return states
