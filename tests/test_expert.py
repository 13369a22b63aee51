"""The offline expert's rules, the answer schemas and the prompt templates (no environment steps)."""

from __future__ import annotations

import time

import pytest
from pydantic import ValidationError

from nodes.attempt.results import summarise_code_runs
from nodes.models.base import AgentModel
from nodes.models.expert import ExpertError, ExpertModel
from nodes.recipes import backward_chain
from nodes.schemas import (
    Critique,
    Decomposition,
    Plan,
    SubAction,
    Subtask,
    TrainPolicy,
    configure_rl_answer,
    write_code_answer,
)
from prompts.templates import messages_for
from sandbox import check_source
from sandbox.loader import load_coded_actions


def _plan(model, task, **extra):
    return model.structured("planner", [], Plan, {"task": task, **extra})


def _decompose(model, subtask, template, previous=None, critique=None):
    return model.structured("slow", [], Decomposition, {
        "subtask": {"name": subtask}, "template": template, "previous": previous, "critique": critique})


def _critic_context(kind, result, inner=0, max_inner=3, best=None, budget=10_000):
    return {"sub_action": {"name": "collect_wood", "kind": kind}, "result": result, "target": 0.9,
            "inner_iter": inner, "max_inner_iters": max_inner, "best_by_kind": best or {},
            "budget_left": budget, "min_train_steps": 1000}


WOOD_TEMPLATE = {"kind": "collect", "target": "tree", "item": "wood"}


def test_expert_is_an_agent_model_with_zero_token_usage():
    model = ExpertModel()
    assert isinstance(model, AgentModel)
    _plan(model, "collect_wood")
    usage = model.usage.to_dict()
    assert usage == {"planner": {"calls": 1, "retries": 0, "prompt_tokens": 0, "completion_tokens": 0}}


def test_planner_chains_backward_over_recipes():
    plan = _plan(ExpertModel(), "make_wood_pickaxe")
    assert [s.name for s in plan.subtasks] == ["collect_wood", "place_table", "make_wood_pickaxe"]
    diamond = backward_chain("collect_diamond")
    assert diamond[0] == "collect_wood" and diamond[-1] == "collect_diamond"
    for before, after in [("make_wood_pickaxe", "collect_stone"), ("make_stone_pickaxe", "collect_iron"),
                          ("place_furnace", "make_iron_pickaxe"), ("collect_coal", "make_iron_pickaxe")]:
        assert diamond.index(before) < diamond.index(after)


def test_replan_keeps_a_skill_that_ever_worked_and_gives_up_otherwise():
    model = ExpertModel()
    remaining = [{"name": "place_table", "goal": "g", "success_condition": "c"},
                 {"name": "make_wood_pickaxe", "goal": "g", "success_condition": "c"}]
    kept = _plan(model, "make_wood_pickaxe", failed={"subtask": "place_table", "best_rate": 0.25}, remaining=remaining)
    assert [s.name for s in kept.subtasks] == ["place_table", "make_wood_pickaxe"] and "25%" in kept.reason
    gave_up = _plan(model, "make_wood_pickaxe", failed={"subtask": "place_table", "best_rate": 0.0},
                    remaining=remaining)
    assert gave_up.subtasks == []


def test_slow_starts_with_code_and_moves_to_rl_only_when_the_critic_says_so():
    model = ExpertModel()
    first = _decompose(model, "collect_wood", WOOD_TEMPLATE)
    assert [(a.name, a.kind) for a in first.sub_actions] == [("collect_wood", "code")]
    revise = {"sub_action": "collect_wood", "verdict": "revise", "success_rate": 0.5, "feedback": "x", "move_to": None}
    same = _decompose(model, "collect_wood", WOOD_TEMPLATE, first.model_dump(), revise)
    assert [(a.name, a.kind) for a in same.sub_actions] == [("collect_wood", "code")]
    move = {"sub_action": "collect_wood", "verdict": "move", "success_rate": 0.5, "feedback": "x", "move_to": "rl"}
    moved = _decompose(model, "collect_wood", WOOD_TEMPLATE, first.model_dump(), move)
    kinds = [(a.name, a.kind) for a in moved.sub_actions]
    assert kinds == [("explore", "code"), ("collect_wood", "code"), ("collect_wood_policy", "rl")]
    assert moved.sub_actions[-1].coded_actions == ["explore", "collect_wood"]
    assert "50%" in moved.sub_actions[-1].reason


def test_slow_learns_what_no_template_covers():
    d = _decompose(ExpertModel(), "eat_cow", None)
    assert [a.kind for a in d.sub_actions] == ["code", "rl"]


