"""The chain driver (prompts/chain_driver.py) as chain_source writes it into a program: the body of `main`,
after its data, within the sandbox's rules, and whole again after the library splits the program."""

from __future__ import annotations

from nodes.skills.pool import definitions, function_names, pool_from
from prompts.fewshot import CHAIN_DRIVER_BODY, CHAIN_DRIVER_PARAMETERS, chain_source, fill
from sandbox.lint import check_source
from sandbox.loader import load_coded_actions

SOURCES = {"collect_wood": fill("collect", material="tree", item="wood"), "place_table": fill("place", item="table")}
STEPS = ["collect_wood", "place_table"]


def test_main_binds_the_drivers_data_then_runs_its_body():
    for needs in (None, {"collect_wood": [], "place_table": ["collect_wood"]}):
        program = chain_source(SOURCES, STEPS, 1000, needs=needs)
        check_source(program)  # the driver's text keeps to the sandbox's rules
        main = definitions(program)["main"]
        assert main.endswith(CHAIN_DRIVER_BODY)
        assert all(f"\n    {name} = " in main for name in CHAIN_DRIVER_PARAMETERS)
        assert f"\n    needs = {needs!r}\n" in main
        # the driver adds no top-level function: the program's are its sources' and main
        sources = program[:program.index("@coded_action(max_steps=1000)\ndef main(game):")]
        assert function_names(program) == [*function_names(sources), "main"]


def test_a_chain_program_is_whole_again_after_the_library_splits_it():
    program = chain_source(SOURCES, STEPS, 1000)
    assembled = pool_from([program]).program(["main"])
    assert definitions(assembled) == definitions(program)
    assert [a.name for a in load_coded_actions(assembled)][-1] == "main"


def test_the_trace_of_a_chain_names_the_step_that_runs_and_when_each_first_acted():
    """The driver hands each step the turn with `yield from`, so the sandbox sees the step's frames: trace lines
    say 'main > place_table', and a test can tell whether the action it judges ever took a step
    (tools.trace.reached_action)."""
    from tools.run_code import run_code

    report = run_code(chain_source(SOURCES, STEPS, 600), task="place_table", seed=3, max_steps=600)
    assert report.ended == "success", report.trace
    assert report.first_steps["collect_wood"] == 1 and report.first_steps["place_table"] > 1
    assert report.running_at_end == "main > place_table"
    assert "(in main > collect_wood > go_to)" in report.trace.splitlines()[0]
