"""Facts kept in two places agree: the rules snapshot the sandbox reads with the installed Crafter's data,
and the tasks' hand-written prerequisites with the ones the graph derives from the recipes."""

from __future__ import annotations

from envs import rules
from envs.tasks import TASKS
from nodes.recipes import backward_chain, prerequisites


def test_the_rules_snapshot_holds_the_installed_crafters_recipes():
    snapshot = {"collect": rules.COLLECT, "make": rules.MAKE, "place": rules.PLACE}
    assert snapshot == rules.rules_from_crafter()  # if not, `python -m envs.rules` rewrites the snapshot


def test_every_task_lists_the_prerequisites_the_recipes_give():
    for name, task in TASKS.items():
        assert set(task.prerequisites) == set(prerequisites(name)), name
    # the same achievements, in plan order: coal is mined before the stone the tasks list first
    assert prerequisites("collect_diamond") == tuple(backward_chain("collect_diamond")[:-1])
