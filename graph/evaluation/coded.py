"""The expert's coded actions for a tech-tree task, and the pure-code driver that chains them.

Both come from the same place as the graph's code: the planner's backward chain over Crafter's
recipes (nodes.recipes) and the fast agent's filled few-shot examples (nodes.expert.write_source).
"""
from __future__ import annotations

from envs.tasks import TASKS
from nodes.expert import write_source
from nodes.recipes import backward_chain, template_for

RETRIES_PER_STEP = 200  # attempts of one chain step before the driver moves on (it then fails)


def chain_of(task: str) -> list[str]:
    """The task's subtasks in tech-tree order, as the expert planner orders them."""
    if TASKS[task].achievement is None:
        raise ValueError(f"'{task}' has no achievement to chain towards; pure code needs a tech-tree task")
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


def pure_code_program(task: str) -> str:
    """One program whose `main` plays the whole chain with no learning.

    It generalises the few-shot chain example (prompts/examples/obtain_wood_pickaxe.py) to any
    tech-tree task: each subtask's coded action is retried until its achievement unlocks; when the
    item to place or make lacks a material, the material's collect action runs first; when an
    action finds nothing to act on, the player explores.
    """
    sources = coded_actions_for(task)
    order = chain_of(task)
    steps = []
    for sub in order:
        kind, _, item = sub.partition("_")
        needs = repr(item) if kind in ("place", "make") else "None"  # what requirements() is asked about
        steps.append(f"        ({sub}, {sub!r}, {needs}),")
    collectors = [sub for sub in order if sub.startswith("collect_")]
    gather = ", ".join(f"{sub.removeprefix('collect_')!r}: {sub}" for sub in collectors)
    limit = TASKS[task].max_steps
    main = f'''@coded_action(max_steps={limit})
def main(game):
    """Pure code for {task}: {' -> '.join(order)}, each retried until its achievement unlocks."""
    steps = [
{chr(10).join(steps)}
    ]
    gather = {{{gather}}}
    for action, goal, item in steps:
        for _ in range({RETRIES_PER_STEP}):
            if goal in game.achievements:
                break
            todo = action
            if item is not None:
                missing = [m for m, n in game.requirements(item).items() if not game.has(m, n)]
                if missing and missing[0] in gather:
                    todo = gather[missing[0]]
            acted = False
            for name in todo(game):
                acted = True
                yield name
            if not acted:
                yield from explore(game)
        if goal not in game.achievements:
            return
'''
    return "\n\n".join(s.rstrip() for s in sources.values()) + "\n\n\n" + main
