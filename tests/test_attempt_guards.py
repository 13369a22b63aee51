"""What a model can answer and the graph must survive: names it may not use, decompositions the graph
extends, tools it was not offered, seeds for any run seed. No environment steps except where a run
is driven end to end."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage
from pydantic import ValidationError

from graph.builder import build_graph, run_config, run_context, start_state
from nodes.fast import code_test_seeds
from nodes.models.expert import ExpertModel
from nodes.schemas import MAX_SUB_ACTIONS, Decomposition, Plan, SubAction, configure_rl_answer
from nodes.settings import RunSettings
from nodes.slow import enforce_move


def _code(name: str) -> dict:
    return SubAction(name=name, kind="code", reason="r").model_dump()


def test_the_graphs_own_action_names_are_refused():
    for name in ("main", "reach_collect_wood", "play_place_table", "builtin_stay_alive"):
        with pytest.raises(ValidationError, match="the graph uses"):
            SubAction(name=name, kind="code", reason="r")


def test_a_plan_names_each_subtask_once():
    step = {"name": "collect_wood", "goal": "g", "success_condition": "c"}
    with pytest.raises(ValidationError, match="once"):
        Plan(subtasks=[step, step])


def test_an_empty_library_offers_no_action_head_names():
    schema = configure_rl_answer([], 1000, 5000)
    assert schema(coded_actions=[], total_steps=10).coded_actions == []
    with pytest.raises(ValidationError):
        schema(coded_actions=["explore"], total_steps=1000)


def test_a_forced_move_keeps_the_decomposition_valid():
    full = {"subtask": "collect_wood", "reason": "", "sub_actions": [_code(f"step{i}") for i in range(MAX_SUB_ACTIONS)]}
    moved, changed = enforce_move(full, "step7")
    assert changed and len(moved["sub_actions"]) == MAX_SUB_ACTIONS and moved["sub_actions"][-1]["kind"] == "rl"
    Decomposition.model_validate(moved)
    clash = {"subtask": "collect_wood", "reason": "", "sub_actions": [_code("collect_wood_policy")]}
    moved, _ = enforce_move(clash, "collect_wood_policy")
    names = [a["name"] for a in moved["sub_actions"]]
    assert len(set(names)) == 2 and moved["sub_actions"][-1]["coded_actions"] == ["collect_wood_policy"]


@pytest.mark.parametrize("seed", [0, 999, 1000, 999_999])
def test_code_test_seeds_stay_training_seeds_for_any_run_seed(seed):
    settings = RunSettings(seed=seed, test_episodes=8)
    for index in (0, 9, 19):
        seeds = code_test_seeds(settings, {"subtask_index": index})
        assert len(seeds) == 8 and all(0 <= s < 1_000_000 for s in seeds)


def test_the_plans_last_subtask_tests_on_twice_the_seeds_and_a_rewrite_needs_a_quarter_of_them():
    """The plan's last subtask of a one-achievement task replays the whole chain held-out play is: answerers'
    diamond rounds reached the action in 2 to 7 of 8 runs, so its rounds run on twice the seeds (training seeds,
    all different); a middle subtask keeps the run's. A chain helper's rewrite needs a quarter of the round's seeds
    more successes than the earlier one: 2 of 8, 4 of 16."""
    from nodes.attempt.rounds import _with_helpers_before
    from nodes.fast import test_ends_at_achievement, test_seed_count
    from prompts.fewshot import rewrite_margin

    settings = RunSettings(task="collect_coal")
    wood = {"kind": "code", "entry": "collect_wood", "sources": ["def collect_wood(game):\n    yield 'do'\n"]}
    last = {"plan": [{"name": "collect_wood"}, {"name": "collect_coal"}], "subtask_index": 1,
            "skills": {"collect_wood": wood}}
    middle = {**last, "plan": [*last["plan"], {"name": "collect_stone"}]}
    seeds = code_test_seeds(settings, last)
    assert test_seed_count(settings, last) == len(set(seeds)) == 16 and all(0 <= s < 1_000_000 for s in seeds)
    assert test_seed_count(settings, middle) == len(code_test_seeds(settings, middle)) == 8
    assert test_seed_count(RunSettings(task="collect_coal", test_episodes=3), last) == 6
    # a building block of a policy's head is only checked before the training: the run's count
    policy = {"decomposition": {"sub_actions": [{"name": "dig", "kind": "code"}, {"name": "learn", "kind": "rl"}]}}
    assert test_seed_count(settings, {**last, **policy}) == 8
    # the same tests end at the achievement, where held-out play counts the episode a success; the others play on
    assert [test_ends_at_achievement(settings, s) for s in (last, middle, {**last, **policy})] == [True, False, False]
    assert [rewrite_margin(n) for n in (1, 2, 8, 16)] == [1, 1, 2, 4]
    state = {"last_attempt": {"helpers_before": {"stay_alive": "the built-in"}, "rewrite_key": "k"}}
    for own, kept_by_the_earlier in ((11, True), (12, False)):
        result = {"successes": own, "episodes": 16, "sources": [], "helpers_before": {"successes": 8, "episodes": 16}}
        assert _with_helpers_before(state, result)["ranks_above"] is kept_by_the_earlier, own


class _CallsAnUnofferedTool(ExpertModel):
    """The expert, except that its fast agent calls train_ppo itself, with a run folder of its choice."""

    def tool_call(self, role, messages, tools, context=None):
        self.usage.record(role)
        return AIMessage(content="", tool_calls=[{"name": "train_ppo", "id": "x", "type": "tool_call",
                                                  "args": {"rl_config": {}, "run_dir": "/tmp/anywhere"}}])


def test_a_tool_the_fast_agent_was_not_offered_is_never_run(tmp_path):
    settings = RunSettings(task="harvest log", budget_steps=3000, test_episodes=2, eval_episodes=1,
                           max_outer_iters=1, out_dir=tmp_path / "runs", run_id="guard")
    final = build_graph().invoke(start_state(settings), config=run_config(settings),
                                 context=run_context(settings, _CallsAnUnofferedTool()))
    assert final["env_steps_spent"] == 0 and not (tmp_path / "anywhere").exists()
    errors = [e for r in final["results"] for e in r.get("errors", [])]
    assert any("unknown tool 'train_ppo'" in e for e in errors)
    assert final["report"] is not None  # the run went on to its report


class _GivesUpAndTrainsBriefly(ExpertModel):
    """A weak model: its plan is empty, its trainings as short as allowed, paid by Crafter's reward."""

    def __init__(self) -> None:
        super().__init__()
        self.fast_prompts: list[str] = []

    def structured(self, role, messages, schema, context=None):
        if role == "planner":
            self.usage.record(role)
            return Plan(subtasks=[], reason="no idea")
        return super().structured(role, messages, schema, context)

    def _configure_rl(self, c: dict) -> dict:
        self.fast_prompts.append(str(c))
        return {**super()._configure_rl(c), "total_steps": 1000, "reward": "crafter"}


