"""Measure node: every tool round, counted once, and where the attempt goes from it.

It runs after each round of tool calls (and the plugin nodes attached to `tools`). The round's
environment steps go to the budget, and a measuring round (code tests or a training) becomes one
entry of `results` and, when it is the subtask's best, its `best` (nodes.attempt.rounds.record_round).
Successful code tests leave where they stopped for later trainings to start from (nodes.starts). Then it routes:

- a training: the critic judges it;
- a test of a coded building block of a policy's head: its report is filed with the training's
  configuration, and the fast agent goes on;
- a code test: the critic judges it when it meets the pass rule (for the plan's last subtask, over every
  run of the chain as well: nodes.attempt.results.round_passes) or the revisions are spent, and on the
  plan's last subtask when a repair gains nothing on the best round on the same seeds
  (nodes.attempt.results.repair_stalls); otherwise the fast agent repairs the code from the report;
- any other tool (configure_rl, a plugin's): the fast agent reads its answer.

The fast agent only chooses what to ask and asks; the critic reads what was measured here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import Command

from nodes.attempt.results import (
    CODE_TOOL,
    TRAIN_TOOL,
    last_tool_round,
    plays_helpers_before,
    repair_stalls,
    round_best,
    round_passes,
)
from nodes.attempt.rounds import ends_the_chain, measure_event, record_round
from nodes.context import RunContext, context_of
from nodes.entries import learned
from nodes.fast import TESTED_REPORT_CHARS, SubtaskCode, report_text
from nodes.models.base import prompt_room_of
from nodes.settings import RunSettings
from nodes.starts import save_test_ends
from nodes.state import AttemptState, current_decomposition, with_update


def measure(state: AttemptState, runtime: Runtime[RunContext]) -> Command[Literal["fast", "critic"]]:
    settings = context_of(runtime).settings
    room = prompt_room_of(context_of(runtime).model)  # how long a report the model's prompts hold
    update, _ = record_round(state)
    round_ = last_tool_round(list(state.get("messages") or []))
    if "counted_round" in update:  # counted now, not a round a resumed checkpoint had counted already
        # the round's own tests only: the chain with the helpers from before a rewrite is another chain
        saved = save_test_ends(state, settings.run_dir, [m for m in round_ if not plays_helpers_before(m)])
        if saved:
            update["start_states"] = saved
    trains = bool(learned(current_decomposition(state)["sub_actions"]))
    if any(m.name == TRAIN_TOOL for m in round_):
        return Command(goto="critic", update=update)
    if not any(m.name == CODE_TOOL for m in round_):
        return Command(goto="fast", update=update)
    if trains:  # a building block of the policy's head, tested before the training
        _file_head_test(state, update, settings, room)
        return Command(goto="fast", update=update)
    current = with_update(state, update)
    measured = current.get("last_result") or {}
    update["last_attempt"] = {
        **(state.get("last_attempt") or {}), "report": report_text(current, settings, room),
        "result": {k: measured.get(k) for k in ("success_rate", "success_given_start", "started", "episodes",
                                                "prerequisites", "outcomes", "per_seed")}}
    # the round passes on the attempt a verdict would keep: with the chain's helpers before a rewrite, where
    # the rewrite did not gain enough on them on the same seeds
    whole_chain = ends_the_chain(state, settings.task)
    passed = bool(measured) and round_passes(round_best(measured), settings.target_success, whole_chain)
    repair = int(state.get("inner_iter", 0))
    stalled = bool(measured) and not passed and repair_stalls(
        current.get("results", []), measured, whole_chain=whole_chain, repair=repair,
        max_repairs=settings.max_inner_iters, target=settings.target_success)
    if passed or stalled or repair >= settings.max_inner_iters:
        if stalled:  # the critic logs the round's measure event with its verdict
            update["events"] = [{"type": "repairs_end", "subtask": measured.get("subtask"),
                                 "sub_action": measured.get("sub_action"),
                                 "reason": "a repair gained nothing on the best round on these seeds"}]
        return Command(goto="critic", update=update)
    update["events"] = [measure_event(measured, "repair")]
    return Command(goto="fast", update=update)


def _file_head_test(state: Mapping[str, Any], update: dict, settings: RunSettings, room: str) -> None:
    """A coded building block of the policy's head was tested before training: its report goes with the
    training's configuration (the critic judges the training, which plays it)."""
    current = with_update(state, update)
    measured = current.get("last_result") or {}
    tested = (state.get("last_attempt") or {}).get("sub_action")
    report = report_text(current, settings, room)
    update["code_tested"] = [*(state.get("code_tested") or []), {
        "sub_action": tested, "report": report[:TESTED_REPORT_CHARS],
        "successes": measured.get("successes"), "episodes": measured.get("episodes")}]
    loaded = tested in SubtaskCode(with_update(state, update), settings).pool
    # a broken one comes back for one repair with its report; a working one is done
    update["last_attempt"] = None if loaded else {**(state.get("last_attempt") or {}), "report": report}
    update["events"] = [measure_event(measured, "tested before training")]
