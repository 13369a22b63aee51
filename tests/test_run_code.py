"""run_code_in_env: agent code tested in a fresh episode inside the sandbox; every failure comes
back as a report and the caller goes on."""

from __future__ import annotations

import os

import pytest

from envs.seeds import EVAL_SEED_BASE, VALIDATION_SEED_BASE
from nodes.attempt.results import summarise_code_runs
from tools.run_code import (
    VITALS_HEADING,
    CodeRunReport,
    run_code,
    run_code_in_env,
    summarise_reports_for_agent,
)
from tools.trace import TraceBuilder, reached_action

CHOP_WOOD = '''
def main(game):
    for _ in range(5):
        tree = game.nearest("tree")
        if tree is not None:
            break
        yield from game.explore(10)
    print("tree at", tree)
    yield from game.go_to(tree)
    for _ in range(10):
        yield "do"
        if game.has("wood"):
            return
'''

FAST = dict(wall_time_s=3.0)


def assert_caller_goes_on():
    report = run_code("def main(game):\n    yield 'noop'\n    yield 'noop'\n", max_steps=10, **FAST)
    assert report.ok and report.steps == 2, report.error


def test_simple_coded_action_collects_wood(tmp_path):
    report = run_code(CHOP_WOOD, task="collect_wood", seed=0, max_steps=200, gif=True,
                      output_dir=str(tmp_path), wall_time_s=20)
    assert report.ok, report.error
    assert report.task_success and "collect_wood" in report.achievements_unlocked
    assert report.inventory_before["wood"] == 0 and report.inventory_after["wood"] >= 1
    assert 0 < report.steps <= 200
    assert report.action == "main"
    assert "print at step" in report.trace and "unlocked collect_wood" in report.trace
    assert report.gif_path and os.path.getsize(report.gif_path) > 0
    assert os.path.dirname(report.gif_path) == str(tmp_path)


@pytest.mark.parametrize("source, needle", [
    ("import os\ndef main(game):\n    yield 'noop'\n", "line 1: import of 'os' is not allowed"),
    ("import subprocess\n", "import of 'subprocess' is not allowed"),
    ("import socket\n", "import of 'socket' is not allowed"),
    ("def main(game):\n    open('/tmp/x', 'w')\n    yield 'noop'\n", "line 2: the name 'open' is not allowed"),
    ("def main(game):\n    __import__('os')\n    yield 'noop'\n", "the name '__import__' is not allowed"),
    ("x = ().__class__.__bases__[0].__subclasses__()\n", "attribute '__subclasses__' is not allowed"),
    ("def main(game):\n    w = getattr(game, '_obs')\n    yield 'noop'\n", "the name 'getattr' is not allowed"),
    ("def main(game):\n    game.health = 9\n    yield 'noop'\n", "the game API is read-only"),
    ("def main(game):\n    yield 'noop'\n    if x\n", "line 3: syntax error"),
])
def test_unsafe_or_broken_code_is_rejected_before_running(source, needle):
    report = run_code(source, **FAST)
    assert not report.ok and report.failure_kind == "unsafe"
    assert needle in report.error
    assert report.steps == 0


def test_changing_the_returned_inventory_does_not_change_the_game():
    code = ("def main(game):\n    inv = game.inventory\n    inv['diamond'] = 99\n    yield 'noop'\n"
            "    print('diamonds', game.inventory['diamond'])\n")
    report = run_code(code, max_steps=5, **FAST)
    assert report.ok, report.error
    assert report.inventory_after["diamond"] == 0
    assert "diamonds 0" in report.trace


def test_endless_loop_at_top_level_times_out_and_caller_goes_on():
    report = run_code("while True:\n    pass\n", wall_time_s=1.5)
    assert not report.ok and report.failure_kind == "timeout"
    assert "timed out after 1.5 s" in report.error
    assert_caller_goes_on()


def test_generator_that_never_yields_is_stopped_with_its_line():
    code = "def main(game):\n    n = 0\n    while True:\n        n += 1\n    yield 'noop'\n"
    report = run_code(code, **FAST)
    assert not report.ok and report.failure_kind == "runtime"
    assert "in main" in report.error and "no action yielded" in report.error
    assert "line 3" in report.error or "line 4" in report.error  # wherever the timer interrupted it


def test_loop_that_swallows_the_step_timer_is_killed_and_steps_are_counted():
    code = ("def main(game):\n    for _ in range(5):\n        yield 'noop'\n    while True:\n"
            "        try:\n            while True:\n                x = 1\n        except Exception:\n"
            "            pass\n")
    report = run_code(code, wall_time_s=3.5)
    assert not report.ok and report.failure_kind == "timeout"
    assert report.steps == 5 and "after 5 steps" in report.error
    assert report.inventory_before and report.inventory_after
    assert_caller_goes_on()


def test_memory_bomb_hits_the_memory_limit_and_caller_goes_on():
    code = "def main(game):\n    yield 'noop'\n    big = [0] * (10 ** 9)\n    yield 'noop'\n"
    report = run_code(code, memory_mb=128, **FAST)
    assert not report.ok and report.failure_kind == "memory"
    assert "exceeded the memory limit of 128 MiB" in report.error and "line 3" in report.error
    assert report.steps == 1
    top_level = run_code("big = 'x' * (10 ** 10)\n", memory_mb=128, **FAST)
    assert top_level.failure_kind == "memory" and "128 MiB" in top_level.error
    assert_caller_goes_on()


def test_runtime_error_names_the_line_in_the_agent_code():
    code = "def main(game):\n    yield 'noop'\n    x = {}['missing']\n"
    report = run_code(code, **FAST)
    assert not report.ok and report.failure_kind == "runtime" and report.ended == "error"
    assert "line 3" in report.error and "KeyError" in report.error
    assert report.steps == 1 and report.death_cause is None
    text = report.to_text()
    assert "ended: error (runtime) after 1 steps" in text and "line 3" in text and "last view:\n@ you" in text


def test_invalid_yielded_action_is_an_error():
    report = run_code("def main(game):\n    yield 'fly'\n", **FAST)
    assert not report.ok and "yielded 'fly'; expected one of the 17 action names" in report.error
    assert report.steps == 0


def test_action_selection_and_unknown_action():
    code = "def first(game):\n    yield 'noop'\n\ndef second(game):\n    yield 'noop'\n    yield 'noop'\n"
    assert run_code(code, **FAST).action == "second"  # no `main`: the last one defined
    chosen = run_code(code, action="first", **FAST)
    assert chosen.action == "first" and chosen.steps == 1
    missing = run_code(code, action="third", **FAST)
    assert missing.failure_kind == "load" and "defines: first, second" in missing.error


def test_step_budget_is_respected():
    report = run_code("def main(game):\n    while True:\n        yield 'noop'\n", max_steps=7, **FAST)
    assert report.ok and report.steps == 7


IDLE = "def main(game):\n    while True:\n        yield 'noop'\n"

