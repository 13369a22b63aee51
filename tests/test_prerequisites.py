"""A subtask is tested after the earlier skills held-out play puts before it, and its code is judged on the runs
that reached it.

Deep in the diamond chain, a code test replays the solved skills before the subtask: in a one-achievement
task's plan all of them, as held-out play chains them; in a score plan what the subtask needs. Counting deaths
in the prefix against the subtask's code made the critic move working code to RL. No environment steps here.
"""

from __future__ import annotations

from nodes.attempt.outcome import skill_from_attempt
from nodes.attempt.results import judged_rate, summarise_code_runs
from nodes.models.expert import ExpertModel
from nodes.recipes import backward_chain
from nodes.schemas import Critique
from nodes.skills.records import needed_before, prerequisite_achievements, prior_sources

IRON_PICKAXE_PLAN = backward_chain("make_iron_pickaxe")


def _state_at(subtask: str) -> dict:
    index = IRON_PICKAXE_PLAN.index(subtask)
    plan = [{"name": n, "goal": "g", "success_condition": "c"} for n in IRON_PICKAXE_PLAN]
    skills = {n: {"kind": "code", "entry": n, "sources": [f"def {n}(game):\n    yield 'noop'\n"]}
              for n in IRON_PICKAXE_PLAN[:index]}
    return {"plan": plan, "subtask_index": index, "skills": skills}


def test_in_a_one_achievement_tasks_plan_every_subtask_replays_every_earlier_skill():
    """Held-out play chains the plan: the furnace comes after the iron there, so its tests replay the iron too
    (graph rules 18). A furnace tested at step 40 met no hunger and no night; after the iron it met both."""
    assert IRON_PICKAXE_PLAN.index("collect_iron") < IRON_PICKAXE_PLAN.index("place_furnace")
    for subtask in IRON_PICKAXE_PLAN:
        state = {**_state_at(subtask), "task": "make_iron_pickaxe"}
        index = IRON_PICKAXE_PLAN.index(subtask)
        assert [p["subtask"] for p in prior_sources(state)] == IRON_PICKAXE_PLAN[:index]
        assert prerequisite_achievements(state) == IRON_PICKAXE_PLAN[:index]
    # a score plan passes over a step that fails: a subtask there replays only what its recipe needs
    furnace = {**_state_at("place_furnace"), "task": "crafter_score"}
    assert [p["subtask"] for p in prior_sources(furnace)] == ["collect_wood", "place_table", "make_wood_pickaxe",
                                                              "collect_stone"]


def test_without_a_task_a_subtask_replays_only_the_solved_skills_it_depends_on():
    """A plan built by hand, with no task to say whether held-out play chains it, keeps the recipe's needs."""
    furnace = [p["subtask"] for p in prior_sources(_state_at("place_furnace"))]
    assert furnace == ["collect_wood", "place_table", "make_wood_pickaxe", "collect_stone"]
    iron = [p["subtask"] for p in prior_sources(_state_at("collect_iron"))]
    assert "collect_coal" not in iron and iron[-1] == "make_stone_pickaxe"
    pickaxe = [p["subtask"] for p in prior_sources(_state_at("make_iron_pickaxe"))]
    assert pickaxe == IRON_PICKAXE_PLAN[:-1]  # it needs every earlier subtask


def test_the_plans_last_subtask_replays_every_earlier_skill_as_held_out_play_chains_them():
    """Held-out play is the plan's chain: an answerer's plan put a sword before defeat_skeleton, which needs
    nothing by recipe, so its tests started in a fresh world without the sword its held-out play had."""
    plan_names = ["collect_wood", "place_table", "make_wood_pickaxe", "collect_stone", "make_stone_sword",
                  "defeat_skeleton"]
    plan = [{"name": n, "goal": "g", "success_condition": "c"} for n in plan_names]
    skills = {n: {"kind": "code", "entry": n, "sources": [f"def {n}(game):\n    yield 'noop'\n"]}
              for n in plan_names[:-1]}
    last = {"plan": plan, "subtask_index": len(plan) - 1, "skills": skills, "task": "defeat_skeleton"}
    assert [p["subtask"] for p in prior_sources(last)] == plan_names[:-1]
    # a score plan passes over a step that fails: its last subtask replays only its own needs
    assert prior_sources({**last, "task": "crafter_score"}) == []
    # the same rule without a task (a plan built by hand) keeps the recipe's needs
    assert prior_sources({**last, "task": None}) == []
    # beyond the recipe, a learned skill with no coded action of its name cannot be replayed: it is left out
    # rather than counted as an achievement every run must pass through first
    policy = {"kind": "rl", "entry": None, "sources": [], "policy_path": "p.pt"}
    with_policy = {**last, "skills": {**skills, "make_stone_sword": policy}}
    assert [p["subtask"] for p in prior_sources(with_policy)] == plan_names[:4]
    assert prerequisite_achievements(with_policy) == plan_names[:4]


