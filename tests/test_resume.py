"""Kill a real run (the offline expert on a tiny budget) with SIGKILL while it is inside the attempt
subgraph, resume it with --resume, and check from the node log and the SQLite checkpoint history that
it finished and that no node that had finished before the kill ran again."""

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

ROOT = Path(__file__).resolve().parents[1]
RUN_ID = "resume-test"
# code passes at 50%, so the expert's run is: planner subtask slow [fast tools fast critic] subtask executor
# report, the bracketed nodes inside the attempt subgraph
ARGS = ["harvest log", "--run-id", RUN_ID, "--budget-steps", "3000", "--target-success", "0.5",
        "--test-episodes", "3", "--eval-episodes", "2", "--max-inner-iters", "1", "--max-outer-iters", "1",
        "--no-live"]
KILL_AFTER = 4  # planner, subtask, slow, fast done: the attempt's tools node (code tests in the sandbox) runs


def events(out):
    path = out / RUN_ID / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def attempt_saved(out, step: int) -> bool:
    """Whether the attempt subgraph has a checkpoint of ``step`` or later (1: after its fast node). A node's
    event is logged when LangGraph streams its update, which can come just before its checkpoint is
    written; a kill in between re-runs the node on resume, as it should (it never finished durably)."""
    path = out / "checkpoints.sqlite"
    if not path.exists():
        return False
    conn = sqlite3.connect(path, timeout=1.0)
    try:
        saver = SqliteSaver(conn)
        namespaces = [ns for (ns,) in conn.execute(
            "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ?", (RUN_ID,))]
        return any(c.metadata.get("step", -1) >= step
                   for ns in namespaces if ns.startswith("attempt:")
                   for c in saver.list({"configurable": {"thread_id": RUN_ID, "checkpoint_ns": ns}}))
    except sqlite3.OperationalError:  # the run is writing: look again
        return False
    finally:
        conn.close()


def latest_checkpoint(out):
    conn = sqlite3.connect(out / "checkpoints.sqlite")
    try:
        saver = SqliteSaver(conn)
        # the outer graph's chain; the attempt subgraph keeps its own under the namespace 'attempt:<task>'
        history = [c for c in saver.list({"configurable": {"thread_id": RUN_ID}})
                   if not c.config["configurable"].get("checkpoint_ns")]
        latest = saver.get_tuple({"configurable": {"thread_id": RUN_ID, "checkpoint_ns": ""}})
        return latest, sorted(c.metadata["step"] for c in history)
    finally:
        conn.close()


@pytest.mark.slow
def test_kill_and_resume(tmp_path):
    out = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "graph.run", *ARGS, "--out", str(out)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    while len(events(out)) < KILL_AFTER or not attempt_saved(out, step=1):
        assert proc.poll() is None, f"run ended before it could be killed:\n{proc.stdout.read()}"
        assert time.monotonic() < deadline, "run made no progress"
        time.sleep(0.05)
    proc.kill()  # SIGKILL: no clean-up code runs, only what the checkpointer saved survives
    proc.wait(30)
    proc.stdout.close()

    before = events(out)
    assert [e["node"] for e in before] == ["planner", "subtask", "slow", "fast"]
    latest, steps = latest_checkpoint(out)
    killed_at = latest.metadata["step"]
    assert not (out / RUN_ID / "report.json").exists()
    assert steps == list(range(-1, killed_at + 1))
    assert killed_at == 3  # input, planner, subtask, slow: the outer graph waits on the attempt

    resumed = subprocess.run([sys.executable, "-m", "graph.run", "--resume", RUN_ID, "--out", str(out),
                              "--no-live"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    assert f"resuming run {RUN_ID}" in resumed.stderr
    report = json.loads((out / RUN_ID / "report.json").read_text())
    assert report["status"] == "finished" and report["subtasks"][0]["name"] == "collect_wood"
    assert f"report: {out / RUN_ID / 'report.md'}" in resumed.stdout.replace("\n", "")

    after = events(out)[len(before):]
    final, steps = latest_checkpoint(out)
    assert steps == list(range(-1, final.metadata["step"] + 1)), "one chain: the run was not restarted"
    assert all(e["session"] == 1 for e in after) and after[-1]["node"] == "report"
    # the attempt went on inside the subgraph: its fast agent, finished before the kill, did not run again
    assert after[0]["node"] == "tools", [e["node"] for e in after]
    assert [e["node"] for e in after][-3:] == ["subtask", "executor", "report"]
    sessions = json.loads((out / RUN_ID / "sessions.json").read_text())
    assert [s["resumed"] for s in sessions] == [False, True]
    assert report["wall_s"] >= sum(s["ended"] - s["started"] for s in sessions) - 0.01  # report rounds to 0.01 s

    again = subprocess.run([sys.executable, "-m", "graph.run", "--resume", RUN_ID, "--out", str(out)],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "already finished" in again.stderr
    assert len(events(out)) == len(before) + len(after)  # nothing ran the third time