# Explores until it has seen lava, walks next to it and steps in: on seed 1 it finds lava in ~50 steps.
INTO_LAVA = '''
def main(game):
    while game.nearest("lava") is None:
        yield from game.explore(10)
    lava = game.nearest("lava")
    for move in game.path_to(lava, adjacent=True) or []:
        yield move
    x, y = game.pos
    step = {(1, 0): "move_right", (-1, 0): "move_left", (0, 1): "move_down", (0, -1): "move_up"}
    yield step.get((lava[0] - x, lava[1] - y), "noop")
    yield "noop"
'''


def test_how_the_episode_ended_is_reported():
    idle = run_code(IDLE, seed=3, max_steps=60, **FAST)  # zombies come later (test_a_zombie_death...)
    assert idle.ok and idle.ended == "out_of_steps" and idle.steps == 60 and idle.death_cause is None
    assert idle.achievements_before == [] and idle.inventory_after["health"] > 0
    assert idle.last_view.startswith("@ you, on grass") and "daylight" in idle.last_view
    assert len(idle.last_view) <= 600 and "ended: out of steps after 60 steps" in idle.to_text()

    returned = run_code("def main(game):\n    yield 'noop'\n", max_steps=60, **FAST)
    assert returned.ok and returned.ended == "action_returned"

    code = ("@coded_action(precondition=lambda game: game.has('diamond'))\n"
            "def mine(game):\n    yield 'do'\n")
    nothing = run_code(code, **FAST)
    assert nothing.ended == "precondition" and nothing.steps == 0 and nothing.last_view

    wood = run_code(CHOP_WOOD, seed=0, max_steps=200, wall_time_s=20)
    assert wood.ended == "success" and "ended: success at step" in wood.to_text()


def test_a_test_plays_the_code_on_past_the_achievement_to_its_return():
    """Held-out play goes on from where a skill returns, so a test does too (answerers' skills starved after
    their achievement, where no test had run them); a skill that never returns is stopped, a death counts."""
    from tools.run_code import AFTER_SUCCESS_STEPS

    then_idle = CHOP_WOOD.replace("            return", "            for _ in range(30):\n"
                                  "                yield 'noop'\n            return")
    report = run_code(then_idle, seed=0, max_steps=500, wall_time_s=20)
    assert report.ended == "success" and report.task_success and not report.stopped_after_success
    assert report.steps == report.success_step + 30
    assert f"success at step {report.success_step} (returned at {report.steps})" in report.to_text()
    assert f"{report.seed} at step {report.success_step} (returned at {report.steps})" in \
        summarise_reports_for_agent([report])

    forever = CHOP_WOOD.replace("            return", "            while True:\n                yield 'noop'")
    stopped = run_code(forever, seed=7, max_steps=2000, wall_time_s=30)  # no zombie comes to the idle player
    assert stopped.task_success and stopped.stopped_after_success
    assert stopped.steps == stopped.success_step + AFTER_SUCCESS_STEPS
    assert f"(still running at {stopped.steps}, stopped)" in stopped.to_text()

    # where held-out play ends at the achievement (the plan's last subtask) the test does too: what came after it
    # cannot undo the success (a diamond mined, the player dead 13 steps later, was counted a failure)
    ends = run_code(forever, seed=7, max_steps=2000, wall_time_s=30, after_success_steps=0)
    assert ends.task_success and ends.ended == "success" and ends.steps == ends.success_step == stopped.success_step

    capped = run_code(forever, seed=7, max_steps=40, wall_time_s=30)  # the test's step limit stops it first
    assert capped.task_success and capped.stopped_after_success and capped.end_state is None
    assert f"(still running at {capped.steps}, stopped)" in capped.to_text()
    assert report.end_state is not None and report.end_state.steps == report.steps  # where the chain goes on

    # held-out play goes on after a skill that raised once its goal unlocked: so does the test's verdict
    raised = run_code(CHOP_WOOD.replace("            return", "            yield 'noop'\n            x = 1 // 0"),
                      seed=0, max_steps=500, wall_time_s=20)
    assert raised.task_success and raised.ended == "success" and raised.failure_kind == "runtime"
    assert f"success at step {raised.success_step} (raised an error at {raised.steps})" in raised.to_text()

    then_lava = CHOP_WOOD.replace("            return", "            break") + INTO_LAVA.split("def main(game):\n")[1]
    died = run_code(then_lava, seed=2, max_steps=1000, wall_time_s=30)
    assert died.ended == "died" and died.death_cause == "lava" and not died.task_success
    assert "collect_wood" in died.achievements_unlocked and died.success_step < died.steps
    assert f"{died.steps - died.success_step} steps after the achievement, before the code returned" in \
        summarise_reports_for_agent([died])
    same_step = {**died.model_dump(mode="json"), "success_step": died.steps}
    assert "(lava), on the step of the achievement" in summarise_reports_for_agent([same_step])


def test_a_death_in_lava_is_reported_with_its_cause_at_the_end_of_the_trace():
    report = run_code(INTO_LAVA, seed=1, max_steps=1000, wall_time_s=20)
    assert report.ok and report.ended == "died" and report.death_cause == "lava"
    assert "health 0" in report.death_detail and "lava -9" in report.death_detail
    last_lines = report.trace.splitlines()[-2:]
    assert "health -9 (lava)" in last_lines[0] and "the player died (lava)" in last_lines[1]
    assert "on lava" in report.last_view
    text = report.to_text()
    assert f"died at step {report.steps} (lava)" in text and "death: lava;" in text


def test_a_zombie_death_is_reported_and_kept_in_a_shortened_trace():
    # standing still on seed 2: zombies come at dusk and kill the player in about 150 steps
    report = run_code(IDLE, seed=2, max_steps=2000, wall_time_s=20)
    assert report.ended == "died" and report.death_cause == "zombie" and report.steps < 400
    assert "(zombie)" in report.trace.splitlines()[-2] and "died (zombie)" in report.trace.splitlines()[-1]
    assert "Z zombie" in report.last_view and "zombie 1 " in report.last_view


def test_a_death_inside_a_game_api_helper_says_since_when_the_helper_ran():
    """An answerer could not tell why the player died inside shelter(): begun after nightfall, or walking for long.
    The line names the outermost helper of the game API the code was in and the step it had been in it since."""
    wait_then_explore = ("def main(game):\n    for _ in range(150):\n        yield 'noop'\n"
                         "    while True:\n        yield from game.explore(40)\n")
    report = run_code(wait_then_explore, seed=2, max_steps=2000, wall_time_s=20)
    assert report.ended == "died" and report.running_at_end.startswith("main > explore")
    assert report.helper_since == "explore since step 151"  # the first step it took inside explore
    line = next(x for x in summarise_reports_for_agent([report]).splitlines() if x.startswith("seed 2:"))
    assert ", explore since step 151; at death:" in line
    assert run_code(IDLE, seed=2, max_steps=2000, wall_time_s=20).helper_since == ""  # in no helper: nothing said


