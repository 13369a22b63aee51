"""`FileModel` (`--model file:DIR`): any answerer - a person, a script, a model in another
program - answers the agents through files in a folder.

Each request to the model is written as `DIR/NNNN.request.json` (NNNN counts up from the first
number not yet used in DIR, so an old answer is never read for a new question):

    call            the request number NNNN
    role, kind      the agent role; "structured" (answer with an object) or "tool_call"
    messages        the prompt, [{"role": system|user|assistant|tool, "content": text}, ...]
    schema          structured: the JSON schema the answer must fit
    tools           tool_call: [{"name", "description", "parameters": JSON schema}, ...]
    response_file   the file to answer in, "NNNN.response.json"
    instructions    what to write, in a sentence

The answer is `DIR/NNNN.response.json`: for "structured" the JSON object itself; for "tool_call"
{"tool": <name>, "arguments": {...}}, or {"tool_calls": [such objects, ...]} to call several
tools at once. The answerer should write it under another name and rename it (a rename is
atomic); a file that does not parse yet is read again a few times before it counts as an answer.
An answer file written again after the run read it changes nothing: the run goes on with what it read,
keeps that as `NNNN.used.json` beside it and says so on stderr (two answerers once raced on one request,
and the file left behind was not the answer played).

An answer is checked like a served model's (`nodes.models.output`); a rejected one comes back as the
next request, with the answer and the error appended to its messages, up to `output_retries`
times, then the call raises `ModelOutputError`. No answer within `deadline_s` (default 3600 s, or
RLGPT_FILE_MODEL_TIMEOUT) raises `FileModelTimeout` naming the file it waited for.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel

from nodes.models.base import ROOMY_ROOM, RUN_STOPPING, ModelConfigError, ModelServerError, UsageCounter
from nodes.models.chat import DEFAULT_OUTPUT_RETRIES, ReaskingModel, Sent
from nodes.models.output import answer_as_tool_calls, message_dicts, parse_structured, tool_name, tool_spec

S = TypeVar("S", bound=BaseModel)
log = logging.getLogger(__name__)

DEADLINE_ENV = "RLGPT_FILE_MODEL_TIMEOUT"
DEFAULT_DEADLINE_S = 3600.0
DEFAULT_POLL_S = 0.2
UNPARSED_READS = 5  # reads of a file that is not JSON yet before it is taken as the answer
NUMBERED = re.compile(r"^(\d+)\.(request|response)\.json$")
RENAME_NOTE = ("Write it under another name first and then rename it to {file}, so that it is never "
               "read half-written.")


def _signature(path: Path) -> tuple[int, int]:
    """What changes when a file is written again: its modification time and size."""
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


class FileModelTimeout(ModelServerError):
    """No answer file appeared before the deadline."""


def deadline_from_env(environ: Mapping[str, str] = os.environ) -> float:
    raw = environ.get(DEADLINE_ENV, "").strip()
    if not raw:
        return DEFAULT_DEADLINE_S
    try:
        value = float(raw)
    except ValueError:
        raise ModelConfigError(f"{DEADLINE_ENV}={raw!r} is not a number of seconds") from None
    if value <= 0:
        raise ModelConfigError(f"{DEADLINE_ENV}={raw!r} must be > 0 seconds")
    return value


class FileModel(ReaskingModel):
    """An AgentModel whose answers are JSON files written by someone else (see the module doc)."""

    # a person or a capable model in another program: no small window to fit, and no memory of its answers but
    # what it keeps itself, so it sees its whole last code and full test reports
    prompt_room = ROOMY_ROOM

    def __init__(self, directory: str | Path, deadline_s: float | None = None,
                 output_retries: int = DEFAULT_OUTPUT_RETRIES, poll_s: float = DEFAULT_POLL_S):
        if deadline_s is not None and deadline_s <= 0:
            raise ModelConfigError(f"deadline_s must be > 0 seconds, got {deadline_s}")
        if output_retries < 0:
            raise ModelConfigError(f"output_retries must be >= 0, got {output_retries}")
        if poll_s <= 0:
            raise ModelConfigError(f"poll_s must be > 0 seconds, got {poll_s}")
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ModelConfigError(f"cannot use {self.directory} as the model's folder: {e}") from None
        self.deadline_s = deadline_s if deadline_s is not None else deadline_from_env()
        self.output_retries = output_retries
        self.poll_s = poll_s
        self.name = f"file:{self.directory}"
        self.usage = UsageCounter()
        self.last_requests = []
        used = [int(m.group(1)) for p in self.directory.iterdir() if (m := NUMBERED.match(p.name))]
        self._next = max(used, default=-1) + 1
        # the answers read, as read, with the file's (mtime, size) then: one written again later is kept apart
        self._read: dict[Path, tuple[str, tuple[int, int]]] = {}

    def structured(self, role: str, messages: Sequence[BaseMessage], schema: type[S],
                   context: Mapping[str, Any] | None = None) -> S:
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise TypeError(f"schema must be a pydantic model class, got {schema!r}")
        shape = "one JSON object that fits `schema`"
        send = self._sender(role, {"kind": "structured", "schema": schema.model_json_schema()}, shape)
        return self._ask(role, messages, f"{schema.__name__} (structured answer)", send,
                         lambda raw: parse_structured(raw, schema),
                         f"Write the answer again, as {shape}, to the response_file of this request.")

    def tool_call(self, role: str, messages: Sequence[BaseMessage], tools: Sequence[Any],
                  context: Mapping[str, Any] | None = None) -> AIMessage:
        if not tools:
            raise ValueError(f"tool_call for role '{role}' needs at least one tool")
        names = [tool_name(t) for t in tools]
        shape = ('one JSON object {"tool": <one of: ' + ", ".join(names) + '>, "arguments": {...}} whose '
                 'arguments fit that tool\'s parameters, or {"tool_calls": [such objects, ...]} to call several')
        send = self._sender(role, {"kind": "tool_call", "tools": [tool_spec(t) for t in tools]}, shape)
        return self._ask(role, messages, f"tool call (one of: {', '.join(names)})", send,
                         lambda raw: answer_as_tool_calls(raw, tools),
                         f"Write the answer again, as {shape}, to the response_file of this request.")

    def _sender(self, role: str, spec: dict[str, Any], shape: str):
        def send(msgs: list[BaseMessage]) -> Sent:
            self._keep_rewritten()
            number = self._next
            self._next += 1
            stem = f"{number:04d}"
            response = self.directory / f"{stem}.response.json"
            request = {"call": number, "role": role, "kind": spec["kind"], "messages": message_dicts(msgs),
                       **{k: v for k, v in spec.items() if k != "kind"}, "response_file": response.name,
                       "instructions": f"Write {shape} to {response.name} in this folder. "
                                       + RENAME_NOTE.format(file=response.name)}
            request_file = self.directory / f"{stem}.request.json"
            self._write_atomically(request_file, request)
            return AIMessage(content=self._await(response)), {"max_tokens": None, "request_file": request_file.name}

        return send

    def _keep_rewritten(self) -> None:
        """Keep apart each answer written again since the run read it (`NNNN.used.json`: what the run used)."""
        for path, (text, seen) in list(self._read.items()):
            try:
                if _signature(path) == seen:
                    continue  # untouched: not read again
                now: str | None = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                now = None  # removed since: what was used is still kept below
            if now == text:
                continue
            used = path.with_name(path.name.replace(".response.json", ".used.json"))
            try:
                used.write_text(text, encoding="utf-8")
                kept = f", kept in {used.name}"
            except OSError as e:
                kept = f" (it could not be kept in {used.name}: {e})"
            log.warning("%s was written again or removed after the run had read it; the run went on with the answer "
                        "it had read%s. Answer each request once.", path, kept)
            del self._read[path]

    def _write_atomically(self, path: Path, data: dict[str, Any]) -> None:
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as e:
            raise ModelServerError(f"cannot write the request {path}: {e}") from None

    def _await(self, path: Path) -> str:
        """The text of the answer file once it exists and parses (or stopped changing into JSON)."""
        deadline = time.monotonic() + self.deadline_s
        unparsed = 0
        while True:
            if path.exists():
                try:
                    text = path.read_text(encoding="utf-8", errors="replace")
                except OSError as e:
                    raise ModelServerError(f"cannot read the answer {path}: {e}") from None
                try:
                    json.loads(text)
                except json.JSONDecodeError:
                    unparsed += 1
                    if unparsed < UNPARSED_READS:
                        time.sleep(self.poll_s)
                        continue  # not JSON after UNPARSED_READS reads: the re-ask tells the answerer why
                try:
                    self._read[path] = (text, _signature(path))
                except OSError:
                    pass  # gone again at once: nothing to watch
                return text
            elif RUN_STOPPING.is_set():
                raise ModelServerError(f"the run was stopped while waiting for {path.name}")
            elif time.monotonic() > deadline:
                raise FileModelTimeout(
                    f"no answer in {path} after {self.deadline_s:g}s (the request is "
                    f"{path.name.replace('response', 'request')} beside it). Answer it, or raise the wait with "
                    f"{DEADLINE_ENV}=<seconds>.")
            time.sleep(self.poll_s)
