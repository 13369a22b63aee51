"""Moments of Crafter episodes saved on the trusted side, to start later episodes from.

A code test that ends in success saves where it stopped (nodes.measure), and a training for a later
sub-action starts its episodes there instead of a fresh world (rl.env_factory.TrainingSeeds): its
steps then go to the part being learned, not to replaying the chain before it. Those replayed steps were
counted when the code test spent them.

The world is a pickle, so it is read back by an unpickler that builds only the game's own classes,
numpy's arrays and random generators, and a set: a blob that names anything else is refused, never run.
Agent code never sees these files (the sandbox cannot open any file) and no seed of a world is stored
where the player could read it.

A start-set file holds several states: per state, one JSON line (its facts and the length of its world)
and then the world's bytes.
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
        raw = zlib.decompress(blob)
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

    def facts(self) -> dict:
        return {"seed": self.seed, "steps": self.steps, "achievements": list(self.achievements),
                "spawn": list(self.spawn), "source": self.source, "bytes": len(self.world)}


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
            size = int(facts["bytes"])
            if not 0 < size <= MAX_WORLD_BYTES or end + 1 + size > len(data):
                raise ValueError(f"a world of {size} bytes")
            states.append(SavedState(
                world=data[end + 1:end + 1 + size], seed=int(facts["seed"]), steps=int(facts["steps"]),
                achievements=tuple(str(a) for a in facts["achievements"]),
                spawn=(int(facts["spawn"][0]), int(facts["spawn"][1])), source=str(facts["source"])))
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise StateFileError(f"{str(path)!r} is damaged at byte {at}: {exc}") from exc
        at = end + 1 + size
    if not states:
        raise StateFileError(f"{str(path)!r} holds no state")
    return states