def test_a_report_keeps_the_bars_every_50_steps_and_a_detail_shows_them_ending_at_the_death():
    # answerers could not tell from a trace's end when food ran low or when the night caught the player
    report = run_code(IDLE, seed=2, max_steps=2000, wall_time_s=20)
    samples = report.vitals.split(", ")
    steps = [int(s.split(" ")[0].rstrip("*")) for s in samples]
    assert steps[:-1] == list(range(0, 50 * (len(steps) - 1), 50)) and steps[-1] == report.steps
    assert samples[0] == "0 9/9/9/9" and samples[-1].split(" ")[1].startswith("0/")  # health 0 at the death
    # the bars drop as the steps pass: food about 1 per 25 steps awake
    food = [int(s.split(" ")[1].split("/")[1]) for s in samples]
    assert food == sorted(food, reverse=True) and food[0] - food[-1] >= report.steps // 25 - 2
    assert samples[-1].split(" ")[0].endswith("*") == (report.daylight_at_end < 0.4)  # '*': dark
    assert samples[1].endswith(" main") and report.vitals.count("main") == 1  # named once, where it began
    detail = summarise_reports_for_agent([report], max_chars=2350)
    line = next(row for row in detail.splitlines() if row.startswith("bars by step"))
    assert line.endswith(samples[-1]) and "health/food/drink/energy" in line
    assert f"{VITALS_HEADING}: {report.vitals}" in report.to_text()


def test_a_crowded_report_still_shows_the_first_detail_s_timeline():
    # eight deaths with long lines: a third of what the first detail's death lines left was too little for
    # any timeline (an answerer on crafter_score never saw one); the timeline now comes before view and trace
    vitals = ", ".join(f"{t}{'*' if t % 300 > 160 else ''} 9/{max(0, 9 - t // 60)}/7/5" for t in range(0, 900, 50))
    rows = [{"seed": 1900 + k, "ok": True, "ended": "died", "steps": 880 + k, "death_cause": "starvation",
             "daylight_at_end": 0.1, "running_at_end": "main > eat_plant > stay_alive > eat_up > eat_cow",
             "death_detail": "health lost in the last steps: " + ", ".join(f"step {800 + 10 * i} zombie -2"
                                                                           for i in range(6))
                             + "; at the end: health 0, food 0, drink 7, energy 7",
             "inventory_after": {"health": 0, "food": 0, "drink": 7, "energy": 7, "sapling": 1, "wood": 3},
             "achievements_unlocked": ["collect_wood", "place_plant"], "vitals": vitals,
             "trace": "\n".join(f"step {t}: move_left" for t in range(850, 881)),
             "last_view": "@ you, on grass\n" + "\n".join("........." for _ in range(7))} for k in range(8)]
    text = summarise_reports_for_agent(rows, max_chars=2350)
    assert len(text) <= 2350
    first = text.split("--- detail of seed")[1]
    line = next(row for row in first.splitlines() if row.startswith(VITALS_HEADING))
    assert line.endswith("850* 9/0/7/5") and line.split(": ", 1)[1].startswith("0 9/9/7/5, ")


def test_a_detail_keeps_the_trace_s_end_before_the_view_s_rows():
    """The reported case: a first detail of about 830 characters whose death lines, timeline and view left
    its trace one line ('the player died'): the answerer never saw what the shelter did at night."""
    from tools.run_code import MIN_TRACE_CHARS, _detail

    label = "(in main > mine_coal > dig_material > stay_alive > shelter)"
    report = {"seed": 1803, "ok": True, "ended": "died", "steps": 515, "death_cause": "zombie",
              "daylight_at_end": 0.0, "death_detail": "health lost in the last steps: step 293 zombie -2, step 304 "
              "zombie -2, step 434 zombie -2, step 467 zombie -2, step 507 zombie -7, step 515 zombie -1; at the "
              "end: health 0, food 8, drink 5, energy 2",
              "vitals": "0 9/9/9/9, 100 9/6/5/6 mine_coal, 200* 6/7/6/6, 300 8/4/4/9, 400 9/6/5/5, 450 7/4/8/4, "
                        "500* 7/2/6/2, 515* 0/8/5/2",
              "trace": "\n".join(f"step {t}: move_right {label} -> energy -1" if t % 6 == 0 else f"step {t}: noop"
                                 for t in range(480, 515))
                       + "\nstep 515: the player died (zombie); health 0, food 8, drink 5, energy 2",
              "last_view": "@ you, on grass, facing right; night (daylight 0.00); health 0, food 8, drink 5, "
                           "energy 2\n" + "\n".join("..~~~~~~:" for _ in range(7)) + "\nlegend: ~ water, . grass"}
    detail = _detail(report, 830)
    trace = detail.split("trace (end):\n", 1)[1].split("last view:", 1)[0]
    assert len(detail) <= 830 and len(trace) >= MIN_TRACE_CHARS - 100 and trace.count("\nstep ") >= 8
    assert label in trace
    short = _detail({**report, "trace": "step 1: noop"}, 830)  # a short trace leaves the view its half
    assert short.count("..~~~~~~:") > detail.count("..~~~~~~:")


CHAIN_TO_WATER = '''
def wander(game):
    for _ in range(60):
        yield "noop"

def drink(game):
    for _ in range(1000):
        yield "noop"

def main(game):
    yield from wander(game)
    for _ in range(45):
        yield "noop"
    yield from drink(game)
'''


def test_the_timeline_names_the_skill_main_ran_where_it_changed_and_at_the_end():
    report = run_code(CHAIN_TO_WATER, seed=2, max_steps=130, wall_time_s=20)
    assert report.steps == 130 and report.running_at_end == "main > drink"
    assert [s.split(" ", 2)[2:] for s in report.vitals.split(", ")] == [[], ["wander"], ["main"], ["drink"]]
    assert report.vitals.split(", ")[-1].startswith("130")


def test_no_step_no_timeline():
    report = run_code("def main(game):\n    raise ValueError('no')\n    yield 'noop'\n", max_steps=10, **FAST)
    assert report.steps == 0 and report.vitals == ""
    assert "bars by step" not in summarise_reports_for_agent([report], max_chars=2350)


def test_a_long_timeline_is_thinned_over_the_whole_run_and_keeps_its_last_samples():
    from tools.run_code import VITALS_HEADING, _vitals_line

    vitals = ", ".join(f"{t} 9/{9 - t // 300}/8/7" + (" collect_iron" if t == 1000 else "")
                       for t in range(0, 3000, 50))
    line = _vitals_line(vitals, 320)
    assert len(line) <= 320 and line.startswith(f"{VITALS_HEADING}: 0 9/9/8/7, ")
    kept = [int(s.split(" ")[0]) for s in line.split(": ", 1)[1].split(", ")]
    assert kept[-4:] == [2800, 2850, 2900, 2950]  # the end as it is
    stride = kept[1] - kept[0]
    assert stride > 50 and kept[:-4] == list(range(0, kept[-5] + 1, stride))  # the rest evenly, from the start
    # the skill is said at the first kept sample after it changed, though its own sample was dropped
    named = [s for s in line.split(", ") if s.endswith("collect_iron")]
    assert len(named) == 1 and int(named[0].split(" ")[0]) == min(t for t in kept if t >= 1000)
    assert _vitals_line(vitals, 10) == "" and _vitals_line("0 9/9/9/9", 200).endswith(": 0 9/9/9/9")


