"""`make_model`: the AgentModel named by `--model`.

`make_model("expert")` (or no name) gives the offline rule-based expert; any other name gives an
OpenAI-compatible chat model (`nodes.llm.LLMModel`), configured from the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from nodes.expert import ExpertModel
from nodes.models import AgentModel, ModelConfigError

EXPERT_NAMES = ("expert",)

# The OpenAI client insists on some key; local servers (llama.cpp, vLLM, Ollama) ignore it.
LOCAL_SERVER_DUMMY_KEY = "not-needed-for-a-local-server"

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
    if spec is None or is_expert(spec):
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
    from nodes.llm import LLMModel  # heavy (the OpenAI client): only for a language model

    options = {**llm_options_from_env(), **llm_options}  # explicit arguments win
    return LLMModel(model=model, api_key=api_key or LOCAL_SERVER_DUMMY_KEY,
                    base_url=base_url or None, **options)