def test_a_fight_is_coded_from_the_defeat_example_and_wins_it_in_play():
    """defeat_<creature> has a few-shot example: the expert codes the fight (it learned it before), the score
    plan puts the fights after the rest of the coded achievements (they want the swords; the ripe plant's wait
    goes between them) and before what is learned, and the filled code, played by the chain, kills a zombie on
    unseen training worlds."""
    from envs.seeds import train_seeds
    from nodes.recipes import LAST_CODED, score_order, template_for
    from prompts.fewshot import chain_source, fill
    from tools.run_code import run_code

    template = template_for("defeat_skeleton")
    assert template == {"kind": "defeat", "target": "skeleton"}
    d = _decompose(ExpertModel(), "defeat_skeleton", template)
    assert [(a.name, a.kind, a.template, a.target) for a in d.sub_actions] == [
        ("defeat_skeleton", "code", "defeat", "skeleton")]
    order = score_order()
    coded = [a for a in order if template_for(a) is not None and a not in LAST_CODED]
    learned = [a for a in order if template_for(a) is None]
    assert LAST_CODED == ("defeat_zombie", "eat_plant", "defeat_skeleton")
    assert order == coded + list(LAST_CODED) + learned
    source = fill("defeat", target="zombie")
    assert '"skeleton"' not in source and fill("defeat", target="skeleton").count('"skeleton"') == 3
    program = chain_source({"defeat_zombie": source, "explore": fill("explore")}, ["defeat_zombie"], 1000)
    reports = [run_code(program, task="defeat_zombie", seed=s, max_steps=1000) for s in train_seeds(3, offset=8400)]
    assert [(r.ended, r.task_success) for r in reports] == [("success", True)] * 3, [r.error for r in reports]


def _code_result(ok, n=8, outcomes=None, errors=()):
    return {"kind": "code", "episodes": n, "successes": ok, "success_rate": ok / n,
            "outcomes": outcomes or {"ok": ok, "no_action": n - ok}, "errors": list(errors)}


def test_critic_moves_code_that_cannot_act_to_rl_and_passes_good_code():
    model = ExpertModel()
    moved = model.structured("critic", [], Critique, _critic_context("code", _code_result(5)))
    assert (moved.verdict, moved.move_to) == ("move", "rl")
    assert "5/8" in moved.feedback and "3 did nothing" in moved.feedback
    passed = model.structured("critic", [], Critique, _critic_context("code", _code_result(8)))
    assert passed.verdict == "pass" and passed.move_to is None


def test_critic_asks_to_fix_erroring_code_while_inner_iterations_remain():
    model = ExpertModel()
    result = _code_result(2, outcomes={"ok": 2, "runtime": 6}, errors=["seed 1: line 3: NameError: x"])
    assert model.structured("critic", [], Critique, _critic_context("code", result)).verdict == "revise"
    last = model.structured("critic", [], Critique, _critic_context("code", result, inner=3, max_inner=3))
    assert last.verdict == "move"


def test_critic_trains_longer_while_rl_improves_then_keeps_the_better_kind():
    model = ExpertModel()
    rl = {"kind": "rl", "ok": True, "success_rate": 0.6}
    assert model.structured("critic", [], Critique, _critic_context("rl", rl)).verdict == "revise"
    stalled = _critic_context("rl", rl, best={"rl_before": 0.7, "code": 0.75})
    verdict = model.structured("critic", [], Critique, stalled)
    assert verdict.verdict == "fail" and "75%" in verdict.feedback
    poor = _critic_context("rl", rl, budget=500)
    assert model.structured("critic", [], Critique, poor).verdict == "fail"


def _fast_context(sub_action, **extra):
    limits = {"test_seeds": 3, "max_steps_per_test": 500, "budget_left": 3000, "revision": 0, "max_revisions": 3}
    return {"subtask": "collect_wood", "sub_action": sub_action, "sources": {}, "prefix": [],
            "limits": {**limits, **extra.pop("limits", {})}, **extra}


def _rl(**over):
    return {"coded_actions": ["explore", "collect_wood"], "train_steps": 5000, "min_train_steps": 1000,
            "max_train_steps": 3000, "subtasks_left": 1, "previous_train_steps": None, "revise": False, **over}


def test_fast_writes_the_filled_example_as_one_coded_action():
    model = ExpertModel()
    first = _decompose(model, "collect_wood", WOOD_TEMPLATE).model_dump()["sub_actions"][0]
    schema = write_code_answer("collect_wood")
    ai = model.tool_call("fast", [], [schema], _fast_context(first))
    (call,) = ai.tool_calls
    assert call["name"] == "WriteCode"
    answer = schema.model_validate(call["args"])  # the same validation a model's answer goes through
    check_source(answer.code)
    assert [a.name for a in load_coded_actions(answer.code)] == ["collect_wood"]


def test_library_chains_prior_skills_into_the_test_program():
    from nodes.models.expert import write_source
    from nodes.skills import pool as code_pool

    pool = code_pool.pool_from([write_source({"template": "collect", "target": "tree", "item": "wood"}),
                                 write_source({"template": "place", "item": "table"})])
    code, action = code_pool.test_program(pool, ["collect_wood"], ["place_table"], 500)
    assert action is None
    names = [a.name for a in load_coded_actions(code)]
    assert names[-1] == "main" and {"collect_wood", "place_table", "explore", "stay_alive"} <= set(names)
    assert code.index("(collect_wood, 'collect_wood'") < code.index("(place_table, 'place_table'")
    alone, action = code_pool.test_program(pool, [], ["collect_wood"], 500)
    assert action == "collect_wood" and [a.name for a in load_coded_actions(alone)] == ["collect_wood"]


