"""Composition stays linear: the library keeps each written definition once, and every program (a code
test, an action-head entry, a held-out chain) is assembled from one pool by one rule."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from nodes.attempt.outcome import skill_from_attempt
from nodes.attempt.rounds import _artefacts
from nodes.executor import _load_chain
from nodes.fast import SubtaskCode
from nodes.settings import RunSettings
from nodes.skills import pool as code_pool

DIAMOND_CHAIN = ["collect_wood", "place_table", "make_wood_pickaxe", "collect_stone", "make_stone_pickaxe",
                 "collect_coal", "collect_iron", "place_furnace", "make_iron_pickaxe", "collect_diamond"]


def _written(i: int, name: str, previous: str | None) -> str:
    """A model-like answer: module-level lines, a same-named helper in every skill, a call of the skill before."""
    call = f"    yield from {previous}(game)\n" if previous else ""
    return (f"import heapq\nMV = {{'left': (-1, 0), 'right': (1, 0)}}\nWALK = ('left', 'right')\n\n\n"
            f"def helper(game):\n    \"\"\"helper of skill {i}\"\"\"\n    yield 'noop'\n    return {i}\n\n\n"
            f"@coded_action(max_steps=40)\ndef {name}(game):\n    \"\"\"skill {i}\"\"\"\n{call}"
            f"    yield from helper(game)\n    heapq.heapify([MV[w][0] for w in WALK])\n")


def _skill(i: int, name: str, previous: str | None) -> dict:
    return skill_from_attempt(name, {"kind": "code", "success_rate": 1.0, "episodes": 8, "steps": 10,
                                     "sources": [_written(i, name, previous)], "entry": name}, 0.5)


def _state_at(k: int, skills: dict) -> dict:
    return {"plan": [{"name": n} for n in DIAMOND_CHAIN], "subtask_index": k, "skills": skills,
            "decomposition": {"sub_actions": [{"name": DIAMOND_CHAIN[k], "kind": "code"}]},
            "code_versions": []}


def test_a_depth_10_chain_grows_linearly_and_held_out_plays_the_last_tests_definitions(tmp_path):
    settings = RunSettings(out_dir=tmp_path, test_max_steps=100)
    skills: dict[str, dict] = {}
    sizes = []
    for k, name in enumerate(DIAMOND_CHAIN):
        previous = DIAMOND_CHAIN[k - 1] if k else None
        lib = SubtaskCode(_state_at(k, skills), settings)
        pool = lib.with_code(_written(k, name, previous))
        program, _ = code_pool.test_program(pool, lib.prefix, [name], 100)
        sizes.append(len(program))
        # every module-level line and every helper once, whatever the depth; the latest helper wins
        for line in ("import heapq", "MV = {", "WALK = ("):
            assert program.count(line) == 1, (name, line)
        assert program.count("def helper(") == 1 and f"helper of skill {k}" in program
        skills[name] = _skill(k, name, previous)
    steps = [b - a for a, b in zip(sizes, sizes[1:], strict=False)]
    # past the first chain (the driver and its built-ins), each level adds one skill's own code (about 350
    # characters), a chain row and at most a built-in sword, never a copy of what came before
    own = len(_written(9, DIAMOND_CHAIN[9], DIAMOND_CHAIN[8]))
    assert max(steps[1:]) < 4 * own and sizes[-1] - sizes[1] < 9 * 2 * own, sizes
    # the skills keep what was written, nothing composed
    for k, name in enumerate(DIAMOND_CHAIN):
        assert skills[name]["sources"] == [_written(k, name, DIAMOND_CHAIN[k - 1] if k else None)]

    # held-out play is what the last subtask's tests played: every skill with each name's latest definition
    last = len(DIAMOND_CHAIN) - 1
    lib = SubtaskCode(_state_at(last, {n: skills[n] for n in DIAMOND_CHAIN[:last]}), settings)
    pool = lib.with_code(_written(last, DIAMOND_CHAIN[last], DIAMOND_CHAIN[last - 1]))
    tested = code_pool.definitions(code_pool.test_program(pool, lib.prefix, [DIAMOND_CHAIN[last]], 100)[0])
    chain = _load_chain([{"name": n} for n in DIAMOND_CHAIN], skills, seed=0)
    try:
        for k, step in enumerate(chain):
            inner = code_pool.definitions("\n".join(line[4:] for line in step.source.splitlines()[3:]))
            assert code_pool.definitions(step.source)  # one function: its definitions sit one level in
            for name in DIAMOND_CHAIN[:k + 1]:
                assert inner.get(name, "").strip() == tested[name].strip(), (k, name)
            assert step.source.count("def helper(") == 1 and f"helper of skill {last}" in step.source
    finally:
        for step in chain:
            step.close()
    # a last skill that is not passing (a best attempt cut short) changes only its own play: the earlier skills
    # play as the iron pickaxe's tests, the latest passing ones, replayed them
    cut_short = dict(skills, collect_diamond=dict(skills["collect_diamond"], passing=False))
    chain = _load_chain([{"name": n} for n in DIAMOND_CHAIN], cut_short, seed=0)
    try:
        assert [f"helper of skill {last - 1}" in step.source for step in chain[:-1]] == [True] * last
        assert f"helper of skill {last}" in chain[-1].source
    finally:
        for step in chain:
            step.close()


def test_held_out_play_plays_an_unneeded_earlier_skill_with_the_last_skills_helpers_as_its_tests_did():
    """The plan's last subtask's tests replay every earlier skill, needed by recipe or not (a record made before
    graph rules 18, with no `replayed`): held-out play then plays each with the library those tests had, the last
    skill's helper."""
    plan = ["collect_sapling", "defeat_zombie"]  # defeat_zombie needs nothing by recipe
    skills = {name: _skill(k, name, None) for k, name in enumerate(plan)}
    chain = _load_chain([{"name": n} for n in plan], skills, seed=0, whole_chain=True)
    try:
        assert ["helper of skill 1" in step.source for step in chain] == [True, True]
    finally:
        for step in chain:
            step.close()
    # a plan cut at a subtask with no skill: its last skill's tests replayed only what its recipe needs
    chain = _load_chain([{"name": n} for n in plan], skills, seed=0)
    try:
        assert ["helper of skill 1" in step.source for step in chain] == [False, True]
    finally:
        for step in chain:
            step.close()


def test_held_out_play_follows_the_earlier_skills_a_skills_tests_recorded_as_replayed():
    """Graph rules 18: a middle subtask's tests replay every earlier skill too, and its record says which
    (`Skill.replayed`); held-out play plays each earlier skill with the library of the latest passing test that
    replayed it. A record made before (no `replayed`) goes by the recipe, as its tests did."""
    plan = ["collect_sapling", "defeat_zombie", "collect_wood"]  # defeat_zombie needs nothing by recipe
    skills = {name: _skill(k, name, None) for k, name in enumerate(plan)}
    skills["collect_wood"]["passing"] = False  # a best attempt cut short: it changes only its own play
    recorded = dict(skills, defeat_zombie=dict(skills["defeat_zombie"], replayed=["collect_sapling"]))
    for records, sapling_plays_skill_1 in ((recorded, True), (skills, False)):
        chain = _load_chain([{"name": n} for n in plan], records, seed=0, whole_chain=True)
        try:
            assert ["helper of skill 1" in step.source for step in chain] == [sapling_plays_skill_1, True, False]
            assert "helper of skill 2" in chain[2].source
        finally:
            for step in chain:
                step.close()


def test_a_code_rl_code_cycle_adds_nothing_to_the_library():
    name = "collect_coal"
    code = _written(0, name, None)
    state = {"plan": [{"name": name}], "subtask_index": 0,
             "decomposition": {"sub_actions": [{"name": name, "kind": "code"}, {"name": "coal_policy", "kind": "rl"}]},
             "code_versions": [{"subtask": name, "sub_action": name, "version": 1, "source": code}]}
    pool = code_pool.pool_from([code])
    head = code_pool.action_head_sources(pool, [name]) + [code_pool.prefix_action(pool, [name], 50, "reach_x")]
    train = AIMessage(content="", tool_calls=[{"name": "train_ppo", "id": "t1",
                                               "args": {"rl_config": {"coded_actions": head}}}])
    learned = _artefacts(state, [train], {"kind": "rl"}, {"name": "coal_policy", "kind": "rl"})
    assert learned["sources"] == [code] and learned["rl_config"]["coded_actions"] == head
    test = AIMessage(content="", tool_calls=[{"name": "run_code_in_env", "id": "c1",
                                              "args": {"code": code_pool.test_program(pool, [], [name], 50)[0],
                                                       "action": name}}])
    state["decomposition"] = {"sub_actions": [{"name": name, "kind": "code"}]}
    coded = _artefacts(state, [test], {"kind": "code"}, {"name": name, "kind": "code"})
    assert coded == {"sources": [code], "entry": name}
    before = code_pool.pool_of([(name, {"kind": "code", **coded})]).sources
    after = code_pool.pool_of([(name, {"kind": "rl", **learned}), (name, {"kind": "code", **coded})]).sources
    assert after == before and "reach_x" not in after  # nothing composed came back into the library
    assert after[name] == code_pool.definitions(code)[name]


