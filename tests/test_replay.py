"""A recorded SmolLM2 run (tests/fixtures/smollm2_harvest_log.jsonl, from `--record`) replays offline,
without llama.cpp or any model: every call is matched by index and prompt hash, so the run takes the
same decisions; a run that asks something else stops at the first call where it diverges."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from test_smollm2_run import ARGS

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "smollm2_harvest_log.jsonl"


def _replay(out: Path, *args: str, fixture: Path = FIXTURE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graph.run", *args, "--out", str(out), "--run-id", "smol",
                           "--replay", str(fixture)], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_the_committed_recording_replays_to_the_same_decisions(tmp_path):
    done = _replay(tmp_path, *ARGS)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "smol" / "report.json").read_text())
    # the run learns in the end, its coded building blocks tested before the training (what the model chose
    # decides how many code tests come first; the graph decides that they come before the training)
    kinds = [m["kind"] for m in report["measurements"]]
    assert "rl" in kinds and kinds.index("rl") > 0 and set(kinds[:kinds.index("rl")]) == {"code"}, kinds
    assert any(m["kind"] == "rl" and m["steps"] >= 1000 for m in report["measurements"])
    calls = sum(1 for line in FIXTURE.read_text().splitlines() if line.strip())
    assert sum(u["calls"] - u["retries"] for u in report["usage"].values()) == calls
    # each head entry tested before training is listed once, by its name (a tool round the fast node came back
    # to without a new call was once filed again, as 'None: 0 of 1 test episodes succeeded')
    prompts = [m["content"] for line in FIXTURE.read_text().splitlines() if line.strip()
               for m in json.loads(line)["messages"]]
    assert not any(line.startswith("None: ") for text in prompts for line in text.splitlines())


def test_a_run_that_asks_something_else_names_the_call_where_it_diverges(tmp_path):
    changed = [a if a != "6000" else "5000" for a in ARGS]  # another budget: the prompts say other numbers
    done = _replay(tmp_path, *changed)
    assert done.returncode != 0
    assert "call" in done.stderr and "diverge" in done.stderr.lower(), done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_a_recording_cut_short_says_so(tmp_path):
    short = tmp_path / "short.jsonl"
    short.write_text("".join(FIXTURE.read_text().splitlines(keepends=True)[:3]))
    done = _replay(tmp_path / "out", *ARGS, fixture=short)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "3" in done.stderr  # the call the recording does not hold
    shutil.rmtree(tmp_path / "out", ignore_errors=True)