def test_library_makes_each_action_head_entry_self_contained():
    from nodes.skills import pool as code_pool

    pool = code_pool.pool_from(['def helper(game):\n    yield "noop"\n',
                                 '@coded_action(max_steps=9)\ndef act(game):\n    yield from helper(game)\n'])
    (source,) = code_pool.action_head_sources(pool, ["act"])
    actions = load_coded_actions(source)
    assert [a.name for a in actions] == ["act"] and actions[0].max_steps == 9


def test_fast_configures_then_trains_a_learned_sub_action():
    model = ExpertModel()
    policy = {"name": "collect_wood_policy", "kind": "rl", "coded_actions": ["explore", "collect_wood"]}
    schema = configure_rl_answer(["explore", "collect_wood"], 1000, 3000)
    ai = model.tool_call("fast", [], [schema], _fast_context(policy, rl=_rl()))
    (call,) = ai.tool_calls
    args = schema.model_validate(call["args"])
    assert call["name"] == "ConfigureRL" and args.coded_actions == ["explore", "collect_wood"]
    assert args.total_steps == 3000  # train_steps capped by the budget left
    train = model.tool_call("fast", [], [TrainPolicy], _fast_context(policy, rl=_rl()))
    assert train.tool_calls[0]["name"] == "TrainPolicy"
    longer = model.tool_call("fast", [], [configure_rl_answer(["explore"], 1000, 10_000)], _fast_context(
        policy, rl=_rl(previous_train_steps=1000, revise=True, max_train_steps=10_000),
        limits={"budget_left": 10_000}))
    assert longer.tool_calls[0]["args"]["total_steps"] == 2000


def _last(code, per_seed, max_steps=100):
    return {"sub_action": "collect_wood", "code": code, "max_steps": max_steps, "report": "...",
            "result": {"per_seed": per_seed}}


def test_expert_repairs_by_the_failure_the_report_names():
    from nodes.models.expert import write_source

    code = write_source({"template": "collect", "target": "tree", "item": "wood"})
    sub = {"name": "collect_wood", "template": "collect", "item": "wood"}
    model = ExpertModel()
    out_of_steps = [{"success": False, "ended": "out_of_steps"}] * 3
    call = model.tool_call("fast", [], [write_code_answer("collect_wood")],
                           _fast_context(sub, last_attempt=_last(code, out_of_steps)))
    assert call.tool_calls[0]["args"]["max_steps"] == 200 and call.tool_calls[0]["args"]["code"] == code
    nothing_in_view = [{"success": False, "failure": "precondition", "ended": "precondition"}] * 2
    call = model.tool_call("fast", [], [write_code_answer("collect_wood")],
                           _fast_context(sub, last_attempt=_last(code, nothing_in_view)))
    repaired = call.tool_calls[0]["args"]["code"]
    actions = {a.name: a for a in load_coded_actions(repaired)}
    assert actions["collect_wood"].precondition is None and "collect_wood_here" in actions  # explores first
    died = [{"success": False, "ended": "died", "death_cause": "zombie"}] * 3
    call = model.tool_call("fast", [], [write_code_answer("collect_wood")],
                           _fast_context(sub, last_attempt=_last(code, died)))
    assert call.tool_calls[0]["args"]["code"] == code  # no rule: unchanged (the graph will not retest it)


def test_a_death_after_the_item_was_made_is_not_read_as_a_lacking_material():
    """A code test plays on past the achievement: a seed that made its pickaxe and then died holds no wood
    any more, and that is not a reason to gather wood first."""
    from nodes.models.expert import write_source

    code = write_source({"template": "make", "item": "wood_pickaxe", "name": "make_wood_pickaxe"})
    sub = {"name": "make_wood_pickaxe", "template": "make", "item": "wood_pickaxe"}
    context = {"sources": {"collect_wood": write_source({"template": "collect", "target": "tree", "item": "wood"})}}
    lacking = [{"success": False, "ended": "action_returned", "inventory_after": {"wood": 0}}] * 2
    named = {"sub_action": "make_wood_pickaxe"}
    call = ExpertModel().tool_call("fast", [], [write_code_answer("make_wood_pickaxe")],
                                   _fast_context(sub, last_attempt={**_last(code, lacking), **named}, **context))
    assert "make_wood_pickaxe_here" in call.tool_calls[0]["args"]["code"]  # the rule fires: gather first
    made_then_died = [{**lacking[0], "ended": "died", "success_step": 40}] * 2
    call = ExpertModel().tool_call("fast", [], [write_code_answer("make_wood_pickaxe")],
                                   _fast_context(sub, last_attempt={**_last(code, made_then_died), **named},
                                                 **context))
    assert call.tool_calls[0]["args"]["code"] == code