def test_definitions_keep_each_module_level_name_once_and_drop_what_binds_nothing():
    program = ('"""doc"""\nimport heapq, math\nfrom collections import deque as dq\nX = 0\nX += 1\n'
               'A, B = 1, 2\nprint("side effect")\n\ndef f(game):\n    yield "noop"\n\ndef f(game):\n    yield "do"\n')
    defs = code_pool.definitions(program)
    assert list(defs) == ["heapq", "math", "dq", "X", "A", "f"]
    assert defs["X"] == "X = 0\nX += 1\n" and '"do"' in defs["f"] and "print" not in "".join(defs.values())
    pool = code_pool.pool_from([program])
    assert pool.closure(["B"]) == ["A"]  # a name bound by a statement keyed by another name is found
    later = code_pool.pool_from([program, "X = 5\n"])
    assert later.sources["X"] == "X = 5\n"  # one precedence rule: a later definition replaces the earlier


def test_a_composed_program_over_the_limit_names_what_is_large():
    big = "def big(game):\n    " + "\n    ".join(f"x{i} = {i}" for i in range(3000)) + "\n    yield 'noop'\n"
    pool = code_pool.pool_from([big], subtask="collect_wood")
    pool.add("def act(game):\n    yield from big(game)\n", subtask="place_table")
    program = pool.program(["act"])
    problem = code_pool.size_problem(pool, program, ["act"], 10_000)
    assert problem is not None and "big (" in problem and "collect_wood" in problem and "no step was spent" in problem
    assert code_pool.size_problem(pool, program, ["act"], len(program)) is None


def test_a_program_calling_a_function_nothing_defines_is_refused_before_a_step():
    """An answerer's stay_alive kept calling helpers written for a sub-action that the next decomposition left
    out: every seed of the next round raised NameError. Such a program is now refused before it runs."""
    from graph.evaluation.coded import pure_code_program
    from nodes.skills.pool import missing_problem, undefined_calls

    pool = code_pool.pool_from(["def stay_alive(game):\n    if sa_cow_near(game):\n        yield from sa_hunt(game)\n"],
                               subtask="collect_diamond")
    pool.add("def collect_diamond(game):\n    yield from stay_alive(game)\n    yield 'do'\n")
    program = pool.program(["collect_diamond"])
    assert undefined_calls(program) == ["sa_cow_near", "sa_hunt"]
    problem = missing_problem(program)
    assert problem and "calls sa_cow_near, sa_hunt" in problem and "no step was spent" in problem
    # nothing that can run is refused: parameters, lambdas, comprehensions, handlers, imports, nested
    # functions, builtins, coded_action, and every program the expert's chains assemble
    fine = ("import math\nfrom collections import deque as dq\n\n@coded_action(max_steps=9)\ndef act(game, k=2):\n"
            "    def inner(x):\n        return abs(x)\n    f = lambda y: inner(y)\n"
            "    q = dq([f(i) for i in range(k)])\n"
            "    try:\n        math.sqrt(len(q))\n    except ValueError as err:\n        print(repr(err))\n"
            "    yield 'noop'\n")
    assert undefined_calls(fine) == [] and missing_problem(fine) is None
    for task in ("collect_diamond", "crafter_score", "make_wood_pickaxe"):
        assert undefined_calls(pure_code_program(task)) == []
    assert undefined_calls("def broken(:\n") == []  # the loader reports a syntax error with its line


def test_error_lines_of_a_composed_program_point_into_the_models_own_code():
    own = "import math\n\n\ndef survive(game):\n    yield 'noop'\n    x = 1 / 0\n"
    pool = code_pool.pool_from(["def helper(game):\n    yield 'noop'\n    y = [][1]\n"], subtask="collect_wood")
    pool.add(own)
    program = pool.program(["survive", "helper"])
    survive_def = program.splitlines().index("def survive(game):") + 1
    helper_def = program.splitlines().index("def helper(game):") + 1
    text = (f"seed 1: line {survive_def + 2} in survive (`x = 1 / 0`): ZeroDivisionError\n"
            f"seed 2: line {helper_def + 2} in helper: IndexError")
    moved = code_pool.relocate_lines(text, program, own)
    assert "line 6 of your code, in survive" in moved and "line 3 of library function helper" in moved


def test_a_revision_keeps_the_helpers_it_does_not_send_again_and_its_test_plays_what_is_kept(tmp_path):
    """A model revises by sending only what changes: the helper of its first answer stays loaded, in the test
    and in the version kept, two revisions later as in the next one, and after an answer that did not parse
    (before, the test of a revision loaded the previous version's helpers but the version kept did not, so they
    vanished one revision later). Sending again what is loaded already is an unchanged resubmission."""
    from nodes.fast import _write_code

    name = "collect_coal"
    first = ("STEP = 'do'\n\n\ndef near(game):\n    \"\"\"first helper\"\"\"\n    return True\n\n\n"
             f"def {name}(game):\n    \"\"\"first\"\"\"\n    if near(game):\n        yield STEP\n")
    broken = f"def {name}(game):\n    yield 'do'\n  yield 'noop'\n"
    action_only = (f"def {name}(game):\n    \"\"\"second: only the action\"\"\"\n    if near(game):\n"
                   "        yield STEP\n    yield 'noop'\n")
    helper_only = "def near(game):\n    \"\"\"third: only the helper\"\"\"\n    return game.can_collect('coal')\n"
    settings = RunSettings(out_dir=tmp_path, test_max_steps=100)
    target = {"name": name, "kind": "code"}
    state: dict = {"plan": [{"name": name}], "subtask_index": 0, "skills": {}, "code_versions": [],
                   "decomposition": {"sub_actions": [target]}, "messages": [], "budget_steps": 100_000}

    def answer(code: str):
        nonlocal state
        lib = SubtaskCode(state, settings)
        command = _write_code(state, {}, settings, lib, target, {"code": code, "max_steps": None}, [target],
                              AIMessage(content=""))
        if command.goto == "critic":
            return command, None
        (version,) = command.update["code_versions"]
        state = {**state, "code_versions": [*state["code_versions"], version],
                 "last_attempt": command.update["last_attempt"]}
        return command, code_pool.definitions(version["source"])

    for i, code in enumerate([first, broken, action_only, helper_only]):
        command, kept = answer(code)
        assert kept is not None and set(kept) == {"STEP", "near", name}, (i, kept)
        calls = command.update["messages"][0].tool_calls
        if code is broken:  # one seed brings back the sandbox's error; the code kept is the one that loaded
            assert len(calls) == 1 and calls[0]["args"]["code"].rstrip().endswith("yield 'noop'")
            continue
        for key, source in code_pool.definitions(calls[0]["args"]["code"]).items():  # played = kept
            assert kept[key].strip() == source.strip(), (i, key)
    assert "third: only the helper" in kept["near"] and "second: only the action" in kept[name]
    command, _ = answer("STEP = 'do'\n")  # what is loaded already, sent again: nothing to test
    assert command.goto == "critic" and "unchanged" in command.update["fast_error"]
    assert code_pool.revised(None, first) == first  # a first answer is kept as it was written
    assert code_pool.revised(first, first) == first  # and so is one that sends everything again
    assert code_pool.revised(None, broken) == broken


