"""Turning a chat model's answer into a schema instance or validated tool calls.

Every function here either returns a valid result or raises `InvalidOutput` with a short,
model-readable explanation; `nodes.models.chat` shows that explanation to the model when it re-asks.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolCall, ToolMessage
from langchain_core.tools import ArgsSchema, BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ValidationError

S = TypeVar("S", bound=BaseModel)

MAX_LISTED_ERRORS = 8
PREVIEW_CHARS = 160


class InvalidOutput(ValueError):
    """The model's answer does not fit; the message is written for the model to read."""


def format_validation_error(err: ValidationError) -> str:
    """One line per problem, 'field.path: message', capped so the re-ask stays short."""
    lines = []
    for e in err.errors()[:MAX_LISTED_ERRORS]:
        loc = ".".join(str(p) for p in e.get("loc", ())) or "(top level)"
        lines.append(f"- {loc}: {e.get('msg', 'invalid')}")
    more = len(err.errors()) - MAX_LISTED_ERRORS
    if more > 0:
        lines.append(f"- ... and {more} more")
    return "\n".join(lines)


def preview(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "..."


def text_of(message: BaseMessage) -> str:
    """The plain text of an answer; content may be a string or a list of content blocks."""
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def extract_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in free text (prose, markdown fences and all)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    last_error = None
    while start != -1:
        try:
            obj, _ = decoder.raw_decode(text, start)
            if isinstance(obj, dict):
                return obj
        except json.JSONDecodeError as e:
            last_error = e
        start = text.find("{", start + 1)
    if last_error is not None:
        raise InvalidOutput(f"the answer contains no valid JSON object ({last_error.msg}); "
                            f"it began: {preview(text)!r}")
    raise InvalidOutput(f"the answer contains no JSON object; it began: {preview(text)!r}")


def _unwrap_call(obj: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """Small models often wrap arguments as {"name": ..., "arguments": {...}}; peel that off.
    The next-step answer (see `next_step_tool`) names the tool under "tool" instead."""
    name = next((obj[k] for k in ("name", "tool") if isinstance(obj.get(k), str)), None)
    if name is None:
        return None, obj
    for key in ("arguments", "args", "parameters"):
        if isinstance(obj.get(key), dict):
            return name, obj[key]
        if isinstance(obj.get(key), str):
            try:
                inner = json.loads(obj[key])
            except json.JSONDecodeError:
                continue
            if isinstance(inner, dict):
                return name, inner
    return None, obj


def validate_into(schema: type[S], data: Any) -> S:
    try:
        return schema.model_validate(data)
    except ValidationError as e:
        raise InvalidOutput(f"the {schema.__name__} does not match its schema:\n"
                            f"{format_validation_error(e)}") from None


def parse_structured(message: AIMessage, schema: type[S]) -> S:
    """A `schema` instance from a function call in `message`, or else from JSON in its text."""
    name = schema.__name__
    for call in message.tool_calls:
        if call["name"] == name or len(message.tool_calls) == 1:
            return validate_into(schema, call["args"])
    _refuse_unparsed_call(message, name)
    text = text_of(message)
    if not text.strip():
        raise InvalidOutput(f"the answer was empty; call `{name}` with its arguments.")
    obj = extract_json_object(text)
    try:
        return validate_into(schema, obj)
    except InvalidOutput:
        wrapped_name, inner = _unwrap_call(obj)
        if wrapped_name is None:
            raise
        return validate_into(schema, inner)


def tool_name(tool: Any) -> str:
    if isinstance(tool, BaseTool):
        return tool.name
    if isinstance(tool, type) and issubclass(tool, BaseModel):
        return tool.__name__
    raise TypeError(f"a tool must be a LangChain BaseTool or a pydantic model class, "
                    f"got {type(tool).__name__}: {tool!r}")


def _args_schema(tool: Any) -> ArgsSchema | Mapping[str, Any] | None:
    if isinstance(tool, BaseTool):
        # tool_call_schema leaves out injected arguments the model never supplies.
        return tool.tool_call_schema
    return tool


def check_tool_args(tool: Any, args: Any) -> None:
    schema = _args_schema(tool)
    name = tool_name(tool)
    if not isinstance(args, dict):
        raise InvalidOutput(f"the arguments of `{name}` must be a JSON object, got {type(args).__name__}")
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            schema.model_validate(args)
        except ValidationError as e:
            raise InvalidOutput(f"the arguments of `{name}` do not match its schema:\n"
                                f"{format_validation_error(e)}") from None
    elif isinstance(schema, Mapping):
        missing = [k for k in schema.get("required", []) if k not in args]
        if missing:
            raise InvalidOutput(f"the call to `{name}` lacks required arguments: {', '.join(missing)}")


def validated_tool_calls(message: AIMessage, tools: Sequence[Any]) -> AIMessage:
    """`message` if its tool calls name known tools with valid args; a call found as JSON in the
    text is turned into a proper tool call (local servers often answer that way)."""
    by_name = {tool_name(t): t for t in tools}
    known = ", ".join(sorted(by_name))
    calls = list(message.tool_calls)
    if not calls:
        _refuse_unparsed_call(message, None)
        text = text_of(message)
        if not text.strip():
            raise InvalidOutput(f"the answer was empty; call one of the tools: {known}.")
        try:
            obj = extract_json_object(text)
        except InvalidOutput as e:
            raise InvalidOutput(f"no tool was called; call one of the tools: {known} "
                                f"({e})") from None
        name, args = _unwrap_call(obj)
        if name is None and len(by_name) == 1:
            name = next(iter(by_name))
        if name is None:
            raise InvalidOutput(f"no tool was called and the JSON in the answer names no tool; "
                                f"call one of the tools: {known}.")
        calls = [{"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:12]}",
                  "type": "tool_call"}]
        message = AIMessage(content=text, tool_calls=calls, id=message.id,
                            usage_metadata=message.usage_metadata,
                            response_metadata=message.response_metadata)
    for call in calls:
        if call["name"] not in by_name:
            raise InvalidOutput(f"there is no tool named `{call['name']}`; the tools are: {known}.")
        check_tool_args(by_name[call["name"]], call["args"])
    return message


def signature(tool_or_schema: Any) -> str:
    """`name(arg: type, opt?: type): description`, the short form a re-ask shows the model.

    Servers whose chat template drops the tool list (llama.cpp without a forced tool) leave the
    model blind to the tools; this line is what lets it answer with JSON the parsers accept.
    """
    fn = convert_to_openai_tool(tool_or_schema)["function"]
    params = fn.get("parameters", {})
    required = set(params.get("required", []))
    args = ", ".join(f"{k}{'' if k in required else '?'}: {v.get('type', 'any')}"
                     for k, v in params.get("properties", {}).items())
    doc = (fn.get("description") or "").strip().splitlines()
    return f"{fn['name']}({args})" + (f": {doc[0]}" if doc else "")


def render_answer(message: AIMessage) -> str:
    """The model's answer as plain text, for the transcript of a re-ask.

    A re-sent assistant message with tool_calls would need matching tool results, which
    OpenAI-style servers insist on, so the calls are written out as text instead.
    """
    parts = [text_of(message).strip()]
    for call in message.tool_calls:
        parts.append(f"(called `{call['name']}` with {json.dumps(call['args'], default=str)})")
    for bad in message.invalid_tool_calls:
        parts.append(f"(called `{bad.get('name')}` with unparseable arguments {bad.get('args')!r})")
    text = "\n".join(p for p in parts if p)
    return text or "(empty answer)"


def _refuse_unparsed_call(message, fallback_name: str | None) -> None:
    """A function call whose arguments were not valid JSON is reported to the model as such."""
    if message.invalid_tool_calls:
        bad = message.invalid_tool_calls[0]
        raise InvalidOutput(f"the arguments of your call to `{bad.get('name') or fallback_name}` are not "
                            f"valid JSON: {preview(str(bad.get('args') or ''))!r}")


# -- messages as plain text, for servers without tools, token counts, records and request files -------

MESSAGE_ROLES = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}


def message_text(message: BaseMessage) -> str:
    """What a message says; an answer's tool calls are written out (see `render_answer`)."""
    if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
        return render_answer(message)
    return text_of(message)


def message_dicts(messages: Sequence[BaseMessage]) -> list[dict[str, str]]:
    """Each message as {"role": system|user|assistant|tool, "content": text}."""
    return [{"role": MESSAGE_ROLES.get(m.type, m.type), "content": message_text(m)} for m in messages]


def plain_chat(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The conversation without tool-call structure: earlier calls as assistant text, tool results
    as user text. A server that ignores tools (next-step mode) would otherwise get assistant
    messages with no content and tool messages its chat template may not know."""
    called: dict[str, str] = {}
    out: list[BaseMessage] = []
    for m in messages:
        if isinstance(m, AIMessage):
            called.update({c["id"]: c["name"] for c in m.tool_calls if c["id"]})
            out.append(AIMessage(content=message_text(m)) if m.tool_calls or m.invalid_tool_calls else m)
        elif isinstance(m, ToolMessage):
            name = m.name or called.get(m.tool_call_id, "the tool")
            out.append(HumanMessage(content=f"Result of `{name}`:\n{text_of(m)}"))
        else:
            out.append(m)
    return out


# -- next-step mode: one forced, grammar-constrained answer that picks a tool ----------------------

NEXT_STEP_TOOL = "next_step"


GRAMMAR_MAX_REPEAT = 64
LENGTH_BOUNDS = ("maxLength", "minLength", "maxItems", "minItems")


def without_long_bounds(schema: Any) -> Any:
    """`schema` without length bounds over GRAMMAR_MAX_REPEAT. llama.cpp turns a JSON schema into a
    grammar that spells out every allowed repetition: the 8000-character limit of a code field makes
    a grammar it fails to parse, and its server dies. The answer is still checked against the full
    schema here, so only the server's constraint gets looser."""
    if isinstance(schema, dict):
        return {k: without_long_bounds(v) for k, v in schema.items()
                if not (k in LENGTH_BOUNDS and isinstance(v, int) and v > GRAMMAR_MAX_REPEAT)}
    if isinstance(schema, list):
        return [without_long_bounds(v) for v in schema]
    return schema


def tool_spec(tool: Any) -> dict[str, Any]:
    """{"name", "description", "parameters"} with every $ref inlined (LangChain's conversion)."""
    fn = convert_to_openai_tool(tool)["function"]
    return {"name": fn["name"], "description": fn.get("description", ""),
            "parameters": fn.get("parameters", {"type": "object", "properties": {}})}


def sendable_tool(tool: Any) -> dict[str, Any]:
    """The OpenAI function a request carries for `tool` (see `without_long_bounds`)."""
    return {"type": "function", "function": without_long_bounds(tool_spec(tool))}


def next_step_tool(tools: Sequence[Any]) -> dict[str, Any]:
    """One OpenAI function whose arguments pick a tool and give its arguments.

    The parameters are an anyOf of one object per tool, {"tool": <const name>, "arguments":
    <that tool's parameters>}: the const ties each argument schema to its tool, so a grammar
    built from this schema (llama.cpp does so for a function forced by name) admits only a valid
    call of one of the tools.
    """
    alternatives = []
    for t in tools:
        spec = tool_spec(t)
        alternatives.append({
            "type": "object",
            "description": spec["description"].strip().split("\n")[0],
            "properties": {"tool": {"const": spec["name"]}, "arguments": without_long_bounds(spec["parameters"])},
            "required": ["tool", "arguments"],
        })
    names = ", ".join(tool_name(t) for t in tools)
    return {"type": "function", "function": {
        "name": NEXT_STEP_TOOL,
        "description": f"Take the next step: call exactly one of the tools {names}.",
        "parameters": {"type": "object", "anyOf": alternatives},
    }}


def with_tool_listing(messages: Sequence[BaseMessage], tools: Sequence[Any]) -> list[BaseMessage]:
    """The messages with the tools and the next-step answer shape added to the system message: a
    chat template that drops the request's tool list (SmolLM2's) leaves the model blind to them."""
    listing = ("Answer with the next step as one JSON object "
               '{"tool": <tool name>, "arguments": {...}}, calling one of these tools:\n'
               + "\n".join(f"- {signature(t)}" for t in tools))
    msgs = list(messages)
    if msgs and isinstance(msgs[0], SystemMessage):
        return [SystemMessage(content=f"{text_of(msgs[0])}\n\n{listing}"), *msgs[1:]]
    return [SystemMessage(content=listing), *msgs]


def tool_calls_from_json(obj: dict[str, Any], known: str) -> list[ToolCall]:
    """Calls from {"tool": name, "arguments": {...}} (or "name" for "tool"), or from
    {"tool_calls": [such objects, ...]} for several at once."""
    items = obj["tool_calls"] if isinstance(obj.get("tool_calls"), list) else [obj]
    calls: list[ToolCall] = []
    for item in items:
        name, args = _unwrap_call(item) if isinstance(item, dict) else (None, {})
        if name is None:
            raise InvalidOutput('each call must be a JSON object {"tool": <tool name>, "arguments": {...}} '
                                f"with the arguments as an object; the tools are: {known}; got "
                                f"{preview(json.dumps(item, default=str))!r}")
        calls.append(ToolCall(name=name, args=args, id=f"call_{uuid.uuid4().hex[:12]}", type="tool_call"))
    if not calls:
        raise InvalidOutput(f"the list tool_calls is empty; call one of the tools: {known}.")
    return calls


def answer_as_tool_calls(message: AIMessage, tools: Sequence[Any]) -> AIMessage:
    """A next-step answer (or a JSON answer written to a file) as an AIMessage with validated
    tool calls of `tools`: the JSON comes from the forced `next_step` call or from the text."""
    by_name = {tool_name(t): t for t in tools}
    known = ", ".join(sorted(by_name))
    _refuse_unparsed_call(message, NEXT_STEP_TOOL)
    if message.tool_calls:
        call = message.tool_calls[0]
        # a server that ignored the forced function may call a real tool directly
        obj = {"tool": call["name"], "arguments": call["args"]} if call["name"] in by_name else call["args"]
    else:
        text = text_of(message)
        if not text.strip():
            raise InvalidOutput(f"the answer was empty; call one of the tools: {known}.")
        obj = extract_json_object(text)
    note = obj.get("content")
    answer = AIMessage(content=note if isinstance(note, str) else "", tool_calls=tool_calls_from_json(obj, known),
                       id=message.id, usage_metadata=message.usage_metadata,
                       response_metadata=message.response_metadata)
    return validated_tool_calls(answer, tools)
