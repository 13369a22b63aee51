"""`LLMModel`: the agent model backed by an OpenAI-compatible chat server (langchain-openai).

Invalid output (bad JSON, wrong schema, empty answer, unknown tool, bad tool arguments) is shown
back to the model with the validation error and re-asked; after `output_retries` re-asks the call
raises `ModelOutputError`. Network and HTTP failures raise `ModelServerError` naming the server.
`ReaskingModel` holds that loop for any model that answers with text or JSON (also
`nodes.models.file.FileModel`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel

from nodes.models.base import (
    COMPACT_ROOM,
    MIN_ANSWER_TOKENS,
    ROOMY_ROOM,
    ROOMY_WINDOW,
    ContextWindowError,
    ModelOutputError,
    ModelServerError,
    UsageCounter,
)
from nodes.models.output import (
    NEXT_STEP_TOOL,
    InvalidOutput,
    answer_as_tool_calls,
    next_step_tool,
    parse_structured,
    plain_chat,
    render_answer,
    sendable_tool,
    signature,
    tool_name,
    validated_tool_calls,
    with_tool_listing,
)

S = TypeVar("S", bound=BaseModel)
ToolMode = Literal["native", "next_step"]
# (answer, facts about the request: "max_tokens" sent, "counted_prompt_tokens" when counted)
Sent = tuple[AIMessage, dict[str, Any]]

OPENAI_API_URL = "https://api.openai.com/v1"  # the server when OPENAI_BASE_URL is not set
DEFAULT_MAX_TOKENS = 1024
DEFAULT_TIMEOUT_S = 180.0  # a small CPU-served model can need minutes for 1k tokens
DEFAULT_NETWORK_RETRIES = 2
DEFAULT_OUTPUT_RETRIES = 2
TOOL_MODES = ("native", "next_step")


def structured_instruction(schema: type[BaseModel]) -> str:
    return (f"Answer again by calling the function {signature(schema)}\n"
            "with arguments that fit its schema. If you cannot call functions, "
            "answer with only the JSON object of its arguments.")


def tool_instruction(tools: Sequence[Any]) -> str:
    listing = "\n".join(f"- {signature(t)}" for t in tools)
    return ("Answer again with a call to one of these tools, with arguments that fit "
            f"its schema:\n{listing}\nIf you cannot call tools, answer with only a JSON "
            'object {"name": <tool name>, "arguments": {...}}.')


def next_step_instruction(tools: Sequence[Any]) -> str:
    listing = "\n".join(f"- {signature(t)}" for t in tools)
    return ('Answer again with one JSON object {"tool": <tool name>, "arguments": {...}} whose '
            f"arguments fit that tool's schema, calling one of these tools:\n{listing}")


REJECTED_ANSWER_CHARS = 4000  # of a rejected answer, shown in the re-ask: its start says what was tried


def clip_rejected(text: str, limit: int = REJECTED_ANSWER_CHARS) -> str:
    """A rejected answer as the re-ask quotes it: whole up to `limit` characters, else its start and a count."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters of this answer left out ...]"


class ReaskingModel:
    """Ask, validate, and re-ask with the validation error, up to `output_retries` times. Each re-ask is the
    question with the latest rejected answer (its start, `clip_rejected`) and its error: the prompt of a re-ask
    does not grow with the number of tries.

    Subclasses set `name`, `usage` and `output_retries` and give `_ask` a `send` (one request:
    the answer and facts about the request) and a `parse` (the result, or `InvalidOutput`).
    `last_requests` describes the requests of the latest call, one dict each.
    """

    name: str
    usage: UsageCounter
    output_retries: int
    last_requests: list[dict[str, Any]]

    def _ask(self, role: str, messages: Sequence[BaseMessage], expected: str,
             send: Callable[[list[BaseMessage]], Sent], parse: Callable[[AIMessage], Any],
             instruction: str) -> Any:
        msgs = list(messages)
        self.last_requests = []
        attempts = self.output_retries + 1
        last_error = ""
        for attempt in range(1, attempts + 1):
            try:
                raw, facts = send(msgs)
            except ContextWindowError as e:
                if attempt == 1:
                    raise
                # the question fitted; its re-ask with a rejected answer does not: the answer was unusable, and
                # the graph's fallback for an unusable answer takes over (the run goes on)
                raise ModelOutputError(role, expected, attempt - 1, f"{last_error}; asking again did not fit the "
                                       f"context window ({e})", model=self.name) from e
            meta = getattr(raw, "usage_metadata", None) or {}
            tokens_in, tokens_out = int(meta.get("input_tokens", 0) or 0), int(meta.get("output_tokens", 0) or 0)
            self.usage.record(role, tokens_in, tokens_out, retry=attempt > 1)
            self.last_requests.append({"prompt_tokens": tokens_in, "completion_tokens": tokens_out, **facts})
            try:
                return parse(raw)
            except InvalidOutput as e:
                last_error = str(e)
            # the question again with only the latest rejected answer, its start kept: a re-ask that carried every
            # rejected answer whole (a small model's 2,048 tokens of noise each) outgrew the context window
            msgs = list(messages) + [
                AIMessage(content=clip_rejected(render_answer(raw))),
                HumanMessage(content=f"Your answer was not valid: {last_error}\n{instruction}"),
            ]
        raise ModelOutputError(role, expected, attempts, last_error, model=self.name)