def test_the_fallback_learns_the_task_with_the_budget_left_whatever_steps_the_model_asks(tmp_path):
    """The planner's fallback (the task itself, learned) is the graph's decision: so are its training length and,
    for a task that needs nothing before it, its reward, both said in the prompt before the answer; a weak
    model's 1,000 steps would leave the budget unspent, and Crafter's reward cost SmolLM2's "harvest log" about
    a third of its held-out successes (nodes.fast.fallback_reward)."""
    settings = RunSettings(task="harvest log", budget_steps=3000, test_episodes=2, eval_episodes=1,
                           max_outer_iters=1, out_dir=tmp_path / "runs", run_id="fallback")
    model = _GivesUpAndTrainsBriefly()
    final = build_graph().invoke(start_state(settings), config=run_config(settings),
                                 context=run_context(settings, model))
    assert [e["type"] for e in final["events"]][0] == "fallback_plan"
    trainings = [r for r in final["results"] if r["kind"] == "rl"]
    assert trainings and trainings[0]["steps"] >= 3000 - 500  # the budget left, not the 1,000 asked
    assert final["env_steps_spent"] <= 3000 + 512  # a rollout may finish its last option
    assert any("total_steps_set_by_the_graph" in p for p in model.fast_prompts)
    fits = [c for e in final["events"] if e["type"] == "budget_fit" for c in e["changes"]]
    left = 3000 - sum(r["steps"] for r in final["results"] if r["kind"] == "code")  # a head entry's test came first
    assert f"ConfigureRL: total_steps 1000 -> {left}" in fits
    assert any("reward_set_by_the_graph" in p for p in model.fast_prompts)
    trained = [c["config"] for c in final["rl_configs"] if c["sub_action"] == trainings[0]["sub_action"]]
    assert trained and {c["reward"] for c in trained} == {"task"}
    said = {"type": "fallback_reward", "subtask": "collect_wood", "asked": "crafter", "reward": "task"}
    assert said in final["events"]