def test_a_helper_rewritten_as_its_own_sub_action_is_the_one_tests_and_the_skill_load():
    """An answer for the last sub-action carried an old stay_alive; the model then rewrote stay_alive as its own
    sub-action. Whatever order the pool loads the sub-actions in, the definition sent last is the live one, in
    the test's pool and in the skill kept (once), and a later revision that carries the old copy unchanged does
    not bring it back; sending it again does."""
    from nodes.attempt.rounds import live_code

    name = "collect_coal"
    stay, mine = ({"name": n, "kind": "code", "reason": "r"} for n in ("stay_alive", name))

    def alive(tag: str) -> str:
        return f"def stay_alive(game):\n    \"\"\"{tag}\"\"\"\n    yield 'noop'\n"

    def action(tag: str) -> str:
        return f"def {name}(game):\n    \"\"\"{tag}\"\"\"\n    yield from stay_alive(game)\n    yield 'do'\n"

    def version(n: int, sub: str, source: str) -> dict:
        return {"subtask": name, "sub_action": sub, "version": n, "source": source, "plan": None, "outer_iter": 0}

    settings = RunSettings(test_max_steps=100)
    written = [version(1, name, alive("old") + "\n" + action("first")), version(2, "stay_alive", alive("new"))]
    state = {"plan": [{"name": name}], "subtask_index": 0, "skills": {},
             "decomposition": {"subtask": name, "reason": "", "sub_actions": [stay, mine]}, "code_versions": written}

    def live_stay_alive(versions: list[dict]) -> str:
        current = {**state, "code_versions": versions}
        pool = SubtaskCode(current, settings).pool
        kept = live_code(current, name, ["stay_alive", name])
        copies = [src for src in kept.values() if "def stay_alive" in src]
        assert len(copies) == 1, kept  # the skill keeps it once
        assert code_pool.definitions(copies[0])["stay_alive"] == pool.sources["stay_alive"]
        return pool.sources["stay_alive"]

    assert '"""new"""' in live_stay_alive(written)
    carried = version(3, name, alive("old") + "\n" + action("second"))  # a revision of the action alone
    assert '"""new"""' in live_stay_alive([*written, carried])
    resent = version(4, name, alive("newest") + "\n" + action("third"))
    assert '"""newest"""' in live_stay_alive([*written, carried, resent])


def test_a_score_chain_plays_the_weak_skills_last_the_likeliest_first_each_with_what_needs_it():
    from nodes.executor import score_play_order

    names = ["collect_wood", "collect_sapling", "eat_plant", "place_table", "collect_stone", "collect_iron",
             "make_wood_pickaxe", "make_iron_pickaxe", "collect_diamond"]
    met = [True, True, False, True, True, False, True, True, False]
    rates = [1.0, 1.0, 0.5, 1.0, 1.0, 0.5, 1.0, 1.0, 0.2]
    costs = [7, 4, 426, 24, 56, 293, 28, 461, 603]  # steps per test episode
    order = [names[i] for i in score_play_order(names, met, rates, costs)]
    # what met the target in plan order, each after what it needs (the stone after the wood pickaxe); then the
    # iron (50%, shorter tests than the plant's 50%) with the pickaxe that needs it, the plant, the diamond (20%)
    assert order == ["collect_wood", "collect_sapling", "place_table", "make_wood_pickaxe", "collect_stone",
                     "collect_iron", "make_iron_pickaxe", "eat_plant", "collect_diamond"]
    tree = ["collect_wood", "place_table", "make_wood_pickaxe", "collect_stone"]  # each after what it needs
    assert score_play_order(tree, [True] * 4, [1.0] * 4, [9] * 4) == [0, 1, 2, 3]  # all met: the plan's order
    # a skill never comes before one of the plan's skills that it needs, however likely it is
    assert score_play_order(["collect_wood", "place_table"], [False, True], [0.1, 1.0], [9, 9]) == [0, 1]

    # the loaded chain plays in that order, each skill with the library as it stood at its place in the plan
    plan = ["collect_wood", "collect_sapling", "place_table", "make_wood_pickaxe"]
    skills = {n: _skill(k, n, None) for k, n in enumerate(plan)}
    skills["collect_sapling"] = dict(skills["collect_sapling"], success_rate=0.5, success_given_start=0.5,
                                     started=8)
    chain = _load_chain([{"name": n} for n in plan], skills, seed=0, score=True)
    try:
        assert [s.subtask for s in chain] == ["collect_wood", "place_table", "make_wood_pickaxe", "collect_sapling"]
        assert [s.place for s in chain] == ["1/4", "2/4", "3/4", "4/4"]
        # each plays its own helper (the library at its place in the plan)
        assert "helper of skill 3" in chain[2].source and "helper of skill 1" in chain[3].source
    finally:
        for step in chain:
            step.close()
    # a chain task keeps the plan's order whatever the rates
    chain = _load_chain([{"name": n} for n in plan], skills, seed=0)
    try:
        assert [s.subtask for s in chain] == plan
    finally:
        for step in chain:
            step.close()


def test_a_first_write_of_a_short_action_shows_no_stay_alive_example_and_a_repair_does(tmp_path):
    from nodes.fast import REPAIR_WITH_SURVIVAL_CHARS, fast_context

    settings = RunSettings(out_dir=tmp_path, test_max_steps=100)
    skills = {n: _skill(k, n, None) for k, n in enumerate(DIAMOND_CHAIN[:2])}  # the wood and the table

    def examples(template: str, last_attempt: dict | None = None) -> dict:
        """The examples make_wood_pickaxe's call shows: its tests replay the wood and the table first."""
        sub = {"name": "make_wood_pickaxe", "kind": "code", "template": template}
        state = dict(_state_at(2, skills), decomposition={"sub_actions": [sub]}, last_attempt=last_attempt)
        return fast_context(state, settings, SubtaskCode(state, settings), "code", sub, [])["examples"]

    assert "stay_alive" not in examples("make") and "stay_alive" not in examples("place")
    assert "stay_alive" in examples("collect")  # a long search, where the chain's survival shows
    # a repair after a death gets it, unless its own code already fills the call
    assert "stay_alive" in examples("make", {"code": "y" * 100, "report": "seed 3: died at step 90 (zombie)"})
    assert "stay_alive" not in examples("make", {"code": "y" * (REPAIR_WITH_SURVIVAL_CHARS + 1),
                                                 "report": "seed 3: died at step 90 (zombie)"})


def test_a_roomy_repair_shows_the_best_attempt_so_far_where_a_later_round_scored_lower(tmp_path):
    """An answerer whose later rewrites scored lower went back to its best code from its own memory; a served model
    keeps none. A roomy prompt shows the subtask's best attempt (what `fail` keeps) beside a later, lower round,
    with its figures and its code; not where the best is the last round, and not in a compact prompt."""
    from nodes.fast import fast_context
    from prompts.templates import messages_for

    settings = RunSettings(out_dir=tmp_path, test_max_steps=100)
    skills = {n: _skill(k, n, None) for k, n in enumerate(DIAMOND_CHAIN[:2])}
    sub = {"name": "make_wood_pickaxe", "kind": "code", "template": "make"}
    best_code = "def make_wood_pickaxe(game):\n    \"\"\"the best one\"\"\"\n    yield 'make_wood_pickaxe'\n"
    best = {"kind": "code", "subtask": "make_wood_pickaxe", "success_rate": 0.625, "successes": 5, "episodes": 8,
            "started": 6, "started_successes": 5, "prerequisites": ["collect_wood", "place_table"],
            "outer_iter": 0, "inner_iter": 1, "sources": [best_code], "helpers": {"stay_alive": "the built-in"}}
    lower = "def x(game):\n    yield 'noop'\n"
    later = {**best, "success_rate": 0.25, "successes": 2, "inner_iter": 3, "sources": [lower]}
    state = dict(_state_at(2, skills), decomposition={"sub_actions": [sub]}, best={"make_wood_pickaxe": best},
                 last_result=later, last_attempt={"code": lower, "report": "seed 1: died"})

    def context(room: str, current: dict) -> dict:
        return fast_context(current, settings, SubtaskCode(current, settings), "code", sub, [], room)

    shown = context("roomy", state)["best_attempt"]
    assert shown["code"].strip() == best_code.strip() and shown["successes"] == 5
    text = messages_for("fast", context("roomy", state))[-1].content
    assert ("## Your best attempt at this subtask so far (outer iteration 1, revision 1: 5 of 8 runs succeeded, 5 of "
            "the 6 that reached the action; its runs played the earlier `stay_alive` (the built-in) in place of a "
            "rewrite)\n```python\n" + best_code.rstrip()) in text, text
    assert "To go back to it, send its definitions again: each replaces the later one of its name" in text
    long_best = {**best, "sources": [best_code + "\n# " + "x" * 14_000]}  # two answers' worth: shown whole
    assert "characters cut" not in messages_for("fast", context("roomy", {**state, "best": {
        "make_wood_pickaxe": long_best}}))[-1].content.split("Your best attempt", 1)[1]
    assert "best_attempt" not in context("compact", state)
    assert "best_attempt" not in context("roomy", {**state, "last_result": best})  # the last round is the best


