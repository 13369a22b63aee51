"""run_code_in_env: agent code tested in a fresh episode inside the sandbox; every failure comes
back as a report and the caller goes on."""

from __future__ import annotations

import os

import pytest

from envs.seeds import EVAL_SEED_BASE
from tools.run_code import CodeRunReport, run_code, run_code_in_env

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
    assert not report.ok and report.failure_kind == "runtime"
    assert "line 3" in report.error and "KeyError" in report.error
    assert report.steps == 1


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


@pytest.mark.parametrize("kwargs, needle", [
    (dict(seed=EVAL_SEED_BASE), "held-out evaluation seed"),
    (dict(seed=-1), "seed must be >= 0"),
    (dict(task="collect wod"), "unknown task"),
    (dict(max_steps=0), "max_steps must be an integer from 1"),
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
