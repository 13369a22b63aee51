"""FileModel: requests written as files, answered by a scripted answerer thread; rejected answers
come back as the next request with the error; no answer is a clear timeout."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from pydantic import BaseModel, Field

from nodes.models.base import AgentModel, ModelOutputError
from nodes.models.file import FileModel, FileModelTimeout

PROMPT = [SystemMessage(content="You plan."), HumanMessage(content="Plan: collect wood.")]


class Plan(BaseModel):
    subtasks: list[str] = Field(min_length=1)


@tool
def train(steps: int) -> str:
    """Train PPO."""
    return str(steps)


@tool
def run_code(code: str) -> str:
    """Run code."""
    return code


class Answerer(threading.Thread):
    """Answers each request file in turn with the next scripted text, written then renamed."""

    def __init__(self, folder: Path, answers: list[str | Callable[[Path], None]]):
        super().__init__(daemon=True)
        self.folder, self.answers = folder, list(answers)
        self.requests: list[dict] = []

    def run(self) -> None:
        deadline = time.monotonic() + 20
        while self.answers and time.monotonic() < deadline:
            pending = sorted(p for p in self.folder.glob("*.request.json")
                             if not (self.folder / json.loads(p.read_text())["response_file"]).exists())
            if not pending:
                time.sleep(0.01)
                continue
            request = json.loads(pending[0].read_text())
            self.requests.append(request)
            answer = self.answers.pop(0)
            target = self.folder / request["response_file"]
            if callable(answer):
                answer(target)
                continue
            tmp = self.folder / "answer.tmp"
            tmp.write_text(answer)
            os.replace(tmp, target)


def answered(tmp_path: Path, *answers, retries: int = 2, poll_s: float = 0.01) -> tuple[FileModel, Answerer]:
    model = FileModel(tmp_path, deadline_s=10, output_retries=retries, poll_s=poll_s)
    answerer = Answerer(tmp_path, list(answers))
    answerer.start()
    return model, answerer


def test_structured_answer_round_trip_and_request_format(tmp_path):
    model, answerer = answered(tmp_path, '{"subtasks": ["collect_wood"]}')
    assert isinstance(model, AgentModel)
    assert model.structured("planner", PROMPT, Plan).subtasks == ["collect_wood"]
    request = json.loads((tmp_path / "0000.request.json").read_text())
    assert request["call"] == 0 and request["role"] == "planner" and request["kind"] == "structured"
    assert request["messages"] == [{"role": "system", "content": "You plan."},
                                   {"role": "user", "content": "Plan: collect wood."}]
    assert request["schema"] == Plan.model_json_schema() and request["response_file"] == "0000.response.json"
    assert "0000.response.json" in request["instructions"] and "rename" in request["instructions"]
    assert model.usage.to_dict() == {"planner": {"calls": 1, "retries": 0, "prompt_tokens": 0,
                                                 "completion_tokens": 0}}
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically


def test_rejected_answer_comes_back_as_the_next_request_with_the_error(tmp_path):
    model, answerer = answered(tmp_path, '{"tool": "train", "arguments": {"steps": "lots"}}',
                               '{"tool": "train", "arguments": {"steps": 5000}}')
    msg = model.tool_call("fast", PROMPT, [run_code, train])
    assert msg.tool_calls[0]["name"] == "train" and msg.tool_calls[0]["args"] == {"steps": 5000}
    first, second = answerer.requests
    assert [t["name"] for t in first["tools"]] == ["run_code", "train"]
    assert first["tools"][1]["parameters"]["properties"]["steps"]["type"] == "integer"
    assert second["call"] == 1 and second["response_file"] == "0001.response.json"
    assert second["messages"][:2] == first["messages"]
    rejected = '{"tool": "train", "arguments": {"steps": "lots"}}'
    assert second["messages"][2] == {"role": "assistant", "content": rejected}
    feedback = second["messages"][3]["content"]
    assert feedback.startswith("Your answer was not valid: the arguments of `train` do not match its schema")
    assert "steps" in feedback and "response_file" in feedback
    assert model.usage.roles["fast"].retries == 1
    assert [r["request_file"] for r in model.last_requests] == ["0000.request.json", "0001.request.json"]


def test_several_calls_at_once(tmp_path):
    both = {"tool_calls": [{"tool": "run_code", "arguments": {"code": "x"}},
                           {"name": "train", "arguments": {"steps": 1}}], "content": "both"}
    model, _ = answered(tmp_path, json.dumps(both))
    msg = model.tool_call("fast", PROMPT, [run_code, train])
    assert [c["name"] for c in msg.tool_calls] == ["run_code", "train"] and msg.content == "both"


def test_answers_that_stay_invalid_end_in_a_model_output_error(tmp_path):
    model, _ = answered(tmp_path, "I would rather not.", '{"subtasks": []}', retries=1)
    with pytest.raises(ModelOutputError) as exc:
        model.structured("planner", PROMPT, Plan)
    assert exc.value.attempts == 2 and "subtasks" in exc.value.last_error
    assert "file:" in str(exc.value)


def test_a_file_written_in_two_steps_is_read_once_complete(tmp_path):
    def slow_writer(target: Path) -> None:
        target.write_text('{"subtasks": ')  # no rename: the parse is retried until the rest arrives
        time.sleep(0.03)
        with open(target, "a") as f:
            f.write('["collect_wood"]}')

    model, _ = answered(tmp_path, slow_writer, poll_s=0.1)  # 5 reads span 0.5 s, the rest comes after 0.03
    assert model.structured("planner", PROMPT, Plan).subtasks == ["collect_wood"]


def test_no_answer_is_a_timeout_naming_the_file(tmp_path):
    model = FileModel(tmp_path, deadline_s=0.2, poll_s=0.01)
    with pytest.raises(FileModelTimeout, match=r"no answer in .*0000\.response\.json after 0\.2s .*"
                                               r"RLGPT_FILE_MODEL_TIMEOUT"):
        model.structured("planner", PROMPT, Plan)


def test_numbering_continues_after_files_already_in_the_folder(tmp_path):
    (tmp_path / "0007.response.json").write_text('{"subtasks": ["stale"]}')
    model, answerer = answered(tmp_path, '{"subtasks": ["fresh"]}')
    assert model.structured("planner", PROMPT, Plan).subtasks == ["fresh"]
    assert answerer.requests[0]["call"] == 8


def test_an_answer_written_again_after_it_was_read_is_kept_apart_and_said(tmp_path, caplog):
    """Two answerers raced on one request: the file left behind was not the answer the run played. The run goes
    on with what it read, keeps it as NNNN.used.json and says so; an answer left alone gets no such file."""
    model, _ = answered(tmp_path, '{"subtasks": ["collect_wood"]}', '{"subtasks": ["place_table"]}',
                        '{"subtasks": ["make_wood_pickaxe"]}')
    assert model.structured("planner", PROMPT, Plan).subtasks == ["collect_wood"]
    (tmp_path / "0000.response.json").write_text('{"subtasks": ["collect_diamond"]}')  # the late second answerer
    with caplog.at_level("WARNING"):
        assert model.structured("planner", PROMPT, Plan).subtasks == ["place_table"]
    assert json.loads((tmp_path / "0000.used.json").read_text()) == {"subtasks": ["collect_wood"]}
    assert "0000.response.json was written again or removed after the run had read it" in caplog.text
    assert "0000.used.json" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert model.structured("planner", PROMPT, Plan).subtasks == ["make_wood_pickaxe"]
    assert not caplog.text and not (tmp_path / "0001.used.json").exists()  # said once; 0001 was left alone
