"""Turning a chat model's answer into a schema instance or validated tool calls.

Every function here either returns a valid result or raises `InvalidOutput` with a short,
model-readable explanation; `nodes.llm` shows that explanation to the model when it re-asks.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.messages import AIMessage
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


def text_of(message: AIMessage) -> str:
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
    """Small models often wrap arguments as {"name": ..., "arguments": {...}}; peel that off."""
    for key in ("arguments", "args", "parameters"):
        if isinstance(obj.get(key), dict) and isinstance(obj.get("name"), str):
            return obj["name"], obj[key]
        if isinstance(obj.get(key), str) and isinstance(obj.get("name"), str):
            try:
                inner = json.loads(obj[key])
            except json.JSONDecodeError:
                continue
            if isinstance(inner, dict):
                return obj["name"], inner
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