def test_a_building_block_the_slow_agent_plans_anew_is_written_again_from_its_old_code():
    """Code written in an earlier outer iteration serves the plan it was written for: when the next
    decomposition asks something else of that sub-action, the fast agent is asked for it again and sees its
    old code; a sub-action planned as before keeps its code and is not asked again."""
    from nodes.attempt.rounds import plan_of
    from nodes.fast import SubtaskCode, _previous_attempt, pending_code
    from prompts.templates import messages_for

    walk = SubAction(name="walk_to_iron", kind="code", reason="walk to the nearest iron").model_dump()
    mine = SubAction(name="mine_iron", kind="code", reason="mine it").model_dump()
    old_walk = "def walk_to_iron(game):\n    yield 'noop'\n"
    state = {"plan": [{"name": "collect_iron", "goal": "g", "success_condition": "c"}], "subtask_index": 0,
             "skills": {}, "outer_iter": 1, "last_attempt": None,
             "decomposition": {"subtask": "collect_iron", "reason": "", "sub_actions": [walk, mine]},
             "code_versions": [{"subtask": "collect_iron", "sub_action": "walk_to_iron", "version": 1,
                                "source": old_walk, "plan": plan_of(walk), "outer_iter": 0}]}
    settings = RunSettings(task="collect_iron")
    lib = SubtaskCode(state, settings)
    assert [a["name"] for a in pending_code(state["decomposition"], lib)] == ["mine_iron"]  # same plan: kept
    avoid_lava = {**walk, "reason": "walk to the nearest iron, around lava"}
    state["decomposition"] = {**state["decomposition"], "sub_actions": [avoid_lava, mine]}
    lib = SubtaskCode(state, settings)
    assert [a["name"] for a in pending_code(state["decomposition"], lib)] == ["walk_to_iron", "mine_iron"]
    previous = _previous_attempt(state, "code", avoid_lava, lib)
    assert previous is not None and previous["code"] == old_walk and previous["replanned"]
    assert _previous_attempt({**state, "last_attempt": {"code": "x"}}, "code", avoid_lava, lib) is None
    context = {"subtask": "collect_iron", "mode": "code", "sub_action": avoid_lava,
               "decomposition": state["decomposition"], "library": [], "previous_attempt": previous}
    human = messages_for("fast", context)[-1].content
    assert "Your code of outer iteration 1, written before the slow agent changed its plan for `walk_to_iron`" in human
    assert old_walk.splitlines()[0] in human
    # a definition of it that a later answer (for mine_iron, in the next outer iteration) sent again is shown as
    # that answer wrote it, what the tests load (nodes.attempt.rounds.live_code): not the first version
    newer = "def walk_to_iron(game):\n    yield 'move_left'\n"
    later = {"subtask": "collect_iron", "sub_action": "mine_iron", "version": 2, "plan": plan_of(mine),
             "source": newer + "\n\ndef mine_iron(game):\n    yield 'do'\n", "outer_iter": 1}
    state["code_versions"] = [*state["code_versions"], later]
    lib = SubtaskCode(state, settings)
    previous = _previous_attempt(state, "code", avoid_lava, lib)
    assert previous is not None and previous["code"].strip() == newer.strip() and previous["outer_iter"] == 1


def test_the_helpers_of_a_sub_action_the_decomposition_dropped_are_said_to_be_unloaded():
    """Code belongs to its sub-action: when the slow agent drops one, its helpers leave the library with it. An
    answerer found `_dd_shelter` and two more gone from the listing without a word while its other code still
    called them; the prompt now names them (a rewrite of a built-in falls back to the built-in, still loaded)."""
    from nodes.fast import SubtaskCode, dropped_code
    from prompts.templates import messages_for

    survive = SubAction(name="stay_alive", kind="code", reason="survive").model_dump()
    mine = SubAction(name="mine_iron", kind="code", reason="mine it").model_dump()
    rewrite = ("def _dd_shelter(game):\n    yield 'noop'\n\n\ndef _dd_to_rock(game):\n    yield 'noop'\n\n\n"
               "def stay_alive(game):\n    yield from _dd_shelter(game)\n")
    state = {"plan": [{"name": "collect_iron", "goal": "g", "success_condition": "c"}], "subtask_index": 0,
             "skills": {}, "outer_iter": 1, "last_attempt": None,
             "decomposition": {"subtask": "collect_iron", "reason": "", "sub_actions": [survive, mine]},
             "code_versions": [{"subtask": "collect_iron", "sub_action": "stay_alive", "version": 1,
                                "source": rewrite, "outer_iter": 0},
                               {"subtask": "collect_iron", "sub_action": "mine_iron", "version": 2,
                                "source": "def mine_iron(game):\n    yield from _dd_to_rock(game)\n",
                                "outer_iter": 0}]}
    settings = RunSettings(task="collect_iron")
    assert dropped_code(state, SubtaskCode(state, settings), state["decomposition"]) == {}  # both still planned
    state["decomposition"] = {**state["decomposition"], "sub_actions": [mine]}
    lib = SubtaskCode(state, settings)
    unloaded = dropped_code(state, lib, state["decomposition"])
    assert unloaded == {"stay_alive": ["_dd_shelter", "_dd_to_rock"]}
    assert "_dd_to_rock" not in lib.pool and lib.pool.origin["stay_alive"]["kind"] == "built-in"
    context = {"subtask": "collect_iron", "mode": "code", "sub_action": mine, "unloaded": unloaded,
               "decomposition": state["decomposition"], "library": []}
    human = messages_for("fast", context)[-1].content
    said = "## Unloaded: code of sub-actions the decomposition dropped\n- `stay_alive`: _dd_shelter, _dd_to_rock"
    assert said in human
    # a helper sent only in an earlier version of the dropped sub-action left with it too
    first = {"subtask": "collect_iron", "sub_action": "stay_alive", "version": 0, "outer_iter": 0,
             "source": "def _dd_water(game):\n    yield 'noop'\n"}
    state["code_versions"] = [first, *state["code_versions"]]
    assert dropped_code(state, SubtaskCode(state, settings), state["decomposition"]) == {
        "stay_alive": ["_dd_water", "_dd_shelter", "_dd_to_rock"]}
    # a sub-action moved from code to rl under its name is still planned: its code is no dropped code
    learned = {**state, "decomposition": {**state["decomposition"], "sub_actions": [
        {**survive, "kind": "rl"}, mine]}}
    assert dropped_code(learned, SubtaskCode(learned, settings), learned["decomposition"]) == {}