def test_trace_drops_the_middle_and_keeps_the_end():
    trace = TraceBuilder(max_chars=1000)
    for t in range(1, 3001):
        trace.step(t, "do", ["wood +1"] if t % 2 else [])
    trace.note("step 3000: the player died (zombie)")
    text = trace.render()
    assert len(text) <= 1000
    assert text.startswith("step 1: do -> wood +1") and text.endswith("the player died (zombie)")
    assert "dropped from the middle" in text and "step 2999: do -> wood +1" in text
    head, tail = text.split("dropped from the middle")
    assert len(tail) > 2 * len(head)  # the end gets the larger share


def test_the_codes_prints_outlive_the_steps_dropped_around_them():
    """An answerer's print() diagnostics never reached its report: they had run before the trace's end. The
    trace keeps them when it drops its middle, and a detail shows the last of them above the trace's end."""
    trace = TraceBuilder(max_chars=1000)
    for t in range(1, 3001):
        if t in (700, 1500):
            trace.printed(t, f"DIAG no water known at step {t}")
        trace.step(t, "do", ["wood +1"] if t % 2 else [])
    trace.note("step 3000: the player died (zombie)")
    text = trace.render()
    assert len(text) <= 1000 and text.endswith("the player died (zombie)")
    assert "print at step 700: DIAG" in text and "print at step 1500: DIAG" in text
    marker = next(line for line in text.splitlines() if line.startswith("[... "))
    assert marker.endswith("; the code's prints from there follow ...]")  # marker, the rescued prints, the end
    assert text.index(marker) < text.index("step 700: DIAG") < text.index("step 1500: DIAG") < text.index(
        "step 2999: do")
    dropped = int(text.split("[... ", 1)[1].split(" ", 1)[0])
    # 3,003 lines (a step or its 'uneventful' marker each, 2 prints, the death): the marker counts what is gone
    assert dropped == 3003 - (len(text.splitlines()) - 1)
    report = {"seed": 5, "ended": "died", "task_success": False, "steps": 3000, "death_cause": "zombie",
              "achievements_unlocked": [], "inventory_after": {"health": 0}, "trace": text}
    detail = summarise_reports_for_agent([report], max_chars=900).split("--- detail of seed 5", 1)[1]
    prints, end = detail.split("trace (end):\n", 1)
    assert "print at step 1500: DIAG no water known at step 1500" in prints and "player died" in end
    assert "print at step" not in end
    # a print every 10 steps: those shown are the last before the trace's end, each once, none in a gap
    many = TraceBuilder(max_chars=4000)
    for t in range(1, 201):
        many.step(t, "noop", [])
        if t % 10 == 0:
            many.printed(t, f"DIAG {t}")
    many.note("step 200: the player died (zombie)")
    report = {**report, "steps": 200, "trace": many.render()}
    for budget in (600, 900, 1500):
        detail = summarise_reports_for_agent([report], max_chars=budget + 200).split("--- detail of seed 5", 1)[1]
        shown = [int(line.split()[3].rstrip(":")) for line in detail.splitlines() if line.startswith("print at step")]
        assert shown and shown == list(range(shown[0], 201, 10)), (budget, shown)


def test_summary_for_the_agent_keeps_the_error_line_and_stays_under_the_cap():
    error = run_code("def main(game):\n    yield 'noop'\n    x = {}['missing']\n", seed=4, **FAST)
    idle = run_code(IDLE, seed=3, max_steps=60, **FAST)
    reports = [idle, error.model_dump(mode="json")] + [idle.model_dump(mode="json")] * 8  # dicts as from a checkpoint
    text = summarise_reports_for_agent(reports, max_chars=1500)
    assert len(text) <= 1500
    first = text.splitlines()[0]
    assert first.startswith("code tests on 10 seeds (steps count from each episode's start):") and "1 error" in first
    assert "seed 4: error (runtime) after 1 steps; line 3 in main" in text
    detail = text[text.index("--- detail of seed 4"):]
    assert "error: line 3 in main (`x = {}['missing']`): KeyError" in detail and "last view:" in detail
    assert len(summarise_reports_for_agent(reports, max_chars=300)) <= 300

    died = run_code(INTO_LAVA, seed=1, max_steps=1000, wall_time_s=20)
    text = summarise_reports_for_agent([idle, died])
    assert "--- detail of seed 1 (died at step" in text and "the player died (lava)" in text
    assert summarise_reports_for_agent([]) == "no code tests ran"
    with pytest.raises(TypeError, match=r"reports\[0\]"):
        summarise_reports_for_agent(["ok"])
    with pytest.raises(ValueError, match="max_chars"):
        summarise_reports_for_agent([idle], max_chars=10)


@pytest.mark.parametrize("kwargs, needle", [
    (dict(seed=EVAL_SEED_BASE), "held-out evaluation seed"),
    (dict(seed=VALIDATION_SEED_BASE + 3), "validation seed"),
    (dict(seed=-1), "seed must be >= 0"),
    (dict(task="collect wod"), "unknown task"),
    (dict(max_steps=0), "max_steps must be an integer from 1"),
    (dict(after_success_steps=-1), "after_success_steps must be an integer from 0"),
])
def test_bad_inputs_are_refused_with_a_clear_message(kwargs, needle):
    report = run_code("def main(game):\n    yield 'noop'\n", **kwargs)
    assert not report.ok and report.failure_kind == "input" and needle in report.error


def test_tool_works_through_langgraph_tool_node():
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode([run_code_in_env]))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    call = {"name": "run_code_in_env", "id": "call-1",
            "args": {"code": "def main(game):\n    yield 'noop'\n", "max_steps": 3}}
    out = builder.compile().invoke({"messages": [AIMessage(content="", tool_calls=[call])]})
    message = out["messages"][-1]
    assert isinstance(message.artifact, CodeRunReport) and message.artifact.ok
    assert "steps used: 1" in message.content
    assert run_code_in_env.args_schema.model_json_schema()["required"] == ["code"]


def test_the_trace_says_which_functions_the_code_was_in():
    """Each step line says where the code was when it chose the action (its own functions and the game
    API's helpers, outermost first) where that changed, so a repair can tell which part of a chain acted."""
    code = ("def walk(game):\n"
            "    for _ in range(3):\n"
            "        yield from game.explore(2)\n"
            "\n"
            "def main(game):\n"
            "    yield from walk(game)\n"
            "    yield 'noop'\n")
    report = run_code(code, task="collect_wood", seed=0, max_steps=12)
    assert report.ok, report.error
    lines = report.trace.splitlines()
    assert lines[0] == "step 1: move_up (in main > walk > explore)"
    assert "(in" not in lines[1]  # unchanged: not repeated
    assert lines[6].startswith("step 7: noop (in main)")