def test_subtasks_outside_the_recipe_data_keep_every_earlier_skill():
    assert needed_before("not_a_crafter_task", ["collect_wood", "collect_iron"]) == ["collect_wood", "collect_iron"]
    assert needed_before("collect_stone", ["my_own_step", "collect_iron"]) == ["my_own_step"]


def _run(success: bool, unlocked: list[str]) -> dict:
    return {"seed": 0, "task_success": success, "steps": 10, "achievements_unlocked": unlocked}


def test_code_summary_separates_prefix_failures_from_the_sub_action():
    prefix = ["collect_wood", "place_table"]
    reports = [_run(True, prefix + ["make_wood_pickaxe"]), _run(True, prefix + ["make_wood_pickaxe"]),
               _run(False, prefix), _run(False, ["collect_wood"])]
    summary = summarise_code_runs(reports, prefix)
    assert (summary["success_rate"], summary["started"]) == (0.5, 3)
    assert summary["success_given_start"] == 2 / 3 and judged_rate(summary) == 2 / 3
    assert summary["prerequisites"] == sorted(prefix)
    plain = summarise_code_runs(reports)
    assert (plain["started"], plain["success_given_start"]) == (4, 0.5)
    none_reached = summarise_code_runs([_run(False, [])], prefix)
    assert none_reached["success_given_start"] is None and judged_rate(none_reached) == 0.0


def test_the_plans_last_subtask_needs_half_of_its_runs_to_reach_it_while_its_revisions_last():
    """Held-out play of a one-achievement task is the chain its last subtask's tests replay: there, a round
    whose action meets the target on the runs that reached it goes back for repair while fewer than half of
    its runs reached it; earlier subtasks, and every subtask of a score plan, pass on their own runs."""
    from nodes.attempt.results import pass_rule_text, reached_by_enough_runs, round_passes, runs_reaching
    from nodes.attempt.rounds import ends_the_chain

    prefix = ["collect_wood", "place_table", "make_wood_pickaxe", "collect_stone"]
    early_deaths = summarise_code_runs([_run(True, prefix)] * 3 + [_run(False, prefix[:2])] * 5, prefix)
    half_reach = summarise_code_runs([_run(True, prefix)] * 4 + [_run(False, prefix[:2])] * 4, prefix)
    assert round_passes(early_deaths, 0.9) and not round_passes(early_deaths, 0.9, whole_chain=True)
    assert round_passes(half_reach, 0.9, whole_chain=True)  # 4 of 4 that reached it, 4 of 8 over all runs
    half_missing = summarise_code_runs([_run(True, prefix)] * 2 + [_run(False, prefix)] * 2
                                       + [_run(False, prefix[:2])] * 4, prefix)
    assert not round_passes(half_missing, 0.9, whole_chain=True)  # half reached it, but 2 of 4 succeeded
    # no run reached it: no count over every run stands in for the runs that reached it (a reviewer's finding)
    none_reach = summarise_code_runs([_run(False, prefix[:2])] * 8, prefix)
    assert runs_reaching(none_reach) == 0 and not reached_by_enough_runs(none_reach)
    assert not round_passes(none_reach, 0.9, whole_chain=True)
    plan = [{"name": name} for name in [*prefix, "make_stone_pickaxe"]]
    skills = {name: {"kind": "code", "task": name, "entry": name, "rate_source": "code_tests",
                     "sources": [f"def {name}(game):\n    yield 'do'\n"]} for name in prefix}
    last = {"plan": plan, "subtask_index": 4, "skills": skills}
    assert ends_the_chain(last, "make_stone_pickaxe")
    assert not ends_the_chain({**last, "subtask_index": 3}, "make_stone_pickaxe")
    assert not ends_the_chain(last, "crafter_score")
    assert not ends_the_chain({**last, "skills": {}}, "make_stone_pickaxe")  # no earlier skill: every run reaches it
    assert pass_rule_text(8, 0.9, whole_chain=True) == (
        "the plan's last subtask (its chain is held-out play) meets the target 90% when 4+ of the 8 test runs reach "
        "your action after earlier skills and 7 of 8 of those succeed (or 6 of 7, 5 of 6, 4 of 5, 3 of 4). Until "
        "then the round comes back to you while revisions last; a repair must beat your best round's successes "
        "(else the critic judges, keeping the best)")
    # twice the seeds (nodes.fast.test_seed_count): the list's ends
    assert "8+ of the 16 test runs" in pass_rule_text(16, 0.9, whole_chain=True)
    assert "13 of 16 of those succeed (or 13 of 15, ..., 7 of 8)" in pass_rule_text(16, 0.9, whole_chain=True)
    assert "2+ of the 3 test runs" in pass_rule_text(3, 0.9, whole_chain=True)
    assert "2 of 3 of those succeed (or 2 of 2)" in pass_rule_text(3, 0.9, whole_chain=True)
    assert "held-out play" not in pass_rule_text(8, 0.9)


