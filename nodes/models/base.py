"""The one model interface every agent node talks to, its usage counts and its errors.

A node never knows whether a language model or the rule-based expert answers it: it calls
`structured(...)` (planner, slow agent, critic) or `tool_call(...)` (fast agent) and reads
`usage` for the report. The implementations (`nodes.models.expert.ExpertModel`, `nodes.models.chat.LLMModel`)
build on these types; `nodes.models.factory.make_model` picks one by name.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel

S = TypeVar("S", bound=BaseModel)


# Set when the run is being stopped (graph.run on Ctrl-C or SIGTERM): a wait for an answer ends at once. The graph's
# nodes run in worker threads, so a node waiting on a person would otherwise keep the process alive after the stop.
RUN_STOPPING = threading.Event()


class ModelConfigError(ValueError):
    """The model cannot be built from the given name and environment."""


class ModelServerError(RuntimeError):
    """The model server could not be reached or refused the request (network, auth, HTTP error)."""


class ContextWindowError(ModelServerError):
    """The prompt leaves no room for an answer in the model's context window (checked before sending)."""


class ModelOutputError(RuntimeError):
    """The model kept answering with output that does not fit the expected schema or tools."""

    def __init__(self, role: str, expected: str, attempts: int, last_error: str, model: str = ""):
        self.role = role
        self.expected = expected
        self.attempts = attempts
        self.last_error = last_error
        self.model = model
        who = f"model '{model}'" if model else "the model"
        super().__init__(
            f"The {role} agent could not get a valid {expected} from {who} after {attempts} "
            f"attempt{'s' if attempts != 1 else ''}. Last problem: {last_error.strip()}\n"
            "Hint: use a larger or instruction-tuned model that supports tool/function calling, "
            "raise the retry count, or run with --model expert (the offline rule-based stand-in)."
        )


@dataclass
class RoleUsage:
    """Counts for one role (node): calls answered, retries spent, tokens in and out."""

    calls: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class UsageCounter:
    """Per-role call and token counts of one run; the expert records calls with zero tokens."""

    roles: dict[str, RoleUsage] = field(default_factory=dict)

    def record(self, role: str, prompt_tokens: int = 0, completion_tokens: int = 0,
               retry: bool = False) -> None:
        """Count one request to the model. `retry=True` marks a re-ask after invalid output."""
        if prompt_tokens < 0 or completion_tokens < 0:
            raise ValueError(f"token counts must be >= 0, got {prompt_tokens}, {completion_tokens}")
        u = self.roles.setdefault(role, RoleUsage())
        u.calls += 1
        u.retries += int(retry)
        u.prompt_tokens += int(prompt_tokens)
        u.completion_tokens += int(completion_tokens)

    def total(self) -> RoleUsage:
        t = RoleUsage()
        for u in self.roles.values():
            t.calls += u.calls
            t.retries += u.retries
            t.prompt_tokens += u.prompt_tokens
            t.completion_tokens += u.completion_tokens
        return t

    def to_dict(self) -> dict[str, dict[str, int]]:
        """Plain data, so the graph state and its checkpoint can hold it."""
        return {r: {"calls": u.calls, "retries": u.retries, "prompt_tokens": u.prompt_tokens,
                    "completion_tokens": u.completion_tokens} for r, u in self.roles.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, int]]) -> UsageCounter:
        return cls(roles={r: RoleUsage(**dict(v)) for r, v in data.items()})

    def merge(self, other: UsageCounter) -> None:
        """Add another counter's numbers (a resumed run adds to what the checkpoint held)."""
        for r, u in other.roles.items():
            mine = self.roles.setdefault(r, RoleUsage())
            mine.calls += u.calls
            mine.retries += u.retries
            mine.prompt_tokens += u.prompt_tokens
            mine.completion_tokens += u.completion_tokens

    def summary_table(self, model_name: str = "") -> str:
        """A fixed-width text table: one row per role and a total row."""
        head = f"Model usage{f' ({model_name})' if model_name else ''}"
        cols = ("role", "calls", "retries", "prompt tok", "completion tok", "total tok")
        rows = [(r, u) for r, u in sorted(self.roles.items())] + [("TOTAL", self.total())]
        cells = [cols] + [(r, str(u.calls), str(u.retries), str(u.prompt_tokens),
                           str(u.completion_tokens), str(u.total_tokens)) for r, u in rows]
        widths = [max(len(c[i]) for c in cells) for i in range(len(cols))]

        def line(c: Sequence[str]) -> str:
            return "  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                             for i, (v, w) in enumerate(zip(c, widths)))

        sep = "  ".join("-" * w for w in widths)
        return "\n".join([head, line(cells[0]), sep, *map(line, cells[1:-1]), sep, line(cells[-1])])


@runtime_checkable
class AgentModel(Protocol):
    """What every agent node calls; see docs/CONTRACTS.md.

    `context` carries the facts the rule-based expert reasons on; a language model sees the same
    facts rendered into `messages` by the prompt templates and ignores it.

    Optional members, outside the protocol so that a model without them still fits:
    - `prompt_room`: "compact" or "roomy", how much of the long texts its prompts show (`prompt_room_of`);
    - `close()`: releases what the model holds (the local llama.cpp server of `--model smollm2`);
      whoever built the model calls it when the run ends, best through `close_model`;
    - `last_requests`: one dict per request of the latest call (`prompt_tokens`,
      `completion_tokens`, `max_tokens`, ...), read by `nodes.models.recording`.
    """

    name: str
    usage: UsageCounter

    def structured(self, role: str, messages: Sequence[BaseMessage], schema: type[S],
                   context: Mapping[str, Any] | None = None) -> S: ...

    def tool_call(self, role: str, messages: Sequence[BaseMessage], tools: Sequence[Any],
                  context: Mapping[str, Any] | None = None) -> AIMessage: ...


MIN_ANSWER_TOKENS = 64  # less room than this in the context window is refused before sending

# Prompt rooms (prompts.templates.PROMPT_ROOMS), by name: the nodes ask the model which its prompts get.
COMPACT_ROOM, ROOMY_ROOM = "compact", "roomy"
ROOMY_WINDOW = 32_768  # tokens: a served model's window this large, or not given, gets the roomy prompts


def prompt_room_of(model: object) -> str:
    """How much of the long texts (last code, test reports) the model's prompts show: its own `prompt_room`
    where it has one (a served model decides by its window, a `file:` answerer is roomy), else compact: the
    rule-based expert and a replay of a compact run get the prompts benchmarks/prompt_budget.py measures."""
    room = getattr(model, "prompt_room", None)
    return room if room in (COMPACT_ROOM, ROOMY_ROOM) else COMPACT_ROOM


def close_model(model: object) -> None:
    """Call the model's optional `close()`; a model without one holds nothing to release."""
    close = getattr(model, "close", None)
    if callable(close):
        close()