def test_a_report_says_where_each_function_first_stepped_and_where_the_code_ended():
    """What a judged action's start is read from (tools.trace.reached_action): the first step taken inside
    each function, and the functions the code was in at its last step."""
    code = ("def walk(game):\n"
            "    yield from game.explore(3)\n"
            "\n"
            "def judged(game):\n"
            "    for _ in range(4):\n"
            "        yield 'noop'\n"
            "\n"
            "def main(game):\n"
            "    yield from walk(game)\n"
            "    yield from judged(game)\n")
    report = run_code(code, task="collect_wood", seed=0, max_steps=20)
    assert report.ok, report.error
    assert report.first_steps == {"main": 1, "walk": 1, "explore": 1, "judged": 4}
    assert report.running_at_end == "main > judged"


def test_a_death_before_the_judged_action_took_a_step_is_not_counted_against_it():
    """The chain walks to its stations and keeps the player fed before it calls the action under test: a death
    there leaves the run out of the action's own rate, in the report and in the critic's figures alike."""
    prefix = ["collect_wood", "place_table"]

    def report(seed: int, ended: str, first_steps: dict[str, int], running: str) -> dict:
        won = ended == "success"
        return {"seed": seed, "ended": ended, "task_success": won, "steps": 200 + seed,
                "death_cause": None if won else "zombie", "achievements_before": [],
                "achievements_unlocked": prefix + (["make_wood_pickaxe"] if won else []),
                "inventory_after": {"health": 5 if won else 0, "wood": 2}, "trace": "step 1: noop",
                "first_steps": first_steps, "running_at_end": running}

    rows = [report(0, "success", {"main": 1, "make_pickaxe": 150}, "main > make_pickaxe"),
            report(1, "died", {"main": 1, "collect_wood": 1, "go_near": 120}, "main > go_near"),
            report(2, "died", {"main": 1, "make_pickaxe": 150, "go_to": 151}, "main > make_pickaxe > go_to")]
    judged = ["make_pickaxe"]
    assert [reached_action(r, prefix, judged) for r in rows] == [True, False, True]
    assert reached_action(rows[1], prefix) and not reached_action(rows[0], [*prefix, "collect_coal"], judged)
    summary = summarise_code_runs(rows, prefix, judged)
    assert (summary["started"], summary["started_successes"], summary["success_given_start"]) == (2, 1, 0.5)
    text = summarise_reports_for_agent(rows, prerequisites=prefix, judged=judged)
    assert "2 of 3 runs reached your action; 1 of those 2 succeeded" in text
    lines = {line.split(":")[0]: line for line in text.splitlines() if line.startswith("seed ")}
    # a death before the action says where and with what, as one inside it does: a stay_alive can change it
    assert lines["seed 1"].startswith("seed 1: died at step 201 (zombie) before your action; "
                                      "in go_near (the chain's walk to stations); at death: food 0")
    assert lines["seed 1"].endswith("; held wood 2")
    assert "; in make_pickaxe > go_to; at death: food 0" in lines["seed 2"]
    assert "--- detail of seed 2 " in text  # the run that reached the action is the one shown in full


def test_when_the_chain_loses_runs_before_the_action_one_of_them_is_shown_in_detail():
    """Failures inside the action come first, but a death on the way to it is the second detail: it is what a
    stay_alive the model writes repairs, and its trace says which coded action was running."""
    prefix, judged = ["collect_wood"], ["collect_stone"]

    def report(seed: int, ended: str, running: str, reached: bool) -> dict:
        steps = {"main": 1, "collect_wood": 1} | ({"collect_stone": 90} if reached else {})
        return {"seed": seed, "ended": ended, "task_success": False, "steps": 300 + seed,
                "death_cause": "zombie" if ended == "died" else None, "achievements_before": [],
                "achievements_unlocked": prefix, "inventory_after": {"health": 0, "wood": 2},
                "error": "ValueError: no stone" if ended == "error" else None,
                "trace": f"step {299 + seed}: noop in {running}", "first_steps": steps, "running_at_end": running}

    rows = [report(s, "error", "main > collect_stone", True) for s in range(3)]
    rows.append(report(7, "died", "main > stay_alive", False))
    text = summarise_reports_for_agent(rows, max_chars=4000, prerequisites=prefix, judged=judged)
    details = [line for line in text.splitlines() if line.startswith("--- detail of seed ")]
    assert details[0].split()[4] in ("0", "1", "2") and details[1].split()[4] == "7", details
    assert "step 306: noop in main > stay_alive" in text
    # with no death on the way, the action's own failures keep every detail
    text = summarise_reports_for_agent(rows[:3], max_chars=4000, prerequisites=prefix, judged=judged)
    assert "--- detail of seed 7" not in text and text.count("--- detail of seed ") == 3
    # at the fast agent's report size, with long traces, the first detail leaves the death on the way its room

    def run(seed: int, ended: str, reached: bool) -> dict:
        running = "main > collect_stone > go_to" if reached else "main > stay_alive > collect_food"
        moves = [f"step {k}: move_left (in {running}) -> health -2 (zombie)" for k in range(380, 440)]
        return {"seed": seed, "ended": ended, "task_success": ended == "success", "steps": 440,
                "death_cause": "zombie" if ended == "died" else None, "achievements_before": [],
                "achievements_unlocked": prefix, "inventory_after": {"health": 0, "food": 5, "wood": 2},
                "running_at_end": running, "first_steps": {"main": 1, "collect_wood": 1} | (
                    {"collect_stone": 90} if reached else {}),
                "death_detail": "health lost in the last steps: step 420 zombie -2; at the end: health 0",
                "vitals": ", ".join(f"{k} 9/8/7/6" for k in range(0, 440, 50)),
                "trace": "\n".join([*moves, "step 440: the player died (zombie)"])}

    for failing in (1, 2, 3, 5):
        rows = [run(s, "died" if s < failing else "success", True) for s in range(7)] + [run(7, "died", False)]
        text = summarise_reports_for_agent(rows, max_chars=2350, prerequisites=prefix, judged=judged)
        assert len(text) <= 2350 and "--- detail of seed 7 " in text, (failing, text)


def test_a_death_line_says_why_a_helper_stopped_short_just_before_and_is_never_cut_inside_a_word():
    """A death of thirst says little without why the chain did not drink: a helper's refusal in the last steps
    before the death is on the seed's line; an old one is not."""
    from tools.run_code import DEATH_REFUSAL_WINDOW, _cut

    def died(seed: int, refused_at: int) -> dict:
        return {"seed": seed, "ended": "died", "task_success": False, "steps": 400, "death_cause": "thirst",
                "achievements_before": [], "achievements_unlocked": [], "inventory_after": {"health": 0, "drink": 0},
                "trace": "step 1: noop", "running_at_end": "main > stay_alive > collect_drink > go_to",
                "last_refusal": "go_to: no known path to (12, -3)", "last_refusal_step": refused_at}

    recent, old = died(1, 400 - DEATH_REFUSAL_WINDOW), died(2, 399 - DEATH_REFUSAL_WINDOW)
    lines = {x.split(":")[0]: x for x in summarise_reports_for_agent([recent, old]).splitlines()
             if x.startswith("seed ")}
    assert f"; step {400 - DEATH_REFUSAL_WINDOW} go_to: no known path to (12, -3)" in lines["seed 1"]
    assert "no known path" not in lines["seed 2"]
    line = "seed 3: died at step 12 (zombie) health lost in the last steps -4 zombie"
    cut = _cut(line, 60)
    kept = cut.removesuffix(" ...")
    assert len(cut) <= 60 and line.startswith(kept) and line[len(kept)] == " " and kept.endswith("the")