def test_a_collect_action_that_returns_empty_handed_is_called_again():
    """A sapling drops on one grass hit in ten: the filled collect example (5 hits a call) often returns
    without one. The repair calls it again until it gets one, which its tests then show."""
    from nodes.models.expert import write_source
    from tools.run_code import run_code

    code = write_source({"template": "collect", "target": "grass", "item": "sapling"})
    sub = {"name": "collect_sapling", "template": "collect", "target": "grass", "item": "sapling"}
    returned = [{"success": False, "ended": "action_returned"}] * 3
    call = ExpertModel().tool_call("fast", [], [write_code_answer("collect_sapling")],
                                   _fast_context(sub, last_attempt={**_last(code, returned),
                                                                    "sub_action": "collect_sapling"}))
    repaired = call.tool_calls[0]["args"]["code"]
    assert "collect_sapling_once" in repaired and "again" in call.content

    def wins(source):
        return sum(run_code(source, task="collect_sapling", seed=s, max_steps=400, action="collect_sapling")
                   .task_success for s in range(6))

    assert wins(repaired) >= 5 > wins(code)


def test_expert_refuses_roles_and_tools_it_has_no_rule_for():
    model = ExpertModel()
    with pytest.raises(ExpertError, match="no rule"):
        model.structured("fast", [], Plan, {})
    first = _decompose(model, "collect_wood", WOOD_TEMPLATE).model_dump()["sub_actions"][0]
    from tools.rl_tools import train_ppo_tool

    with pytest.raises(ExpertError, match="WriteCode"):
        model.tool_call("fast", [], [train_ppo_tool], _fast_context(first))


def test_schemas_reject_what_nodes_cannot_use():
    with pytest.raises(ValidationError, match="move_to"):
        Critique(sub_action="a", verdict="move", success_rate=0.1, feedback="f")
    with pytest.raises(ValidationError, match="unknown task"):
        Subtask(name="collect_unobtainium", goal="g", success_condition="c")
    with pytest.raises(ValidationError):
        SubAction(name="Not A Name", kind="code", reason="r")
    assert len(SubAction(name="x", kind="code", reason="r" * 999).reason) == 300  # prose is cut, not refused
    with pytest.raises(ValidationError, match="unique"):
        Decomposition(subtask="collect_wood", sub_actions=[SubAction(name="a", kind="code", reason="r")] * 2)
    assert Subtask(name="harvest log", goal="g", success_condition="c").name == "collect_wood"


def test_code_run_summary_counts_outcomes():
    reports = [{"seed": 1, "task_success": True, "steps": 5}, {"seed": 2, "task_success": False, "steps": 0},
               {"seed": 3, "task_success": False, "steps": 9, "failure_kind": "runtime", "error": "boom"}]
    s = summarise_code_runs(reports)
    assert (s["successes"], s["steps"], s["outcomes"]) == (1, 14, {"no_action": 1, "ok": 1, "runtime": 1})
    assert s["errors"] == ["seed 3: boom"]


def test_prompts_render_the_same_facts_the_expert_gets():
    critic = messages_for("critic", {"subtask": "collect_wood", **_critic_context("code", _code_result(5))})
    assert "0.625" in critic[1].content
    with pytest.raises(ValueError, match="unknown role"):
        messages_for("boss", {})


def _failed_state(rate):
    from nodes.state import initial_state

    state = initial_state("place_table", "place table", 10_000)
    state.update(plan=[{"name": "collect_wood", "goal": "g", "success_condition": "c"},
                       {"name": "place_table", "goal": "g", "success_condition": "c"}],
                 subtask_index=1, started_at=time.time(),
                 failed={"subtask": "place_table", "best_rate": rate, "feedback": "f"},
                 best={"place_table": {"kind": "code", "success_rate": rate, "episodes": 8, "steps": 40,
                                       "sources": ["def place_table(game):\n    yield 'noop'\n"],
                                       "entry": "place_table"}})
    return state


def _runtime(settings):
    from types import SimpleNamespace

    from nodes.context import RunContext

    return SimpleNamespace(context=RunContext(settings=settings, model=ExpertModel()))


