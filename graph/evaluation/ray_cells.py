"""`python -m graph.evaluate --ray ADDRESS`: the table cells measured in parallel, one Ray task each.

The tables are built the usual way (tables.py); only where a missing cell is measured changes:
  1. a planning pass runs the table builders with a runner that measures nothing: it collects every cell
     missing from the cache (a builder that needs a cell's value to go on stops there for this round);
  2. the missing cells are measured as Ray tasks, all at once (the cluster runs as many as it has CPUs);
     each finished one is written to the cache at once, as a serial run writes it;
  3. repeat until a planning pass finds nothing new (table 3's iterations need table 3's RL-GPT run);
  4. the normal serial pass then builds the tables from those values and writes the report.
So the cache and the report are a serial run's, and a killed run resumes from its finished cells.

Nothing assumes a shared filesystem. A cell is measured on its node in a fresh folder (cwd) under a
relative stand-in for the results folder; its value (JSON) and the files it wrote there (policies, skill
libraries, PPO logs; not its LangGraph checkpoints) come back through Ray, and the driver writes the files
under the real results folder and puts the real folder into the paths the value holds. A cell that
plays files earlier cells wrote (`Runner.cell(..., local=True)`: table 3's replays of a run's attempts) is
measured in the driver, in the serial pass.
"""
from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from graph.evaluation.cache import CellCache
from graph.evaluation.tables import BUILDERS, EvalConfig, Runner

STAND_IN = "rlgpt-cell-out"          # the results folder as a cell on a node sees it (relative to its cwd)
ABSOLUTE = "@@rlgpt-absolute-out@@"  # the stand-in made absolute on the node; the driver's out, resolved
NOT_SHIPPED = ("checkpoints.sqlite",)  # a finished cell's LangGraph checkpoints: the cell is cached instead

Log = Callable[[str], None]


class CellFailed(RuntimeError):
    """A cell raised on the cluster; the cells finished before it are cached."""


class _Pending(dict):
    """The value of a cell not measured yet, in a planning pass: empty, so builders read None or stop."""


class _NodeRunner:
    """What a cell's compute sees of its runner on a Ray node: the settings and a log (Ray forwards prints to the
    driver's terminal)."""

    def __init__(self, cfg: EvalConfig):
        self.cfg = cfg

    def log(self, message: str) -> None:
        print(message, flush=True)


class PlanningRunner(Runner):
    """Runs the builders without measuring: a cell already known is returned, a missing one recorded."""

    def __init__(self, cfg: EvalConfig, cache: CellCache, known: dict[str, dict]):
        super().__init__(cfg, cache, log=lambda _message: None)
        self.known = known
        self.missing: dict[str, tuple[str, Callable[[], dict]]] = {}

    def cell(self, label: str, key: str, compute: Callable[[], dict], local: bool = False) -> dict:
        value = self.known.get(key)
        if value is None:
            value = self.cache.get(key)
        if value is not None:
            self.used[key] = value
            return value
        if not local:
            self.missing.setdefault(key, (label, compute))
        return _Pending()

    def video(self, name: str, cell: dict, title: str) -> Path | None:
        return None

    def __reduce__(self):
        # a cell's compute holds its runner: on the node it gets the settings and a log, not this planner
        return (_NodeRunner, (self.cfg,))


def _json_inner(text: str) -> str:
    return json.dumps(text)[1:-1]


def measure_cell(compute: Callable[[], dict]) -> tuple[str, bytes]:
    """Runs as a Ray task: measure the cell in a fresh folder; return its value as JSON and the files it wrote
    under the stand-in results folder as a gzipped tar."""
    work = tempfile.mkdtemp(prefix="rlgpt-task-")
    previous = os.getcwd()
    try:
        os.chdir(work)
        value = compute()
        text = json.dumps(value, default=str)
        for folder in {os.path.join(work, STAND_IN), os.path.join(os.path.realpath(work), STAND_IN)}:
            text = text.replace(_json_inner(folder), ABSOLUTE)
        return text, _pack(Path(work) / STAND_IN)
    finally:
        os.chdir(previous)
        shutil.rmtree(work, ignore_errors=True)