def test_every_failing_seed_keeps_its_line_and_the_successes_share_one():
    """A repair needs every failure: with long lines the seeds are cut to a share, never dropped; what the earlier
    skills unlocked is said once, not on every line."""
    prefix = ["collect_wood", "place_table", "make_wood_pickaxe"]
    many = [f"achievement_{i}" for i in range(12)]

    def report(seed: int, won: bool) -> dict:
        return {"seed": seed, "ended": "success" if won else "died", "task_success": won, "steps": 300 + seed,
                "death_cause": None if won else "zombie", "achievements_before": [],
                "achievements_unlocked": prefix + many + (["collect_stone"] if won else []),
                "inventory_after": {"health": 0 if not won else 5, "wood": 3, "stone": 9}, "trace": "step 1: noop"}

    rows = [report(s, s in (3, 6)) for s in range(8)]
    text = summarise_reports_for_agent(rows, max_chars=1500, prerequisites=prefix)
    assert len(text) <= 1500 and "more seeds" not in text
    for seed in (0, 1, 2, 4, 5, 7):
        assert f"\nseed {seed}: died at step {300 + seed} (zombie)" in text
    assert "success on 2 seeds: 3 at step 303, 6 at step 306" in text
    seed_lines = [line for line in text.splitlines() if line.startswith("seed ")]
    assert not any("place_table" in line for line in seed_lines)  # the prefix's achievements, said above
    early = {**report(9, False), "achievements_unlocked": ["collect_wood"]}  # died before the action started
    line = next(x for x in summarise_reports_for_agent(rows + [early], prerequisites=prefix).splitlines()
                if x.startswith("seed 9:"))
    start = "seed 9: died at step 309 (zombie) before your action (place_table next)"  # the first in play order
    # then where it died and with what, as far as its share goes: cut after a whole item, never inside a name
    assert line.startswith(start) and (line[len(start):] == " ..." or line[len(start):].startswith("; at death"))
    wide = next(x for x in summarise_reports_for_agent(rows + [early], max_chars=8000, prerequisites=prefix)
                .splitlines() if x.startswith("seed 9:"))
    assert wide == start + "; at death: food 0, drink 0, energy 0; held stone 9, wood 3"  # health is 0 at a death
    inside = {**early, "running_at_end": "main > place_table > stay_alive"}  # the skill it died in names itself
    assert ("seed 9: died at step 309 (zombie) before your action; in place_table > stay_alive; at death"
            in summarise_reports_for_agent(rows + [inside], max_chars=8000, prerequisites=prefix))
    # what the chain's main calls itself between skills is named as the chain's: answerers read
    # "in explore > explore" as a skill of their own; an action or skill of that name stays itself
    glue = {**early, "running_at_end": "main > explore > explore"}
    assert ("before your action (place_table next); in explore > explore (the chain's search: a skill found "
            "nothing); at death" in summarise_reports_for_agent(rows + [glue], max_chars=8000, prerequisites=prefix))
    walking = {**report(9, False), "running_at_end": "main > go_near > go_to"}
    assert "in go_near > go_to (the chain's walk to stations); at death" in (
        summarise_reports_for_agent(rows + [walking], max_chars=8000, prerequisites=prefix))
    own = summarise_reports_for_agent(rows + [glue], max_chars=8000, prerequisites=prefix, judged=["explore"])
    assert "in explore > explore; at death" in own and "the chain's search" not in own
    # a long chain of earlier skills is named by its ends: the room goes to the seeds
    chain = [f"skill_{i}" for i in range(9)]
    assert ("earlier skills played first (9 skills, skill_0 to skill_8): 0 of 8 runs reached your action"
            in summarise_reports_for_agent(rows, prerequisites=chain))
    dark = {**early, "daylight_at_end": 0.12}  # the report says the daylight at death: night is named
    assert "\nseed 9: died at step 309, at night (zombie) before" in summarise_reports_for_agent(rows + [dark],
                                                                                                prerequisites=prefix)


def test_a_report_marks_the_seeds_that_ended_as_last_round_and_names_the_chains_stay_alive():
    """An answerer spent revisions on seeds its changes never reached: a seed that died or returned at the same
    step, of the same cause, holding the same as in the round before is marked; one that moved, or whose
    ending says nothing of its play (out of steps at the limit, an error before the first step), is not. The
    early-death line says whose stay_alive the chain called."""
    prefix = ["collect_wood", "place_table"]

    def report(seed: int, steps: int, cause: str | None, won: bool = False, ended: str = "died",
               held: int = 0, failure: str | None = None) -> dict:
        return {"seed": seed, "ended": "success" if won else ended, "task_success": won, "steps": steps,
                "death_cause": cause, "achievements_before": [], "failure_kind": failure,
                "achievements_unlocked": ["collect_wood"] + (["place_table", "collect_stone"] if won else []),
                "inventory_after": {"health": 0 if not won else 5, "wood": held}, "trace": "step 1: noop"}

    def ended(r: dict) -> dict:  # the round's per-seed entry as nodes.attempt.results keeps it
        return {"seed": r["seed"], "success": r["task_success"], "steps": r["steps"], "failure": r["failure_kind"],
                "ended": r["ended"], "death_cause": r["death_cause"], "inventory_after": r["inventory_after"]}

    before = [report(1, 183, "zombie"), report(2, 240, "zombie"), report(3, 300, "thirst"), report(4, 90, "zombie"),
              report(5, 300, None, ended="out_of_steps"), report(6, 0, None, ended="error", failure="load"),
              report(7, 120, "starvation"), report(8, 150, None, ended="action_returned")]
    now = [report(1, 183, "zombie"), report(2, 251, "zombie"), report(3, 300, "zombie"), report(4, 95, None, True),
           report(5, 300, None, ended="out_of_steps"), report(6, 0, None, ended="error", failure="load"),
           report(7, 120, "starvation", held=2), report(8, 150, None, ended="action_returned")]
    text = summarise_reports_for_agent(now, max_chars=4000, prerequisites=prefix,
                                       last_round=[ended(r) for r in before], survival="the `stay_alive` of x")
    lines = {x.split(":")[0] for x in text.splitlines() if x.startswith("seed ")}
    assert lines == {"seed 1 (as last round)", "seed 2", "seed 3", "seed 5", "seed 6", "seed 7",
                     "seed 8 (as last round)"}  # 2 moved, 3 died of another cause, 7 held more
    assert "2 failing seeds (marked 'as last round') ended at the same step in the same way" in text
    assert "died before it; between skills the chain called the `stay_alive` of x" in text
    first = summarise_reports_for_agent(now, max_chars=4000, prerequisites=prefix)  # no round before
    assert "as last round" not in first
    assert "between skills the chain called the built-in `stay_alive`: one you write replaces it" in first