def test_planner_node_keeps_a_sometimes_working_skill_or_stops():
    from nodes.executor import chain_skills
    from nodes.limits import MIN_TRAIN_STEPS
    from nodes.planner import planner
    from nodes.settings import RunSettings

    settings = RunSettings(task="place table")
    # the failed subtask is the plan's last: kept only where the budget cannot pay for another try; else tried
    # again, its best attempt what held-out play falls back on (nodes.executor.chain_skills)
    broke = {**_failed_state(0.25), "env_steps_spent": 10_000 - MIN_TRAIN_STEPS + 1}
    kept = planner(broke, _runtime(settings))
    assert kept.goto == "subtask"
    assert kept.update["subtask_index"] == 2 and kept.update["replans"] == 1
    assert kept.update["skills"]["place_table"]["success_rate"] == 0.25
    assert kept.update["skills"]["place_table"]["passing"] is False
    retried = planner(_failed_state(0.25), _runtime(settings))
    assert retried.goto == "subtask" and "subtask_index" not in retried.update and "skills" not in retried.update
    assert [s["name"] for s in retried.update["plan"]] == ["collect_wood", "place_table"]
    assert chain_skills({**_failed_state(0.25), **retried.update}, 0.5)["place_table"]["success_rate"] == 0.25
    # with a later subtask after it, the best attempt is kept and the run goes on
    pickaxe = {"name": "make_wood_pickaxe", "goal": "g", "success_condition": "c"}
    more = {**_failed_state(0.25), "task": "make_wood_pickaxe", "plan": [*_failed_state(0.25)["plan"], pickaxe]}
    on = planner(more, _runtime(settings.model_copy(update={"task": "make_wood_pickaxe"})))
    assert on.update["subtask_index"] == 2 and on.update["skills"]["place_table"]["success_rate"] == 0.25
    # a re-plan that gives up while the budget lasts: the task itself, learned, once per run
    learned = planner(_failed_state(0.0), _runtime(settings))
    assert learned.goto == "subtask" and learned.update["forced_rl"] == "place_table"
    assert learned.update["plan"][-1]["name"] == "place_table"
    assert [e["type"] for e in learned.update["events"]] == ["fallback_plan"]
    again = {**_failed_state(0.0), "events": learned.update["events"]}
    stopped = planner(again, _runtime(settings))
    assert stopped.goto == "executor" and "gave up" in stopped.update["stop_reason"]
    # past the re-plan limit, the budget still goes to the task (a SmolLM2 run stopped at 4,000 of 100,000
    # steps): the task itself, learned, once per run; then the run stops
    no_replans = _runtime(settings.model_copy(update={"max_replans": 0}))
    limited = planner(_failed_state(0.25), no_replans)
    assert limited.goto == "subtask" and limited.update["forced_rl"] == "place_table"
    assert "re-plan limit" in limited.update["events"][0]["reason"]
    limited_again = planner({**_failed_state(0.25), "events": limited.update["events"]}, no_replans)
    assert limited_again.goto == "executor" and "re-plan limit" in limited_again.update["stop_reason"]
    spent = planner({**_failed_state(0.25), "env_steps_spent": 10_000 - MIN_TRAIN_STEPS + 1}, no_replans)
    assert spent.goto == "executor" and "re-plan limit" in spent.update["stop_reason"]
    # a subtask before the task that failed there but sometimes succeeded stays, as its best attempt, as a
    # re-plan keeps it: the task is learned after it (a reviewer's finding); one that never succeeded does not
    before = {**more, "failed": {"subtask": "place_table", "best_rate": 0.25, "feedback": "f"}}
    pickaxe_settings = settings.model_copy(update={"task": "make_wood_pickaxe", "max_replans": 0})
    after = planner(before, _runtime(pickaxe_settings))
    assert [s["name"] for s in after.update["plan"]] == ["collect_wood", "place_table", "make_wood_pickaxe"]
    assert after.update["subtask_index"] == 2 and after.update["forced_rl"] == "make_wood_pickaxe"
    assert after.update["skills"]["place_table"]["success_rate"] == 0.25
    assert after.update["events"][0]["kept"] == "place_table"
    never = {**before, "best": {"place_table": {**before["best"]["place_table"], "success_rate": 0.0}}}
    dropped = planner(never, _runtime(pickaxe_settings))
    assert [s["name"] for s in dropped.update["plan"]] == ["collect_wood", "make_wood_pickaxe"]
    assert dropped.update["subtask_index"] == 1 and "skills" not in dropped.update


def test_a_plan_ends_at_the_tasks_own_achievement():
    """A model's plan (or re-plan) that goes on past the task's achievement is cut there, and the event says what
    was dropped: a SmolLM2 re-plan of "harvest log" added place_furnace and spent the budget on it."""
    from types import SimpleNamespace

    from nodes.context import RunContext
    from nodes.planner import planner
    from nodes.schemas import Plan
    from nodes.settings import RunSettings
    from nodes.state import initial_state

    class Overreaching(ExpertModel):
        def structured(self, role, messages, schema, context=None):
            names = ("place_table", "place_furnace") if (context or {}).get("failed") else (
                "collect_wood", "place_table", "place_furnace")  # a re-plan answers from the failed subtask on
            return Plan(subtasks=[{"name": n, "goal": "g", "success_condition": "c"} for n in names], reason="r")

    runtime = SimpleNamespace(context=RunContext(settings=RunSettings(task="place table"), model=Overreaching()))
    fresh = planner(initial_state("place_table", "place table", 10_000), runtime)
    assert [s["name"] for s in fresh.update["plan"]] == ["collect_wood", "place_table"]
    assert fresh.update["events"][-1]["dropped_after_the_task"] == ["place_furnace"]
    replan = planner(_failed_state(0.25), runtime)  # the failed last subtask, tried again: nothing after it
    assert [s["name"] for s in replan.update["plan"]] == ["collect_wood", "place_table"]
    assert "skills" not in replan.update and replan.update["events"][-1]["dropped_after_the_task"] == ["place_furnace"]