def test_an_example_calls_this_runs_skill_where_the_library_has_no_function_of_the_subtasks_name(tmp_path):
    from nodes.fast import fast_context

    settings = RunSettings(out_dir=tmp_path, test_max_steps=100)
    stone = skill_from_attempt("collect_stone", {
        "kind": "code", "success_rate": 1.0, "episodes": 8, "steps": 10, "entry": "mine_stone",
        "sources": ["@coded_action(max_steps=40)\ndef mine_stone(game):\n    'stone'\n    yield 'do'\n"]}, 0.5)
    sapling = _skill(0, "collect_sapling", None)
    sub = {"name": "eat_plant", "kind": "code", "template": "plant"}
    state = {"plan": [{"name": n} for n in ("collect_sapling", "collect_stone", "eat_plant")], "subtask_index": 2,
             "skills": {"collect_sapling": sapling, "collect_stone": stone}, "decomposition": {"sub_actions": [sub]},
             "code_versions": []}
    shown = fast_context(state, settings, SubtaskCode(state, settings), "code", sub, [])["examples"]["eat_plant"]
    assert "mine_stone(game)" in shown and "collect_stone(" not in shown
    assert "collect_sapling(game)" in shown  # the run has a function of that name: kept
    assert "def plant_site(game)" in shown  # the example's own functions keep their names


def test_a_rewritten_sword_is_the_one_the_chain_makes_after_its_pickaxe():
    """The chain makes a sword after each pickaxe; a model's make_wood_sword replaces the built-in in code tests,
    in a learned skill's prefix action and in held-out play, as the prompt says (an answerer's rewrite was
    dropped: the driver's helpers were taken from the pool without the swords, and the built-in put back)."""
    from prompts.fewshot import builtin_source

    sword = ("def make_wood_sword(game):\n    \"\"\"the model's sword: only with a table in reach\"\"\"\n"
             "    if game.is_near('table', 8):\n        yield 'make_wood_sword'\n")
    prefix = ["collect_wood", "place_table", "make_wood_pickaxe"]
    steps = "\n\n".join(f"def {name}(game):\n    yield 'noop'\n" for name in [*prefix, "collect_stone"])
    pool = code_pool.pool_of([])
    pool.add(steps, subtask="collect_stone", kind="code")
    builtin_only = pool.copy()
    pool.add(sword, subtask="make_wood_pickaxe", kind="code")
    program, _ = code_pool.test_program(pool, prefix, ["collect_stone"], 100)
    assert "the model's sword" in program and builtin_source("make_wood_sword").splitlines()[1] not in program
    assert "the model's sword" in code_pool.prefix_action(pool, prefix, 100, "reach_collect_stone")
    assert "the model's sword" not in code_pool.test_program(pool, prefix[:2], ["collect_stone"], 100)[0]
    assert builtin_source("make_wood_sword").splitlines()[1] in code_pool.test_program(
        builtin_only, prefix, ["collect_stone"], 100)[0]
    # a test of the pickaxe itself ends when the pickaxe's action returns: the sword after it is the next
    # subtask's prefix, as held-out play goes on from there
    tested, _ = code_pool.test_program(pool, prefix[:2], [prefix[2]], 100)
    assert "(make_wood_pickaxe, 'make_wood_pickaxe')," in tested and "(make_wood_sword," not in tested
    from graph.evaluation.coded import pure_code_program

    baseline = pure_code_program("make_wood_pickaxe")  # its tests play main to its return: no sword after it
    assert "(make_wood_pickaxe, 'make_wood_pickaxe')," in baseline and "(make_wood_sword," not in baseline
    assert "(make_wood_sword, 'make_wood_sword')," in pure_code_program("collect_stone")  # mid-chain: kept


def test_a_report_is_set_against_the_round_before_of_the_same_sub_action_and_names_whose_stay_alive_ran():
    """The seeds of the latest round are compared with the round before of the same subtask and sub-action
    (never another sub-action's, never a policy-head test's); the chain's stay_alive is named by who wrote it."""
    from nodes.fast import _round_before, survival_origin

    def result(sub: str, action: str, steps: int, **extra) -> dict:
        return {"kind": "code", "subtask": sub, "sub_action": action, **extra,
                "per_seed": [{"seed": 1, "success": False, "steps": steps, "ended": "died"}]}

    results = [result("collect_coal", "mine_coal", 10), result("collect_coal", "mine_coal", 20),
               result("collect_coal", "walk", 30), result("collect_coal", "mine_coal", 40, head_test=True),
               {"kind": "rl", "subtask": "collect_coal"}, result("collect_coal", "mine_coal", 50)]
    assert [e["steps"] for e in _round_before({"results": results})] == [20]
    assert _round_before({"results": results[:1]}) == [] and _round_before({}) == []
    # a policy's building blocks are tested under the policy's name: one block is not set against another
    assert _round_before({"results": [*results, result("collect_coal", "mine_coal", 60, head_test=True)]}) == []
    pool = code_pool.pool_of([])
    assert survival_origin(pool) == ""  # the report names the built-in itself
    pool.add("def stay_alive(game):\n    yield 'noop'\n", subtask="collect_coal", kind="code")
    assert survival_origin(pool) == ("the `stay_alive` written for collect_coal: one you write replaces it (the "
                                     "built-in is `builtin_stay_alive`)")
    pool.add("def stay_alive(game):\n    yield 'sleep'\n", subtask="collect_iron", kind="code", this_subtask=True)
    assert survival_origin(pool) == ("the `stay_alive` of this subtask's code: one your answer defines replaces it "
                                     "(the built-in is `builtin_stay_alive`)")


def test_measure_sets_a_round_against_the_one_before_and_names_the_stay_alive_this_subtask_wrote(tmp_path):
    """The wiring as the measure node runs it: record the round, then read its report from the updated state.
    The second round of the same code marks the seed that died as before; the early-death line names the
    stay_alive this subtask's code defines, which is the one its tests loaded."""
    import json

    from langchain_core.messages import ToolMessage

    from nodes.attempt.rounds import record_round
    from nodes.fast import report_text
    from nodes.state import with_update

    wood = {"name": "collect_wood", "kind": "code", "entry": "collect_wood", "passing": True, "success_rate": 1.0,
            "episodes": 8, "sources": ["def collect_wood(game):\n    yield 'do'\n"]}
    code = ("def stay_alive(game):\n    yield 'noop'\n\n\n"
            "def collect_coal(game):\n    yield from stay_alive(game)\n    yield 'do'\n")
    target = {"name": "collect_coal", "kind": "code"}
    state: dict = {"plan": [{"name": "collect_wood"}, {"name": "collect_coal"}], "subtask_index": 1,
                   "skills": {"collect_wood": wood}, "decomposition": {"sub_actions": [target]},
                   "code_versions": [{"subtask": "collect_coal", "sub_action": "collect_coal", "source": code}],
                   "messages": [], "results": [], "budget_steps": 100_000}

    def run_round(steps: int) -> str:
        nonlocal state
        calls = [{"name": "run_code_in_env", "args": {"code": code, "seed": seed},
                  "id": f"r{len(state['messages'])}s{seed}"}
                 for seed in (1, 2)]
        reports = [{"seed": seed, "ended": "died", "task_success": False, "steps": steps + seed,
                    "death_cause": "zombie", "achievements_before": [], "achievements_unlocked": [],
                    "inventory_after": {"health": 0}, "trace": "step 1: noop"} for seed in (1, 2)]
        reports[1]["steps"] = 7 + len(state["messages"])  # seed 2 ends elsewhere each round
        ai = AIMessage(content="", tool_calls=calls, id=f"round{len(state['messages'])}")  # a round is its id
        state = {**state, "messages": [*state["messages"], ai, *[
            ToolMessage(content=json.dumps(r), name="run_code_in_env", tool_call_id=c["id"])
            for c, r in zip(calls, reports, strict=True)]]}
        update, _ = record_round(state)
        state = with_update(state, update)
        return report_text(state, RunSettings(out_dir=tmp_path))

    first = run_round(100)
    assert "as last round" not in first
    assert ("between skills the chain called the `stay_alive` of this subtask's code: one your answer defines "
            "replaces it") in first
    # a round whose rewrite the budget left no room to compare played the built-in: the report says so
    not_played = {"helpers_not_played": {"helpers": {"stay_alive": "the built-in"}, "why": "why"}}
    text = report_text(with_update(state, {"last_attempt": not_played}), RunSettings(out_dir=tmp_path))
    assert ("\nthis round played the earlier `stay_alive` (the built-in) in place of your rewrite, which plays only "
            "beside it on the same seeds: why") in text
    assert "of this subtask's code" not in text, text
    second = run_round(100)
    seeds = {x.split(":")[0] for x in second.splitlines() if x.startswith("seed ")}
    assert seeds == {"seed 1 (as last round)", "seed 2"}, second


