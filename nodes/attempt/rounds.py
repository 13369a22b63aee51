"""One tool round of an attempt, counted and logged once, whichever node reads it first.

The fast agent reads a code test to repair its code; the critic reads the same round when it judges
it. Its env steps go to the budget once, and a measuring round (code tests or a training) becomes
one entry of the `results` log, with the code or configuration behind it so a skill can be rebuilt.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from envs.tasks import get_task
from nodes.attempt.results import (
    CHAIN_STARTS,
    CODE_TOOL,
    TRAIN_TOOL,
    judged_rate,
    last_tool_calls,
    round_best,
    round_result,
    steps_of,
)
from nodes.entries import CodeVersion, DecompositionEntry, MeasuredResult, SubActionEntry, coded, learned
from nodes.skills.pool import definitions, function_names, without_definitions
from nodes.skills.records import (
    prerequisite_achievements,
    prior_sources,
    replaced_names,
    replays_the_chain,
)
from prompts.fewshot import rewrite_margin


def judged_sub_action(decomposition: DecompositionEntry) -> SubActionEntry:
    """The sub-action an attempt measures: the learned one, else the last coded non-explore one."""
    subs = decomposition["sub_actions"]
    policies = learned(subs)
    if policies:
        return policies[-1]
    main = [a for a in subs if a.get("template") != "explore"] or subs
    return main[-1]


def tested_actions(decomposition: DecompositionEntry, replaced: Collection[str] = ()) -> list[str]:
    """The coded sub-actions a code test plays after the solved prefix, in order. An explore step is only the
    chain's fallback, and a sub-action before the last named after a `replaced` function (a built-in, an
    earlier skill's helper: nodes.skills.records.replaced_names) replaces it: neither is a step of its own."""
    names = [a["name"] for a in coded(decomposition["sub_actions"]) if a.get("template") != "explore"]
    return [n for i, n in enumerate(names) if n not in replaced or i == len(names) - 1]


def judged_functions(decomposition: DecompositionEntry, replaced: Collection[str] = ()) -> list[str]:
    """The functions whose first step marks that a code test reached the code it judges
    (tools.trace.reached_action): the tested sub-actions, else the judged one."""
    return tested_actions(decomposition, replaced) or [judged_sub_action(decomposition)["name"]]


def round_id(messages: list) -> str | None:
    """The id of the AIMessage the latest tool results answer; None when the last message is no tool result."""
    if not messages or not isinstance(messages[-1], ToolMessage):
        return None
    ai = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    return ai.id if ai is not None else None


PLAN_FIELDS = ("kind", "reason", "template", "target", "item")  # what the slow agent says a coded sub-action is


def plan_of(sub_action: Mapping[str, Any]) -> dict[str, Any]:
    """What the slow agent asked of a sub-action: kept with each code version, so that a sub-action the
    next outer iteration plans differently is written again (nodes.fast.pending_code)."""
    return {k: sub_action.get(k) for k in PLAN_FIELDS}


def latest_versions(state: Mapping[str, Any], subtask: str) -> dict[str, CodeVersion]:
    """Sub-action name -> its latest code version in this subtask (source, the plan it was written for,
    its outer iteration), as the model (or the expert) wrote it."""
    return {v["sub_action"]: v for v in state.get("code_versions", []) if v["subtask"] == subtask}


def live_code(state: Mapping[str, Any], subtask: str, names: Collection[str]) -> dict[str, str]:
    """Sub-action name (of `names`) -> its latest code in this subtask, less the definitions that an answer for
    another of `names` sent later. A revision carries its sub-action's earlier definitions forward, so a
    helper (say stay_alive) the model rewrote as its own sub-action would otherwise lose to the copy an older
    answer for the last sub-action carried, by the order the pool loads them. Here each top-level name is
    live once, as the answer that sent it last wrote it: tests, the skill kept and held-out play load the
    same definitions whatever the order. A sub-action that lost none is its code exactly as written."""
    sent_by: dict[str, str] = {}  # definition name -> the sub-action whose answer sent it last
    defined: dict[str, dict[str, str]] = {}
    latest: dict[str, str] = {}
    for version in state.get("code_versions", []):
        sub = version["sub_action"]
        if version["subtask"] != subtask or sub not in names:
            continue
        defs = definitions(version["source"])
        before = defined.get(sub, {})
        sent_by.update({key: sub for key, source in defs.items() if before.get(key) != source})
        defined[sub], latest[sub] = defs, version["source"]
    out = {}
    for sub, source in latest.items():
        kept = [src for key, src in defined[sub].items() if sent_by.get(key, sub) == sub]
        out[sub] = source if len(kept) == len(defined[sub]) else "\n".join(kept)
    return out


