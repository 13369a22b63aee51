"""A real language model drives the whole graph: `python -m graph.run "harvest log" --model smollm2`.

SmolLM2-135M (llama.cpp on 127.0.0.1, started and stopped by the run) is far too small to play Crafter,
so this asserts what the system does, never what the model chose: every request fit the model's
window, the model's code ran in the sandbox and its test report went back to it, train_ppo trained a
learned sub-action, and the report was written. The
recorded run then replays offline to the same decisions (tests/test_replay.py replays the committed
recording without llama.cpp). CI installs llama.cpp (.ci/install_llm.sh):
a missing install fails, it is never skipped.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nodes.models.tokens import SMOLLM2_CONTEXT

# SmolLM2 may write up to its 2,048-token answer limit before a re-ask: on 2 CPU cores one such answer takes
# minutes, and a recorded run had four (the fixture's). The bound is on a hang, not on the model's length.
pytestmark = [pytest.mark.llm, pytest.mark.timeout(2400)]

ROOT = Path(__file__).resolve().parents[1]
# Small everything: two test seeds, one revision, 1,000-step trainings, two held-out episodes, and a bound on
# the model calls (not on wall time, so that a replay stops where the recorded run stopped).
ARGS = ["harvest log", "--budget-steps", "6000", "--test-episodes", "2", "--eval-episodes", "2",
        "--train-steps", "1000", "--max-inner-iters", "1", "--max-outer-iters", "2", "--max-model-calls", "24",
        "--no-live"]


def _run(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graph.run", *ARGS, "--out", str(out), "--run-id", "smol", *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=2100)


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def smol_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("smol")
    record = out / "calls.jsonl"
    done = _run(out, "--model", "smollm2", "--record", str(record))
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    return out, record, done


def test_every_request_fit_the_window(smol_run):
    _, record, _ = smol_run
    requests = [q for r in _records(record) for q in r["requests"]]
    assert requests
    for q in requests:
        assert q["prompt_tokens"] + q["max_tokens"] <= SMOLLM2_CONTEXT, q


def test_the_models_code_ran_in_the_sandbox_and_its_report_went_back(smol_run):
    out, record, _ = smol_run
    report = json.loads((out / "smol" / "report.json").read_text())
    # an attempt whose answers could not be used is logged with 0 episodes; the others ran in the sandbox
    code_tests = [m for m in report["measurements"] if m["kind"] == "code" and m["episodes"] >= 1]
    assert code_tests
    fast = [r for r in _records(record) if r["role"] == "fast"]
    written = [r for r in fast if r["answer"] and r["answer"]["tool_calls"][0]["name"] == "WriteCode"]
    assert written, "the model wrote no code"
    # a later fast-agent prompt holds the test report of the model's own code: to repair it, or beside the
    # training whose action head it is in
    reported = [r for r in fast if any("code tests on" in m["content"] and (
        "Your last code" in m["content"] or "Your coded actions, tested before the training" in m["content"])
        for m in r["messages"])]
    assert reported, "no test report went back to the fast agent"


def test_a_learned_sub_action_was_trained_by_train_ppo(smol_run):
    """However the model's answers go (its decomposition learns, its critic moves the code to RL, or its plan
    gives up and the graph learns the task), its budget goes to a real training."""
    out, _, _ = smol_run
    report = json.loads((out / "smol" / "report.json").read_text())
    learned = [m for m in report["measurements"] if m["kind"] == "rl"]
    assert learned and learned[0]["steps"] >= 1000  # a real PPO training
    assert report["evaluation"]["episodes"] in (0, 2)
    assert (out / "smol" / "report.md").is_file()


def test_the_recorded_run_replays_offline(smol_run, tmp_path):
    _, record, first = smol_run
    again = _run(tmp_path, "--replay", str(record))
    assert again.returncode == 0, again.stderr[-3000:]
    before = json.loads((record.parent / "smol" / "report.json").read_text())
    after = json.loads((tmp_path / "smol" / "report.json").read_text())
    assert [m["kind"] for m in after["measurements"]] == [m["kind"] for m in before["measurements"]]
    assert after["moves"] == before["moves"]