def test_the_first_failure_keeps_the_moves_before_its_death_when_the_seed_lines_fill_the_report():
    """An answerer read a death's detail with its trace cut to the death line alone, while a second detail showed
    only its health losses: the first failure gets the room for the moves that led to it first."""
    losses = ", ".join(f"step {300 + 20 * k} skeleton arrow -2" for k in range(6))

    def run(seed: int, won: bool) -> dict:
        moves = [f"step {k}: move_left (in main > collect_iron > mine_mineral > stay_alive > collect_food > go_to) "
                 "-> health -2 (zombie)" for k in range(380, 440)]
        return {"seed": seed, "ended": "success" if won else "died", "task_success": won, "steps": 440,
                "death_cause": None if won else "skeleton arrow", "achievements_before": [],
                "achievements_unlocked": ["collect_wood", "collect_drink", "eat_cow", "defeat_zombie"],
                "inventory_after": {"health": 0, "food": 5, "stone": 8, "stone_pickaxe": 1, "wood_sword": 1},
                "running_at_end": "main > collect_iron > mine_mineral > stay_alive > collect_food > go_to",
                "death_detail": f"health lost in the last steps: {losses}; at the end: health 0, food 5",
                "vitals": ", ".join(f"{k} 9/8/7/6" for k in range(0, 440, 50)),
                "trace": "\n".join([*moves, "step 440: the player died (skeleton arrow); health 0, food 5"])}

    text = summarise_reports_for_agent([run(s, s % 2 == 0) for s in range(1600, 1608)], max_chars=2350)
    first = text.split("--- detail of seed")[1]
    shown = first.split("trace (end):\n", 1)[1].splitlines()
    assert len([line for line in shown if line.startswith("step 43")]) >= 3, first


def test_a_second_detail_shows_an_ending_the_first_did_not():
    """An answerer saw only zombie deaths in detail while its starvation and thirst deaths grew, and repaired
    those blind: after the first detail comes a failure that ended otherwise, with room kept for it."""

    def died(seed: int, cause: str, steps: int) -> dict:
        moves = [f"step {k}: move_left (in main > collect_iron > go_to) -> health -2 ({cause})"
                 for k in range(steps - 60, steps)]
        return {"seed": seed, "ended": "died", "task_success": False, "steps": steps, "death_cause": cause,
                "achievements_before": [], "achievements_unlocked": ["collect_wood"],
                "inventory_after": {"health": 0, "food": 0 if cause == "starvation" else 5, "stone": 3},
                "running_at_end": "main > collect_iron > go_to",
                "death_detail": f"health lost in the last steps: step {steps} {cause} -2; at the end: health 0",
                "vitals": ", ".join(f"{k} 9/8/7/6" for k in range(0, steps, 50)),
                "trace": "\n".join([*moves, f"step {steps}: the player died ({cause})"])}

    # ranked by steps: the zombie deaths come first, the starvation death last
    rows = [died(1, "zombie", 480), died(2, "zombie", 470), died(3, "zombie", 460), died(4, "starvation", 300)]
    text = summarise_reports_for_agent(rows, max_chars=2350)
    details = [line for line in text.splitlines() if line.startswith("--- detail of seed ")]
    assert len(text) <= 2350 and [d.split()[4] for d in details[:2]] == ["1", "4"], details
    # the same ending everywhere: the first keeps its room (the moves before its death)
    same = summarise_reports_for_agent([died(s, "zombie", 480 - s) for s in range(1, 5)], max_chars=2350)
    first = same.split("--- detail of seed")[1].split("trace (end):\n", 1)[1]
    assert len([line for line in first.splitlines() if line.startswith("step ")]) >= 4, first
    # where the first would take it all, room is kept for the second: it shows the starvation death
    eight = [died(s, "zombie", 480 - s) for s in range(1, 8)] + [died(8, "starvation", 300)]
    parts = summarise_reports_for_agent(eight, max_chars=2500).split("--- detail of seed ")[1:]
    assert len(parts) == 2 and parts[1].startswith("8 ") and "death: starvation" in parts[1], parts
    assert len(parts[1]) >= 250 and "death: zombie" in parts[0]
    # where both cannot fit, the first is not cut for a second that cannot come
    small = summarise_reports_for_agent(eight, max_chars=1500)
    alone = small.split("--- detail of seed ")[1:]
    assert len(alone) == 1 and len(small) > 1450, small
    # a run that ran out of steps before the earlier skills were done shows neither the action nor a death:
    # it is not promoted over a failure of the action itself
    short = {**died(9, "zombie", 5000), "ended": "out_of_steps", "death_cause": None, "death_detail": "",
             "achievements_unlocked": []}
    ordered = summarise_reports_for_agent([died(1, "zombie", 480), died(2, "zombie", 470), short],
                                          max_chars=2500, prerequisites=["collect_wood"])
    assert [d.split()[0] for d in ordered.split("--- detail of seed ")[1:3]] == ["1", "2"], ordered


def test_a_report_counts_each_helper_that_stopped_short_with_its_reason():
    code = ("def main(game):\n    for _ in range(30):\n        yield from game.shelter()\n"
            "        yield from game.go_to((60, 60))\n        yield 'noop'\n")
    report = run_code(code, task="collect_iron", seed=3, max_steps=30, **FAST)
    by_helper = {line.split(" ", 1)[0]: line for line in report.refusals}
    assert set(by_helper) == {"shelter", "go_to"}
    assert by_helper["shelter"].startswith("shelter 30 times, last at step 29: needs a wood pickaxe")
    assert "helpers that stopped short: shelter 30 times" in summarise_reports_for_agent([report])


def test_a_detail_shows_the_last_view_in_whole_rows_or_says_what_it_left_out():
    """A view cut inside a row misleads a repair: rows are kept whole, and the rows left out are counted."""
    rows = [f"{i}" * 9 for i in range(7)]
    view = "\n".join(rows) + "\nlegend: " + "x=stone " * 20
    report = {"seed": 4, "ended": "died", "task_success": False, "steps": 90, "death_cause": "zombie",
              "achievements_unlocked": [], "inventory_after": {"health": 0}, "trace": "step 1: noop",
              "last_view": view}
    for max_chars in (400, 600, 2500):
        text = summarise_reports_for_agent([report], max_chars=max_chars)
        shown = text.split("last view:\n", 1)[1].splitlines() if "last view:\n" in text else []
        kept = [line for line in shown if not line.startswith("[...")]
        assert all(line in view.splitlines() for line in kept), (max_chars, shown)
        if kept and len(kept) < len(view.splitlines()):
            assert shown[-1] == f"[... {len(view.splitlines()) - len(kept)} more lines of the view left out ...]"
    assert "legend: " in summarise_reports_for_agent([report], max_chars=2500)


def test_a_step_that_runs_out_of_time_calling_a_refusing_helper_says_so():
    """A helper that stops short returns at once, so code that calls it in a loop never yields: the timeout's
    message says what the helpers did meanwhile, not only the line that looped."""
    code = "def main(game):\n    while True:\n        yield from game.shelter()\n"
    report = run_code(code, task="collect_iron", seed=3, max_steps=30, wall_time_s=8.0)
    assert report.ended == "error" and "CodeTimeout" in report.error, report.error
    assert "stopped short" in report.error and "needs a wood pickaxe" in report.error
    assert "in main" in report.error  # the line the timer stopped: the loop or the call in it


