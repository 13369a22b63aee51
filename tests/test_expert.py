"""The offline expert's rules, the answer schemas and the prompt templates (no environment steps)."""

from __future__ import annotations

import time

import pytest
from pydantic import ValidationError

from nodes.attempts import split_functions, summarise_code_runs
from nodes.expert import ExpertError, ExpertModel
from nodes.models import AgentModel
from nodes.recipes import backward_chain
from nodes.schemas import Critique, Decomposition, Plan, SubAction, Subtask
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
    last = model.structured("critic", [], Critique, _critic_context("code", result, inner=2, max_inner=3))
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


def _fast_context(decomposition, **extra):
    return {"subtask": "collect_wood", "decomposition": decomposition, "test_seeds": [3, 4, 5],
            "test_max_steps": 500, "train_steps": 5000, "budget_left": 3000, "min_train_steps": 1000,
            "run_dir": "/tmp/x", "ppo_defaults": {"num_envs": 2}, **extra}


def test_fast_tests_filled_code_on_every_seed():
    model = ExpertModel()
    first = _decompose(model, "collect_wood", WOOD_TEMPLATE).model_dump()
    from tools.run_code import run_code_in_env

    ai = model.tool_call("fast", [], [run_code_in_env], _fast_context(first))
    assert [c["args"]["seed"] for c in ai.tool_calls] == [3, 4, 5]
    args = ai.tool_calls[0]["args"]
    assert args["action"] == "collect_wood" and args["task"] == "collect_wood"
    run_code_in_env.args_schema.model_validate(args)  # valid arguments for the real tool
    check_source(args["code"])
    assert [a.name for a in load_coded_actions(args["code"])] == ["collect_wood"]


def test_fast_chains_prior_skills_in_a_main_program():
    model = ExpertModel()
    table = _decompose(model, "place_table", {"kind": "place", "item": "table"}).model_dump()
    from nodes.expert import write_source

    prior = [{"subtask": "collect_wood", "kind": "code", "main": "collect_wood",
              "sources": [write_source({"template": "collect", "target": "tree", "item": "wood"})]}]
    ai = model.tool_call("fast", [], [_Named("run_code_in_env")],
                         _fast_context(table, subtask="place_table", prior_sources=prior))
    code = ai.tool_calls[0]["args"]["code"]
    assert "action" not in ai.tool_calls[0]["args"]
    names = [a.name for a in load_coded_actions(code)]
    assert names[-1] == "main" and {"collect_wood", "place_table", "explore", "stay_alive"} <= set(names)
    assert code.index("(collect_wood, 'collect_wood'") < code.index("(place_table, 'place_table'")
    assert {"collect_wood", "place_table", "main"} <= set(split_functions(code))


class _Named:
    def __init__(self, name):
        self.name = name


def test_fast_configures_then_trains_a_learned_sub_action():
    from rl.config import RLConfig

    model = ExpertModel()
    first = _decompose(model, "collect_wood", WOOD_TEMPLATE)
    move = {"sub_action": "collect_wood", "verdict": "move", "success_rate": 0.5, "feedback": "x", "move_to": "rl"}
    learned = _decompose(model, "collect_wood", WOOD_TEMPLATE, first.model_dump(), move).model_dump()
    tools = [_Named("configure_rl"), _Named("train_ppo")]
    ai = model.tool_call("fast", [], tools, _fast_context(learned))
    (call,) = ai.tool_calls
    assert call["name"] == "configure_rl"
    config = RLConfig.model_validate(call["args"]["rl_config"])
    assert config.coded_action_names() == ["explore", "collect_wood"]
    assert config.ppo.total_steps == 3000  # train_steps capped by the budget left
    assert config.eval_episodes == 0  # held-out seeds stay for the final evaluation
    train = model.tool_call("fast", [], tools, _fast_context(learned, configured=config.model_dump(mode="json")))
    assert train.tool_calls[0]["name"] == "train_ppo"
    revise = {"verdict": "revise"}
    longer = model.tool_call("fast", [], tools, _fast_context(learned, feedback=revise, previous_train_steps=1000,
                                                               budget_left=10_000))
    assert longer.tool_calls[0]["args"]["rl_config"]["ppo"]["total_steps"] == 2000


def test_expert_refuses_roles_and_tools_it_has_no_rule_for():
    model = ExpertModel()
    with pytest.raises(ExpertError, match="no rule"):
        model.structured("fast", [], Plan, {})
    first = _decompose(model, "collect_wood", WOOD_TEMPLATE).model_dump()
    with pytest.raises(ExpertError, match="run_code_in_env"):
        model.tool_call("fast", [], [_Named("train_ppo")], _fast_context(first))


def test_schemas_reject_what_nodes_cannot_use():
    with pytest.raises(ValidationError, match="move_to"):
        Critique(sub_action="a", verdict="move", success_rate=0.1, feedback="f")
    with pytest.raises(ValidationError, match="unknown task"):
        Subtask(name="collect_unobtainium", goal="g", success_condition="c")
    with pytest.raises(ValidationError):
        SubAction(name="x", kind="code", reason="r" * 301)
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
    fast = messages_for("fast", _fast_context({"subtask": "collect_wood", "sub_actions": []}))
    text = fast[1].content
    assert "def collect_wood(game)" in text and "[3, 4, 5]" in text  # few-shot examples and the seeds
    critic = messages_for("critic", _critic_context("code", _code_result(5)))
    assert "0.625" in critic[1].content
    with pytest.raises(ValueError, match="unknown role"):
        messages_for("boss", {})


def _failed_state(rate):
    from graph.state import initial_state

    state = initial_state("place_table", "place table", 10_000)
    state.update(plan=[{"name": "collect_wood", "goal": "g", "success_condition": "c"},
                       {"name": "place_table", "goal": "g", "success_condition": "c"}],
                 subtask_index=1, started_at=time.time(),
                 failed={"subtask": "place_table", "best_rate": rate, "feedback": "f"},
                 best={"place_table": {"kind": "code", "success_rate": rate, "episodes": 8, "steps": 40,
                                       "sources": ["def place_table(game):\n    yield 'noop'\n"],
                                       "entry": "place_table"}})
    return state


def test_planner_node_keeps_a_sometimes_working_skill_or_stops():
    from nodes.planner import make_planner
    from nodes.settings import RunSettings

    settings = RunSettings(task="place table")
    kept = make_planner(settings, ExpertModel())(_failed_state(0.25))
    assert kept["route"] == "subtask" and kept["subtask_index"] == 2 and kept["replans"] == 1
    assert kept["skills"]["place_table"]["success_rate"] == 0.25
    assert kept["skills"]["place_table"]["passing"] is False
    stopped = make_planner(settings, ExpertModel())(_failed_state(0.0))
    assert stopped["route"] == "executor" and "gave up" in stopped["stop_reason"]
    limited = make_planner(settings.model_copy(update={"max_replans": 0}), ExpertModel())(_failed_state(0.25))
    assert limited["route"] == "executor" and "re-plan limit" in limited["stop_reason"]


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