def test_executor_gathers_what_a_coded_skill_lacks():
    """A table needs two wood; the wood skill stops after one. The executor's chain driver gathers."""
    from nodes.executor import evaluate_chain
    from prompts.fewshot import fill

    skills = {
        "collect_wood": {"kind": "code", "entry": "collect_wood",
                         "sources": [fill("collect", material="tree", item="wood"), fill("explore")]},
        "place_table": {"kind": "code", "entry": "place_table", "sources": [fill("place", item="table")]},
    }
    plan = [{"name": "collect_wood"}, {"name": "place_table"}]
    result = evaluate_chain("place_table", plan, skills, episodes=4, seed=0)
    assert result["ran"] and result["reached"]["place_table"] >= 3 and not result["errors"]



def test_the_evaluation_says_where_each_episode_that_missed_the_task_ended():
    """Each held-out episode that misses the task names the skill it ended in and how: the player died (and
    of what), the episode ran out of steps, or the next subtask has no skill; with the functions the code
    was in. Here the table skill only waits, so the player dies of what the night or thirst brings."""
    from graph.report import render_markdown
    from nodes.executor import evaluate_chain
    from prompts.fewshot import fill

    wood = {"kind": "code", "entry": "collect_wood",
            "sources": [fill("collect", material="tree", item="wood"), fill("explore")]}
    waiting = {"kind": "code", "entry": "place_table",
               "sources": ["def place_table(game):\n    while True:\n        yield from wait(game)\n",
                           "def wait(game):\n    yield 'noop'\n"]}
    plan = [{"name": "collect_wood"}, {"name": "place_table"}]
    died = evaluate_chain("place_table", plan, {"collect_wood": wood, "place_table": waiting}, episodes=2, seed=0,
                          record=False, max_steps=5000)
    assert died["outcomes"] == [0, 0] and len(died["endings"]) == 2
    for ending in died["endings"]:
        assert ending["subtask"] == "place_table" and ending["how"].startswith("died: ")
        assert ending["in"].endswith("place_table > wait") and 0 < ending["step"] < 5000
    assert sum(row["episodes"] for row in died["ended"]) == 2

    # a skill whose call goes on after its achievement (as a sword follows a pickaxe) and dies there: it is the
    # skill the episode ended in, not the next one, which never played
    lingering = {"kind": "code", "entry": "wood_then_wait", "sources": [
        *wood["sources"], "def wood_then_wait(game):\n    while 'collect_wood' not in game.achievements:\n"
        "        yield from collect_wood(game)\n        yield from explore(game)\n    while True:\n"
        "        yield 'noop'\n"]}
    after = evaluate_chain("place_table", plan, {"collect_wood": lingering, "place_table": waiting}, episodes=1,
                           seed=0, record=False, max_steps=5000)
    assert after["reached"]["collect_wood"] == 1
    [ending] = after["endings"]
    assert ending["subtask"] == "collect_wood" and ending["how"].startswith("died: ")
    assert ending["in"].endswith("wood_then_wait")

    short = evaluate_chain("place_table", plan, {"collect_wood": wood, "place_table": waiting}, episodes=1, seed=0,
                           record=False, max_steps=60)
    assert [(e["subtask"], e["how"], e["step"]) for e in short["endings"]] == [
        ("place_table", "out of episode steps", 60)]

    missing = evaluate_chain("place_table", plan, {"collect_wood": wood}, episodes=1, seed=0, record=False)
    assert missing["outcomes"] == [0]
    assert [(e["subtask"], e["how"]) for e in missing["endings"]] == [("place_table", "no skill for it")]

    report = {"run_id": "r", "task_text": "place a table", "task": "place_table", "env": "crafter", "model": "m",
              "status": "finished", "stop_reason": "", "env_steps": {"spent": 0, "budget": 1, "evaluation": 0},
              "wall_s": 0.0, "evaluation": died, "subtasks": [], "moves": [], "usage": {},
              "skills": {"library": "l", "skills": []}}
    text = render_markdown(report)
    assert "Where the 2 of 2 held-out episodes that missed the task ended" in text
    assert f"| place_table | {died['ended'][0]['how']} |" in text and "place_table > wait`" in text


def test_an_ending_names_the_first_thing_that_ended_the_episode():
    """A death outranks everything (the step that killed the player may also have unlocked the achievement);
    then the episode's step limit, a missing skill, the code's error, and a skill that just stopped."""
    from types import SimpleNamespace

    from nodes.executor import _ending

    def env(cause=None, step=10):
        return SimpleNamespace(death_cause=cause, max_steps=100, game=SimpleNamespace(step_count=step))

    assert _ending(env("zombie", 100), "collect_iron", "boom", "main", missing=True)["how"] == "died: zombie"
    assert _ending(env(step=100), "collect_iron", "boom", missing=True)["how"] == "out of episode steps"
    assert _ending(env(), "collect_iron", "boom", missing=True)["how"] == "no skill for it"
    assert _ending(env(), "collect_iron", "line 3 in f: KeyError")["how"] == "code error"
    ended = _ending(env(step=42), "collect_iron", None, "main > collect_iron")
    assert ended == {"subtask": "collect_iron", "how": "stopped without the achievement", "step": 42,
                     "in": "main > collect_iron"}