def _pack(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        if folder.is_dir():
            for path in sorted(folder.rglob("*")):
                if path.is_file() and not any(path.name.startswith(n) for n in NOT_SHIPPED):
                    tar.add(path, arcname=str(path.relative_to(folder)), recursive=False)
    return buffer.getvalue()


def unpack(text: str, files: bytes, out: Path) -> dict:
    """The cell's value with the real results folder in its paths; its files written under that folder."""
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(files), mode="r:gz") as tar:
        if hasattr(tarfile, "data_filter"):  # refuses absolute paths, '..' and links out of the folder
            tar.extractall(out, filter="data")
        else:  # pragma: no cover - Pythons before the filter: check the names ourselves
            for member in tar.getmembers():
                if member.name.startswith("/") or ".." in Path(member.name).parts or not member.isfile():
                    raise CellFailed(f"a cell sent back a file outside its folder: {member.name!r}")
            tar.extractall(out)
    text = text.replace(ABSOLUTE, _json_inner(str(out.resolve()))).replace(STAND_IN, _json_inner(str(out)))
    return json.loads(text)


class MeasuredCache(CellCache):
    """The run's cache, with the cells just measured on the cluster counted as measured (not as cache hits)."""

    def __init__(self, base: CellCache, measured: dict[str, dict]):
        super().__init__(base.folder, base.enabled)
        self.hits, self.runs = base.hits, base.runs
        self.measured = measured

    def get_or_run(self, key: str, compute: Callable[[], dict], log: Callable[[str], None] = print) -> dict:
        if key in self.measured:
            self.runs += 1
            log(f"  measured on the Ray cluster  {key}")
            return self.measured[key]
        return super().get_or_run(key, compute, log)


def missing_cells(cfg: EvalConfig, tables: list[int], cache: CellCache,
                  known: dict[str, dict]) -> dict[str, tuple[str, Callable[[], dict]]]:
    """key -> (label, compute) of every cell the tables need that is neither cached nor known, as far as the
    builders get with what is known; the computes measure under the stand-in results folder."""
    plan = PlanningRunner(dataclasses.replace(cfg, out=Path(STAND_IN)), cache, known)
    for number in tables:
        try:
            BUILDERS[number](plan)
        except Exception:  # noqa: BLE001 - it needs a cell not measured yet: the next round gets further
            pass
    return {key: item for key, item in plan.missing.items() if key not in known}


def measure_on_ray(cfg: EvalConfig, tables: list[int], cache: CellCache, log: Log = print) -> MeasuredCache:
    """Measure every missing cell of the tables on the Ray cluster (rl.ray_cluster finds it), writing each to
    the cache as it finishes; returns the cache the serial pass builds the tables from."""
    from rl import ray_cluster

    ray = ray_cluster.connect()
    task = ray.remote(num_cpus=1, max_retries=0, **ray_cluster.sandbox_options())(measure_cell)
    measured: dict[str, dict] = {}
    start, rounds = time.time(), 0
    while True:
        todo = missing_cells(cfg, tables, cache, measured)
        if not todo:
            break
        rounds += 1
        log(f"== {len(todo)} cell(s) as Ray tasks on {ray_cluster.cluster_cpus(ray)} CPU(s) of the cluster "
            f"(round {rounds}) ==")
        refs = {task.remote(compute): (key, label) for key, (label, compute) in todo.items()}
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                key, label = refs[done[0]]
                try:
                    text, files = ray.get(done[0])
                except Exception as exc:
                    cause = getattr(exc, "cause", None) or exc
                    raise CellFailed(f"the cell '{label}' failed on the Ray cluster: {type(cause).__name__}: "
                                     f"{cause}") from None
                value = unpack(text, files, cfg.out)
                cache.put(key, value)
                measured[key] = value
                log(f"[{time.time() - start:7.0f}s] measured on the cluster: {label} ({value.get('wall_s', '?')} s)")
        finally:
            for ref in pending:  # after a failure or Ctrl-C: the cells still running are not wanted
                try:
                    ray.cancel(ref, force=True)
                except Exception:
                    pass
    return MeasuredCache(cache, measured)