def test_a_replaced_built_in_stays_callable_under_its_alias_in_tests_and_held_out_play(tmp_path):
    """A model that rewrites `stay_alive` can still call the built-in, as `builtin_stay_alive` (to build on it or
    go back to it without pasting its source); the listing names the alias only once the built-in is replaced,
    and a program holds it only where its code calls it. Played: the call runs the built-in's body."""
    from envs.crafter_env import CrafterEnv
    from prompts.fewshot import builtin_source
    from prompts.templates import _examples, _library
    from sandbox import AgentCode

    pool = code_pool.pool_of([])
    assert "builtin_stay_alive" not in _library(code_pool.listing(pool))
    # the first rewrite is told, where the built-in's source is shown as the example
    shown = {"stay_alive": builtin_source("stay_alive")}
    assert _examples(shown, frozenset(shown), "stay_alive").startswith(
        "### stay_alive (the built-in's source, as it runs; yours replaces it, and it stays callable as "
        "builtin_stay_alive)")
    assert _examples(shown, frozenset(shown), "collect_coal").startswith(
        "### stay_alive (the built-in's source, as it runs)\n")
    assert "builtin_" not in pool.program(["stay_alive", "collect_food", "explore"])
    wrapper = ("def stay_alive(game):\n    \"\"\"Drink first, then the built-in.\"\"\"\n"
               "    yield from builtin_stay_alive(game)\n")
    pool.add(wrapper, subtask="collect_coal", kind="code", this_subtask=True)
    lines = _library(code_pool.listing(pool)).splitlines()
    assert "- stay_alive [yours, this subtask; the built-in is builtin_stay_alive]: Drink first, then the built-in." \
        in lines
    assert not any(line.startswith("- builtin_") for line in lines) and "collect_food [built-in]" in lines[3]
    # a learned skill's head carries the built-in explore as it is: no rewrite, no alias named
    head = code_pool.pool_of([("collect_sapling", {"kind": "rl", "sources": [builtin_source("explore")]})])
    assert [e.get("builtin_alias") for e in code_pool.listing(head) if e["name"] == "explore"] == [None]
    program = pool.program(["stay_alive"])
    body = builtin_source("stay_alive").split("\n", 1)[1]
    assert "def builtin_stay_alive(game):\n" + body in program and program.count("def collect_food(") == 1

    # held-out play loads the same pool: a skill whose stay_alive calls the built-in plays it
    coal = {"name": "collect_coal", "kind": "code", "entry": "collect_coal", "passing": True, "success_rate": 1.0,
            "episodes": 8, "sources": [wrapper, "def collect_coal(game):\n    yield 'noop'\n"]}
    chain = _load_chain([{"name": "collect_coal"}], {"collect_coal": coal}, seed=0)
    try:
        assert "def builtin_stay_alive(game):" in chain[0].source
    finally:
        for step in chain:
            step.close()
    # played in the sandbox: the alias loads and runs the built-in's body (at full bars in the day it takes no
    # step), where an undefined name would end the call with an error
    env = CrafterEnv(task="collect_diamond", obs_kind="symbolic", reward="task", max_steps=50)
    own = code_pool.pool_of([])
    own.add("def stay_alive(game):\n    yield from builtin_stay_alive(game)\n    yield 'noop'\n", kind="code")
    with AgentCode([own.program(["stay_alive"])]) as code:
        env.reset(seed=8003)
        outcome = code.execute(env, "stay_alive", max_steps=50)
    assert outcome.error is None and outcome.actions == ["noop"], outcome


def test_a_resent_program_is_the_same_test_whatever_order_its_definitions_come_in():
    """An answerer resent its code unchanged and was charged a second test of 5,300 steps: once live, its
    version came back with the action after a new helper instead of before it. The same definitions in
    another order are the same test; a changed definition is not, and a program that does not parse is
    compared by its text."""
    from nodes.fast import program_identity

    helper = "def near(game):\n    return True\n"
    action = "def collect_coal(game):\n    if near(game):\n        yield 'do'\n"
    assert program_identity(helper + "\n\n" + action) == program_identity(action + "\n\n" + helper)
    changed = action.replace("do", "noop")
    assert program_identity(helper + "\n\n" + action) != program_identity(helper + "\n\n" + changed)
    broken = "def collect_coal(game):\n    yield 'do'\n  yield 'noop'\n"
    assert program_identity(broken) != program_identity(broken + "\n# changed\n")
    # where order decides what loads, it counts: a default read before its constant is bound raises NameError
    constant, reader = "N = 5\n", "def act(game, n=N):\n    yield 'do'\n"
    assert program_identity(constant + "\n" + reader) != program_identity(reader + "\n" + constant)
    shadowed = helper + "\nnear = print\n"  # a name bound twice: the order says which one is live
    assert program_identity(shadowed) != program_identity("near = print\n\n" + helper)
    # a statement that binds nothing still counts
    assert program_identity(action) != program_identity(action + "\nprint('x')\n")


def test_a_code_test_calls_the_judged_action_again_while_its_achievement_is_locked():
    """What the fast prompt says of a test: like held-out play, it calls an action named after an achievement
    again while that is locked, and any other action once; a test of one action alone calls it once."""
    from tools.run_code import run_code

    written = ("@coded_action(max_steps=5)\ndef warm_up(game):\n    yield 'noop'\n\n\n"
               "@coded_action(max_steps=5)\ndef take_sapling(game):\n    yield 'noop'\n\n\n"
               "@coded_action(max_steps=5)\ndef collect_sapling(game):\n    yield 'noop'\n")
    pool = code_pool.builtin_pool()
    pool.add(written, subtask="collect_sapling")

    def test_of(prefix: list[str], actions: list[str]):
        program, action = code_pool.test_program(pool, prefix, actions, 120)
        report = run_code(program, task="collect_sapling", seed=3, max_steps=120, action=action)
        assert report.error is None
        return report.ended, report.steps

    assert test_of(["warm_up"], ["collect_sapling"]) == ("out_of_steps", 120)  # one noop per call to the limit
    assert test_of([], ["warm_up", "collect_sapling"]) == ("out_of_steps", 120)  # two sub-actions: a chain too
    assert test_of(["warm_up"], ["take_sapling"]) == ("action_returned", 2)  # not an achievement: once
    assert test_of([], ["collect_sapling"]) == ("action_returned", 1)  # one action alone: once


