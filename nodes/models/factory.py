"""`make_model`: the AgentModel named by `--model`.

- `expert` (or no name): the offline rule-based expert;
- `smollm2`: SmolLM2-135M-Instruct on a llama.cpp server this process starts (the `llamacpp`
  extra); the model's `close()` stops it;
- `file:DIR`: answers written as files in DIR by any answerer (`nodes.models.file`);
- `replay:FILE`: the answers of a recorded run (`nodes.models.recording`);
- any other name: an OpenAI-compatible chat model (`nodes.models.chat.LLMModel`), configured from the
  environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from nodes.models.base import MIN_ANSWER_TOKENS, AgentModel, ModelConfigError
from nodes.models.expert import ExpertModel

EXPERT_NAMES = ("expert",)
SMOLLM2_NAME = "smollm2"
FILE_PREFIX = "file:"
REPLAY_PREFIX = "replay:"
# The fast agent writes code, so it may answer at length; the window guard cuts every limit to the
# room the prompt leaves in SmolLM2's 8192-token context.
SMOLLM2_MAX_TOKENS = 1024
SMOLLM2_MAX_TOKENS_BY_ROLE = {"fast": 2048}
# Reading a prompt near the full window took minutes on a busy 2-core machine (measured): more than
# the 180 s a served model gets.
SMOLLM2_TIMEOUT_S = 900.0

# The OpenAI client insists on some key; local servers (llama.cpp, vLLM, Ollama) ignore it.
LOCAL_SERVER_DUMMY_KEY = "not-needed-for-a-local-server"

# Knobs of the LLM client a user can set without touching the CLI: env var -> (option, type).
LLM_ENV_OPTIONS = {
    "RLGPT_MAX_TOKENS": ("max_tokens", int),
    "RLGPT_LLM_TIMEOUT": ("timeout", float),
    "RLGPT_LLM_NETWORK_RETRIES": ("network_retries", int),
    "RLGPT_LLM_OUTPUT_RETRIES": ("output_retries", int),
    # the served model's window in tokens: prompts are fitted to it (compact below 32,768) and checked against it
    "RLGPT_LLM_CONTEXT_WINDOW": ("context_window", int),
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
        positive = option in ("max_tokens", "timeout", "context_window")  # zero retries is fine, zero tokens not
        if value < 0 or (positive and value == 0):
            raise ModelConfigError(f"{var}={raw!r} must be {'> 0' if positive else '>= 0'}")
        if option == "context_window" and value <= MIN_ANSWER_TOKENS:
            raise ModelConfigError(f"{var}={raw!r} leaves no room for an answer: give the server's window in "
                                   f"tokens (more than {MIN_ANSWER_TOKENS}, e.g. 8192)")
        options[option] = value
    return options


def is_expert(spec: str | None) -> bool:
    return spec is None or spec.strip().lower() in EXPERT_NAMES


def make_model(spec: str | None = None, **llm_options: Any) -> AgentModel:
    """Build the model named by `--model` (see the module doc).

    A served LLM needs OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (any OpenAI-compatible server: a
    local one needs no key). `llm_options` go to `nodes.models.chat.LLMModel` (max_tokens, timeout,
    retries...), over the RLGPT_* environment variables of `LLM_ENV_OPTIONS`; a file model takes
    `output_retries` and `deadline_s` from them.
    """
    if spec is not None and not isinstance(spec, str):
        raise ModelConfigError(f"--model must be a model name string, got {type(spec).__name__}")
    if spec is None or is_expert(spec):
        return ExpertModel()
    model = spec.strip()
    if not model:
        raise ModelConfigError("--model is empty: give a model name (e.g. gpt-4o-mini) or 'expert'.")
    options = {**llm_options_from_env(), **llm_options}  # explicit arguments win
    if model.lower() == SMOLLM2_NAME:
        return smollm2_model(**options)
    if model.startswith(FILE_PREFIX):
        from nodes.models.file import FileModel

        folder = _path_after_prefix(model, FILE_PREFIX, "the folder the answers are written in")
        retries = {"output_retries": options["output_retries"]} if "output_retries" in options else {}
        return FileModel(folder, deadline_s=options.get("deadline_s"), **retries)
    if model.startswith(REPLAY_PREFIX):
        from nodes.models.recording import ReplayModel

        return ReplayModel(_path_after_prefix(model, REPLAY_PREFIX, "a recording made with nodes.models.recording"))
    api_key = os.environ.get("OPENAI_API_KEY", "").strip()
    base_url = os.environ.get("OPENAI_BASE_URL", "").strip()
    if not api_key and not base_url:
        raise ModelConfigError(
            f"--model {model} asks for a language model, but no server is configured: set "
            "OPENAI_API_KEY, or OPENAI_BASE_URL for a local server (vLLM, llama.cpp, Ollama), "
            f"or use --model {SMOLLM2_NAME} (a tiny local model), or --model expert."
        )
    from nodes.models.chat import LLMModel  # heavy (the OpenAI client): only for a language model

    try:
        return LLMModel(model=model, api_key=api_key or LOCAL_SERVER_DUMMY_KEY,
                        base_url=base_url or None, **options)
    except ValueError as e:  # an option out of range (the RLGPT_* variables, or arguments): said, not a traceback
        raise ModelConfigError(f"--model {model}: {e}") from None


def _path_after_prefix(model: str, prefix: str, what: str) -> str:
    path = model[len(prefix):].strip()
    if not path:
        raise ModelConfigError(f"--model {prefix} needs a path after the colon: {what}")
    return path


def smollm2_model(**options: Any) -> AgentModel:
    """SmolLM2-135M-Instruct on a llama.cpp server started now on a free loopback port (context
    8192 tokens, up to 2 threads), as an LLMModel in next-step tool mode whose answer limits fit
    the window (prompts counted with the model's own tokenizer). `close()` stops the server; an
    atexit hook and, on the main thread, the parent-death signal stop it if nobody does."""
    from nodes.models.chat import LLMModel
    from nodes.models.local import LlamaServer
    from nodes.models.tokens import SMOLLM2_CONTEXT, count_chat_tokens, count_tokens

    count_tokens("")  # loads the tokenizer: a missing or broken install fails before the server starts
    defaults: dict[str, Any] = {"tool_mode": "next_step", "context_window": SMOLLM2_CONTEXT,
                                "count_prompt": count_chat_tokens, "timeout": SMOLLM2_TIMEOUT_S}
    if "max_tokens" not in options:  # a limit the user set holds for every role
        defaults.update(max_tokens=SMOLLM2_MAX_TOKENS, max_tokens_by_role=SMOLLM2_MAX_TOKENS_BY_ROLE)
    if "context_window" in options:  # a smaller window tightens the guard; the server's own is the most there is
        options = {**options, "context_window": min(int(options["context_window"]), SMOLLM2_CONTEXT)}
    server = LlamaServer(n_ctx=SMOLLM2_CONTEXT).start()
    try:
        return LLMModel(server.model_id, api_key=LOCAL_SERVER_DUMMY_KEY, base_url=server.base_url,
                        on_close=server.stop, **{**defaults, **options})
    except BaseException:
        server.stop()
        raise
