"""`LLMModel`: the agent model backed by an OpenAI-compatible chat server (langchain-openai).

Invalid output (bad JSON, wrong schema, empty answer, unknown tool, bad tool arguments) is shown
back to the model with the validation error and re-asked; after `output_retries` re-asks the call
raises `ModelOutputError`. Network and HTTP failures raise `ModelServerError` naming the server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel

from nodes.llm_output import (
    InvalidOutput,
    parse_structured,
    render_answer,
    signature,
    tool_name,
    validated_tool_calls,
)
from nodes.models import ModelOutputError, ModelServerError, UsageCounter

S = TypeVar("S", bound=BaseModel)

DEFAULT_MAX_TOKENS = 1024
DEFAULT_TIMEOUT_S = 180.0  # a small CPU-served model can need minutes for 1k tokens
DEFAULT_NETWORK_RETRIES = 2
DEFAULT_OUTPUT_RETRIES = 2


class LLMModel:
    """An `AgentModel` (see nodes.models) over a LangChain chat model, ChatOpenAI by default."""

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        max_tokens: int | None = DEFAULT_MAX_TOKENS,
        temperature: float = 0.0,
        timeout: float = DEFAULT_TIMEOUT_S,
        network_retries: int = DEFAULT_NETWORK_RETRIES,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        chat_model: BaseChatModel | None = None,
    ):
        if output_retries < 0:
            raise ValueError(f"output_retries must be >= 0, got {output_retries}")
        if max_tokens is not None and max_tokens <= 0:
            raise ValueError(f"max_tokens must be a positive number or None, got {max_tokens}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        self.name = model
        self.base_url = base_url or "https://api.openai.com/v1"
        self.output_retries = output_retries
        self.usage = UsageCounter()
        self.chat = chat_model if chat_model is not None else self._openai_chat(
            model, api_key, base_url, max_tokens, temperature, timeout, network_retries)

    @staticmethod
    def _openai_chat(model, api_key, base_url, max_tokens, temperature, timeout, network_retries):
        from langchain_openai import ChatOpenAI
        # llama.cpp's server ignores `max_completion_tokens` (what ChatOpenAI sends for
        # max_tokens), so the limit travels as a raw `max_tokens` field of the request body.
        extra_body = {"max_tokens": int(max_tokens)} if max_tokens is not None else None
        return ChatOpenAI(model=model, api_key=api_key, base_url=base_url,
                          temperature=temperature, timeout=timeout,
                          max_retries=network_retries, extra_body=extra_body)

    # -- the AgentModel interface -------------------------------------------------------------

    def structured(self, role: str, messages: Sequence[BaseMessage], schema: type[S],
                   context: Mapping[str, Any] | None = None) -> S:
        """A `schema` instance, asked for as a forced function call. `context` is for the expert."""
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise TypeError(f"schema must be a pydantic model class, got {schema!r}")
        runnable = self.chat.with_structured_output(schema, method="function_calling",
                                                    include_raw=True)

        def answer(msgs: list[BaseMessage]) -> tuple[AIMessage, Callable[[], S]]:
            out = cast(dict[str, Any], runnable.invoke(msgs))  # include_raw=True: {"raw", "parsed", ...}
            raw, parsed = out["raw"], out.get("parsed")
            if isinstance(parsed, schema):
                return raw, lambda: parsed
            # Our own parser also accepts JSON written in prose and explains what is wrong.
            return raw, lambda: parse_structured(raw, schema)

        return self._ask(role, messages, f"{schema.__name__} (structured answer)", answer,
                         f"Answer again by calling the function {signature(schema)}\n"
                         "with arguments that fit its schema. If you cannot call functions, "
                         "answer with only the JSON object of its arguments.")

    def tool_call(self, role: str, messages: Sequence[BaseMessage], tools: Sequence[Any],
                  context: Mapping[str, Any] | None = None) -> AIMessage:
        """An AIMessage whose tool_calls name the given tools with schema-valid arguments."""
        if not tools:
            raise ValueError(f"tool_call for role '{role}' needs at least one tool")
        names = [tool_name(t) for t in tools]
        # One tool: force it by name. Several: any of them ('required' is OpenAI's spelling).
        choice = names[0] if len(names) == 1 else "required"
        bound = self.chat.bind_tools(list(tools), tool_choice=choice)

        def answer(msgs: list[BaseMessage]) -> tuple[AIMessage, Callable[[], AIMessage]]:
            raw = bound.invoke(msgs)
            return raw, lambda: validated_tool_calls(raw, tools)

        listing = "\n".join(f"- {signature(t)}" for t in tools)
        return self._ask(role, messages, f"tool call (one of: {', '.join(names)})", answer,
                         "Answer again with a call to one of these tools, with arguments that fit "
                         f"its schema:\n{listing}\nIf you cannot call tools, answer with only a JSON "
                         'object {"name": <tool name>, "arguments": {...}}.')

    # -- shared retry loop ----------------------------------------------------------------------

    def _ask(self, role: str, messages: Sequence[BaseMessage], expected: str,
             answer: Callable[[list[BaseMessage]], tuple[AIMessage, Callable[[], Any]]],
             instruction: str) -> Any:
        msgs = list(messages)
        attempts = self.output_retries + 1
        last_error = ""
        for attempt in range(1, attempts + 1):
            raw, parse = self._invoke(role, expected, answer, msgs)
            self._record(role, raw, retry=attempt > 1)
            try:
                return parse()
            except InvalidOutput as e:
                last_error = str(e)
            msgs = msgs + [
                AIMessage(content=render_answer(raw)),
                HumanMessage(content=f"Your answer was not valid: {last_error}\n{instruction}"),
            ]
        raise ModelOutputError(role, expected, attempts, last_error, model=self.name)

    def _invoke(self, role, expected, answer, msgs):
        try:
            return answer(msgs)
        except openai.APITimeoutError as e:
            raise ModelServerError(
                f"The model server at {self.base_url} did not answer the {role} agent in time "
                f"({e}). Raise the timeout, use a faster model, or check the server.") from None
        except openai.APIConnectionError as e:
            raise ModelServerError(
                f"Cannot reach the model server at {self.base_url} ({e}). Is it running? Check "
                "OPENAI_BASE_URL, or use --model expert to run without a model.") from None
        except openai.AuthenticationError:
            raise ModelServerError(
                f"The model server at {self.base_url} rejected the API key: check OPENAI_API_KEY."
            ) from None
        except openai.NotFoundError as e:
            raise ModelServerError(
                f"The model server at {self.base_url} does not know model '{self.name}' or the "
                f"endpoint ({_api_message(e)}). Check --model and OPENAI_BASE_URL.") from None
        except openai.APIStatusError as e:
            raise ModelServerError(
                f"The model server at {self.base_url} refused the {role} agent's request for a "
                f"{expected}: HTTP {e.status_code}: {_api_message(e)}") from None

    def _record(self, role: str, raw: AIMessage, retry: bool) -> None:
        meta = getattr(raw, "usage_metadata", None) or {}
        self.usage.record(role, int(meta.get("input_tokens", 0) or 0),
                          int(meta.get("output_tokens", 0) or 0), retry=retry)


def _api_message(err: openai.APIStatusError) -> str:
    body = err.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(err.message)