def test_a_rewritten_stay_alive_is_kept_only_where_it_gains_two_seeds_on_the_one_before(tmp_path):
    """A round whose code writes stay_alive anew also plays its seeds with the stay_alive that stood before (the
    built-in here). Unless the rewrite succeeds on 2 more of those seeds, the attempt kept is the round's code
    without the rewrite: a skill made of it plays the built-in, in later tests and in held-out play. The report
    says which, and the round is judged on the attempt kept. A later round that plays the rewrite that lost,
    not compared again, is kept only where it does better than the best. A code that rewrites no chain helper is
    tested once, as before."""
    import json

    from langchain_core.messages import ToolMessage

    from nodes.attempt.results import HELPERS_BEFORE, round_best, round_passes
    from nodes.attempt.rounds import record_round
    from nodes.fast import (
        _last_round_steps,
        _write_code,
        fast_context,
        helpers_not_played_text,
        max_steps_capped_text,
        report_text,
        test_seed_count,
    )
    from nodes.state import with_update
    from prompts.fewshot import builtin_source
    from prompts.templates import messages_for
    from tools.run_code import run_code

    wood = {"name": "collect_wood", "kind": "code", "entry": "collect_wood", "passing": True, "success_rate": 1.0,
            "episodes": 8, "sources": ["@coded_action(max_steps=5)\ndef collect_wood(game):\n    yield 'do'\n"]}
    rewrite = "def stay_alive(game):\n    \"\"\"rewritten\"\"\"\n    yield 'noop'\n"
    action = "@coded_action(max_steps=5)\ndef collect_coal(game):\n    yield from stay_alive(game)\n    yield 'do'\n"
    target = {"name": "collect_coal", "kind": "code"}
    settings = RunSettings(out_dir=tmp_path, test_max_steps=60, test_episodes=4)
    state: dict = {"plan": [{"name": "collect_wood"}, {"name": "collect_coal"}], "subtask_index": 1,
                   "skills": {"collect_wood": wood}, "decomposition": {"sub_actions": [target]},
                   "code_versions": [], "messages": [], "results": [], "budget_steps": 100_000}
    n = test_seed_count(settings, state)
    assert n == 8  # the plan's last subtask tests on twice the run's seeds

    def write_at(at: dict, code: str):
        lib = SubtaskCode(at, settings)
        command = _write_code(at, {}, settings, lib, target, {"code": code, "max_steps": None}, [target],
                              AIMessage(content="", id=f"answer{len(at['messages'])}"))
        return command, command.update["messages"][0].tool_calls

    def write(code: str):
        return write_at(state, code)

    _, calls = write(action)  # the built-in stay_alive: nothing to set it against
    assert len(calls) == n and not any(c["id"].startswith(HELPERS_BEFORE) for c in calls)
    # the plan's last subtask: its tests end at the achievement, where held-out play counts the success
    assert [c["args"].get("after_success_steps") for c in calls] == [0] * n
    # the way back to the built-in the report gives plays the built-in: no comparison, which could only tie
    back = "def stay_alive(game):\n    yield from builtin_stay_alive(game)\n"
    _, calls = write(back + "\n\n" + action)
    assert len(calls) == n and not any(c["id"].startswith(HELPERS_BEFORE) for c in calls)

    command, calls = write(rewrite + "\n\n" + action)
    own = [c for c in calls if not c["id"].startswith(HELPERS_BEFORE)]
    before = [c for c in calls if c["id"].startswith(HELPERS_BEFORE)]
    assert len(own) == len(before) == n
    assert [c["args"]["seed"] for c in own] == [c["args"]["seed"] for c in before]
    assert '"""rewritten"""' in own[0]["args"]["code"] and '"""rewritten"""' not in before[0]["args"]["code"]
    builtin = code_pool.definitions(builtin_source("stay_alive"))["stay_alive"]
    assert code_pool.definitions(before[0]["args"]["code"])["stay_alive"].strip() == builtin.strip()
    report = run_code(before[0]["args"]["code"], task="collect_coal", seed=3, max_steps=60,
                      action=before[0]["args"].get("action"))
    assert report.error is None and report.steps > 0  # the program set beside it loads and plays
    state = {**state, "code_versions": command.update["code_versions"],
             "last_attempt": command.update["last_attempt"]}

    def measured(own_wins: int, before_wins: int) -> tuple[dict, str]:
        ai = AIMessage(content="", tool_calls=calls, id=f"round{own_wins}{before_wins}")
        wins = {c["id"]: i < (own_wins if c in own else before_wins)
                for group in (own, before) for i, c in enumerate(group)}
        messages = [ai, *[ToolMessage(content=json.dumps(
            {"seed": c["args"]["seed"], "ended": "success" if wins[c["id"]] else "died", "steps": 50,
             "task_success": wins[c["id"]], "death_cause": None if wins[c["id"]] else "zombie",
             "achievements_before": [], "achievements_unlocked": ["collect_wood"], "trace": "step 1: do"}),
            name="run_code_in_env", tool_call_id=c["id"]) for c in calls]]
        current = {**state, "messages": messages, "best": {}}
        update, result = record_round(current)
        current = with_update(current, update)
        assert result is not None and update["env_steps_spent"] == 50 * len(calls)  # both count toward the budget
        # the next round says what its own tests used: it compares again only for a new version
        assert _last_round_steps(current, "collect_coal", "collect_coal") == 50 * len(own)
        return current, report_text(current, settings)

    current, text = measured(own_wins=2, before_wins=7)
    kept = current["best"]["collect_coal"]
    assert kept["success_rate"] == 7 / 8 and kept["helpers"] == {"stay_alive": "the built-in"}
    assert round_passes(round_best(current["last_result"]), settings.target_success)
    assert not any("def stay_alive" in source for source in kept["sources"])
    skill = skill_from_attempt("collect_coal", kept, 0.5)
    held_out = code_pool.pool_of([("collect_wood", wood), ("collect_coal", skill)])
    assert held_out.sources["stay_alive"].strip() == builtin.strip()  # later tests and held-out play: the built-in
    assert "2 success" in text and ("the same seeds with the earlier `stay_alive` (the built-in) in place of yours: "
                                    "7 of 8 succeeded, 8 reached your action; yours did not succeed on 2 more of "
                                    "these seeds") in text, text
    assert ("so this round counts as your code with the earlier one (a pass or fail keeps the best round so far; "
            "your next revision is tested with yours again, and a round of it is kept only where it does better "
            "than the best; `def stay_alive(game): yield from "
            "builtin_stay_alive(game)` goes back to the built-in); on these 8 seeds the two are within chance "
            "(paired: 0 seeds only yours won, 5 only the earlier one; McNemar p = 0.06), and each round replays the "
            "same worlds") in text, text
    _, text = measured(own_wins=0, before_wins=7)  # 7 seeds one way: told apart, no word of chance
    assert "yours did not succeed on 2 more" in text and "within chance" not in text, text

    # the earlier helper, which every skill before was tested with, stays unless the rewrite gains 2 seeds on it
    for own_wins in (5, 6):
        current, text = measured(own_wins=own_wins, before_wins=5)
        kept = current["best"]["collect_coal"]
        assert kept["success_rate"] == 5 / 8 and not any("rewritten" in source for source in kept["sources"])
        assert "yours did not succeed on 2 more of these seeds" in text, text
    # a revision of the action alone plays the rewrite that lost, not compared again: only a better round is kept
    lost = {**current, "code_versions": state["code_versions"]}
    # said before the next round, whatever the budget: the loaded rewrite plays again as it is (an answerer raised
    # its `max_steps` to have the earlier one played, and had its losing rewrite played again)
    roomy = fast_context(lost, settings, SubtaskCode(lost, settings), "code", target, [], room="roomy")
    assert roomy["limits"]["helpers_compared_already"] == {"stay_alive": "the built-in"}
    assert ("Your rewrite of `stay_alive` loaded now was compared with the earlier one already: the next round plays "
            "it again as it is") in messages_for("fast", roomy)[-1].content
    compact = fast_context(lost, settings, SubtaskCode(lost, settings), "code", target, [])
    assert "helpers_compared_already" not in compact["limits"]
    fresh = fast_context(state, settings, SubtaskCode(state, settings), "code", target, [], room="roomy")
    assert "helpers_compared_already" not in fresh["limits"]  # the rewrite as first sent: not compared yet
    command, later = write_at(lost, rewrite + "\n\n" + action.replace("yield 'do'", "yield 'noop'\n    yield 'do'"))
    assert len(later) == n and command.update["last_attempt"]["rewrite_key"]
    for wins, kept_rate in ((5, 5 / 8), (6, 6 / 8)):
        after = {**lost, "last_attempt": command.update["last_attempt"], "messages": [
            AIMessage(content="", tool_calls=later, id=f"later{wins}"),
            *[ToolMessage(content=json.dumps(
                {"seed": c["args"]["seed"], "ended": "success" if i < wins else "died", "steps": 50,
                 "task_success": i < wins, "death_cause": None if i < wins else "zombie", "achievements_before": [],
                 "achievements_unlocked": ["collect_wood"], "trace": "step 1: do"}),
                name="run_code_in_env", tool_call_id=c["id"]) for i, c in enumerate(later)]]}
        update, _ = record_round(after)
        assert update["best"]["collect_coal"]["success_rate"] == kept_rate
        assert any("rewritten" in source for source in update["best"]["collect_coal"]["sources"]) == (wins == 6)
    current, text = measured(own_wins=7, before_wins=5)
    kept = current["best"]["collect_coal"]
    assert kept["success_rate"] == 7 / 8 and any("rewritten" in source for source in kept["sources"])
    assert "yours succeeded on 2+ more of these seeds, so this round counts as yours; on these 8 seeds the two are " \
           "within chance" in text, text

    # once per version of the rewrite: a revision of the action alone plays it as compared already
    state = {**current, "code_versions": state["code_versions"]}
    _, again = write(rewrite + "\n\n" + action.replace("yield 'do'", "yield 'noop'\n    yield 'do'"))
    assert len(again) == n
    # compared already: nothing said of a skipped comparison, even on a budget too short for one
    compared = state
    state = {**compared, "env_steps_spent": compared["budget_steps"] - 100}
    command, _ = write(rewrite + "\n\n" + action.replace("yield 'do'", "yield 'noop'\n    yield 'noop'"))
    assert "helpers_not_played" not in command.update["last_attempt"]
    state = compared
    _, again = write(rewrite.replace("rewritten", "rewritten again") + "\n\n" + action)
    assert len(again) == 2 * n  # a new version is compared
    # and only while the budget leaves three more rounds of this size for its own tests
    state = {**state, "env_steps_spent": state["budget_steps"] - 3 * 50 * n + 1}
    # else the one before plays alone: here the very program the last comparison ran with it, so not again
    same = _write_code(state, {}, settings, SubtaskCode(state, settings), target, {
        "code": rewrite.replace("rewritten", "rewritten anew") + "\n\n" + action, "max_steps": None}, [target],
        AIMessage(content="", id="same"))
    assert same.goto == "critic" and "did not play" in same.update["fast_error"]
    action = action.replace("yield 'do'", "yield 'do'\n    yield 'noop'")
    command, again = write(rewrite.replace("rewritten", "rewritten anew") + "\n\n" + action)
    # else the one before plays alone (an answerer set `max_steps` high to have its rewrite taken untested)
    assert len(again) == n and '"""rewritten anew"""' not in again[0]["args"]["code"]
    assert code_pool.definitions(again[0]["args"]["code"])["stay_alive"].strip() == builtin.strip()
    assert "rewrite_key" not in command.update["last_attempt"]
    assert helpers_not_played_text(command.update["last_attempt"]) == (
        "this round played the earlier `stay_alive` (the built-in) in place of your rewrite, which plays only "
        "beside it on the same seeds: 1,199 steps are left, fewer than 3 more rounds at your last round's 400 "
        "steps")
    # the attempt it makes keeps no rewrite: a skill of it plays the built-in, in later tests and held-out play
    short = {**state, "code_versions": command.update["code_versions"], "last_attempt": command.update["last_attempt"],
             "messages": [AIMessage(content="", tool_calls=again, id="short"), *[ToolMessage(content=json.dumps(
                 {"seed": c["args"]["seed"], "ended": "success", "steps": 50, "task_success": True,
                  "achievements_before": [], "achievements_unlocked": ["collect_wood"], "trace": "step 1: do"}),
                 name="run_code_in_env", tool_call_id=c["id"]) for c in again]]}
    update, result = record_round(short)
    assert result is not None and result["helpers"] == {"stay_alive": "the built-in"}
    assert not any("rewritten" in source for source in result["sources"]) and result["sources"]
    skill = skill_from_attempt("collect_coal", update["best"]["collect_coal"], 0.5)
    assert code_pool.pool_of([("collect_wood", wood), ("collect_coal", skill)]).sources["stay_alive"].strip() == \
        builtin.strip()
    # another rewrite alone, still no room: the same program again, not tested again, and said why
    after = with_update(short, update)
    resent = _write_code(after, {}, settings, SubtaskCode(after, settings), target, {
        "code": rewrite.replace("rewritten", "rewritten twice") + "\n\n" + action, "max_steps": None}, [target],
        AIMessage(content="", id="resent"))
    assert resent.goto == "critic" and resent.update["fast_error"].startswith(
        "the fast agent resubmitted unchanged code (its rewrite of `stay_alive` (the built-in) did not play: ")
    # where both sets at their full length would not fit, a `max_steps` that lets them run and covers every test
    # run so far is taken instead (an answerer asked 5,000 where 4,820 fit, and lost its round to the built-in)
    state = {**state, "env_steps_spent": state["budget_steps"] - 2 * 60 * n + 1,
             "results": []}
    command, again = write(rewrite.replace("rewritten", "rewritten once more") + "\n\n" + action)
    assert len(again) == 2 * n and all(c["args"]["max_steps"] == 59 for c in again)
    assert command.update["last_attempt"]["max_steps"] == 59 and helpers_not_played_text(
        command.update["last_attempt"]) == ""
    assert max_steps_capped_text(command.update["last_attempt"]) == (
        "this round ran with `max_steps` 59, not the 60 asked: both sets of tests (yours and the earlier helpers') "
        "fit the budget at that length, and it covers every test run so far")
    # the same answer again is the same test, though it ran lower than asked: the critic judges it, untested
    ran = {**state, "code_versions": command.update["code_versions"], "last_attempt": command.update["last_attempt"]}
    resent = _write_code(ran, {}, settings, SubtaskCode(ran, settings), target, {
        "code": rewrite.replace("rewritten", "rewritten once more") + "\n\n" + action, "max_steps": 60}, [target],
        AIMessage(content="", id="again"))
    assert resent.goto == "critic"
    # not where a test run so far took more steps than that: no test is cut for it, the built-in plays alone
    state = {**state, "results": [{"subtask": "collect_coal", "kind": "code", "per_seed": [{"steps": 60}]}]}
    command, again = write(rewrite.replace("rewritten", "rewritten once more") + "\n\n" + action)
    assert len(again) == n and all(c["args"]["max_steps"] == 60 for c in again)
    assert "max_steps_capped" not in command.update["last_attempt"]
    assert helpers_not_played_text(command.update["last_attempt"]).endswith(
        ": both sets of tests at full length need 960 steps and 959 are left (a `max_steps` of 59 or less lets them "
        "run)")
    # a round that rewrites none, on the same short budget, has nothing to say
    state = {**state, "code_versions": []}
    command, _ = write(action)
    assert helpers_not_played_text(command.update["last_attempt"]) == ""