def test_a_sub_action_that_replaces_a_built_in_or_a_helper_is_loaded_not_played_as_a_step():
    """Listing `stay_alive` or an earlier skill's helper (which may take more than `game`) rewrites that function;
    the test chain plays only the sub-actions that are steps, and the last one always."""
    from nodes.attempt.rounds import judged_functions, tested_actions

    subs = [_code("dig_route"), _code("stay_alive"), _code("collect_iron"), _code("collect_diamond")]
    decomposition = {"subtask": "collect_diamond", "reason": "", "sub_actions": subs}
    replaced = {"dig_route", "stay_alive", "explore"}
    assert tested_actions(decomposition, replaced) == ["collect_iron", "collect_diamond"]
    assert judged_functions(decomposition, replaced) == ["collect_iron", "collect_diamond"]
    assert tested_actions(decomposition) == ["dig_route", "stay_alive", "collect_iron", "collect_diamond"]
    drink = {"subtask": "collect_drink", "reason": "", "sub_actions": [_code("collect_drink")]}
    assert tested_actions(drink, {"collect_drink"}) == ["collect_drink"]  # the last one is the step under test


def test_an_earlier_skill_the_plan_names_is_said_to_play_as_it_is():
    """An answerer's plan listed collect_wood (solved earlier) to rewrite it; no call asked for it and "this one
    now" jumped past it. The fast prompt now says on its line that it is reused as it is, and how to change it."""
    from nodes.fast import SubtaskCode, fast_context, pending_code, reused_skills
    from prompts.templates import messages_for

    wood = SubAction(name="collect_wood", kind="code", reason="rewrite it to avoid zombies").model_dump()
    coal = SubAction(name="collect_coal", kind="code", reason="mine coal").model_dump()
    state = {"plan": [{"name": "collect_wood", "goal": "g", "success_condition": "c"},
                      {"name": "collect_coal", "goal": "g", "success_condition": "c"}],
             "subtask_index": 1, "outer_iter": 0, "last_attempt": None, "code_versions": [],
             "skills": {"collect_wood": {"kind": "code", "success_rate": 1.0, "entry": "collect_wood",
                                         "sources": ["def collect_wood(game):\n    yield 'do'\n"]}},
             "decomposition": {"subtask": "collect_coal", "reason": "", "sub_actions": [wood, coal]}}
    lib = SubtaskCode(state, RunSettings(task="collect_coal"))
    assert [a["name"] for a in pending_code(state["decomposition"], lib)] == ["collect_coal"]
    assert reused_skills(state["decomposition"], lib) == ["collect_wood"]
    settings = RunSettings(task="collect_coal")
    context = fast_context({**state, "budget_steps": 100_000}, settings, lib, "code", coal, [])
    assert context["reused"] == ["collect_wood"]
    assert fast_context({**state, "budget_steps": 100_000}, settings, lib, "rl", coal, [])["reused"] == []
    human = str(messages_for("fast", context)[-1].content)
    assert "- collect_wood (code): rewrite it to avoid zombies  <- an earlier skill, reused as it is" in human
    assert "- collect_coal (code): mine coal  <- this one now" in human


def test_the_last_piece_to_write_is_said_to_start_the_test_and_a_resend_of_the_same_program_is_not_tested(tmp_path):
    """An answerer re-planned stay_alive beside a diamond action whose plan (and code) stayed: writing stay_alive
    was the last piece, so its test ran on that answer, which nothing had said. The call now says so and names
    the pieces that keep their code. Sending the other piece again unchanged plays the same program: the
    critic judges it untested, whichever sub-action the last answer was for (it was tested, and charged)."""
    from nodes.attempt.rounds import plan_of
    from nodes.fast import SubtaskCode, _write_code, fast_context
    from prompts.templates import messages_for

    stay = SubAction(name="stay_alive", kind="code", reason="survive the night").model_dump()
    mine = SubAction(name="collect_coal", kind="code", reason="dig to coal").model_dump()
    action = "def collect_coal(game):\n    yield from stay_alive(game)\n    yield 'do'\n"
    state: dict = {"plan": [{"name": "collect_coal", "goal": "g", "success_condition": "c"}], "subtask_index": 0,
                   "skills": {}, "outer_iter": 1, "last_attempt": None, "messages": [], "budget_steps": 100_000,
                   "decomposition": {"subtask": "collect_coal", "reason": "", "sub_actions": [stay, mine]},
                   "code_versions": [{"subtask": "collect_coal", "sub_action": "collect_coal", "version": 1,
                                      "source": action, "plan": plan_of(mine), "outer_iter": 0}]}
    settings = RunSettings(out_dir=tmp_path, task="collect_coal", test_max_steps=50)
    lib = SubtaskCode(state, settings)
    context = fast_context(state, settings, lib, "code", stay, [])
    assert context.get("kept_pieces") == ["collect_coal"]
    human = messages_for("fast", context)[-1].content
    assert ("The other pieces keep their code from before (`collect_coal`; send one again in this answer only to "
            "change it): the test of the whole decomposition runs on this answer.") in human
    command = _write_code(state, {}, settings, lib, stay, {"code": "def stay_alive(game):\n    yield 'noop'\n",
                                                           "max_steps": None}, [stay], AIMessage(content=""))
    assert command.goto == "tools" and command.update["messages"][0].tool_calls  # tested on this answer
    state = {**state, "code_versions": [*state["code_versions"], *command.update["code_versions"]],
             "last_attempt": {**command.update["last_attempt"], "report": "a report"}}
    lib = SubtaskCode(state, settings)
    assert "kept_pieces" not in fast_context(state, settings, lib, "code", mine, [])  # a repair: nothing pending
    again = _write_code(state, {}, settings, lib, mine, {"code": action, "max_steps": None}, [],
                        AIMessage(content=""))
    assert again.goto == "critic" and "unchanged" in again.update["fast_error"]