def _critic(result: dict) -> Critique:
    context = {"sub_action": {"name": "place_furnace", "kind": "code"}, "result": result, "target": 0.9,
               "inner_iter": 0, "max_inner_iters": 3, "best_by_kind": {}, "budget_left": 10_000,
               "min_train_steps": 1000}
    return ExpertModel().structured("critic", [], Critique, context)


def test_expert_critic_judges_code_on_the_runs_that_reached_its_start():
    prefix = ["collect_wood", "place_table", "make_wood_pickaxe", "collect_stone"]
    reports = [_run(True, prefix)] * 3 + [_run(False, prefix[:2])] * 5
    passed = _critic(summarise_code_runs(reports, prefix))
    assert passed.verdict == "pass" and passed.success_rate == 1.0
    assert "3 of 8 test runs that reached its start" in passed.feedback
    stuck = _critic(summarise_code_runs([_run(False, prefix[:1])] * 8, prefix))
    assert (stuck.verdict, stuck.move_to) == ("move", "rl") and "no test run reached its start" in stuck.feedback
    weak = _critic(summarise_code_runs([_run(True, prefix)] * 5 + [_run(False, prefix)] * 3, prefix))
    assert weak.verdict == "move" and "all 8 test runs reached its start" in weak.feedback


def test_a_skill_passes_on_the_rate_of_its_own_code():
    attempt = {"kind": "code", "success_rate": 0.25, "success_given_start": 1.0, "episodes": 8, "steps": 99}
    record = skill_from_attempt("make_iron_pickaxe", attempt, threshold=0.5)
    assert record["passing"] and record["success_rate"] == 0.25
    assert not skill_from_attempt("make_iron_pickaxe", {**attempt, "success_given_start": None}, 0.5)["passing"]


def test_critic_node_names_the_achievements_a_test_passes_through():
    state = _state_at("place_furnace")
    assert prerequisite_achievements(state) == ["collect_wood", "place_table", "make_wood_pickaxe", "collect_stone"]
    assert prerequisite_achievements(_state_at("collect_wood")) == []


def test_logs_show_the_rate_over_the_runs_that_reached_the_start():
    from nodes.attempt.results import rate_text

    assert rate_text({"success_rate": 0.375, "success_given_start": 1.0, "started": 3, "episodes": 8}) == \
        "38% (3 of 8 reached its start: 100%)"
    assert rate_text({"success_rate": 0.875, "success_given_start": 0.875, "started": 8, "episodes": 8}) == "88%"
    assert rate_text({"success_rate": 0.4}) == "40%"


def test_a_test_runs_as_long_as_the_longest_limit_of_the_skills_it_replays():
    """A furnace tested after the iron (graph rules 18) runs as long as the iron's tests: its own 3,000 steps would
    cut short the runs whose iron took long. A score plan replays only what the furnace needs: its own limit."""
    from envs.tasks import TASKS
    from nodes.fast import test_max_steps
    from nodes.settings import RunSettings

    furnace = {**_state_at("place_furnace"), "task": "make_iron_pickaxe"}
    assert TASKS["place_furnace"].max_steps < TASKS["collect_iron"].max_steps
    assert test_max_steps(RunSettings(), furnace) == TASKS["collect_iron"].max_steps
    assert test_max_steps(RunSettings(), {**furnace, "task": "crafter_score"}) == TASKS["place_furnace"].max_steps
    assert test_max_steps(RunSettings(test_max_steps=123), furnace) == 123