def test_executor_places_a_station_next_to_what_later_subtasks_need():
    """Each skill plays alone, so the furnace step must know that the iron pickaxe, made next to a
    table and a furnace, comes later: the furnace then goes beside the table."""
    from nodes.executor import _load_chain
    from prompts.fewshot import fill

    templates = {"collect_stone": ("collect", {"material": "stone", "item": "stone"}),
                 "place_table": ("place", {"item": "table"}), "place_furnace": ("place", {"item": "furnace"}),
                 "make_iron_pickaxe": ("make", {"item": "iron_pickaxe"})}
    skills = {n: {"kind": "code", "entry": n, "sources": [fill(kind, **params)]}
              for n, (kind, params) in templates.items()}
    chain = _load_chain([{"name": n} for n in templates], skills, seed=0)
    furnace = next(step for step in chain if step.subtask == "place_furnace")
    assert furnace.entry == "play_place_furnace"
    assert "'place_furnace': ['table']" in furnace.source
    alone = _load_chain([{"name": n} for n in list(templates)[:3]], skills, seed=0)[-1]
    assert "place_near = {}" in alone.source  # no iron pickaxe later: placed anywhere


# ---- the Crafter-score task: a plan over every achievement ------------------------------------
def test_the_score_plan_lists_every_achievement_once_after_its_prerequisites():
    from envs.tasks import ACHIEVEMENTS, TASKS

    names = [s.name for s in _plan(ExpertModel(), "crafter_score").subtasks]
    assert sorted(names) == sorted(ACHIEVEMENTS)
    for i, name in enumerate(names):
        assert set(TASKS[name].prerequisites) <= set(names[:i]), name
    # coded achievements (a few-shot example covers them) come before the ones the expert learns
    from nodes.recipes import template_for

    learned = [i for i, n in enumerate(names) if template_for(n) is None]
    assert learned == list(range(len(names) - len(learned), len(names)))
    assert names.index("collect_sapling") < names.index("collect_iron")  # shallow before deep


def _score_state(rate):
    from nodes.state import initial_state

    names = ["collect_sapling", "place_plant", "collect_wood", "eat_plant", "place_table"]
    state = initial_state("crafter_score", "crafter score", 10_000)
    state.update(plan=[{"name": n, "goal": "g", "success_condition": "c"} for n in names], subtask_index=1,
                 started_at=time.time(), failed={"subtask": "place_plant", "best_rate": rate, "feedback": "f"},
                 best={"place_plant": {"kind": "code", "success_rate": rate, "episodes": 8, "steps": 40,
                                       "sources": ["def place_plant(game):\n    yield 'noop'\n"],
                                       "entry": "place_plant"}})
    return state


def test_a_score_plan_goes_on_without_a_failed_achievement_and_what_needs_it():
    from nodes.planner import planner
    from nodes.settings import RunSettings

    settings = RunSettings(task="crafter_score", max_replans=0)  # not a re-plan: no limit applies
    # never succeeded in its tests: what needs it is dropped (its tests could not get past it), but its best
    # attempt stays, to play last in held-out play, where it costs no achievement and may unlock its own
    never = planner(_score_state(0.0), _runtime(settings))
    assert never.goto == "subtask" and not never.update.get("stop_reason")
    assert [s["name"] for s in never.update["plan"]] == ["collect_sapling", "place_plant", "collect_wood",
                                                         "place_table"]
    assert never.update["subtask_index"] == 2 and never.update["skills"]["place_plant"]["success_rate"] == 0.0
    reason = never.update["events"][0]["reason"]
    assert "plays last in held-out play" in reason and "dropped eat_plant" in reason  # it needs the plant
    # an attempt that never ran (no code loaded) has nothing to play: dropped with what needs it
    unplayed = _score_state(0.0)
    unplayed["best"]["place_plant"]["sources"] = []
    dropped = planner(unplayed, _runtime(settings))
    assert [s["name"] for s in dropped.update["plan"]] == ["collect_sapling", "collect_wood", "place_table"]
    assert "place_plant" not in (dropped.update.get("skills") or {})
    assert "dropped place_plant, eat_plant" in dropped.update["events"][0]["reason"]
    took_no_step = _score_state(0.0)
    took_no_step["best"]["place_plant"]["steps"] = 0  # its code was refused before a step: nothing to play
    assert "place_plant" not in (planner(took_no_step, _runtime(settings)).update.get("skills") or {})
    kept = planner(_score_state(0.25), _runtime(settings))
    assert kept.update["subtask_index"] == 2 and kept.update["skills"]["place_plant"]["success_rate"] == 0.25
    assert "plan" not in kept.update