def test_code_that_defines_a_built_ins_alias_is_refused_before_a_step_and_asked_again(tmp_path):
    """A model that defined `builtin_stay_alive` itself replaced the built-in under its alias too, while the
    reports still called it the built-in. Such code is refused with the name and what to do instead; no test
    is run, and the fast agent answers again (a repair)."""
    from nodes.fast import SubtaskCode, _write_code

    mine = SubAction(name="collect_coal", kind="code", reason="dig to coal").model_dump()
    state: dict = {"plan": [{"name": "collect_coal", "goal": "g", "success_condition": "c"}], "subtask_index": 0,
                   "skills": {}, "outer_iter": 0, "last_attempt": None, "messages": [], "budget_steps": 100_000,
                   "decomposition": {"subtask": "collect_coal", "reason": "", "sub_actions": [mine]},
                   "code_versions": []}
    settings = RunSettings(out_dir=tmp_path, task="collect_coal", test_max_steps=50)
    code = ("def builtin_stay_alive(game):\n    yield 'noop'\n\n\n"
            "def collect_coal(game):\n    yield from builtin_stay_alive(game)\n    yield 'do'\n")
    command = _write_code(state, {}, settings, SubtaskCode(state, settings), mine, {"code": code, "max_steps": None},
                          [mine], AIMessage(content=""))
    assert command.goto == "fast" and "messages" not in command.update  # no tool call: nothing played
    report = command.update["last_attempt"]["report"]
    assert report.startswith("your code defines builtin_stay_alive: names starting with `builtin_` are the "
                             "library's") and "no step was spent" in report
    # calling the alias is what it is for: the same action without the definition goes to its test
    fine = code.split("\n\n\n", 1)[1]
    state = {**state, "last_attempt": command.update["last_attempt"], "inner_iter": command.update["inner_iter"]}
    again = _write_code(state, {}, settings, SubtaskCode(state, settings), mine, {"code": fine, "max_steps": None},
                        [mine], AIMessage(content=""))
    assert again.goto == "tools" and again.update["messages"][0].tool_calls


class _FailingCritic:
    """A critic that answers `fail` for collect_coal and notes the facts and the prompt it was given in `seen`."""

    name = "scripted critic"

    def __init__(self, seen: dict, success_rate: float, feedback: str):
        self.seen, self.success_rate, self.feedback = seen, success_rate, feedback

    def structured(self, role, messages, schema, context=None):
        self.seen.update(context or {}, text=messages[-1].content)
        return schema(sub_action="collect_coal", verdict="fail", success_rate=self.success_rate,
                      feedback=self.feedback)


def test_the_critic_of_the_plans_last_subtask_needs_half_of_its_runs_to_reach_the_action(tmp_path):
    """1 of 1 runs that reached the diamond action succeeded, 1 of 8 runs in all: for the plan's last
    subtask, whose chain held-out play runs, that does not meet the target, as the fast agent was told."""
    from langchain_core.messages import ToolMessage

    from nodes.attempt.results import summarise_code_runs
    from nodes.critic import critic

    prefix = ["collect_wood"]
    runs = [{"seed": i, "task_success": i == 0, "ended": "success" if i == 0 else "died", "steps": 40,
             "achievements_before": [], "achievements_unlocked": ["collect_wood"] if i == 0 else [],
             "trace": "step 1: do"} for i in range(8)]
    result = {**summarise_code_runs(runs, prefix, ["collect_coal"]), "subtask": "collect_coal",
              "sub_action": "collect_coal", "outer_iter": 0, "inner_iter": 3}
    assert (result["started"], result["successes"], result["episodes"]) == (1, 1, 8)
    wood = {"name": "collect_wood", "kind": "code", "entry": "collect_wood", "passing": True, "success_rate": 1.0,
            "episodes": 8, "sources": ["def collect_wood(game):\n    yield 'do'\n"]}
    ai = AIMessage(content="", tool_calls=[{"name": "run_code_in_env", "args": {}, "id": "c1"}], id="r1")
    state = {"task": "collect_coal", "plan": [{"name": "collect_wood"}, {"name": "collect_coal"}],
             "subtask_index": 1, "skills": {"collect_wood": wood}, "results": [result], "best": {},
             "decomposition": {"subtask": "collect_coal", "reason": "", "sub_actions": [_code("collect_coal")]},
             "messages": [ai, ToolMessage(content="{}", name="run_code_in_env", tool_call_id="c1")],
             "counted_round": "r1", "last_result": result, "inner_iter": 3, "outer_iter": 0,
             "last_attempt": {"code": "def collect_coal(game):\n    yield 'do'\n", "report": "a report"}}
    seen: dict = {}

    class Runtime:
        context = run_context(RunSettings(out_dir=tmp_path, task="collect_coal"),
                              _FailingCritic(seen, 0.125, "the chain dies"))

    critic(state, Runtime())
    assert seen["meets_target"] is False and seen["reached_count"] == (1, 8, 4)
    assert ("held-out play is this chain, so the attempt meets the target only when at least 4 of all 8 test runs "
            "reached the action as well") in seen["text"]
    assert ("This attempt does not meet the target: 1 of the 1 runs that reached the action succeeded, and 1 of "
            "all 8 runs reached it (the plan's last subtask needs both: at least 4 to reach it).") in seen["text"]