def test_no_detail_ends_inside_a_line_whatever_the_budget():
    """A second failure's detail was cut at the report's limit mid-word ('step 274: the player d'): every trace
    line shown is whole, whatever room is left, and the detail of a later failure comes only when it fits."""
    def report(seed: int) -> dict:
        trace = [f"step {i}: move_left (in main > collect_iron > stay_alive > go_to) -> moved" for i in range(40)]
        trace.append(f"step 40: the player died (zombie); health 0, food {seed}, drink 3, energy 5")
        return {"seed": seed, "ended": "died", "task_success": False, "steps": 40, "death_cause": "zombie",
                "death_detail": "health lost in the last steps: step 30 zombie -2, step 35 zombie -2",
                "achievements_unlocked": [], "inventory_after": {"health": 0, "stone": 3},
                "running_at_end": "main > collect_iron > stay_alive", "trace": "\n".join(trace),
                "last_view": "@ you, on grass\n" + "\n".join(["........."] * 7)}

    rows = [report(seed) for seed in range(5)]
    whole = {line for row in rows for line in row["trace"].splitlines()}
    for max_chars in range(1200, 3001, 75):
        text = summarise_reports_for_agent(rows, max_chars=max_chars)
        assert len(text) <= max_chars
        shown = [line for line in text.splitlines() if line.startswith("step ")]
        assert shown and all(line in whole for line in shown), (max_chars, shown)
        assert text.count("--- detail of seed") >= 1


def test_a_timeout_with_no_line_says_where_its_last_step_came_from():
    """A sandbox that stopped answering names no line of code; the functions of its last step are the lead."""
    report = {"seed": 5, "ended": "error", "failure_kind": "timeout", "task_success": False, "steps": 120,
              "error": "no answer within 2.5 s: an endless loop, or code that does not yield",
              "running_at_end": "main > make_iron_pickaxe > stay_alive", "achievements_unlocked": [],
              "inventory_after": {"health": 7}, "trace": "step 120: noop"}
    line = next(x for x in summarise_reports_for_agent([report]).splitlines() if x.startswith("seed 5:"))
    assert "; its last step was in make_iron_pickaxe > stay_alive" in line
    runtime = {**report, "failure_kind": "runtime", "error": "line 3 in helper: ValueError: x"}
    assert "its last step" not in summarise_reports_for_agent([runtime])  # the error names its own line


def test_a_run_stopped_before_the_action_says_where_and_a_long_error_keeps_its_start():
    """An out-of-steps run in an earlier skill names the functions it was in (a death names them with its bars);
    a detail whose one-line error is longer than its room shows the error's start, cut between words."""
    stuck = {"seed": 2, "ended": "out_of_steps", "task_success": False, "steps": 1000, "achievements_unlocked": [],
             "running_at_end": "main > collect_stone > go_to", "inventory_after": {"health": 5}, "trace": ""}
    line = next(x for x in summarise_reports_for_agent([stuck], prerequisites=["collect_wood", "collect_stone"])
                .splitlines() if x.startswith("seed 2:"))
    assert line == ("seed 2: out of steps after 1000 steps before your action (collect_wood next); "
                    "in collect_stone > go_to")
    error = "line 9 in helper: ValueError: " + "a long message about the failure " * 20
    broken = {"seed": 1, "ended": "error", "failure_kind": "runtime", "task_success": False, "steps": 3,
              "error": error.strip(), "achievements_unlocked": [], "inventory_after": {}, "trace": "step 1: noop"}
    text = summarise_reports_for_agent([broken], max_chars=700)
    detail = text.split("--- detail of seed 1", 1)[1]
    assert "\nerror: line 9 in helper: ValueError: a long message" in detail and detail.endswith(" ...")


def test_a_helpers_since_step_follows_the_calls_in_the_running_stack():
    """A frame shared with the step before keeps its step; one left and another called starts again."""
    from tools.run_code import _Progress

    progress = object.__new__(_Progress)  # only the stack bookkeeping: no env
    progress.running, progress.entered = "", []
    for step, running in enumerate(["main", "main > go_to", "main > go_to", "main > shelter > _dig_and_seal",
                                    "main > shelter > defend", "main > shelter", "main > go_to"], start=1):
        progress.steps = step
        progress._enter(running)
        progress.running = running
        if step == 3:
            assert progress.helper_since() == "go_to since step 2"
        if step == 6:
            assert progress.helper_since() == "shelter since step 4"  # defend came and went inside shelter
    assert progress.helper_since() == "go_to since step 7"  # a new call after shelter
    progress._enter("main")
    progress.running = "main"
    assert progress.helper_since() == ""


def test_a_seed_line_cut_for_room_keeps_where_the_player_died():
    """Seven deaths before the action, each deep in the functions: a line cut for room kept '... at night (zombie)
    before your action ...' and lost the place (an answerer's worst report gap). The place now comes by its
    ends, the skill and the innermost two helpers, in every line."""
    chain = ["collect_wood", "place_table", "make_wood_pickaxe", "collect_stone", "collect_coal", "collect_iron"]
    rows = [{"seed": 900 + i, "ended": "died", "task_success": False, "steps": 400 + i, "death_cause": "zombie",
             "daylight_at_end": 0.1, "achievements_before": [], "achievements_unlocked": chain[:4],
             "running_at_end": ("main > collect_coal > mine_deep > dig_legs > walk_safe > stay_alive > keep_up > "
                                "keep_fed > eat_safe > safe_walk"),
             "inventory_after": {"health": 0, "food": 3, "drink": 6, "energy": 2, "wood": 4, "stone": 7},
             "trace": "step 1: noop"} for i in range(7)]
    text = summarise_reports_for_agent(rows, max_chars=2350, prerequisites=chain, judged=["collect_diamond"])
    lines = [x for x in text.splitlines() if x.startswith("seed 9")]
    assert len(lines) == 7
    for line in lines:
        assert "; in collect_coal > ... > eat_safe > safe_walk" in line, line
    wide = summarise_reports_for_agent(rows[:1], max_chars=2350, prerequisites=chain, judged=["collect_diamond"])
    assert "in collect_coal > mine_deep > dig_legs > walk_safe > stay_alive > keep_up > keep_fed > eat_safe > " \
        "safe_walk" in wide  # with room, in full
    # a roomy prompt's report (a model with a large window) holds all seven lines whole, the items held included,
    # and still a seed in detail
    from prompts.templates import ROOMY

    roomy = summarise_reports_for_agent(rows, max_chars=ROOMY.report_chars, prerequisites=chain,
                                        judged=["collect_diamond"])
    lines = [x for x in roomy.splitlines() if x.startswith("seed 9")]
    assert len(lines) == 7 and all(line.endswith("; held stone 7, wood 4") for line in lines), lines
    assert all("in collect_coal > mine_deep > dig_legs > walk_safe > stay_alive > keep_up > keep_fed > eat_safe > "
               "safe_walk" in line for line in lines)
    assert "--- detail of seed" in roomy
