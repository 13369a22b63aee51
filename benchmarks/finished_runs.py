"""A finished run's final state, read back from its checkpoint, for the benchmarks that replay its chain."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver


def final_state(runs: Path, run_id: str) -> dict:
    """The graph state the run ended with (RUNS/checkpoints.sqlite); a clear exit when it is not there."""
    db = runs / "checkpoints.sqlite"
    if not db.exists():
        raise SystemExit(f"no checkpoints in {runs} (expected {db})")
    with sqlite3.connect(db, check_same_thread=False) as conn:
        saved = SqliteSaver(conn).get_tuple({"configurable": {"thread_id": run_id}})
    if saved is None:
        raise SystemExit(f"no run {run_id!r} in {db}")
    return saved.checkpoint["channel_values"]