def test_on_the_plans_last_subtask_repairs_go_on_only_while_they_gain_on_the_best_round(tmp_path):
    """Answerers spent 40,000-70,000 steps repairing the diamond chain on the same 8 worlds, one seed up or
    down, since its 7-of-8 rule over every run sat far above any chain's rate. A repair of the plan's last
    subtask that scores no more successes than the best earlier round on the same seeds now goes to the
    critic, which is told why; a repair that gains, the first code of a decomposition, and any repair of an
    earlier subtask still come back to the fast agent."""
    from langchain_core.messages import ToolMessage

    from nodes.attempt.results import summarise_code_runs
    from nodes.critic import critic
    from nodes.measure import measure

    def tested(successes: int, inner: int, seeds: list[int] | None = None) -> dict:
        runs = [{"seed": i, "task_success": i < successes, "ended": "success" if i < successes else "died",
                 "steps": 40, "achievements_before": [], "achievements_unlocked": ["collect_wood"],
                 "trace": "step 1: do"} for i in (seeds or range(8))]
        return {**summarise_code_runs(runs, ["collect_wood"], ["collect_coal"]), "subtask": "collect_coal",
                "sub_action": "collect_coal", "outer_iter": 0, "inner_iter": inner, "entry": "collect_coal",
                "sources": [f"def collect_coal(game):\n    yield 'do'  # {successes} of 8\n"]}

    wood = {"name": "collect_wood", "kind": "code", "entry": "collect_wood", "passing": True, "success_rate": 1.0,
            "episodes": 8, "sources": ["def collect_wood(game):\n    yield 'do'\n"]}
    ai = AIMessage(content="", tool_calls=[{"name": "run_code_in_env", "args": {}, "id": "c1"}], id="r1")

    def state_after(earlier: list[dict], last: dict) -> dict:
        return {"task": "collect_coal", "plan": [{"name": "collect_wood"}, {"name": "collect_coal"}],
                "subtask_index": 1, "skills": {"collect_wood": wood}, "results": [*earlier, last], "best": {},
                "decomposition": {"subtask": "collect_coal", "reason": "", "sub_actions": [_code("collect_coal")]},
                "messages": [ai, ToolMessage(content="{}", name="run_code_in_env", tool_call_id="c1")],
                "counted_round": "r1", "last_result": last, "inner_iter": last["inner_iter"], "outer_iter": 0,
                "last_attempt": {"code": "def collect_coal(game):\n    yield 'do'\n"}}

    settings = RunSettings(out_dir=tmp_path, task="collect_coal")

    class Runtime:
        context = run_context(settings, ExpertModel())

    first = tested(3, inner=0)
    assert measure(state_after([], first), Runtime()).goto == "fast"  # the first code: nothing to gain on yet
    no_gain = tested(3, inner=1)
    stalled = measure(state_after([first], no_gain), Runtime())
    assert stalled.goto == "critic"
    assert stalled.update["events"] == [{"type": "repairs_end", "subtask": "collect_coal", "sub_action": "collect_coal",
                                         "reason": "a repair gained nothing on the best round on these seeds"}]
    assert measure(state_after([first], tested(4, inner=1)), Runtime()).goto == "fast"  # it gained: repairs go on
    # a round on other seeds cannot be set against the first seed for seed
    assert measure(state_after([first], tested(3, inner=1, seeds=list(range(8, 16)))), Runtime()).goto == "fast"
    longer_plan = {**state_after([first], no_gain), "plan": [{"name": "collect_wood"}, {"name": "collect_coal"},
                                                             {"name": "collect_iron"}]}
    assert measure(longer_plan, Runtime()).goto == "fast"
    # a round that raised an error comes back with its error report, whatever it scored
    assert measure(state_after([first], {**no_gain, "errors": ["seed 0: NameError"]}), Runtime()).goto == "fast"
    # a new decomposition's first tested round (answers refused before it counted as repairs) is not a repair
    assert measure(state_after([first], {**no_gain, "outer_iter": 1}), Runtime()).goto == "fast"
    # with the repairs spent it goes to the critic as before, not as a round that gained nothing
    spent = measure(state_after([first], {**tested(3, inner=3)}), Runtime())
    assert spent.goto == "critic" and "events" not in spent.update

    seen: dict = {}

    class CriticRuntime:
        context = run_context(settings, _FailingCritic(seen, 0.375, "keep the best"))

    critic({**state_after([first], no_gain), "last_attempt": {"code": "def collect_coal(game):\n    yield 'do'\n",
                                                             "report": "a report"}}, CriticRuntime())
    assert ("1 of 3: this repair scored no more successes than the best round on the same seeds, so it asks you now "
            "(on the plan's last subtask repairs go on only while they gain)") in seen["text"]

    # a pass keeps the better of this round and the best earlier one, and the skill threshold judges that one:
    # a repair below the threshold after a better round is not turned into a revise
    class Passing(_FailingCritic):
        def structured(self, role, messages, schema, context=None):
            return schema(sub_action="collect_coal", verdict="pass", success_rate=0.625, feedback="keep the best")

    class PassingRuntime:
        context = run_context(settings, Passing({}, 0.0, ""))

    better = tested(5, inner=0)
    below = tested(3, inner=1)
    passed = critic({**state_after([better], below), "best": {"collect_coal": better}}, PassingRuntime())
    assert (passed.goto, passed.update["exit_to"]) == ("leave", "subtask")
    assert passed.update["skills"]["collect_coal"]["success_rate"] == 0.625
    # a round whose stay_alive rewrite lost to the earlier one on its seeds (a tie): a pass keeps the round's code
    # with the earlier stay_alive, as measure recorded it, never the rewrite (an answerer found it in held-out play)
    rewrite = "def stay_alive(game):\n    yield 'noop'\n"
    own = {**tested(6, inner=0), "sources": [rewrite, "def collect_coal(game):\n    yield 'do'\n"],
           "entry": "collect_coal"}
    before = {**own, "sources": ["def collect_coal(game):\n    yield 'do'\n"], "ranks_above": True,
              "helpers": {"stay_alive": "the built-in"}}
    own["helpers_before"] = before
    kept = critic({**state_after([], own), "best": {"collect_coal": before}}, PassingRuntime())
    sources = kept.update["skills"]["collect_coal"]["sources"]
    assert (kept.update["exit_to"], kept.update["critiques"][0]["verdict"]) == ("subtask", "pass")
    assert sources and not any("def stay_alive" in source for source in sources), sources


