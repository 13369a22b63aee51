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
