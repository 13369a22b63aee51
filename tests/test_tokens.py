"""Token counts with SmolLM2's tokenizer, and `--model smollm2` end to end: the counts match what
the llama.cpp server reports, every recorded request fits the context window, and close() stops
the server. These need the llamacpp extra, as the other `llm` tests do (CI installs it)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from nodes.models.base import ContextWindowError, ModelOutputError
from nodes.models.factory import make_model
from nodes.models.output import sendable_tool
from nodes.models.recording import RecordingModel
from nodes.models.tokens import SMOLLM2_CONTEXT, chat_prompt, count_chat_tokens, count_tokens

pytestmark = [pytest.mark.llm, pytest.mark.timeout(900)]

WINDOW = 1024
PROMPT = [SystemMessage(content="You plan Crafter tasks."), HumanMessage(content="Task: collect wood.")]


class Verdict(BaseModel):
    """Judge the attempt."""
    verdict: str = Field(max_length=20)
    score: float


class WriteCode(BaseModel):
    """Write the coded action and test it."""
    code: str = Field(max_length=8000)  # long bounds must not reach llama.cpp's grammar


class ConfigureRL(BaseModel):
    """Configure PPO training."""
    total_steps: int = Field(ge=1000, le=100_000)


class TrainPolicy(BaseModel):
    """Train the configured policy."""


def test_count_matches_the_tokenizer_directly():
    from llama_cpp import Llama

    from nodes.models.local import smollm2_model_path

    text = "Collect wood, then place a table: <|im_start|> is one token."
    direct = Llama(str(smollm2_model_path()), vocab_only=True, verbose=False)
    assert count_tokens(text) == len(direct.tokenize(text.encode(), add_bos=False, special=True))
    assert count_tokens("<|im_start|>") == 1


def test_chat_count_follows_the_chatml_template_and_grows_with_messages():
    assert chat_prompt(PROMPT) == ("<|im_start|>system\nYou plan Crafter tasks.<|im_end|>\n"
                                   "<|im_start|>user\nTask: collect wood.<|im_end|>\n<|im_start|>assistant\n")
    # without a system message the template adds its own
    assert chat_prompt(PROMPT[1:]).startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    one = count_chat_tokens(PROMPT)
    two = count_chat_tokens([*PROMPT, AIMessage(content="Plan: wood."), HumanMessage(content="Go on.")])
    assert one == count_tokens(chat_prompt(PROMPT)) and two > one
    assert count_chat_tokens(PROMPT, Verdict) > one
    assert count_chat_tokens(PROMPT, [WriteCode, ConfigureRL]) > count_chat_tokens(PROMPT, [WriteCode]) > one


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    path = tmp_path_factory.mktemp("rec") / "calls.jsonl"
    # A 1024-token window over the server's 8192: the guard works the same, and a prompt that fills
    # it takes seconds to read instead of minutes on a small CPU.
    inner = make_model("smollm2", max_tokens=48, max_tokens_by_role={"fast": 96, "slow": 400}, context_window=WINDOW,
                       network_retries=0, output_retries=0)
    model = RecordingModel(inner, path)
    yield model, path
    model.close()


def outcome(ask):
    try:
        return ask()
    except ModelOutputError as e:  # a 135M model may well answer badly: structure is what counts
        assert e.attempts == 1 and e.last_error.strip()
        return e


def test_counted_prompt_equals_what_the_server_reports(recorded):
    model, _ = recorded
    outcome(lambda: model.structured("critic", PROMPT, Verdict))
    request = model.inner.last_requests[0]
    # llama.cpp with SmolLM2's template shows the model no schema: the messages alone match exactly,
    # and the guard's count (schema estimate included) errs high
    assert request["prompt_tokens"] == count_chat_tokens(PROMPT)
    assert request["counted_prompt_tokens"] > request["prompt_tokens"]


def test_fast_agent_next_step_over_three_tools(recorded):
    model, _ = recorded
    msgs = [SystemMessage(content="You write Crafter code."),
            HumanMessage(content='Write `def collect_wood(game): yield "do"` and test it with WriteCode.')]
    answer = outcome(lambda: model.tool_call("fast", msgs, [WriteCode, ConfigureRL, TrainPolicy]))
    if isinstance(answer, AIMessage):
        assert answer.tool_calls[0]["name"] in {"WriteCode", "ConfigureRL", "TrainPolicy"}
    assert model.inner.last_requests[0]["max_tokens"] == 96


def test_a_long_prompt_gets_a_shorter_answer_limit_and_every_request_fits(recorded):
    model, path = recorded
    filler = "wood " * 100
    per_block = count_tokens(filler)
    base = count_chat_tokens([PROMPT[0], HumanMessage(content="")], [sendable_tool(Verdict)])
    long_prompt = [PROMPT[0], HumanMessage(content=filler * ((WINDOW - 100 - base) // per_block))]
    outcome(lambda: model.structured("slow", long_prompt, Verdict))
    last = model.inner.last_requests[0]
    # the slow role may answer 400 tokens; the prompt leaves 100 to 100 + per_block
    assert last["max_tokens"] == WINDOW - last["counted_prompt_tokens"] < 400
    too_long = [HumanMessage(content=filler * (WINDOW // per_block + 1))]
    with pytest.raises(ContextWindowError, match="1024-token context window"):
        model.structured("critic", too_long, Verdict)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    requests = [r for rec in records for r in rec["requests"]]
    assert len(requests) >= 3 and all(r["prompt_tokens"] > 0 for r in requests)
    assert all(r["prompt_tokens"] + r["max_tokens"] <= WINDOW for r in requests)


def test_smollm2_defaults_and_close_stops_the_server():
    model = make_model("smollm2")
    assert model.tool_mode == "next_step" and model.context_window == SMOLLM2_CONTEXT
    assert model.max_tokens_by_role["fast"] > model.max_tokens
    models_url = f"{model.base_url}/models"
    with urllib.request.urlopen(models_url, timeout=5) as r:
        assert r.status == 200
    model.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(models_url, timeout=5)
    model.close()  # idempotent