def test_a_roomy_prompt_says_before_the_round_when_a_helper_rewrite_would_not_be_compared(tmp_path):
    """An answerer read the whole budget left as a round's room, rewrote stay_alive, and learned from the next
    report that the rewrite had not been played against the earlier one (both sets did not fit). A roomy prompt
    says so before the round, with the same reason the report would give; a compact one keeps its tokens."""
    from nodes.fast import SubtaskCode, fast_context
    from prompts.templates import messages_for

    wood = {"name": "collect_wood", "kind": "code", "entry": "collect_wood", "passing": True, "success_rate": 1.0,
            "episodes": 8, "sources": ["def collect_wood(game):\n    yield 'do'\n"]}
    coal = _code("collect_coal")
    state: dict = {"task": "collect_coal", "plan": [{"name": "collect_wood"}, {"name": "collect_coal"}],
                   "subtask_index": 1, "skills": {"collect_wood": wood}, "outer_iter": 0, "last_attempt": None,
                   "messages": [], "budget_steps": 5000, "env_steps_spent": 0, "code_versions": [],
                   "decomposition": {"subtask": "collect_coal", "reason": "", "sub_actions": [coal]}}
    # 4 seeds: the plan's last subtask tests on 8
    settings = RunSettings(out_dir=tmp_path, task="collect_coal", test_max_steps=500, test_episodes=4)
    lib = SubtaskCode(state, settings)
    said = ("A new rewrite of `stay_alive` (or `explore`, `collect_drink`, `collect_food`) plays only beside the "
            "earlier one on the same seeds, and this round the budget leaves no room for both: both sets of tests at "
            "full length need 8,000 steps and 5,000 are left (a `max_steps` of 312 or less lets them run). A round "
            "with one runs with `max_steps` at most 312 (a higher one is lowered to it where it is at least half of "
            "that one and covers your longest test run so far; else the earlier one plays in its place).")
    roomy = fast_context(state, settings, lib, "code", coal, [], room="roomy")
    assert said in messages_for("fast", roomy)[-1].content
    assert "helpers_compared_cap" not in messages_for("fast", roomy)[-1].content  # said once, in words
    # a test run so far longer than what fits: no lowering, the earlier one plays
    ran = {**state, "results": [{"subtask": "collect_coal", "kind": "code", "per_seed": [{"steps": 400}]}]}
    text = messages_for("fast", fast_context(ran, settings, SubtaskCode(ran, settings), "code", coal, [],
                                             room="roomy"))[-1].content
    assert ("(a `max_steps` of 312 or less lets them run) (the earlier one would play in its place).") in text, text
    # a round that tests collect_drink itself: its rewrite is the action, not a helper set beside the earlier one
    drink = _code("collect_drink")
    drinking = {**state, "decomposition": {"subtask": "collect_coal", "reason": "", "sub_actions": [drink]}}
    text = messages_for("fast", fast_context(drinking, settings, SubtaskCode(drinking, settings), "code", drink, [],
                                             room="roomy"))[-1].content
    assert "A new rewrite of `stay_alive` (or `explore`, `collect_food`) plays only beside the earlier one" in text
    compact = fast_context(state, settings, lib, "code", coal, [], room="compact")
    assert "plays only beside the earlier one" not in messages_for("fast", compact)[-1].content
    plenty = fast_context({**state, "budget_steps": 50_000}, settings, lib, "code", coal, [], room="roomy")
    assert "helpers_compared_only_if" not in plenty["limits"]