def test_a_score_task_plays_every_skill_and_scores_the_achievements():
    """A skill that fails does not end a score episode (it ends a chain): the later skills still play.
    The idle sapling skill explores for its whole step limit (500); the diamond one is not ready (no
    iron pickaxe) and is passed over; eat_cow has no skill."""
    from nodes.executor import evaluate_chain
    from prompts.fewshot import fill

    def idle(name):
        return {"kind": "code", "entry": name, "sources": [f"def {name}(game):\n    return\n    yield 'noop'\n"]}

    skills = {"collect_sapling": idle("collect_sapling"), "collect_diamond": idle("collect_diamond"),
              "collect_wood": {"kind": "code", "entry": "collect_wood",
                               "sources": [fill("collect", material="tree", item="wood"), fill("explore")]}}
    plan = [{"name": n} for n in ("collect_sapling", "collect_diamond", "eat_cow", "collect_wood")]
    # three episodes: most of them end at the first night, and only some get as far as the wood skill
    scored = evaluate_chain("crafter_score", plan, skills, episodes=3, seed=0, record=False, max_steps=1200)
    assert scored["ran"] and scored["missing"] == ["eat_cow"] and not scored["errors"]
    assert scored["reached"]["collect_diamond"] == 0 and scored["reached"]["collect_wood"] >= 1
    rates = scored["achievement_rates"]
    assert rates["collect_wood"] == pytest.approx(100.0 * scored["reached"]["collect_wood"] / 3)
    assert rates["collect_diamond"] == 0
    assert len(scored["achievements"]) == 3
    assert 0 < scored["crafter_score_ci95"][0] <= scored["crafter_score"] <= scored["crafter_score_ci95"][1]
    # where each episode that ended before the chain's last skill ended: a wood never reached is an episode that
    # died (or ran out of steps) earlier in the chain, in the skill then playing
    ended = [e for e in scored["endings"] if e is not None]
    assert len(scored["endings"]) == 3 and len(ended) >= 3 - scored["reached"]["collect_wood"]
    assert all(e["how"].startswith("died") or e["how"] == "out of episode steps" for e in ended)
    assert all(e["subtask"] in ("collect_sapling", "collect_wood") for e in ended)
    assert sum(r["episodes"] for r in scored["ended"]) == len(ended)
    chained = evaluate_chain("collect_wood", [{"name": "collect_diamond"}, {"name": "collect_wood"}], skills,
                             episodes=2, seed=0, record=False)
    assert chained["reached"] == {"collect_diamond": 0, "collect_wood": 0} and "crafter_score" not in chained


def test_the_pure_code_score_program_passes_over_a_failed_step():
    from envs.crafter_env import CrafterEnv
    from prompts.fewshot import chain_source, fill
    from sandbox import AgentCode

    # a sapling step that never collects one: 200 tries of one noop each, then the chain ends or goes on
    sources = {"collect_sapling": "def collect_sapling(game):\n    yield 'noop'\n",
               "collect_wood": fill("collect", material="tree", item="wood")}
    steps = ["collect_sapling", "collect_wood"]
    env = CrafterEnv(task="crafter_score", obs_kind="symbolic", max_steps=1500)
    for needs, wood in ((None, False), ({"collect_sapling": [], "collect_wood": []}, True)):
        with AgentCode([chain_source(sources, steps, 1500, needs=needs)]) as code:
            env.reset(seed=1)  # a world where the idle player survives the 200 noops
            code.execute(env, "main", max_steps=1500)
        assert "collect_sapling" not in env.game.achievements
        assert ("collect_wood" in env.game.achievements) is wood


def test_a_kept_attempt_that_never_succeeded_plays_last_with_its_own_code_and_never_stops_the_chain():
    """Its definitions stay out of the later subtasks' library (its stay_alive may be why it failed), held-out
    play puts it last, and a skill of a score chain that does not load is left out with an error."""
    from nodes.attempt.outcome import skill_from_attempt
    from nodes.executor import _load_chain, evaluate_chain
    from nodes.skills.records import solved_pool
    from prompts.fewshot import fill

    def attempt(name, rate, source):
        return skill_from_attempt(name, {"kind": "code", "success_rate": rate, "episodes": 8, "steps": 80,
                                         "entry": name, "sources": [source]}, 0.5)

    never = attempt("collect_sapling", 0.0, "def sapling_helper(game):\n    yield 'noop'\n\n\n"
                                             "def collect_sapling(game):\n    yield from sapling_helper(game)\n")
    wood = attempt("collect_wood", 1.0, fill("collect", material="tree", item="wood"))
    plan = [{"name": n} for n in ("collect_sapling", "collect_wood", "place_table")]
    state = {"plan": plan, "subtask_index": 2, "skills": {"collect_sapling": never, "collect_wood": wood}}
    pool = solved_pool(state)
    assert "collect_wood" in pool and "sapling_helper" not in pool and "collect_sapling" not in pool
    chain = _load_chain(plan[:2], state["skills"], seed=0, score=True)
    try:
        assert [s.subtask for s in chain] == ["collect_wood", "collect_sapling"]  # rate 0: last
        assert "sapling_helper" in chain[1].source  # its own code plays
    finally:
        for step in chain:
            step.close()
    broken = dict(never, sources=["def collect_sapling(game):\n    yield (\n"])
    result = evaluate_chain("crafter_score", plan[:2], {"collect_sapling": broken, "collect_wood": wood},
                            episodes=1, seed=0, record=False, max_steps=300)
    assert result["ran"] and result["chain"] == ["collect_wood:code"]
    assert any("collect_sapling does not load" in e for e in result["errors"])
