"""One JSON file per finished table cell, so a killed evaluation skips what it already measured.

A cell's key holds every parameter that changes its result (method, task, budget, episodes,
variant, seed), so a run with other settings never reuses a stale cell.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

_SAFE = re.compile(r"[^A-Za-z0-9_.=-]+")


def cell_key(*parts: Any, **params: Any) -> str:
    words = [str(p) for p in parts] + [f"{k}={v}" for k, v in sorted(params.items())]
    return _SAFE.sub("_", "-".join(words))[:200]


class CellCache:
    """results/cells/<key>.json; `get_or_run` returns the cached value or computes and stores it."""

    def __init__(self, folder: str | Path, enabled: bool = True):
        self.folder = Path(folder)
        self.enabled = enabled
        self.hits = 0
        self.runs = 0

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def get(self, key: str) -> dict | None:
        path = self.path(key)
        if not (self.enabled and path.is_file()):
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            return None  # a torn write from a killed run: measure the cell again

    def put(self, key: str, value: dict) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=f".{key}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=1, default=str)
        os.replace(tmp, self.path(key))

    def get_or_run(self, key: str, compute: Callable[[], dict], log: Callable[[str], None] = print) -> dict:
        found = self.get(key)
        if found is not None:
            self.hits += 1
            log(f"  cached  {key}")
            return found
        value = compute()
        self.runs += 1
        self.put(key, value)
        return value
