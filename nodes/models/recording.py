"""Record every model call of a run to a JSON-lines file, and replay a run from such a file.

`RecordingModel(inner, path)` wraps any AgentModel (the expert too) and appends one line per call:

    call            index of the call in the file, from 0
    role, kind      the agent role; "structured" or "tool_call"
    schema / tools  the schema's class name / the tool names (the other one is null)
    model           the inner model's name
    messages        the prompt, [{"role": system|user|assistant|tool, "content": text}, ...]
    prompt_sha256   hash of the messages' roles and contents with the schema name or tool names
    answer          structured: the object's JSON; tool_call: {"content": text, "tool_calls":
                    [{"name", "args", "id"}, ...]}; null when the call failed
    error           null, or {"type": "output"|"server", "message", ...} when the call raised
    usage           the inner model's usage delta: calls (requests, re-asks included), retries,
                    prompt_tokens, completion_tokens (as the server reported them)
    requests        per request: prompt_tokens, completion_tokens, max_tokens (the answer limit
                    sent) and counted_prompt_tokens, when the inner model tells (LLMModel does)
    max_tokens      the answer limit of the last request, or null
    wall_s          seconds the call took

Each line is flushed and synced before the call returns, and a line cut short by a crash is
dropped when the file is opened again, so a killed run leaves a readable record. A run that
records into an existing file appends after its calls.

`ReplayModel(path)` answers call k with record k when role, kind and prompt hash match, and raises
`ReplayDivergence` naming the call and the first differing prompt lines when they do not.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, ToolCall
from pydantic import BaseModel, ValidationError

from nodes.models.base import (
    COMPACT_ROOM,
    AgentModel,
    ModelConfigError,
    ModelOutputError,
    ModelServerError,
    RoleUsage,
    UsageCounter,
    close_model,
    prompt_room_of,
)
from nodes.models.output import message_dicts, text_of, tool_name

S = TypeVar("S", bound=BaseModel)
SHOWN_LINES = 3
SHOWN_CHARS = 200


class ReplayDivergence(RuntimeError):
    """The run asks the model something other than what the recording holds at that call."""


def prompt_hash(messages: Sequence[Mapping[str, str]], schema: str | None, tools: Sequence[str] | None) -> str:
    payload = {"messages": [[m["role"], m["content"]] for m in messages], "schema": schema, "tools": tools}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


def _prompt_lines(messages: Sequence[Mapping[str, str]]) -> list[str]:
    return [f"[{m['role']}] {line}" for m in messages for line in (m["content"].splitlines() or [""])]


def _usage_delta(before: RoleUsage, after: RoleUsage) -> dict[str, int]:
    return {"calls": after.calls - before.calls, "retries": after.retries - before.retries,
            "prompt_tokens": after.prompt_tokens - before.prompt_tokens,
            "completion_tokens": after.completion_tokens - before.completion_tokens}


def _read_records(path: Path) -> list[dict[str, Any]]:
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise ModelConfigError(f"{path} line {n} is not JSON ({e.msg}): not a model-call recording?") from None
        missing = [k for k in ("call", "role", "kind", "prompt_sha256", "messages") if not isinstance(rec, dict)
                   or k not in rec]
        if missing:
            raise ModelConfigError(f"{path} line {n} is not a model-call record (lacks {', '.join(missing)})")
        records.append(rec)
    return records


class RecordingModel:
    """An AgentModel that answers through `inner` and appends each call to `path` (see module doc)."""

    def __init__(self, inner: AgentModel, path: str | Path):
        self.inner = inner
        self.name = inner.name
        self.usage = inner.usage  # the same counter: recording adds no calls of its own
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._calls = len(_read_records(self._drop_partial_line()))

    def _drop_partial_line(self) -> Path:
        """A run killed mid-write leaves a last line without its newline: cut it off."""
        if not self.path.exists():
            self.path.touch()
            return self.path
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(self.path, "r+b") as f:
                f.truncate(data.rfind(b"\n") + 1)
        return self.path

    @property
    def prompt_room(self) -> str:
        """The inner model's (each record keeps it: a replay shows the prompts the recorded run showed)."""
        return prompt_room_of(self.inner)

    def close(self) -> None:
        close_model(self.inner)

    def structured(self, role: str, messages: Sequence[BaseMessage], schema: type[S],
                   context: Mapping[str, Any] | None = None) -> S:
        return self._call(role, "structured", messages, schema.__name__, None,
                          lambda: self.inner.structured(role, messages, schema, context),
                          lambda answer: answer.model_dump(mode="json"))

    def tool_call(self, role: str, messages: Sequence[BaseMessage], tools: Sequence[Any],
                  context: Mapping[str, Any] | None = None) -> AIMessage:
        return self._call(role, "tool_call", messages, None, [tool_name(t) for t in tools],
                          lambda: self.inner.tool_call(role, messages, tools, context), _dump_message)

    def _call(self, role: str, kind: str, messages: Sequence[BaseMessage], schema: str | None,
              tools: list[str] | None, ask: Callable[[], Any], dump: Callable[[Any], Any]) -> Any:
        texts = message_dicts(messages)
        record: dict[str, Any] = {
            "call": self._calls, "role": role, "kind": kind, "schema": schema, "tools": tools,
            "model": self.inner.name, "prompt_room": self.prompt_room,
            "messages": texts, "prompt_sha256": prompt_hash(texts, schema, tools),
            "answer": None, "error": None}
        before = RoleUsage(**vars(self.inner.usage.roles.get(role, RoleUsage())))
        started = time.monotonic()

        def finish(**outcome: Any) -> None:
            requests = list(getattr(self.inner, "last_requests", None) or [])
            self._append({**record, **outcome,
                          "usage": _usage_delta(before, self.inner.usage.roles.get(role, RoleUsage())),
                          "requests": requests, "max_tokens": requests[-1].get("max_tokens") if requests else None,
                          "wall_s": round(time.monotonic() - started, 3)})

        try:
            answer = ask()
        except ModelOutputError as e:
            finish(error={"type": "output", "message": str(e), "expected": e.expected, "attempts": e.attempts,
                          "last_error": e.last_error, "model": e.model})
            raise
        except ModelServerError as e:
            finish(error={"type": "server", "message": str(e)})
            raise
        finish(answer=dump(answer))
        return answer

    def _append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self._calls += 1


