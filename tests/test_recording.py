"""RecordingModel and ReplayModel: a scripted run recorded to JSON lines replays to identical
answers; a changed prompt, role or length is reported at the call where the run diverges."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from pydantic import BaseModel

from nodes.models.base import AgentModel, ModelConfigError, ModelOutputError, UsageCounter
from nodes.models.expert import ExpertModel
from nodes.models.factory import make_model
from nodes.models.recording import RecordingModel, ReplayDivergence, ReplayModel


class Verdict(BaseModel):
    verdict: str
    score: float


@tool
def run_code(code: str) -> str:
    """Run code."""
    return code


class ScriptedModel:
    """A tiny AgentModel: answers from a list, counts 100 prompt and 10 answer tokens per call."""

    name = "scripted"

    def __init__(self, answers: list[Any]):
        self.answers = list(answers)
        self.usage = UsageCounter()
        self.last_requests: list[dict] = []
        self.closed = False

    def _next(self, role: str) -> Any:
        self.usage.record(role, 100, 10)
        self.last_requests = [{"prompt_tokens": 100, "completion_tokens": 10, "max_tokens": 512}]
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def structured(self, role: str, messages: Sequence[BaseMessage], schema: type[BaseModel],
                   context: Mapping[str, Any] | None = None):
        return schema.model_validate(self._next(role))

    def tool_call(self, role: str, messages: Sequence[BaseMessage], tools: Sequence[Any],
                  context: Mapping[str, Any] | None = None) -> AIMessage:
        return self._next(role)

    def close(self) -> None:
        self.closed = True


def prompt(text: str) -> list[BaseMessage]:
    return [SystemMessage(content="You judge.\nBe brief."), HumanMessage(content=text)]


CALL = AIMessage(content="testing", tool_calls=[{"name": "run_code", "args": {"code": "yield 'do'"},
                                                 "id": "c1", "type": "tool_call"}])


def run(model: AgentModel, last_text: str = "score the run") -> tuple[Verdict, AIMessage, Verdict]:
    first = model.structured("critic", prompt("judge 1"), Verdict)
    call = model.tool_call("fast", prompt("write code"), [run_code])
    last = model.structured("critic", prompt(last_text), Verdict)
    return first, call, last


def recorded(tmp_path) -> tuple[Any, Any]:
    path = tmp_path / "calls.jsonl"
    inner = ScriptedModel([{"verdict": "pass", "score": 0.5}, CALL, {"verdict": "move", "score": 0.25}])
    model = RecordingModel(inner, path)
    return run(model), path


def test_replay_gives_identical_answers_and_usage(tmp_path):
    (first, call, last), path = recorded(tmp_path)
    replay = ReplayModel(path)
    assert isinstance(replay, AgentModel) and replay.name == "replay:calls.jsonl"
    again = run(replay)
    assert again[0] == first and again[2] == last
    assert again[1].tool_calls == call.tool_calls and again[1].content == "testing"
    assert replay.usage.to_dict() == {"critic": {"calls": 2, "retries": 0, "prompt_tokens": 200,
                                                 "completion_tokens": 20},
                                      "fast": {"calls": 1, "retries": 0, "prompt_tokens": 100,
                                               "completion_tokens": 10}}
    assert replay.last_requests == [{"prompt_tokens": 100, "completion_tokens": 10, "max_tokens": 512}]


def test_record_fields(tmp_path):
    _, path = recorded(tmp_path)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["call"] for r in records] == [0, 1, 2]
    first, second = records[0], records[1]
    assert (first["role"], first["kind"], first["schema"], first["tools"]) == ("critic", "structured", "Verdict", None)
    assert (second["kind"], second["schema"], second["tools"]) == ("tool_call", None, ["run_code"])
    assert first["messages"] == [{"role": "system", "content": "You judge.\nBe brief."},
                                 {"role": "user", "content": "judge 1"}]
    assert first["answer"] == {"verdict": "pass", "score": 0.5} and first["error"] is None
    assert second["answer"] == {"content": "testing",
                                "tool_calls": [{"name": "run_code", "args": {"code": "yield 'do'"}, "id": "c1"}]}
    assert first["usage"] == {"calls": 1, "retries": 0, "prompt_tokens": 100, "completion_tokens": 10}
    assert first["max_tokens"] == 512 and first["requests"][0]["prompt_tokens"] == 100
    assert len(first["prompt_sha256"]) == 64 and first["model"] == "scripted" and first["wall_s"] >= 0


def test_divergent_prompt_names_the_call_and_the_lines(tmp_path):
    _, path = recorded(tmp_path)
    with pytest.raises(ReplayDivergence) as exc:
        run(ReplayModel(path), last_text="score the walk")
    msg = str(exc.value)
    assert msg.startswith(f"The run diverges from the recording {path} at call 2, the critic agent's structured "
                          "(Verdict): the prompt differs from prompt line 3 on.")
    assert msg.endswith("recorded:\n    [user] score the run\n  this run:\n    [user] score the walk")
    with pytest.raises(ReplayDivergence, match=r"line 4 on.\n  recorded:\n    \(the prompt ends here\)"):
        run(ReplayModel(path), last_text="score the run\nwith care")


def test_divergent_role_and_running_past_the_end(tmp_path):
    _, path = recorded(tmp_path)
    replay = ReplayModel(path)
    with pytest.raises(ReplayDivergence, match=r"at call 0: it asks for the planner agent's structured \(Verdict\), "
                                               r"the recording holds the critic agent's structured"):
        replay.structured("planner", prompt("judge 1"), Verdict)
    replay = ReplayModel(path)
    run(replay)
    with pytest.raises(ReplayDivergence, match="past the end of the recording .* holds 3 calls and this is call 3"):
        replay.structured("critic", prompt("judge 1"), Verdict)


def test_failed_call_is_recorded_and_replayed_as_the_same_error(tmp_path):
    path = tmp_path / "calls.jsonl"
    err = ModelOutputError("critic", "Verdict (structured answer)", 3, "- score: field required", model="scripted")
    model = RecordingModel(ScriptedModel([err]), path)
    with pytest.raises(ModelOutputError):
        model.structured("critic", prompt("judge"), Verdict)
    rec = json.loads(path.read_text())
    assert rec["answer"] is None and rec["error"]["type"] == "output" and rec["error"]["attempts"] == 3
    with pytest.raises(ModelOutputError) as exc:
        ReplayModel(path).structured("critic", prompt("judge"), Verdict)
    assert str(exc.value) == str(err)


def test_a_line_cut_by_a_crash_is_dropped_and_recording_continues(tmp_path):
    _, path = recorded(tmp_path)
    path.write_text(path.read_text() + '{"call": 3, "role": "cri')  # killed mid-write
    model = RecordingModel(ScriptedModel([{"verdict": "pass", "score": 1.0}]), path)
    model.structured("critic", prompt("one more"), Verdict)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["call"] for r in records] == [0, 1, 2, 3] and records[3]["messages"][1]["content"] == "one more"


def test_expert_runs_are_recordable_with_zero_tokens(tmp_path):
    from nodes.schemas import Plan

    path = tmp_path / "expert.jsonl"
    model = RecordingModel(ExpertModel(), path)
    plan = model.structured("planner", prompt("plan"), Plan, {"task": "collect_wood"})
    rec = json.loads(path.read_text())
    assert rec["model"] == "expert" and rec["requests"] == [] and rec["max_tokens"] is None
    assert rec["usage"] == {"calls": 1, "retries": 0, "prompt_tokens": 0, "completion_tokens": 0}
    replayed = make_model(f"replay:{path}").structured("planner", prompt("plan"), Plan)
    assert replayed == plan


def test_close_reaches_the_inner_model(tmp_path):
    inner = ScriptedModel([])
    RecordingModel(inner, tmp_path / "r.jsonl").close()
    assert inner.closed


def test_a_file_that_is_not_a_recording_is_a_clear_error(tmp_path):
    bad = tmp_path / "notes.jsonl"
    bad.write_text('{"call": 0}\n')
    with pytest.raises(ModelConfigError, match="line 1 is not a model-call record"):
        ReplayModel(bad)
    bad.write_text("hello\n")
    with pytest.raises(ModelConfigError, match="line 1 is not JSON"):
        ReplayModel(bad)
