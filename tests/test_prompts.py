"""The prompts: what each role renders, the generated references, and the size caps that keep the
fast agent's prompt inside a small model's window (SmolLM2: 8,192 tokens, the answer included)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from envs.game_api import GameAPI
from envs.tasks import ACHIEVEMENTS, TASKS
from nodes.recipes import recipe_facts, template_for
from prompts import loader
from prompts.api_reference import NOTES, api_reference, first_paragraph, member_lines
from prompts.fewshot import builtin_source, example_sources, examples_for
from prompts.rules import primitive_actions, rule_sheet
from prompts.templates import ROLES, ContextError, messages_for

# Character caps (about 3.6 characters per SmolLM2 token): the fast prompt at depth ~5,500 tokens; the slow
# one's largest call in a run is under half the 8,000 (benchmarks/prompt_budget.py).
CAPS = {"fast": 21_900, "planner": 12_000, "slow": 10_400, "critic": 10_000}

CHAIN = list(TASKS["collect_diamond"].prerequisites)


def _text(role: str, context: dict) -> str:
    return "\n".join(str(m.content) for m in messages_for(role, context))


def _filler(label: str, chars: int) -> str:
    """Realistic-looking text of about `chars` characters (a test report or code)."""
    line = f"{label}: seed 7 ended after 412 steps; last action do; inventory wood 3, stone 2; error none\n"
    return (line * (chars // len(line) + 1))[:chars]


def _code(chars: int) -> str:
    body = "    for _ in range(5):\n        yield 'do'\n"
    head = "@coded_action(max_steps=300)\ndef mine_diamond(game):\n    \"\"\"Walk to a diamond and mine it.\"\"\"\n"
    return head + body * ((chars - len(head)) // len(body))


def _library() -> list[dict]:
    return [{"name": name, "signature": f"{name}(game)", "kind": "code", "success_rate": 0.9,
             "doc": f"Walk to the nearest remembered source and do what {name} says until the inventory shows it."}
            for name in [*CHAIN, "explore"]]


def _decomposition() -> dict:
    return {"subtask": "collect_diamond", "reason": "diamonds are rare: search is learned, mining is coded",
            "sub_actions": [
                {"name": "explore", "kind": "code", "reason": "uncover new ground", "template": "explore",
                 "target": None, "item": None, "coded_actions": []},
                {"name": "mine_diamond", "kind": "code", "reason": "walk to a remembered diamond and hit it",
                 "template": "collect", "target": "diamond", "item": "diamond", "coded_actions": []},
                {"name": "find_diamond", "kind": "rl", "reason": "diamonds are rarely in view: learn the search",
                 "template": "custom", "target": None, "item": None,
                 "coded_actions": ["explore", "mine_diamond"]}]}


def fast_context(mode: str = "code") -> dict:
    decomposition = _decomposition()
    action = decomposition["sub_actions"][1 if mode == "code" else 2]
    return {
        "subtask": {"name": "collect_diamond", "goal": "mine a diamond",
                    "success_condition": "achievement 'collect_diamond' unlocked"},
        "task_description": TASKS["collect_diamond"].description,
        "mode": mode, "sub_action": action, "decomposition": decomposition, "library": _library(),
        "examples": examples_for(action["template"]),
        "last_attempt": ({"code": _code(1500), "report": _filler("episode", 2500)} if mode == "code" else
                         {"report": _filler("training", 2500)}),
        "feedback": "The code walks to the diamond but never checks for lava on the way; " * 8,
        "limits": {"test_seeds": 3, "max_steps_per_test": 10_000, "budget_left": 400_000, "subtasks_left": 1,
                   "last_round_steps": 30_000, "max_code_chars": 8000,
                   "revision": 2 if mode == "code" else 1, "max_revisions": 3 if mode == "code" else 2},
        "rl": {"coded_actions": ["explore", "mine_diamond", *CHAIN], "train_steps": 100_000,
               "min_train_steps": 10_000, "max_train_steps": 400_000, "subtasks_left": 1,
               "previous_train_steps": None},
        "configured": None, "configure_error": None,
    }


def planner_context() -> dict:
    task = TASKS["collect_diamond"]
    return {"task": task.name, "task_description": task.description,
            "recipes": [recipe_facts(a) for a in [*CHAIN, task.name]] + [recipe_facts(a) for a in ACHIEVEMENTS],
            "prerequisites": CHAIN,
            "failed": {"subtask": "collect_iron", "success_rate": 0.0, "reason": "no iron found in 5 episodes"},
            "remaining": [{"name": n, "goal": f"get {n}", "success_condition": f"achievement '{n}' unlocked"}
                          for n in CHAIN[-4:] + ["collect_diamond"]]}


def slow_context() -> dict:
    previous = _decomposition()
    previous["sub_actions"] = [dict(a, name=f"{a['name']}_{i}", reason="r" * 300)
                               for i in range(3) for a in previous["sub_actions"][:2]] + previous["sub_actions"][2:]
    return {"subtask": {"name": "collect_diamond", "goal": "mine a diamond", "success_condition": "unlocked"},
            "task_description": TASKS["collect_diamond"].description,
            "recipe": recipe_facts("collect_diamond"), "template": template_for("collect_diamond"),
            "prior_skills": [{"subtask": n, "kind": "code", "success_rate": 0.8} for n in CHAIN],
            "previous": previous,
            "critique": {"sub_action": "mine_diamond_0", "verdict": "move", "success_rate": 0.2, "move_to": "rl",
                         "feedback": "diamonds are rarely in view when the code starts; " * 12},
            "best": {"kind": "code", "success_rate": 0.2},
            "forced_rl": "mine_diamond_0", "outer_iter": 2, "max_outer_iters": 3}


def critic_context() -> dict:
    return {"subtask": "collect_diamond", "sub_action": {"name": "mine_diamond", "kind": "code"},
            "result": {"kind": "code", "ok": True, "success_rate": 0.2, "episodes": 5, "steps": 31_000,
                       "started": 4, "success_given_start": 0.25, "outcomes": {"ok": 4, "runtime": 1},
                       "errors": ["seed 9: line 12 in mine_diamond: KeyError: 'diamond'"] * 3},
            "code": _code(1500), "report": _filler("episode", 2500), "target": 0.6,
            "best_by_kind": {"code": 0.2, "rl": None}, "loops": {"inner": "2 of 3", "outer": "1 of 3"},
            "budget_left": 250_000, "same_seeds": [0.25, 0.5, 0.375, 0.125, 0.25, 0.5, 0.625]}


WORST = {"planner": planner_context, "slow": slow_context, "fast": fast_context, "critic": critic_context}


@pytest.mark.parametrize("role", ROLES)
def test_worst_case_prompts_fit_their_caps(role):
    text = _text(role, WORST[role]())
    assert len(text) <= CAPS[role], f"{role} prompt is {len(text)} characters, cap {CAPS[role]}"


def test_rl_mode_fast_prompt_fits_and_asks_for_the_rl_answers():
    context = fast_context("rl")
    text = _text("fast", context)
    assert len(text) <= CAPS["fast"]
    assert "ConfigureRL" in text and "Answer with ConfigureRL now." in text and "WriteCode" not in text
    assert "def collect_wood" not in text  # no few-shot code when nothing is to be written
    assert "Coded actions available for the action head\nexplore, mine_diamond, collect_wood" in text
    assert "total_steps bounds\ndefault 100000; min 10000; max 400000" in text and "subtasks_left 1" in text
    assert "Your last training and what happened" in text and "Repairs of this decomposition used: 1 of 2." in text
    context["configured"] = {"task": "collect_diamond", "reward": "task", "coded_actions": [_code(1500)] * 6,
                             "ppo": {"total_steps": 50_000, "num_envs": 4, "learning_rate": 0.00025}}
    text = _text("fast", context)
    assert "Answer with TrainPolicy now." in text and "task collect_diamond; reward task" in text
    assert len(text) <= CAPS["fast"]  # the validated config's sources are clipped
    context["configure_error"] = "total_steps: must be at least 10000"
    text = _text("fast", context)
    assert "total_steps: must be at least 10000" in text and "Answer with ConfigureRL now." in text


def test_long_texts_are_clipped_so_the_cap_holds_whatever_the_node_sends():
    context = fast_context()
    context["last_attempt"] = {"code": _code(20_000), "report": _filler("episode", 30_000)}
    context["feedback"] = "f" * 5000
    context["library"] = [dict(e, name=f"{e['name']}_{i}", signature=f"{e['name']}_{i}(game)")
                          for i in range(3) for e in _library()]
    text = _text("fast", context)
    assert len(text) <= CAPS["fast"]
    assert "characters cut" in text
    assert "also loaded:" in text  # names past the listed ones still reach the model
    context["module_names"] = [{"name": f"CONSTANT_{j}_" + "X" * 60, "subtask": f"skill_{i}", "kind": "code"}
                               for i in range(9) for j in range(30)]
    assert len(_text("fast", context)) <= CAPS["fast"] and "module-level names" not in _text("fast", context)
    roomy = _text("fast", {**context, "room": "roomy"})  # a roomy prompt's cap is the model's; this line is bounded
    line = next(x for x in roomy.splitlines() if x.startswith("- module-level names"))
    assert len(line) < 600 and line.endswith("(from skill_0); and 264 more"), line


def test_the_library_names_the_constants_and_imports_that_carry_over(tmp_path):
    """Answerers sent their constants again in every answer, unsure whether an earlier skill's carried over: they
    do (a program gets every definition its code reads), and the library says so with where they came from."""
    from nodes.fast import SubtaskCode
    from nodes.fast import fast_context as facts_of
    from nodes.settings import RunSettings

    iron = {"name": "collect_iron", "kind": "code", "entry": "collect_iron", "passing": True, "success_rate": 1.0,
            "episodes": 8, "sources": ["import heapq\nMOVES = {(1, 0): 'move_right'}\n\n\n"
                                       "def collect_iron(game):\n    yield MOVES[(1, 0)]\n"]}
    sub = {"name": "collect_diamond", "kind": "code", "template": "collect"}
    state = {"plan": [{"name": "collect_iron"}, {"name": "collect_diamond"}], "subtask_index": 1,
             "skills": {"collect_iron": iron}, "decomposition": {"sub_actions": [sub]}, "messages": [],
             "results": [], "budget_steps": 100_000, "code_versions": [
                 {"subtask": "collect_diamond", "sub_action": "collect_diamond", "source": "DEPTH = 3\n\n\n"
                  "def collect_diamond(game):\n    yield 'do'\n"}]}
    settings = RunSettings(out_dir=tmp_path, test_max_steps=100)
    text = _text("fast", facts_of(state, settings, SubtaskCode(state, settings), "code", sub, [], "roomy"))
    assert ("- module-level names, loaded for any code that reads them: `heapq`, `MOVES` (from collect_iron); "
            "`DEPTH` (yours, this subtask)") in text, text


def test_fast_code_prompt_renders_the_contract():
    context = fast_context()
    system, human = (str(m.content) for m in messages_for("fast", context))
    assert "WriteCode" in system and "Answer with WriteCode now." in human
    assert "Write the coded action `mine_diamond`" in human
    assert "- mine_diamond (code): walk to a remembered diamond and hit it [template collect; target diamond; " \
           "item diamond]  <- this one now" in human
    for entry in _library():  # `name(game)` is listed by name: the heading says how to call it
        assert f"- {entry['name']} [code, success 0.90]" in human
    assert "def collect_wood(game)" in human  # the example of the sub-action's template kind
    # the sub-action's line above already holds its reason and hints
    assert "Why it is code" not in human and "Slow agent's hints" not in human
    assert "Your last code and what happened" in human and "Repairs of this decomposition used: 2 of 3." in human
    assert "revision 2" not in human and "max_revisions" not in human
    assert context["last_attempt"]["report"][-40:] in human and context["last_attempt"]["code"][-30:] in human
    assert "A test round: 3 episodes of up to 10000 steps, up to 30000 of the 400000 budget steps left" in human
    assert "subtasks_left 1" in human  # limits the prompt does not know still reach the model
    # a repair's own report is newer than the critic's verdict: the heading says which is which
    assert "## Critic feedback on an earlier attempt (older than your last test above)\n" in human
    fresh = str(messages_for("fast", {**context, "last_attempt": None})[1].content)
    assert "## Critic feedback\n" in fresh
    context["last_attempt"] = {"sub_action": "mine_diamond", "code": "def mine_diamond(game):\n    yield 'do'\n",
                               "report": None}
    human = str(messages_for("fast", context)[1].content)
    assert "## Your last code\n```python\ndef mine_diamond(game):" in human and "Report:" not in human


def test_a_built_in_whose_source_is_shown_is_listed_without_its_docstring():
    """Its source, docstring included, is under the examples: the listing says where instead of repeating it."""
    context = fast_context()
    doc = "Fight a zombie next to the player; shelter and sleep at night."
    context["library"] = [{"name": "stay_alive", "signature": "stay_alive(game)", "kind": "built-in", "doc": doc},
                          *_library()]
    context["examples"] = {"stay_alive": builtin_source("stay_alive")}
    human = str(messages_for("fast", context)[1].content)
    assert "- stay_alive [built-in]: source under Few-shot examples" in human and doc not in human
    assert "### stay_alive (the built-in's source, as it runs)" in human
    context["examples"] = {"stay_alive": "def stay_alive(game):\n    yield 'noop'\n"}  # not what runs: listed
    assert f"- stay_alive [built-in]: {doc}" in str(messages_for("fast", context)[1].content)


def test_a_plain_helper_keeps_its_call_form_in_the_listing():
    """Coded actions are listed by name under "call with `yield from name(game)`"; a helper is not one."""
    context = fast_context()
    context["library"] = [{"name": "near_water", "signature": "near_water(game)", "kind": "code", "helper": True,
                           "doc": "Whether water is in view."}, *_library()]
    human = str(messages_for("fast", context)[1].content)
    assert "- near_water(game) [code, not a coded action]: Whether water is in view." in human


def test_the_job_carries_the_reason_only_when_the_decomposition_does_not_list_the_sub_action():
    context = fast_context()
    context["decomposition"] = {**context["decomposition"], "sub_actions": context["decomposition"]["sub_actions"][:1]}
    human = str(messages_for("fast", context)[1].content)
    assert "Why it is code: walk to a remembered diamond and hit it" in human
    assert "Slow agent's hints: template collect; target diamond; item diamond" in human


def test_fast_prompt_states_the_sandbox_rules_the_lint_enforces():
    from sandbox.lint import ALLOWED_MODULES, FORBIDDEN_NAMES, UnsafeCodeError, check_source

    system = str(messages_for("fast", fast_context())[0].content)
    for module in ALLOWED_MODULES:
        if module != "envs.coded":  # coded_action is in the namespace already
            assert module in system
    for name in ("open", "eval", "exec", "getattr", "type"):
        assert name in FORBIDDEN_NAMES and f" {name}" in system
    assert "no names starting with '__', no attributes starting with '_'" in " ".join(system.split())
    assert "no classes" in system
    # the rule as the lint has it: an answerer's `_n` passed where the prompt had said no name may start with '_'
    check_source("def f(game):\n    _n = 1\n    yield 'noop'\n")
    for forbidden in ("__n = 1\n", "x = game._env\n", "class A:\n    pass\n"):
        with pytest.raises(UnsafeCodeError):
            check_source(forbidden)


def test_api_reference_lists_every_public_member_with_its_call_form():
    members = [n for n, _ in inspect.getmembers(GameAPI) if not n.startswith("_")]
    lines = member_lines()
    assert sorted(lines) == sorted(members)
    reference = api_reference()
    for name in members:
        assert f"game.{name}" in reference
    assert "- yield from game.go_to(target: Pos, max_steps=200, dig=False):" in reference  # helpers that act
    assert "- yield from game.defend() -> bool:" in reference
    assert "- game.pos -> Pos:" in reference and "- game.nearest(name: str) -> Pos | None:" in reference
    # neighbouring properties with nothing to say beyond their type share a line
    assert "- game.health, game.food, game.drink, game.energy -> int\n" in reference
    assert "- game.sleeping -> bool\n" in reference
    assert "@coded_action(precondition=None, max_steps=200)" in reference
    assert first_paragraph(GameAPI.shelter.__doc__) in reference
    assert "absolute" in reference and "offsets (dx, dy)" in reference  # the coordinate conventions


def test_api_notes_only_stand_in_for_missing_docstrings():
    for name, note in NOTES.items():
        member = vars(GameAPI)[name]
        doc = (member.fget if isinstance(member, property) else member).__doc__
        assert not doc, f"GameAPI.{name} has a docstring now: drop its note from prompts.api_reference.NOTES"
        assert note in member_lines()[name]


def test_rule_sheet_is_generated_from_the_game_data():
    import crafter.constants

    sheet = rule_sheet()
    planner = str(messages_for("planner", {"task": "collect_wood"})[0].content)
    assert sorted(primitive_actions()) == sorted(crafter.constants.actions)
    assert "- table: uses 2 wood; onto grass, sand, path" in sheet
    assert "- iron_pickaxe: uses 1 coal, 1 iron, 1 wood; near table and furnace" in sheet
    assert "- diamond: +1 diamond, needs 1 iron_pickaxe, leaves path" in sheet
    assert "- grass: +1 sapling (10% of the time)" in sheet
    for achievement in ACHIEVEMENTS:
        assert achievement in planner  # the planner's subtask names
    assert "lava" in sheet and "zombie" in sheet.lower() and "300 steps" in sheet


def test_planner_never_sees_the_chain():
    context = planner_context()
    with_chain = _text("planner", context)
    without = _text("planner", {k: v for k, v in context.items() if k != "prerequisites"})
    assert with_chain == without  # the key is ignored altogether
    for sep in (", ", " -> ", "->", " > ", "\n"):
        assert sep.join(CHAIN) not in with_chain
    assert str(CHAIN) not in with_chain
    human = str(messages_for("planner", context)[1].content)
    recipes = human.split("## What achievements need", 1)[1].split("##", 1)[0]
    firsts = sorted(CHAIN, key=recipes.index)
    assert firsts != CHAIN and firsts == sorted(CHAIN)  # listed by name, not in tech-tree order
    assert "- make_iron_pickaxe:" in recipes and "collect_iron" in human


def test_slow_prompt_has_the_worked_example_and_the_forced_move():
    import json

    from nodes.schemas import Decomposition

    system, human = (str(m.content) for m in messages_for("slow", slow_context()))
    example = system.split("Example: a Decomposition for the subtask collect_stone (the player already has a "
                           "wood pickaxe):\n", 1)[1].split("\n\n", 1)[0]
    parsed = Decomposition.model_validate(json.loads(example))  # the example is a valid answer
    assert {a.kind for a in parsed.sub_actions} == {"code", "rl"}
    assert parsed.sub_actions[-1].coded_actions == [a.name for a in parsed.sub_actions[:-1]]
    assert "mark `mine_diamond_0` kind 'rl'" in human
    assert "Outer iteration 3 of 3." in human  # counted from 1, as the critic counts it
    assert "Moved to rl" not in _text("slow", {**slow_context(), "forced_rl": None})


def test_the_slow_agent_hears_which_built_ins_an_earlier_skill_wrote_anew():
    """An answerer that rewrote stay_alive in collect_iron saw it listed as built-in still, and could not tell
    whether the rewrite took effect."""
    from nodes.settings import RunSettings
    from nodes.slow import slow_context as context_of_state

    survive = "@coded_action\ndef stay_alive(game):\n    yield 'noop'\n"
    iron = "@coded_action\ndef collect_iron(game):\n    yield 'do'\n"
    state = {"plan": [{"name": "collect_iron"}, {"name": "make_iron_pickaxe"}], "subtask_index": 1,
             "skills": {"collect_iron": {"name": "collect_iron", "task": "collect_iron", "kind": "code",
                                         "success_rate": 0.75, "episodes": 8, "passing": True,
                                         "entry": "collect_iron", "sources": [survive + iron]}}}
    settings = RunSettings(task="obtain diamond")
    facts = context_of_state(state, settings)
    assert facts["rewritten"] == {"stay_alive": "collect_iron"}
    built_ins = _text("slow", facts).split("## Built-in coded actions", 1)[1].split("\n\n", 1)[0]
    assert "stay_alive (written anew for collect_iron)" in built_ins and "explore," in built_ins
    first = context_of_state({**state, "subtask_index": 0}, settings)
    assert first["rewritten"] == {} and "written anew" not in _text("slow", first)
    record = state["skills"]["collect_iron"]
    unchanged = builtin_source("explore") + "\n\n" + iron  # a learned skill's head carries explore as it is
    for other in ({**record, "passing": False, "success_rate": 0.0},  # never succeeded: its code is its own
                  {**record, "sources": []}, {**record, "sources": [unchanged]}):
        assert context_of_state({**state, "skills": {"collect_iron": other}}, settings)["rewritten"] == {}


def test_critic_prompt_shows_the_code_and_the_evidence():
    system, human = (str(m.content) for m in messages_for("critic", critic_context()))
    assert "move_to" in system and "success_given_start" in system
    assert "def mine_diamond(game)" in human and "The test report the fast agent saw" in human
    assert "success_given_start 0.25" in human and "Target success rate: 0.6." in human
    assert "inner 2 of 3; outer 1 of 3" in human
    assert "fast agent's error" not in human
    # the earlier attempts' best is named by its measure: beside a judged 71%, 'code 0.625' read as a contradiction
    named = _text("critic", {**critic_context(), "best_measure": "success_rate"})
    assert "Best success_rate of the earlier attempts at this subtask, by kind: code 0.2" in named
    bare = _text("critic", {"subtask": "collect_wood", "sub_action": {"name": "x", "kind": "rl"},
                            "result": {"success_rate": 0.5}})
    assert "The judged code" not in bare and "success_rate 0.5" in bare
    # after earlier skills, the two rates in words: 'successes 6; success_rate 0.75' was read as the judged count
    chained = _text("critic", {**critic_context(), "result": {
        "kind": "code", "episodes": 8, "successes": 6, "success_rate": 0.75, "prerequisites": ["collect_wood"],
        "started": 7, "started_successes": 6, "success_given_start": 6 / 7}})
    assert ("6 of 8 test runs succeeded from a fresh world (success_rate); 7 of the 8 reached mine_diamond after "
            "the earlier skills, and 6 of those succeeded (success_given_start: the rate the pass rule") in chained
    none = _text("critic", {**critic_context(), "result": {
        "kind": "code", "episodes": 8, "successes": 0, "success_rate": 0.0, "prerequisites": ["collect_wood"],
        "started": 0, "started_successes": 0, "success_given_start": None}})
    assert "none reached mine_diamond after the earlier skills, so the pass rule and the skill threshold" in none
    assert "success_given_start 0.857" in chained and "0.8571" not in chained
    failed = _text("critic", {**critic_context(), "code": None, "report": None, "fast_error": "WriteCode: no parse"})
    assert "The fast agent's error (no answer of it could be used)\nWriteCode: no parse" in failed


def test_examples_for_picks_the_template_kind_within_the_budget():
    sources = example_sources()
    assert list(examples_for("collect")) == ["collect_wood", "obtain_wood_pickaxe"]
    assert list(examples_for("make")) == ["make_wood_pickaxe", "obtain_wood_pickaxe"]
    assert list(examples_for("explore")) == ["explore", "obtain_wood_pickaxe", "stay_alive"]  # small enough
    assert list(examples_for("custom")) == list(examples_for(None)) == ["collect_wood", "obtain_wood_pickaxe"]
    assert list(examples_for("place", limit_chars=100)) == ["place_table"]  # its own kind is always given
    assert len(examples_for("explore", limit=2)) == 2
    assert all(src == sources[name] for name, src in examples_for("collect").items())
    # a repair shows its own code instead; the chain's stay_alive stays where tests replay the chain
    assert examples_for("collect", repair=True) == {}
    assert list(examples_for("collect", chain_survival=True, repair=True)) == ["stay_alive"]


def test_unknown_role_and_missing_context_raise_clear_errors():
    with pytest.raises(ValueError, match="unknown role 'boss'"):
        messages_for("boss", {})
    with pytest.raises(ContextError, match="needs context keys: sub_action"):
        messages_for("fast", {"subtask": "collect_wood"})
    with pytest.raises(ContextError, match="mode must be 'code' or 'rl'"):
        messages_for("fast", {**fast_context(), "mode": "both"})


def test_unknown_keys_are_ignored_and_optional_ones_may_be_absent():
    minimal = {"subtask": "collect_wood", "sub_action": {"name": "chop", "kind": "code"}}
    text = _text("fast", {**minimal, "surprise": "never shown"})
    assert "never shown" not in text and "Write the coded action `chop`" in text
    assert "Answer with" in _text("planner", {"task": "collect_wood"})
    assert "Answer with" in _text("slow", {"subtask": {"name": "collect_wood"}})


def test_missing_placeholder_raises_a_clear_error(tmp_path, monkeypatch):
    (tmp_path / "demo.md").write_text("Hello $name, see ${reference}. Costs $$5.\n")
    monkeypatch.setattr(loader, "PROMPTS_DIR", tmp_path)
    loader.template.cache_clear()
    try:
        filled = loader.render("demo", name="fast", reference="the API", unused=1)
        assert filled == "Hello fast, see the API. Costs $5.\n"
        with pytest.raises(loader.PromptTemplateError, match=r"prompts/demo.md needs a value for \$reference"):
            loader.render("demo", name="fast")
        with pytest.raises(loader.PromptTemplateError, match="no prompt text prompts/nothing.md"):
            loader.render("nothing")
        (tmp_path / "bad.md").write_text("price: $5\n")
        with pytest.raises(loader.PromptTemplateError, match="malformed placeholder"):
            loader.render("bad")
    finally:
        loader.template.cache_clear()


def test_every_prompt_text_is_filled_by_its_role():
    for role in ROLES:
        for message in messages_for(role, WORST[role]()):
            assert "$" not in str(message.content)
    with pytest.raises(loader.PromptTemplateError, match=r"planner.md needs a value for \$achievements, \$rule_sheet"):
        loader.render("planner")


def test_the_fast_prompt_names_exactly_the_sandbox_builtins():
    """The rules a model reads say what the sandbox gives it: every safe builtin, and nothing it lacks."""
    import re

    from sandbox.namespace import SAFE_BUILTINS

    text = (Path(__file__).resolve().parents[1] / "prompts" / "fast_code.md").read_text()
    listed = re.search(r"Builtins: (.*?)\.\n", text, re.S).group(1)
    names = set(re.findall(r"[A-Za-z_]+", listed)) - {"and", "the", "exceptions"}
    assert names == set(SAFE_BUILTINS) | {"print"}


def test_the_fast_prompt_says_where_a_test_stops_a_code_that_plays_on():
    """The prompt's figure is the harness's (prompts sit below tools and cannot read it)."""
    from tools.run_code import AFTER_SUCCESS_STEPS

    text = " ".join((Path(__file__).resolve().parents[1] / "prompts" / "fast_code.md").read_text().split())
    assert (f"After the achievement a test runs until yours returns, raises or has run {AFTER_SUCCESS_STEPS} "
            "steps more") in text


def test_the_fast_prompt_says_what_the_chain_does_around_an_action():
    """A model that knows the chain retries, explores and keeps the player alive between calls can write a short
    action that acts on what is known, as the examples do; the prompt's figures are the driver's."""
    from prompts.fewshot import CHAIN_RETRIES

    text = " ".join((Path(__file__).resolve().parents[1] / "prompts" / "fast_code.md").read_text().split())
    assert "The chain around an action: before each call it runs `stay_alive(game)`" in text
    assert (f"While the achievement is locked it calls the action again, up to {CHAIN_RETRIES} times "
            "(alone in a test: once), with `explore` first after a call that took no step") in text
    assert "So a short action like the examples gets search and survival from the chain" in text


def test_the_critic_hears_when_few_runs_reached_the_judged_action():
    """A pass on 1 of 1 judged runs says little: the critic is told how many of the test runs got there."""
    from prompts.templates import _target_verdict

    few = _target_verdict({"meets_target": True, "judged_count": (1, 1), "result": {"episodes": 8}})
    assert few.startswith("This attempt meets the target by the pass rule: 1 of 1 judged runs succeeded.")
    assert "Only 1 of 8 test runs reached the action" in few
    most = _target_verdict({"meets_target": True, "judged_count": (6, 6), "result": {"episodes": 8}})
    assert "Only" not in most


def test_a_repair_prompt_does_not_ask_to_fix_code_that_no_run_reached():
    """When every test run ended in the chain before the action, the fast agent is told so, and pointed at
    what can change it, not asked to find the cause in its own code (a capable answerer spent three
    revisions on such reports)."""
    from prompts.templates import _last_attempt

    last = {"sub_action": "collect_diamond", "code": "def collect_diamond(game):\n    yield 'do'\n",
            "max_steps": 100, "report": "code tests on 8 seeds: 8 died"}
    unreached = {**last, "result": {"started": 0, "episodes": 8, "prerequisites": ["collect_wood"]}}
    reached = {**last, "result": {"started": 3, "episodes": 8, "prerequisites": ["collect_wood"]}}
    _, body = _last_attempt(unreached, "code")
    assert "No test run reached your action" in body and "fix it in" not in body
    for other in (reached, last):
        _, body = _last_attempt(other, "code")
        assert "Find the cause of the failure in the report and fix it in the code" in body
    # every run that reached the action succeeded: the failures are the chain's before it (an answerer spent 8
    # rounds "fixing the code" for them, within noise)
    all_won = {**last, "result": {"started": 4, "episodes": 8, "success_given_start": 1.0,
                                  "prerequisites": ["collect_wood"]}}
    _, body = _last_attempt(all_won, "code")
    assert "Every run that reached your action succeeded: the others ended in the chain before it." in body
    assert "fix it in" not in body
    # every run reached it and won, 8 of 8 sent back by the critic: no failure to look for and nothing of the
    # chain to say (an answerer was asked for "the cause of the failure"); the result as nodes.measure keeps it
    every = {**all_won, "result": {**all_won["result"], "started": 8, "success_rate": 1.0}}
    for sent_back in (every, {**last, "result": {"success_rate": 1.0, "episodes": 8}}):
        _, body = _last_attempt(sent_back, "code")
        assert "Every test run succeeded: the critic's feedback says what to change in the code" in body
        assert "cause of the failure" not in body and "before it" not in body


def test_the_critic_hears_that_versions_were_compared_on_the_same_seeds():
    """Every revision is tested on the same seeds: the critic is told which earlier rates came from them, and
    that the best of several overstates held-out play. Only code attempts of this sub-action on these seeds."""
    from nodes.critic import _rates_on_the_same_seeds

    def result(rate, seeds=(900, 901), kind="code", sub_action="mine"):
        return {"kind": kind, "success_rate": rate, "seeds": list(seeds), "subtask": "collect_diamond",
                "sub_action": sub_action, "episodes": 2}

    judged = result(0.5)
    earlier = [result(0.0), result(1.0, seeds=(902, 903)), result(0.5, kind="rl"), result(0.5, sub_action="x")]
    assert _rates_on_the_same_seeds([*earlier, judged], judged) == [0.0]
    assert _rates_on_the_same_seeds([judged], judged) == []
    text = _text("critic", {**critic_context(), "same_seeds": [0.25, 0.625]})
    assert "The 2 earlier code attempts of this sub-action ran on the same test seeds (judged rates 25%, 62%)" in text
    assert "overstates what held-out play" in text
    assert "same test seeds" not in _text("critic", {**critic_context(), "same_seeds": []})
    # the plan's last subtask is compared over all runs: 3 of 8 runs, 3 of the 4 that reached the action
    chain = {**result(0.375), "episodes": 8, "started": 4, "started_successes": 3, "success_given_start": 0.75,
             "prerequisites": ["collect_wood"]}
    assert _rates_on_the_same_seeds([chain, judged], judged) == [0.75]
    assert _rates_on_the_same_seeds([chain, judged], judged, whole_chain=True) == [0.375]
    text = _text("critic", {**critic_context(), "same_seeds": [0.375],
                            "same_seeds_measure": "success rates over all runs"})
    assert "ran on the same test seeds (success rates over all runs 38%)" in text


def test_the_test_cost_line_gives_the_last_rounds_real_cost_beside_the_worst_case():
    """The line "up to 80000 steps" alone reads as what a round takes; most episodes end long before their limit."""
    context = fast_context()
    context["limits"] = {**context["limits"], "test_seeds": 8, "max_steps_per_test": 10000, "budget_left": 90000,
                         "last_round_steps": 4321}
    text = _text("fast", context)
    assert "up to 80000 of the 90000 budget steps left; your last round used 4321; `max_steps` caps it." in text
    assert "last_round_steps" not in text and "Environment steps left" not in text  # said once, on the round's line
    del context["limits"]["last_round_steps"]
    first = _text("fast", context)
    assert "your last round used" not in first
    # answerers found a worst case near the whole budget left unremarked: a heavy round says what it risks
    assert ("`max_steps` caps it: keep steps for later subtasks, and room in each episode for the earlier skills."
            in first)
    context["limits"].update(budget_left=0)  # nothing left: no round, the budget line says so
    assert "A test round" not in _text("fast", context) and "Environment steps left in the budget: 0." in _text(
        "fast", context)
    del context["limits"]["budget_left"]
    assert "up to 80000 steps in all; `max_steps` caps it." in _text("fast", context)
    context["limits"]["budget_left"] = 90000
    context["limits"]["last_round_steps"] = 0  # code that did not load spent nothing: no measure of a round
    assert "keep steps for later subtasks" in _text("fast", context)
    del context["limits"]["last_round_steps"]
    context["limits"].update(max_steps_per_test=500)  # 4,000 of 90,000: nothing to warn of
    assert "up to 4000 of the 90000 budget steps left; `max_steps` caps it." in _text("fast", context)
    context["limits"].update(max_steps_per_test=20000)
    assert "up to 90000 of the 90000 budget steps left (capped: each episode gets its share)" in _text(
        "fast", context)
    context["limits"]["max_code_chars"] = 8000
    assert "An answer's code holds at most 8000 characters." in _text("fast", context)


def test_the_last_rounds_cost_is_this_sub_actions_latest_code_test():
    from nodes.fast import _last_round_steps

    def result(steps, sub_action="mine", kind="code", subtask="collect_diamond"):
        return {"kind": kind, "subtask": subtask, "sub_action": sub_action, "episodes": 8, "steps": steps}

    state = {"results": [result(900), result(5000, sub_action="other"), result(7000, kind="rl"), result(2500),
                         result(100, subtask="collect_iron")]}
    assert _last_round_steps(state, "collect_diamond", "mine") == 2500
    assert _last_round_steps(state, "collect_diamond", "absent") is None


def test_the_critic_hears_what_fail_does_in_a_score_plan():
    """A score plan never re-plans for a failed subtask (it keeps its best attempt in its chain, and drops what
    needs one that never succeeded): an answerer told 'below it the planner re-plans' chose fail to have a
    subtask moved."""
    from nodes.critic import verdict_rules
    from nodes.settings import RunSettings

    settings = RunSettings(task="crafter_score")
    chain = verdict_rules(settings, 0, 0, "code")
    score = verdict_rules(settings, 0, 0, "code", score_plan=True)
    assert "below it the planner re-plans" in chain and "re-plans" not in score
    assert "still plays in this run's chain" in score and "the subtasks that need it are dropped" in score
    # the held-out order follows the pass rule, not the verdict: said apart from fail, and only for a score plan
    order = next(line for line in score.splitlines() if "held-out play runs the kept skills" in line)
    assert order.startswith("- Whatever the verdict") and "after every skill that did and does not need them" in order
    assert "held-out play" not in chain


def test_the_critic_hears_that_revise_and_move_spend_an_outer_iteration():
    """An answerer could not tell that a revise costs the subtask one of its outer iterations (and tests again)."""
    from nodes.critic import verdict_rules
    from nodes.settings import RunSettings

    settings = RunSettings(task="collect_diamond", max_outer_iters=3)
    first = verdict_rules(settings, 0, 0, "code")
    assert "feedback (outer iteration 2 of 3, spending steps again); its fast agent" in first
    assert "moves the sub-action to the kind you name (outer iteration 2 of 3" in first
    assert "outer iteration 3 of 3" in verdict_rules(settings, 3, 1, "rl")
    last = verdict_rules(settings, 0, 2, "code")
    assert "spending steps again" not in last and "revise: as fail." in last  # none is left to spend


def test_a_score_planner_hears_that_held_out_play_runs_the_skills_below_the_target_last():
    """An answerer planned the iron tools before eat_cow and saw them played after it: the order is the held-out
    chain's (nodes.executor.score_play_order), and only a score plan's planner hears of it."""
    from nodes.executor import score_play_order

    score = " ".join(_text("planner", {**planner_context(), "task": "crafter_score"}).split())
    said = "misses the pass rule of its tests plays after every skill that met it and does not need it"
    assert said in score and "what needs it follows it" in score
    assert "misses the pass rule" not in _text("planner", planner_context())
    # what it says: collect_iron (missed) after eat_cow (met); make_stone_pickaxe (met) after collect_stone
    # (missed), which it needs; place_table (met) still first
    names = ["place_table", "collect_iron", "eat_cow", "collect_stone", "make_stone_pickaxe"]
    order = score_play_order(names, [True, False, True, False, True], [1.0, 0.5, 1.0, 0.9, 1.0], [1.0] * 5)
    assert [names[i] for i in order] == ["place_table", "eat_cow", "collect_stone", "make_stone_pickaxe",
                                         "collect_iron"]


def test_a_roomy_prompt_shows_the_whole_last_code_and_report_where_a_compact_one_cuts_them():
    """A model with a large window and no memory of its answers repairs from what the prompt shows: a roomy
    prompt holds its whole last code (up to the answer limit) and a longer report; the critic sees the whole
    judged code. The compact prompts keep their caps (SmolLM2's window)."""
    from nodes.schemas import MAX_CODE_CHARS
    from prompts.templates import COMPACT, ROOMY

    code, report = _code(MAX_CODE_CHARS), _filler("episode", ROOMY.report_chars)
    context = fast_context()
    context["last_attempt"] = {"code": code, "report": report}
    compact = _text("fast", context)
    assert len(compact) <= CAPS["fast"] and code not in compact and report not in compact
    roomy = _text("fast", {**context, "room": "roomy"})
    assert code in roomy and report in roomy and "characters cut" not in roomy
    judged = {**critic_context(), "code": code, "report": report}
    assert code not in _text("critic", judged) and code in _text("critic", {**judged, "room": "roomy"})
    # the library: every entry with its doc in a roomy prompt, the first COMPACT.library_lines in a compact one
    context["library"] = [dict(e, name=f"{e['name']}_{i}", signature=f"{e['name']}_{i}(game)") for i in range(2)
                          for e in _library()]
    last = context["library"][-1]
    assert f"- {last['name']} [code" not in _text("fast", context)
    assert f"- {last['name']} [code" in _text("fast", {**context, "room": "roomy"})
    assert len(context["library"]) > COMPACT.library_lines
    with pytest.raises(ContextError, match="unknown prompt room 'huge'"):
        _text("fast", {**context, "room": "huge"})


def test_each_model_gets_the_prompt_room_its_window_allows(tmp_path, monkeypatch):
    """SmolLM2 (an 8,192-token window) and the rule-based expert: compact; a served model with a large window (or
    OpenAI's, whose window is not given) and a `file:` answerer: roomy. A recording keeps the room, and its replay
    asks for the same prompts."""
    import json

    from langchain_core.messages import HumanMessage

    from nodes.models.base import prompt_room_of
    from nodes.models.chat import LLMModel
    from nodes.models.expert import ExpertModel
    from nodes.models.factory import ModelConfigError, llm_options_from_env
    from nodes.models.file import FileModel
    from nodes.models.recording import RecordingModel, ReplayModel
    from nodes.schemas import Plan

    def served(window, base_url="http://127.0.0.1:9/v1"):
        return LLMModel("m", base_url=base_url, api_key="k", context_window=window)

    assert prompt_room_of(ExpertModel()) == "compact"
    assert [prompt_room_of(served(w)) for w in (8192, 16_384, 32_768)] == ["compact", "compact", "roomy"]
    # no window given: OpenAI's own models have large ones; another server (llama.cpp at 8,192) may not
    assert prompt_room_of(served(None)) == "compact" and prompt_room_of(served(None, None)) == "roomy"
    from nodes.models.base import COMPACT_ROOM, ROOMY_ROOM
    from prompts.templates import PROMPT_ROOMS

    assert set(PROMPT_ROOMS) == {COMPACT_ROOM, ROOMY_ROOM}  # the models name the rooms the templates have
    assert llm_options_from_env({"RLGPT_LLM_CONTEXT_WINDOW": "8192"}) == {"context_window": 8192}
    with pytest.raises(ModelConfigError, match="must be > 0"):
        llm_options_from_env({"RLGPT_LLM_CONTEXT_WINDOW": "0"})
    with pytest.raises(ModelConfigError, match="leaves no room for an answer"):
        llm_options_from_env({"RLGPT_LLM_CONTEXT_WINDOW": "50"})
    # an option out of range given as an argument is a clear configuration error too, not a traceback
    from nodes.models.factory import make_model

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(ModelConfigError, match="--model m: context_window must be > 64"):
        make_model("m", context_window=10)
    answers = tmp_path / "answers"
    file_model = FileModel(answers, deadline_s=5, poll_s=0.01)
    assert prompt_room_of(file_model) == "roomy"
    plan = {"subtasks": [{"name": "collect_wood", "goal": "g", "success_condition": "c"}]}
    (answers / "0000.response.json").write_text(json.dumps(plan))
    recording = RecordingModel(file_model, tmp_path / "calls.jsonl")
    assert prompt_room_of(recording) == "roomy"
    recording.structured("planner", [HumanMessage(content="plan")], Plan)
    record = json.loads((tmp_path / "calls.jsonl").read_text().splitlines()[0])
    assert record["prompt_room"] == "roomy"
    assert prompt_room_of(ReplayModel(tmp_path / "calls.jsonl")) == "roomy"
    del record["prompt_room"]  # a recording made before rooms: compact, as its prompts were
    (tmp_path / "old.jsonl").write_text(json.dumps(record) + "\n")
    assert prompt_room_of(ReplayModel(tmp_path / "old.jsonl")) == "compact"