def _artefacts(state: Mapping[str, Any], messages: list, result: MeasuredResult,
               judged: SubActionEntry) -> MeasuredResult:
    """The code or configuration behind a measured result, so the skill can be run again. A coded skill
    keeps only what was written for its subtask (the current decomposition's coded sub-actions), never
    the composed program its test played: that is assembled again from the pool when it runs."""
    calls = last_tool_calls(messages)
    subtask = state["plan"][state["subtask_index"]]["name"]
    names = [a["name"] for a in coded(state["decomposition"]["sub_actions"])]
    versions = live_code(state, subtask, names)
    sources = [versions[name] for name in names if name in versions]
    if result["kind"] == "code":
        call = next((c for c in calls if c["name"] == CODE_TOOL), None)
        if call is None:
            return {}
        defined = {name for source in sources for name in function_names(source)}
        entry = call["args"].get("action") or (judged["name"] if judged["name"] in defined else None)
        return {"sources": sources, "entry": entry}
    # a policy's head entries are composed (self-contained): its configuration keeps them for the policy
    call = next((c for c in calls if c["name"] == TRAIN_TOOL), None)
    config = (call.get("args", {}) if call else {}).get("rl_config") or {}
    return {"sources": sources, "rl_config": config, "entry": None}


def recorded_result(state: Mapping[str, Any]) -> MeasuredResult | None:
    """The result recorded (by nodes.measure) when the latest tool round was counted: that round's, or the
    attempt's last measured one when that round measured nothing; None when the last message answers no
    tool round."""
    rid = round_id(list(state.get("messages") or []))
    return state.get("last_result") if rid is not None and rid == state.get("counted_round") else None


def is_the_plans_last(state: Mapping[str, Any], task: str) -> bool:
    """Whether the current subtask is the last of a one-achievement task's plan, whose achievement is the
    task's success in held-out play. A score plan passes over a step that fails, so no subtask of it stands for the
    whole."""
    return replays_the_chain(state.get("plan") or [], int(state.get("subtask_index", 0)), get_task(task).name)


def ends_the_chain(state: Mapping[str, Any], task: str) -> bool:
    """Whether the current subtask's code tests replay the chain held-out play runs, earlier skills first: the
    plan's last subtask (`is_the_plans_last`), after at least one solved skill its tests replay
    (nodes.attempt.results.round_passes; without one, every run reaches the action and the rule is moot)."""
    return is_the_plans_last(state, task) and bool(prior_sources(state))


def record_round(state: Mapping[str, Any]) -> tuple[dict[str, Any], MeasuredResult | None]:
    """(update, result): the latest tool round's steps added to the budget and, when it measured
    something, its result appended to `results` and kept as the subtask's best if it is. Only the measure
    node calls it, once per round; a round already recorded (a checkpoint resumed there) gives an empty
    update and its result again."""
    messages = list(state.get("messages") or [])
    rid = round_id(messages)
    if rid is None:
        return {}, None
    if rid == state.get("counted_round"):
        return {}, state.get("last_result")
    update: dict[str, Any] = {"counted_round": rid,
                              "env_steps_spent": int(state.get("env_steps_spent", 0)) + steps_of(messages)}
    result = round_result(messages, prerequisite_achievements(state),
                          judged_functions(state["decomposition"], replaced_names(state)))
    if result is None:
        return update, None
    subtask = state["plan"][state["subtask_index"]]["name"]
    judged = judged_sub_action(state["decomposition"])
    result.update({"subtask": subtask, "sub_action": judged["name"], "outer_iter": state.get("outer_iter", 0),
                   "inner_iter": state.get("inner_iter", 0), **_artefacts(state, messages, result, judged)})
    replayed = (state.get("last_attempt") or {}).get("replayed")  # nodes.fast.SubtaskCode.replayed; None: not said
    if result["kind"] == "code" and replayed is not None:  # held-out play follows it (nodes.executor._load_chain)
        result["replayed"] = list(replayed)
    if result.get("helpers_before"):
        result["helpers_before"] = _with_helpers_before(state, result)
    not_played = helpers_not_played(state)
    if not_played and result["kind"] == "code":  # the round played the helpers before: a skill of it plays them too
        result["helpers"], result["rewrite_not_played"] = dict(not_played), True
        result["sources"] = [rest for source in result.get("sources") or []
                             if (rest := without_definitions(source, not_played)).strip()]
    best = dict(state.get("best") or {})
    # by the plain rate, then the judged one (nodes.attempt.results.judged_rate); the later on a full tie: a
    # revision that does as well keeps what the agents added since (helpers they call), unless it plays a chain
    # helper's rewrite that lost its comparison (`plays_a_rewrite_that_lost`): then only a better one. A code test
    # while the sub-action is learned tests a building block of the policy's head, not the sub-action: it is
    # logged, never kept as the subtask's skill (it has no entry that solves the subtask)
    head_test = result["kind"] == "code" and judged["kind"] == "rl"
    if head_test:
        result["head_test"] = True
    kept = round_best(result)
    lost = plays_a_rewrite_that_lost(state, subtask) and kept is result
    if not head_test and (subtask not in best or (not at_least_as_good(best[subtask], kept) if lost
                                                  else at_least_as_good(kept, best[subtask]))):
        best[subtask] = dict(kept)
    return {**update, "best": best, "results": [result], "last_result": result}, result



