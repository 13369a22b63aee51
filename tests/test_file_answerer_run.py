"""A whole run driven through `--model file:DIR` by a scripted answerer outside the project: every model
call becomes a request file, the answers go through the same parsing, validation and retries as a served
model's, and a rejected answer comes back as the next request with the error."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from graph import run
from nodes.models.expert_repair import explore_first
from prompts.fewshot import fill

WOOD_CODE = explore_first(fill("collect", material="tree", item="wood"), "collect_wood")


def _answer(request: dict, state: dict) -> dict:
    role = request["role"]
    if role == "planner":
        return {"subtasks": [{"name": "collect_wood", "goal": "get wood",
                              "success_condition": "achievement collect_wood unlocked"}], "reason": "wood first"}
    if role == "slow":
        return {"subtask": "collect_wood", "reason": "code first", "sub_actions": [
            {"name": "collect_wood", "kind": "code", "reason": "walk to a tree and hit it",
             "template": "collect", "target": "tree", "item": "wood"}]}
    if role == "critic":
        return {"sub_action": "collect_wood", "verdict": "pass", "success_rate": 1.0, "feedback": "it works"}
    names = [t["name"] for t in request["tools"]]
    assert names == ["WriteCode"], names
    state["fast"] += 1
    if state["fast"] == 1:  # the first answer breaks the schema: it must come back with the error
        return {"tool": "WriteCode", "arguments": {"code": 42}}
    return {"tool": "WriteCode", "arguments": {"code": WOOD_CODE, "max_steps": 300}}


def _answerer(folder: Path, stop: threading.Event, seen: list[dict]) -> None:
    state = {"fast": 0}
    answered: set[str] = set()
    while not stop.is_set():
        for request_path in sorted(folder.glob("*.request.json")):
            if request_path.name in answered:
                continue
            request = json.loads(request_path.read_text())
            seen.append(request)
            tmp = folder / f"{request['response_file']}.part"
            tmp.write_text(json.dumps(_answer(request, state)))
            tmp.rename(folder / request["response_file"])  # written whole, then renamed (the documented way)
            answered.add(request_path.name)
        time.sleep(0.05)


@pytest.mark.timeout(300)
def test_a_scripted_answerer_drives_a_whole_run_through_files(tmp_path, monkeypatch):
    folder = tmp_path / "answers"
    folder.mkdir()
    monkeypatch.setenv("RLGPT_FILE_MODEL_TIMEOUT", "120")
    stop, seen = threading.Event(), []
    thread = threading.Thread(target=_answerer, args=(folder, stop, seen), daemon=True)
    thread.start()
    try:
        code = run.main(["harvest log", "--model", f"file:{folder}", "--out", str(tmp_path / "runs"),
                         "--run-id", "files", "--budget-steps", "3000", "--test-episodes", "3",
                         "--eval-episodes", "2", "--no-live"])
    finally:
        stop.set()
        thread.join(5)
    assert code == 0
    report = json.loads((tmp_path / "runs" / "files" / "report.json").read_text())
    assert report["status"] == "finished" and report["skills"]
    assert [r["role"] for r in seen][:3] == ["planner", "slow", "fast"]
    fast = [r for r in seen if r["role"] == "fast"]
    # the rejected answer came back as the next request, with the answer and the validation error
    retry = fast[1]
    assert retry["call"] == fast[0]["call"] + 1
    assert "Your answer was not valid" in retry["messages"][-1]["content"]
    assert "code" in retry["messages"][-1]["content"]
    assert all("schema" in r or "tools" in r for r in seen)  # every request says what the answer must fit
    code_tests = [m for m in report["measurements"] if m["kind"] == "code"]
    assert code_tests and code_tests[0]["episodes"] == 3  # the answerer's code ran on every test seed