def test_a_helper_the_round_judges_or_never_calls_is_not_set_against_the_built_in(tmp_path):
    """A collect_drink subtask's own action is collect_drink: the round judges it, it is no rewrite beside it
    (kept alone, the built-in would leave the skill with no source of its own). A first subtask's action that
    defines stay_alive but never calls it plays the same program either way: nothing to compare."""
    from nodes.fast import _write_code

    settings = RunSettings(out_dir=tmp_path, test_max_steps=60)
    for name, code in [("collect_drink", "def collect_drink(game):\n    \"\"\"mine\"\"\"\n    yield 'do'\n"),
                       ("collect_wood", "def stay_alive(game):\n    yield 'noop'\n\n\n"
                                        "def collect_wood(game):\n    yield 'do'\n")]:
        target = {"name": name, "kind": "code"}
        state = {"plan": [{"name": name}], "subtask_index": 0, "skills": {}, "decomposition": {"sub_actions": [target]},
                 "code_versions": [], "messages": [], "results": [], "budget_steps": 100_000}
        command = _write_code(state, {}, settings, SubtaskCode(state, settings), target,
                              {"code": code, "max_steps": None}, [target], AIMessage(content=""))
        calls = command.update["messages"][0].tool_calls
        assert len(calls) == settings.code_test_episodes, name
        assert "helpers_before" not in command.update["last_attempt"], name
        # on a budget too short for a comparison: nothing to compare, so its `max_steps` stands and nothing is said
        short = {**state, "budget_steps": 2 * 50 * settings.code_test_episodes}
        command = _write_code(short, {}, settings, SubtaskCode(short, settings), target,
                              {"code": code, "max_steps": None}, [target], AIMessage(content=""))
        assert all(c["args"]["max_steps"] == 60 for c in command.update["messages"][0].tool_calls), name
        assert not {"max_steps_capped", "helpers_not_played"} & set(command.update["last_attempt"]), name


