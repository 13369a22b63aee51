"""The one model interface every agent node talks to, and the factory that picks one.

A node never knows whether a language model or the rule-based expert answers it: it calls
`structured(...)` (planner, slow agent, critic) or `tool_call(...)` (fast agent) and reads
`usage` for the report. `make_model("expert")` gives the offline expert; any other name gives
an OpenAI-compatible chat model (`nodes.llm.LLMModel`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence, TypeVar, runtime_checkable

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel

S = TypeVar("S", bound=BaseModel)

EXPERT_NAMES = ("expert",)

# The OpenAI client insists on some key; local servers (llama.cpp, vLLM, Ollama) ignore it.
LOCAL_SERVER_DUMMY_KEY = "not-needed-for-a-local-server"


class ModelConfigError(ValueError):
    """The model cannot be built from the given name and environment."""


class ModelServerError(RuntimeError):
    """The model server could not be reached or refused the request (network, auth, HTTP error)."""


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
    def from_dict(cls, data: Mapping[str, Mapping[str, int]]) -> "UsageCounter":
        return cls(roles={r: RoleUsage(**dict(v)) for r, v in data.items()})

    def merge(self, other: "UsageCounter") -> None:
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
    """

    name: str
    usage: UsageCounter

    def structured(self, role: str, messages: Sequence[BaseMessage], schema: type[S],
                   context: Mapping[str, Any] | None = None) -> S: ...

    def tool_call(self, role: str, messages: Sequence[BaseMessage], tools: Sequence[Any],
                  context: Mapping[str, Any] | None = None) -> AIMessage: ...


# Knobs of the LLM client a user can set without touching the CLI: env var -> (option, type).
LLM_ENV_OPTIONS = {
    "RLGPT_MAX_TOKENS": ("max_tokens", int),
    "RLGPT_LLM_TIMEOUT": ("timeout", float),
    "RLGPT_LLM_NETWORK_RETRIES": ("network_retries", int),
    "RLGPT_LLM_OUTPUT_RETRIES": ("output_retries", int),
}


def llm_options_from_env(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """LLMModel options from RLGPT_* environment variables; a bad value is a ModelConfigError."""
    options: dict[str, Any] = {}
    for var, (option, kind) in LLM_ENV_OPTIONS.items():
        raw = environ.get(var, "").strip()
        if not raw:
            continue
        try:
            value = kind(raw)
        except ValueError:
            raise ModelConfigError(f"{var}={raw!r} is not a valid {kind.__name__}") from None
        positive = option in ("max_tokens", "timeout")  # zero retries is fine, zero tokens is not
        if value < 0 or (positive and value == 0):
            raise ModelConfigError(f"{var}={raw!r} must be {'> 0' if positive else '>= 0'}")
        options[option] = value
    return options


def is_expert(spec: str | None) -> bool:
    return spec is None or spec.strip().lower() in EXPERT_NAMES


def make_model(spec: str | None = None, **llm_options: Any) -> AgentModel:
    """Build the model named by `--model`: None or 'expert' -> the expert, else an LLM.

    An LLM needs OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (any OpenAI-compatible server: a local
    one needs no key). `llm_options` go to `nodes.llm.LLMModel` (max_tokens, timeout, retries...),
    over the RLGPT_* environment variables of `LLM_ENV_OPTIONS`.
    """
    if spec is not None and not isinstance(spec, str):
        raise ModelConfigError(f"--model must be a model name string, got {type(spec).__name__}")
    if is_expert(spec):
        # Imported lazily: the expert pulls in env recipe data that an LLM run does not need.
        from nodes.expert import ExpertModel
        return ExpertModel()
    model = spec.strip()
    if not model:
        raise ModelConfigError("--model is empty: give a model name (e.g. gpt-4o-mini) or 'expert'.")
    api_key = os.environ.get("OPENAI_API_KEY", "").strip()
    base_url = os.environ.get("OPENAI_BASE_URL", "").strip()
    if not api_key and not base_url:
        raise ModelConfigError(
            f"--model {model} asks for a language model, but no server is configured: set "
            "OPENAI_API_KEY, or OPENAI_BASE_URL for a local server (vLLM, llama.cpp, Ollama), "
            "or use --model expert."
        )
    from nodes.llm import LLMModel
    options = {**llm_options_from_env(), **llm_options}  # explicit arguments win
    return LLMModel(model=model, api_key=api_key or LOCAL_SERVER_DUMMY_KEY,
                    base_url=base_url or None, **options)