def _dump_message(message: AIMessage) -> dict[str, Any]:
    return {"content": text_of(message),
            "tool_calls": [{"name": c["name"], "args": c["args"], "id": c.get("id")} for c in message.tool_calls]}


class ReplayModel:
    """An AgentModel that answers from a `RecordingModel` file, call by call, without any model."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise ModelConfigError(f"no recording at {self.path}: give the JSON-lines file a run recorded")
        self.records = _read_records(self.path)
        self.name = f"replay:{self.path.name}"
        # the recorded run's prompts were fitted to its model: the replay asks for the same (older recordings,
        # made before rooms, were compact)
        self.prompt_room = next((r["prompt_room"] for r in self.records if r.get("prompt_room")), COMPACT_ROOM)
        self.usage = UsageCounter()
        self.last_requests: list[dict[str, Any]] = []
        self._next = 0

    def structured(self, role: str, messages: Sequence[BaseMessage], schema: type[S],
                   context: Mapping[str, Any] | None = None) -> S:
        rec = self._take(role, "structured", messages, schema.__name__, None)
        try:
            return schema.model_validate(rec["answer"])
        except ValidationError as e:
            raise ReplayDivergence(f"call {rec['call']} of {self.path}: the recorded answer no longer fits "
                                   f"{schema.__name__} (has the schema changed since?):\n{e}") from None

    def tool_call(self, role: str, messages: Sequence[BaseMessage], tools: Sequence[Any],
                  context: Mapping[str, Any] | None = None) -> AIMessage:
        rec = self._take(role, "tool_call", messages, None, [tool_name(t) for t in tools])
        answer = rec["answer"]
        calls = [ToolCall(name=c["name"], args=c["args"], id=c.get("id"), type="tool_call")
                 for c in answer.get("tool_calls", [])]
        return AIMessage(content=answer.get("content", ""), tool_calls=calls)

    def _take(self, role: str, kind: str, messages: Sequence[BaseMessage], schema: str | None,
              tools: list[str] | None) -> dict[str, Any]:
        k = self._next
        asked = f"the {role} agent's {kind} ({schema or ', '.join(tools or [])})"
        if k >= len(self.records):
            raise ReplayDivergence(f"The run goes past the end of the recording {self.path}: it holds "
                                   f"{len(self.records)} calls and this is call {k}, {asked}")
        rec = self.records[k]
        texts = message_dicts(messages)
        if (rec["role"], rec["kind"]) != (role, kind):
            raise ReplayDivergence(
                f"The run diverges from the recording {self.path} at call {k}: it asks for {asked}, the "
                f"recording holds the {rec['role']} agent's {rec['kind']} "
                f"({rec.get('schema') or ', '.join(rec.get('tools') or [])})")
        if rec["prompt_sha256"] != prompt_hash(texts, schema, tools):
            raise ReplayDivergence(f"The run diverges from the recording {self.path} at call {k}, "
                                   f"{asked}: {_difference(rec, texts, schema, tools)}")
        self._next += 1
        self.usage.merge(UsageCounter.from_dict({role: rec.get("usage") or {"calls": 1}}))
        self.last_requests = list(rec.get("requests") or [])
        if rec.get("error"):
            raise _rebuilt_error(role, rec["error"])
        return rec


def _difference(rec: Mapping[str, Any], texts: Sequence[Mapping[str, str]], schema: str | None,
                tools: list[str] | None) -> str:
    """Where the prompt first differs from the recorded one, a few lines of each."""
    old, new = _prompt_lines(rec["messages"]), _prompt_lines(texts)
    i = next((n for n, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
    if old == new:
        return (f"the prompt is the same but it asks for {schema or tools}, the recording for "
                f"{rec.get('schema') or rec.get('tools')}")

    def show(lines: list[str]) -> str:
        part = lines[i:i + SHOWN_LINES] or ["(the prompt ends here)"]
        return "\n".join(f"    {line[:SHOWN_CHARS]}" for line in part)

    return (f"the prompt differs from prompt line {i + 1} on.\n  recorded:\n{show(old)}\n"
            f"  this run:\n{show(new)}")


def _rebuilt_error(role: str, error: Mapping[str, Any]) -> Exception:
    if error.get("type") == "output":
        return ModelOutputError(role, error.get("expected", "answer"), int(error.get("attempts", 1)),
                                error.get("last_error", ""), model=error.get("model", ""))
    return ModelServerError(str(error.get("message", "the recorded call failed")))