class _RoomyExpert(ExpertModel):
    """The expert, taking the prompts a large-window model gets, noting the room of every fast and critic call."""

    prompt_room = "roomy"

    def __init__(self):
        super().__init__()
        self.rooms: list[tuple[str, object]] = []

    def structured(self, role, messages, schema, context=None):
        if role == "critic":
            self.rooms.append((role, (context or {}).get("room")))
        return super().structured(role, messages, schema, context)

    def tool_call(self, role, messages, tools, context=None):
        self.rooms.append((role, (context or {}).get("room")))
        return super().tool_call(role, messages, tools, context)


def test_the_nodes_give_the_model_the_prompt_room_its_window_allows(tmp_path):
    """The fast and critic nodes render their prompts in the model's room: a roomy model's calls are roomy
    (its report made at the roomy length by the measure node), the expert's compact."""
    settings = RunSettings(task="harvest log", budget_steps=3000, test_episodes=2, eval_episodes=1,
                           max_outer_iters=1, out_dir=tmp_path / "runs", run_id="roomy")
    model = _RoomyExpert()
    build_graph().invoke(start_state(settings), config=run_config(settings), context=run_context(settings, model))
    assert {role for role, _ in model.rooms} == {"fast", "critic"} and {r for _, r in model.rooms} == {"roomy"}
    compact = _RoomyExpert()
    compact.prompt_room = "compact"
    other = settings.model_copy(update={"run_id": "compact", "out_dir": tmp_path / "other"})  # no skill saved yet
    build_graph().invoke(start_state(other), config=run_config(other), context=run_context(other, compact))
    assert {r for _, r in compact.rooms} == {"compact"}


def test_a_policy_building_block_sent_again_unchanged_is_left_out_and_the_policy_still_trains(tmp_path):
    """SmolLM2's fallback training never ran: the task itself was to be learned over coded building blocks,
    it sent one block again unchanged after its test, and that ended the attempt untrained at 3,000 of
    100,000 steps. A building block of a policy's head sent again unchanged is left out of the head (the
    policy trains without it, as for a block that stays broken); the judged action's resend still goes to
    the critic."""
    from nodes.fast import SubtaskCode, _write_code

    block = _code("gather_food")
    policy = {"name": "collect_wood_policy", "kind": "rl", "template": "custom", "target": None, "item": None,
              "coded_actions": ["gather_food"]}
    state: dict = {"task": "collect_wood", "plan": [{"name": "collect_wood"}], "subtask_index": 0, "skills": {},
                   "decomposition": {"subtask": "collect_wood", "reason": "", "sub_actions": [block, policy]},
                   "code_versions": [], "messages": [], "results": [], "budget_steps": 100_000, "outer_iter": 0}
    settings = RunSettings(out_dir=tmp_path, task="collect_wood")
    code = "def gather_food(game):\n    yield 'do'\n"

    def write(at: dict):
        return _write_code(at, {}, settings, SubtaskCode(at, settings), block, {"code": code, "max_steps": None},
                           [block], AIMessage(content="", id=f"answer{len(at['code_versions'])}"))

    first = write(state)
    assert first.goto == "tools"  # tested once before the training
    again = write({**state, "code_versions": first.update["code_versions"],
                   "last_attempt": first.update["last_attempt"]})
    assert again.goto == "fast" and again.update["skipped_code"] == ["gather_food"]


def test_a_repair_round_is_set_against_the_best_earlier_round_on_the_same_seeds():
    """Answerers steered each repair by a success or two on the same worlds: a roomy report sets the round seed for
    seed against the best earlier round on those seeds, and says whether the difference is within chance."""
    from nodes.fast import best_round_text

    seeds = list(range(900, 916))

    def round_(wins: set[int], inner: int) -> dict:
        per_seed = [{"seed": s, "success": s in wins} for s in seeds]
        return {"kind": "code", "subtask": "collect_diamond", "sub_action": "collect_diamond", "seeds": seeds,
                "per_seed": per_seed, "successes": len(wins), "outer_iter": 1, "inner_iter": inner}

    best, worse, last = round_({900, 901, 902, 903}, 0), round_({900}, 1), round_({900, 901, 904, 905, 906}, 2)
    state = {"results": [best, worse, last], "last_result": last}
    assert best_round_text(state) == (
        "against your best earlier round on these 16 seeds (outer iteration 2, repair 0): 5 against 4 successes; "
        "paired, 3 seeds only this round won and 2 only that one (McNemar p = 1.00): within chance: each seed that "
        "changed is your code's doing, but on other worlds the two may rank either way")
    far = round_(set(seeds[:13]), 3)
    assert best_round_text({"results": [worse, far], "last_result": far}).endswith("a difference beyond chance")
    other_seeds = {**best, "seeds": [s + 100 for s in seeds]}  # other worlds (another run seed): nothing to pair
    assert best_round_text({"results": [other_seeds, last], "last_result": last}) == ""
    assert best_round_text({"results": [last], "last_result": last}) == ""
    head = {**last, "head_test": True}  # a policy's building block, filed under the policy's name: not paired
    assert best_round_text({"results": [best, head], "last_result": head}) == ""
    # a round stands for what a verdict keeps of it: its code with the earlier helpers where its rewrite lost
    lost = {**worse, "helpers_before": {**round_({900, 901, 902, 903, 904, 905}, 1), "ranks_above": True}}
    assert "5 against 6 successes" in best_round_text({"results": [best, lost, last], "last_result": last})