class LLMModel(ReaskingModel):
    """An `AgentModel` (see nodes.models.base) over a LangChain chat model, ChatOpenAI by default.

    - `max_tokens` is the answer limit; `max_tokens_by_role` overrides it per role (e.g. more for
      the fast agent, which writes code, than for the critic). It travels as `extra_body.max_tokens`.
    - `tool_mode="next_step"` is for servers that ignore `tool_choice` ("required") but constrain a
      function forced by name (llama.cpp): a `tool_call` with several tools asks for one forced
      `next_step` call whose schema is the union of the tools (`nodes.models.output.next_step_tool`),
      and the conversation is sent as plain text (`plain_chat`).
    - `context_window` with `count_prompt(messages, tools_or_schemas) -> tokens`: each answer limit
      is cut to the room the counted prompt leaves, and a prompt that leaves under
      `MIN_ANSWER_TOKENS` raises `ContextWindowError` before sending. Without a counter the server
      judges the length (llama.cpp answers HTTP 400, a `ModelServerError`).
    - `on_close` runs once on `close()` (it stops the local server of `--model smollm2`).
    """

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        max_tokens: int | None = DEFAULT_MAX_TOKENS,
        max_tokens_by_role: Mapping[str, int] | None = None,
        temperature: float = 0.0,
        timeout: float = DEFAULT_TIMEOUT_S,
        network_retries: int = DEFAULT_NETWORK_RETRIES,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        tool_mode: ToolMode = "native",
        context_window: int | None = None,
        count_prompt: Callable[[Sequence[BaseMessage], Sequence[Any]], int] | None = None,
        on_close: Callable[[], None] | None = None,
        chat_model: BaseChatModel | None = None,
    ):
        if output_retries < 0:
            raise ValueError(f"output_retries must be >= 0, got {output_retries}")
        if max_tokens is not None and max_tokens <= 0:
            raise ValueError(f"max_tokens must be a positive number or None, got {max_tokens}")
        bad_roles = {r: n for r, n in (max_tokens_by_role or {}).items() if not isinstance(n, int) or n <= 0}
        if bad_roles:
            raise ValueError(f"max_tokens_by_role needs positive whole numbers, got {bad_roles}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if tool_mode not in TOOL_MODES:
            raise ValueError(f"tool_mode must be one of {TOOL_MODES}, got {tool_mode!r}")
        if context_window is not None and context_window <= MIN_ANSWER_TOKENS:
            raise ValueError(f"context_window must be > {MIN_ANSWER_TOKENS} tokens, got {context_window}")
        self.name = model
        self.base_url = base_url or OPENAI_API_URL
        self.output_retries = output_retries
        self.max_tokens = max_tokens
        self.max_tokens_by_role = dict(max_tokens_by_role or {})
        self.tool_mode = tool_mode
        self.context_window = context_window
        self.count_prompt = count_prompt
        self._on_close = on_close
        self.usage = UsageCounter()
        self.last_requests = []
        self.chat = chat_model if chat_model is not None else self._openai_chat(
            model, api_key, base_url, max_tokens, temperature, timeout, network_retries)

    @property
    def prompt_room(self) -> str:
        """Compact prompts for a window under ROOMY_WINDOW tokens (SmolLM2's 8,192), roomy ones for a larger one.
        Where no window is given (RLGPT_LLM_CONTEXT_WINDOW): roomy for OpenAI's own API, whose models all have
        large windows, compact for any other server (a llama.cpp server is often started with 8,192 tokens, and
        Ollama cuts a longer prompt without a word)."""
        if self.context_window is not None:
            return COMPACT_ROOM if self.context_window < ROOMY_WINDOW else ROOMY_ROOM
        return ROOMY_ROOM if self.base_url.rstrip("/") == OPENAI_API_URL else COMPACT_ROOM

    @staticmethod
    def _openai_chat(model, api_key, base_url, max_tokens, temperature, timeout, network_retries):
        from langchain_openai import ChatOpenAI
        # llama.cpp's server ignores `max_completion_tokens` (what ChatOpenAI sends for
        # max_tokens), so the limit travels as a raw `max_tokens` field of the request body.
        extra_body = {"max_tokens": int(max_tokens)} if max_tokens is not None else None
        return ChatOpenAI(model=model, api_key=api_key, base_url=base_url,
                          temperature=temperature, timeout=timeout,
                          max_retries=network_retries, extra_body=extra_body)

    def close(self) -> None:
        """Release what the model holds (the local server, if it started one); idempotent."""
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()

    # -- the AgentModel interface -------------------------------------------------------------

    def structured(self, role: str, messages: Sequence[BaseMessage], schema: type[S],
                   context: Mapping[str, Any] | None = None) -> S:
        """A `schema` instance, asked for as a forced function call. `context` is for the expert."""
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise TypeError(f"schema must be a pydantic model class, got {schema!r}")
        expected = f"{schema.__name__} (structured answer)"
        send = self._sender(role, expected, [schema], schema.__name__, single_call=True)
        return self._ask(role, messages, expected, send, lambda raw: parse_structured(raw, schema),
                         structured_instruction(schema))

    def tool_call(self, role: str, messages: Sequence[BaseMessage], tools: Sequence[Any],
                  context: Mapping[str, Any] | None = None) -> AIMessage:
        """An AIMessage whose tool_calls name the given tools with schema-valid arguments."""
        if not tools:
            raise ValueError(f"tool_call for role '{role}' needs at least one tool")
        names = [tool_name(t) for t in tools]
        expected = f"tool call (one of: {', '.join(names)})"
        if len(tools) > 1 and self.tool_mode == "next_step":
            send = self._sender(role, expected, [next_step_tool(tools)], NEXT_STEP_TOOL, single_call=True,
                                listing=tools)
            return self._ask(role, messages, expected, send, lambda raw: answer_as_tool_calls(raw, tools),
                             next_step_instruction(tools))
        # One tool: force it by name. Several: any of them ('required' is OpenAI's spelling).
        choice = names[0] if len(names) == 1 else "required"
        send = self._sender(role, expected, list(tools), choice)
        return self._ask(role, messages, expected, send, lambda raw: validated_tool_calls(raw, tools),
                         tool_instruction(tools))

    # -- one request ------------------------------------------------------------------------------

    def _sender(self, role: str, expected: str, tools: list[Any], choice: str, single_call: bool = False,
                listing: Sequence[Any] = ()) -> Callable[[list[BaseMessage]], Sent]:
        sent_tools = [t if isinstance(t, dict) else sendable_tool(t) for t in tools]

        def send(msgs: list[BaseMessage]) -> Sent:
            if self.tool_mode == "next_step":
                msgs = with_tool_listing(plain_chat(msgs), listing) if listing else plain_chat(msgs)
            limit, counted = self._answer_limit(role, msgs, sent_tools)
            # parallel_tool_calls=False: a forced function is answered once (OpenAI could repeat it)
            extra: dict[str, Any] = {"parallel_tool_calls": False} if single_call else {}
            if limit is not None:
                extra["extra_body"] = {"max_tokens": limit}
            bound = self.chat.bind_tools(sent_tools, tool_choice=choice, **extra)
            return self._invoke(role, expected, bound, msgs), {"max_tokens": limit, "counted_prompt_tokens": counted}

        return send

    def _answer_limit(self, role: str, msgs: Sequence[BaseMessage],
                      tools: Sequence[Any]) -> tuple[int | None, int | None]:
        """The answer limit for this request and the counted prompt tokens (None: not counted)."""
        limit = self.max_tokens_by_role.get(role, self.max_tokens)
        if self.context_window is None or self.count_prompt is None:
            return limit, None
        prompt = self.count_prompt(msgs, tools)
        room = self.context_window - prompt
        if room < MIN_ANSWER_TOKENS:
            raise ContextWindowError(
                f"The {role} agent's prompt has {prompt} tokens (counted with {self.name}'s tokenizer; the "
                f"tool schemas estimated), which leaves {max(room, 0)} of the {self.context_window}-token "
                f"context window for the answer, under the {MIN_ANSWER_TOKENS} needed. Shorten the prompt "
                "(less history, fewer examples) or use a model with a larger context window.")
        return (room if limit is None else min(limit, room)), prompt

    def _invoke(self, role: str, expected: str, bound: Any, msgs: list[BaseMessage]) -> AIMessage:
        try:
            return bound.invoke(msgs)
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


def _api_message(err: openai.APIStatusError) -> str:
    body = err.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(err.message)
