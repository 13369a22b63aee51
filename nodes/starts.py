"""Where the chain stands: moments saved from successful code tests, for trainings to start from.

A code test replays the solved skills before its own sub-action, so when it succeeds the player stands
where the next subtask's turn comes in the chain. nodes.measure saves that moment (envs.saved_state) in
the run folder and logs it in the state's `start_states`. A training of a later subtask then starts each
episode from one of the moments whose achievements cover the subtask's prerequisites, instead of a
fresh world in which it would first replay the chain: its steps go to the part being learned. The
replayed steps were counted when the tests spent them; the moments come from training seeds only.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envs.saved_state import StateFileError, read_states, write_states
from envs.tasks import TASKS
from nodes.attempt.results import CODE_TOOL
from nodes.entries import StartStateEntry
from nodes.skills.records import prerequisite_achievements

MAX_TRAINING_STARTS = 64  # the latest moments a training starts from; each is about 15 KB on disk
STARTS_FOLDER = "starts"


def save_test_ends(state: Mapping[str, Any], run_dir: Path, round_: Sequence[Any]) -> list[StartStateEntry]:
    """Save where each successful code test of this round stopped; the entries for `start_states`."""
    subtask = state["plan"][state["subtask_index"]]["name"]
    folder = run_dir / STARTS_FOLDER / "saved"
    entries: list[StartStateEntry] = []
    n = len(state.get("start_states") or [])
    for message in round_:
        report = getattr(message, "artifact", None)
        saved = getattr(report, "end_state", None) if message.name == CODE_TOOL else None
        if saved is None:  # a failed test, or a report read back from a checkpoint (the world is not kept there)
            continue
        path = folder / f"{n + len(entries):05d}-{subtask}.state"
        try:
            write_states(path, [saved])
        except OSError:  # a full or read-only disk loses a start, never the run
            continue
        entries.append({"file": str(path), "subtask": subtask, "achievements": list(saved.achievements),
                        "steps": int(saved.steps)})
    return entries


def chain_starts(state: Mapping[str, Any], subtask: str) -> list[StartStateEntry]:
    """The saved moments where `subtask`'s turn comes: its prerequisites unlocked, its own achievement not
    (the latest MAX_TRAINING_STARTS). None for a subtask that nothing comes before: it starts in a fresh world.
    Read from the state alone (it runs at every fast call): a file gone since is left out by write_start_set."""
    needed = set(prerequisite_achievements(state))
    if not needed:
        return []
    own = TASKS[subtask].achievement if subtask in TASKS else subtask
    fitting = [e for e in state.get("start_states") or []
               if needed <= set(e["achievements"]) and own not in e["achievements"]]
    return fitting[-MAX_TRAINING_STARTS:]


def write_start_set(entries: Sequence[StartStateEntry], path: Path) -> int:
    """One start-set file of these moments, for a training's configuration (RLConfig.start_states); a saved
    moment that cannot be read any more is left out. 0 when none could be (nothing is written then)."""
    states = []
    for e in entries:
        try:
            states += read_states(e["file"])
        except StateFileError:
            continue
    return write_states(path, states) if states else 0


def starts_text(entries: Sequence[StartStateEntry]) -> str:
    """The moments a training starts from, in words for the prompts."""
    by: dict[str, int] = {}
    for e in entries:
        by[e["subtask"]] = by.get(e["subtask"], 0) + 1
    steps = sorted(e["steps"] for e in entries)
    tests = ", ".join(f"{k}: {v}" for k, v in by.items())
    return (f"{len(entries)} moments saved where successful code tests ({tests}) reached this subtask's turn in "
            f"the chain, at episode steps {steps[0]}..{steps[-1]}; every training episode starts from one of them, "
            "so the policy does not replay the earlier skills first")
