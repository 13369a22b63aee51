"""The expert's coded actions for a tech-tree task, and the pure-code driver that chains them.

Both come from the same place as the graph's code: the planner's backward chain over Crafter's
recipes (nodes.recipes) and the fast agent's filled few-shot examples (nodes.models.expert.write_source).
"""
from __future__ import annotations

from envs.tasks import TASKS
from nodes.models.expert import write_source
from nodes.recipes import backward_chain, prerequisites, score_order, template_for


def chain_of(task: str) -> list[str]:
    """The task's subtasks in tech-tree order, as the expert planner orders them. For a score task
    (crafter_score): the expert's plan over every achievement, less those no few-shot example covers
    (the expert learns those; pure code has nothing for them)."""
    if TASKS[task].is_score:
        return [a for a in score_order() if template_for(a) is not None]
    return backward_chain(task)


def coded_actions_for(task: str) -> dict[str, str]:
    """Function name -> source of the expert's coded action for every subtask of the chain, plus
    `explore`. Subtasks that no few-shot example covers are refused: the expert would learn them."""
    sources: dict[str, str] = {}
    for sub in chain_of(task):
        template = template_for(sub)
        if template is None:
            raise ValueError(f"no few-shot example covers '{sub}', so the expert has no code for it")
        sources[sub] = write_source({"name": sub, "template": template["kind"],
                                     "target": template.get("target"), "item": template.get("item")})
    sources["explore"] = write_source({"name": "explore", "template": "explore"})
    return sources


def pure_code_program(task: str, replace: dict[str, str] | None = None) -> str:
    """One program whose `main` plays the whole chain with no learning: the expert's filled
    coded actions, chained by prompts.fewshot.chain_source (retries, gathering, survival); for a
    score task, every coded achievement of the expert's plan. `replace`: sources played instead of the
    library's (a benchmark's other stay_alive)."""
    from prompts.fewshot import chain_source

    chain = chain_of(task)
    sources = {**coded_actions_for(task), **(replace or {})}
    if TASKS[task].is_score:  # a score plan: a step that fails is passed over, not the end
        needs = {a: [p for p in prerequisites(a) if p in chain] for a in chain}
        return chain_source(sources, chain, TASKS[task].max_steps, needs=needs)
    # a task's chain ends at its last step (its code tests play to main's return; held-out play ends there)
    return chain_source(sources, chain, TASKS[task].max_steps, ends_with_last=True)