def helpers_not_played(state: Mapping[str, Any]) -> dict[str, str]:
    """The chain helpers whose rewrites the last round did not play (no budget to compare them; nodes.fast._write_code
    played the earlier ones in their place): name -> whose version played. Empty where it played them all."""
    return dict(((state.get("last_attempt") or {}).get("helpers_not_played") or {}).get("helpers") or {})


def plays_a_rewrite_that_lost(state: Mapping[str, Any], subtask: str) -> bool:
    """Whether the latest round played chain-helper rewrites (`last_attempt["rewrite_key"]`, set by the fast
    node whether or not it compared them this round) that an earlier round of this subtask compared with the
    helpers before them, the earlier ranking above: a later round that is not compared again must not bring
    them back on a tie."""
    key = (state.get("last_attempt") or {}).get("rewrite_key")
    return bool(key) and any(
        (r.get("helpers_before") or {}).get("helpers_key") == key and (r.get("helpers_before") or {}).get("ranks_above")
        for r in state.get("results") or [] if r.get("subtask") == subtask and r.get("kind") == "code")


def _with_helpers_before(state: Mapping[str, Any], result: MeasuredResult) -> dict[str, Any]:
    """The round's code played with the chain's helpers as they stood before this subtask rewrote them, as an
    attempt of its own: the round's artefacts less the rewritten definitions (a skill made of it plays the
    helpers it had before, nodes.skills.pool.pool_of), its figures from the same seeds, and whether it ranks
    above the round's own tests: unless the rewrite succeeded on `comparison_margin` more of the same seeds, the
    earlier helpers stay, which every skill before was tested with."""
    last = state.get("last_attempt") or {}
    helpers = dict(last.get("helpers_before") or {})
    attempt: dict[str, Any] = {**result, **(result.get("helpers_before") or {}), "helpers": helpers,
                               "helpers_key": last.get("rewrite_key")}  # what was compared (fast.already_compared)
    attempt.pop("helpers_before", None)
    attempt["sources"] = [kept for source in result.get("sources") or []
                          if (kept := without_definitions(source, helpers)).strip()]
    attempt["ranks_above"] = (int(result.get("successes") or 0)
                              < int(attempt.get("successes") or 0) + comparison_margin(result))
    return attempt


def comparison_margin(result: Mapping[str, Any]) -> int:
    """The successes more a round's chain-helper rewrite needs than the helpers before it: set by the round's own
    seeds (the paired count the report shows can be smaller, after a harness failure)."""
    return rewrite_margin(int(result.get("episodes") or 0))


MEASURE_FIELDS = ("subtask", "sub_action", "kind", "success_rate", "episodes", "started", "success_given_start",
                  "steps", "outer_iter", "inner_iter")


def measure_event(result: Mapping[str, Any], verdict: str) -> dict[str, Any]:
    """The events-log entry of a measured round: its numbers and what was decided on them ('repair' when
    the fast agent repairs from it, else the critic's verdict)."""
    return {"type": "measure", **{k: result.get(k) for k in MEASURE_FIELDS}, "verdict": verdict}


def at_least_as_good(result: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    """Whether `result` ranks at least as high as `other` for the attempt kept at one subtask (`_standing`)."""
    return _standing(result, other) >= _standing(other, result)


def _standing(result: Mapping[str, Any], other: Mapping[str, Any]) -> tuple[float, float]:
    """How an attempt at one subtask ranks against `other` for the one kept: the plain rate, then the judged
    rate. Beside a training whose episodes started where the chain reached the subtask (a rate given the
    start), only the rates given the start compare: the plain rate of code tests also counts the replayed
    prefix's failures."""
    if CHAIN_STARTS in (result.get("rate_source"), other.get("rate_source")):
        return judged_rate(result), judged_rate(result)
    return float(result.get("success_rate") or 0.0), judged_rate(result)