def test_the_critic_judges_the_attempt_the_round_stands_for(tmp_path):
    """Own tests 2 of 8, the same seeds with the built-in stay_alive 8 of 8: the round passes on the latter
    (measure sends it to the critic), so the critic hears its figures and meets the target with them, and the
    rule-based expert passes it (it moved the subtask to RL on the own tests' 2 of 8)."""
    from langchain_core.messages import ToolMessage

    from nodes.attempt.results import summarise_code_runs
    from nodes.context import RunContext
    from nodes.critic import critic
    from nodes.models.expert import ExpertModel

    def runs(wins: int) -> list[dict]:
        return [{"seed": i, "task_success": i < wins, "ended": "success" if i < wins else "died", "steps": 40,
                 "achievements_before": [], "achievements_unlocked": [], "trace": "step 1: do"} for i in range(8)]

    before = {**summarise_code_runs(runs(8)), "ranks_above": True, "helpers": {"stay_alive": "the built-in"},
              "sources": ["def collect_coal(game):\n    yield 'do'\n"], "entry": "collect_coal"}
    result = {**summarise_code_runs(runs(2)), "subtask": "collect_coal", "sub_action": "collect_coal",
              "outer_iter": 0, "inner_iter": 0, "helpers_before": before,
              "sources": ["def stay_alive(game):\n    yield 'noop'\n\n\ndef collect_coal(game):\n    yield 'do'\n"],
              "entry": "collect_coal"}
    ai = AIMessage(content="", tool_calls=[{"name": "run_code_in_env", "args": {}, "id": "c1"}], id="r1")
    target = {"name": "collect_coal", "kind": "code", "reason": "r"}
    state = {"task": "collect_coal", "plan": [{"name": "collect_coal"}], "subtask_index": 0, "skills": {},
             "results": [result], "best": {"collect_coal": before}, "inner_iter": 0, "outer_iter": 0,
             "decomposition": {"subtask": "collect_coal", "reason": "", "sub_actions": [target]},
             "messages": [ai, ToolMessage(content="{}", name="run_code_in_env", tool_call_id="c1")],
             "counted_round": "r1", "last_result": result,
             "last_attempt": {"code": "def collect_coal(game):\n    yield 'do'\n", "report": "a report"}}
    seen: dict = {}

    class Seen(ExpertModel):
        def structured(self, role, messages, schema, context=None):
            seen.update(context or {}, prompt=str(messages[-1].content))
            return super().structured(role, messages, schema, context)

    class Runtime:
        context = RunContext(settings=RunSettings(out_dir=tmp_path, task="collect_coal"), model=Seen())

    command = critic(state, Runtime())
    assert seen["meets_target"] and seen["judged_count"] == (8, 8) and seen["result"]["success_rate"] == 1.0
    # the prompt says whose stay_alive these runs played: the report it shows is the rewrite's own, whose figures
    # it gives too (an answerer read the built-in's 2 of 8 beside its rewrite's 3 of 8 report as one run)
    assert ("## Measured\nThese figures are the runs that played the earlier `stay_alive` (the built-in) in place "
            "of the rewrite (the rewrite did not succeed on 2 more of the same seeds than they did): the code and "
            "report below are the rewrite's (2 of 8 succeeded with the rewrite).\n") in seen["prompt"]
    from prompts.templates import _measured_text
    chained = _measured_text({**before, "kind": "code", "prerequisites": ["collect_wood"], "started": 6,
                              "started_successes": 5}, "collect_coal")
    assert chained.startswith("In words: 8 of 8 test runs succeeded from a fresh world") and (
        "the skill threshold judge). These figures are the runs that played the earlier `stay_alive`") in chained
    # a round whose rewrite did not play at all (no budget to compare it): the report is of those runs
    alone = _measured_text({**before, "rewrite_not_played": True}, "collect_coal")
    assert alone.startswith("These runs played the earlier `stay_alive` (the built-in) in place of the rewrite in the "
                            "code below, which the budget left no room to compare with it: the report below is of "
                            "these runs.\n") and "rewrite_not_played" not in alone, alone
    assert command.update["critiques"][0]["verdict"] == "pass"
    assert command.update["skills"]["collect_coal"]["sources"] == before["sources"]  # without the rewrite

    # a round the critic sends back carries what it measured into the next outer iteration, so the repair
    # prompt can tell an 8 of 8 sent back from a failure
    from nodes.schemas import Critique
    from prompts.templates import _last_attempt

    class SendsBack(ExpertModel):
        def structured(self, role, messages, schema, context=None):
            if role == "critic":
                return Critique(sub_action="collect_coal", verdict="revise", success_rate=1.0, feedback="shorter")
            return super().structured(role, messages, schema, context)

    class Later:
        context = RunContext(settings=RunSettings(out_dir=tmp_path, task="collect_coal"), model=SendsBack())

    measured = {"success_rate": 1.0, "episodes": 8, "started": 8}
    command = critic({**state, "budget_steps": 10_000, "env_steps_spent": 0,
                      "last_attempt": {**state["last_attempt"], "result": measured}}, Later())
    previous = command.update["previous_attempt"]
    assert previous is not None, (command.goto, command.update.get("critiques"), command.update.get("events"))
    assert previous["result"] == measured
    assert "Every test run succeeded: the critic's feedback says" in _last_attempt(previous, "code")[1]


def test_the_best_attempt_leaves_out_what_the_code_above_shows_word_for_word(tmp_path):
    """An answerer's repair prompt carried one program twice: the critic's round above and the best round below
    shared ten of sixteen functions (7,700 characters). The best attempt shows only the definitions that differ
    from the code above, and names the rest; a program with a statement that binds no name is shown whole."""
    from nodes.fast import fast_context
    from prompts.templates import messages_for

    settings = RunSettings(out_dir=tmp_path, test_max_steps=100)
    skills = {n: _skill(k, n, None) for k, n in enumerate(DIAMOND_CHAIN[:2])}
    sub = {"name": "make_wood_pickaxe", "kind": "code", "template": "make"}
    shared = "def walk(game):\n    \"\"\"a long shared helper\"\"\"\n    yield 'move_left'\n"
    best_own = "def make_wood_pickaxe(game):\n    yield from walk(game)\n    yield 'make_wood_pickaxe'\n"
    above_own = "def make_wood_pickaxe(game):\n    yield 'noop'\n"
    best = {"kind": "code", "subtask": "make_wood_pickaxe", "success_rate": 0.625, "successes": 5, "episodes": 8,
            "outer_iter": 0, "inner_iter": 1, "sources": [shared + "\n\n" + best_own]}
    later = {**best, "success_rate": 0.25, "successes": 2, "inner_iter": 3}
    state = dict(_state_at(2, skills), decomposition={"sub_actions": [sub]}, best={"make_wood_pickaxe": best},
                 last_result=later, last_attempt={"code": shared + "\n\n" + above_own, "report": "seed 1: died"})

    def shown(current: dict) -> tuple[dict, str]:
        facts = fast_context(current, settings, SubtaskCode(current, settings), "code", sub, [], "roomy")
        text = messages_for("fast", facts)[-1].content
        return facts["best_attempt"], text.split("## Your best attempt", 1)[1]

    facts, section = shown(state)
    assert facts["same_as_above"] == ["walk"] and facts["code"].strip() == best_own.strip()
    assert "a long shared helper" not in section and best_own.rstrip() in section
    assert "it holds `walk`, word for word as in the code above (not repeated)" in section
    assert "send the definitions shown here again (the ones named are loaded already)" in section
    # nothing in common: whole, as before
    facts, section = shown({**state, "last_attempt": {"code": above_own, "report": "seed 1: died"}})
    assert "same_as_above" not in facts and "a long shared helper" in section
    assert "send its definitions again" in section
    # every definition above: said so, no empty code block
    facts, section = shown({**state, "last_attempt": {"code": shared + "\n\n" + best_own, "report": "x"},
                            "last_result": later})
    assert "Every definition of it (`walk`, `make_wood_pickaxe`) is in the code above" in section
    assert "```python" not in section
    # a statement that binds no name: shown whole
    odd = {**best, "sources": [shared + "\nprint('x')\n\n" + best_own]}
    facts, section = shown({**state, "best": {"make_wood_pickaxe": odd}})
    assert "same_as_above" not in facts and "a long shared helper" in section
