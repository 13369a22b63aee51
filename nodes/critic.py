"""Critic node: judges a measured attempt from its code and evidence, and decides where the run goes next.

It sees the code (or the RL configuration) and the test report the fast agent saw, and answers a
`Critique`. Its verdict stands; the graph decides only where the answer cannot be used as it is, and
the critic's prompt says so beforehand (`verdict_rules`):

- pass                          -> the subtask is solved with this attempt (skill saved), next subtask;
                                   a 'pass' below the skill threshold is refused (treated as 'revise')
- revise, a learned attempt with revisions left -> the fast agent again (train longer, fix the config)
- revise or move, outer iterations left -> the slow agent revises the decomposition (move: with the
                                   sub-action moved to the kind the critic named)
- fail, or revise/move with the loops spent -> the subtask's best attempt is kept and the run goes on
                                   when it reaches the skill threshold; else the planner re-plans
- no usable critique            -> the numbers decide: pass when the attempt meets the target, else fail
A run limit (budget, wall time, model calls) stops the loops: the best attempt is kept and the
executor measures what was reached.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast

from langgraph.runtime import Runtime
from langgraph.types import Command

from envs.tasks import TASKS
from nodes.attempt.outcome import skill_from_attempt
from nodes.attempt.results import (
    CHAIN_STARTS,
    judged_count,
    judged_rate,
    pass_rule_text,
    repair_stalls,
    round_best,
    round_passes,
    runs_needed_to_reach,
    runs_reaching,
    same_seed_rounds,
    training_pass_rule_text,
)
from nodes.attempt.rounds import ends_the_chain, judged_sub_action, measure_event, recorded_result
from nodes.context import RunContext, context_of
from nodes.entries import CritiqueEntry, FailedEntry, MeasuredResult, SubActionEntry
from nodes.exits import exit_to
from nodes.fast import start_attempt_update, test_seed_count
from nodes.limits import MIN_TRAIN_STEPS, budget_left, limit_reached
from nodes.models.base import ModelOutputError, prompt_room_of
from nodes.schemas import Critique
from nodes.settings import RunSettings
from nodes.skills.records import save_skill
from nodes.state import AttemptState, current_decomposition, with_update
from prompts.facts import CriticFacts
from prompts.templates import messages_for

# result fields the critic is not shown: the artefacts, the per-seed detail, and the rate's label
# and what differs between two runs of the same answers (a recorded run must replay: nodes.models.recording)
# helpers_before: the report says it in a line (nodes.fast.helpers_before_text); helpers_key, ranks_above: bookkeeping
HIDDEN_FROM_CRITIC = ("sources", "rl_config", "per_seed", "rate_source", "policy_path", "run_dir", "wall_time_s",
                      "helpers_before", "helpers_key", "ranks_above")


def _best_by_kind(results: list[MeasuredResult], subtask: str, given_start: bool = False) -> dict[str, float]:
    """The best rate of each kind of attempt at `subtask` (tests of a policy's building blocks are not
    attempts at it). `given_start`: beside a training that started where the chain stands, the rates given
    the start (judged_rate), the only ones it compares with."""
    best: dict[str, float] = {}
    for r in results:
        if r.get("subtask") == subtask and not r.get("head_test"):
            kept = round_best(r)  # a round's code with the chain's helpers from before, where the rewrite lost
            rate = judged_rate(kept) if given_start else float(kept["success_rate"])
            best[r["kind"]] = max(best.get(r["kind"], 0.0), rate)
    return best


def _rates_on_the_same_seeds(results: list[MeasuredResult], result: MeasuredResult,
                             whole_chain: bool = False) -> list[float]:
    """The judged rates of the earlier code attempts of the same sub-action tested on the same seeds as
    `result`: the critic then knows that the best of them was picked on those seeds. `whole_chain`: the plan's
    last subtask, whose attempts are compared over all runs (held-out play is the chain): their success rates,
    as kept (an answerer read judged rates of 50-100% beside a best success_rate of 0.375 as a contradiction)."""
    return [float(round_best(r)["success_rate"]) if whole_chain else judged_rate(r)
            for r in same_seed_rounds(results, result)]


def _failed_result(judged: SubActionEntry, why: str) -> MeasuredResult:
    return {"kind": judged["kind"], "ok": False, "success_rate": 0.0, "episodes": 0, "steps": 0,
            "rate_source": "none", "errors": [why]}


def verdict_rules(settings: RunSettings, inner: int, outer: int, kind: str, score_plan: bool = False) -> str:
    """What the graph does with each verdict at this point of the loops, in plain words for the prompt
    (`score_plan`: a plan over many achievements, where a failed subtask never stops the run)."""
    outer_left = outer + 1 < settings.max_outer_iters
    trains_again = kind == "rl" and inner < settings.max_inner_iters
    # the threshold judges the kept attempt's own rate: for code tests that replay earlier skills, over the runs
    # that reached the sub-action (nodes.attempt.results.judged_rate), which the critic must know to foresee the outcome
    judged = ("its success_given_start (its success_rate when no earlier skill plays first, or when no test run "
              "reached the action)") if kind == "code" else "its success_rate"
    # an answerer could not tell that a revise or a move spends one of the subtask's outer iterations
    next_outer = f" (outer iteration {outer + 2} of {settings.max_outer_iters}, spending steps again)"
    # an answerer held back a pass on a last round below an earlier one, reading "done with this attempt"
    rules = [f"pass: the subtask is done with this attempt, or with the best earlier one where that ranks higher "
             f"(as fail keeps it); a pass counts as revise when {judged} is below the skill threshold "
             f"{settings.skill_threshold:.0%}."]
    if not outer_left:
        ends = "move ends it like fail" if trains_again else "revise and move end it like fail"
        rules.insert(0, f"This is the subtask's last outer iteration ({outer + 1} of {settings.max_outer_iters}): "
                        f"{ends}.")
    if trains_again:
        rules.append("revise: the fast agent trains again with your feedback.")
    elif kind == "rl":
        rules.append("revise: the trainings of this decomposition are spent: " + (
            f"the slow agent revises the decomposition with your feedback{next_outer}." if outer_left
            else "as fail."))
    else:  # a code attempt reaches the critic when it meets the pass rule, its own repairs are spent, or (the
        # plan's last subtask) a repair gained nothing (nodes.attempt.results.repair_stalls)
        rules.append("revise: " + (f"the slow agent revises the decomposition with your feedback{next_outer}; "
                                   "its fast agent then writes the code again, starting from this attempt and its "
                                   "report." if outer_left else "as fail."))
    rules.append("move: " + (f"the slow agent moves the sub-action to the kind you name{next_outer}." if outer_left
                             else "no outer iteration is left: as fail."))
    ranking = "the highest success_rate, then success_given_start" if kind == "code" else "the highest success_rate"
    # a score plan never re-plans for a failure (nodes.planner._go_on_without): a critic told otherwise chose
    # 'fail' to have a subtask moved to the plan's end
    below = ("below it the attempt still plays in this run's chain (it is only not saved for other runs); when "
             "it never succeeded, the subtasks that need it are dropped"
             if score_plan else "below it the planner re-plans")
    rules.append(f"fail: the best attempt so far ({ranking}; the later on a tie) is kept, its code whole as it was "
                 "tested (helpers included; with the earlier stay_alive or other chain helper where the report says "
                 "the rewrite did not gain enough on it), and the run goes on to "
                 f"the next subtask when {judged} reaches the skill threshold {settings.skill_threshold:.0%}; "
                 f"{below}.")
    if score_plan:
        # an answerer read the play order as the verdict's doing and answered fail to move a skill to the end
        rules.append("Whatever the verdict, held-out play runs the kept skills that did not meet the pass rule "
                     "after every skill that did and does not need them (the likeliest first; what needs one "
                     "follows it): they are reached only in the episodes that live through all of those.")
    return "\n".join(f"- {r}" for r in rules)


def loops_text(settings: RunSettings, inner: int, outer: int, kind: str, stalled: bool = False) -> dict[str, str]:
    """Where the attempt stands in the loops, counted from 1 like the verdict rules (`stalled`: the plan's last
    subtask, whose repair gained nothing on the best round: results.repair_stalls)."""
    if kind == "rl":
        here = {"training": f"{inner + 1} of {settings.max_inner_iters + 1} for this decomposition"}
    elif stalled:
        here = {"code repairs used by the fast agent": f"{inner} of {settings.max_inner_iters}: this repair "
                "scored no more successes than the best round on the same seeds, so it asks you now (on the "
                "plan's last subtask repairs go on only while they gain)"}
    else:
        here = {"code repairs used by the fast agent": f"{inner} of {settings.max_inner_iters} (it asks you "
                "when a test meets the pass rule or its repairs are spent)"}
    return {**here, "outer iteration": f"{outer + 1} of {settings.max_outer_iters}"}


def critic(state: AttemptState, runtime: Runtime[RunContext]) -> Command[Literal["fast", "leave"]]:
    settings, model = context_of(runtime).settings, context_of(runtime).model
    subtask = state["plan"][state["subtask_index"]]["name"]
    judged = judged_sub_action(current_decomposition(state))
    update: dict[str, Any] = {}
    result = recorded_result(state)  # nodes.measure recorded it
    fast_error = state.get("fast_error")
    # a test of a policy's building block measured the block, not the sub-action: as if nothing was measured
    if result is None or result.get("head_test") or (fast_error and not state.get("last_attempt")):
        # nothing measured: the attempt failed before any test (an answer the model never got right)
        result = {**_failed_result(judged, fast_error or "the fast agent made no measuring tool call"),
                  "subtask": subtask, "sub_action": judged["name"], "outer_iter": state.get("outer_iter", 0),
                  "inner_iter": state.get("inner_iter", 0)}
        update["results"] = [*update.get("results", []), result]
    current = with_update(state, update)
    best = dict(current.get("best") or {})
    if subtask not in best:
        best[subtask] = result
        update["best"] = current["best"] = best
    # the best rates of the attempts before this one: the fast node may have recorded this round's result
    # already (it reads test reports to repair code), and a training judged against itself never improves
    # beside a training from the chain's saved moments, every rate of the subtask is compared given the start
    from_chain = any(r.get("rate_source") == CHAIN_STARTS for r in current.get("results", [])
                     if r.get("subtask") == subtask)
    earlier = _best_by_kind([r for r in current.get("results", []) if r != result], subtask, given_start=from_chain)
    last: Mapping[str, Any] = state.get("last_attempt") or {}
    max_inner, max_outer = settings.max_inner_iters, settings.max_outer_iters
    inner, outer = int(state.get("inner_iter", 0)), int(state.get("outer_iter", 0))
    # what the round stands for: its own code, or that code with the chain's helpers from before a rewrite where
    # the rewrite did not gain enough on them on the same seeds (what measure passed it on, and what a pass keeps)
    kept = round_best(result)
    count = judged_count(kept)  # (successes, runs judged): fewer runs than seeds when some died before the action
    judged_runs = count[1] if count and count[1] else test_seed_count(settings, state)
    # the plan's last subtask: held-out play is this chain, so half of its runs must reach the action too (as the
    # fast agent is told); an answerer's critic read "1 of 1 judged runs succeeded: meets the target" beside 1 of 8
    whole_chain = judged["kind"] == "code" and ends_the_chain(state, settings.task)
    episodes = int(kept.get("episodes") or 0)
    chain_rule = (f". The plan's last subtask: held-out play is this chain, so the attempt meets the target only "
                  f"when at least {runs_needed_to_reach(episodes)} of all {episodes} test runs reached the action "
                  "as well" if whole_chain and episodes else "")
    context: CriticFacts = {
        "subtask": subtask, "sub_action": {"name": judged["name"], "kind": judged["kind"]},
        "result": {k: v for k, v in kept.items() if k not in HIDDEN_FROM_CRITIC},
        # the rewrite's own figures where the round counts with the helpers from before it: the code and report
        # shown are the rewrite's, and an answerer read the two sets of figures as one run
        "rewrite_result": ({k: result.get(k) for k in ("successes", "episodes", "started", "started_successes")}
                           if kept is not result else None),
        "code": last.get("code") if judged["kind"] == "code" else None,
        "report": last.get("report") if judged["kind"] == "code" else None,
        "fast_error": fast_error, "target": settings.target_success,
        "best_by_kind": {**earlier, "rl_before": earlier.get("rl")},
        "best_measure": "success_given_start" if from_chain else "success_rate",
        "inner_iter": inner, "max_inner_iters": max_inner, "outer_iter": outer, "max_outer_iters": max_outer,
        "loops": loops_text(settings, inner, outer, judged["kind"], stalled=repair_stalls(
            current.get("results", []), result, whole_chain=whole_chain, repair=inner, max_repairs=max_inner,
            target=settings.target_success)),
        "budget_left": budget_left(current), "min_train_steps": MIN_TRAIN_STEPS,
        "pass_rule": pass_rule_text(judged_runs, settings.target_success) + chain_rule if judged["kind"] == "code"
        else training_pass_rule_text(settings.target_success, result.get("rate_source") == CHAIN_STARTS),
        "meets_target": round_passes(kept, settings.target_success, whole_chain), "judged_count": count,
        "reached_count": (runs_reaching(kept), episodes, runs_needed_to_reach(episodes)) if whole_chain and episodes
        else None,
        "same_seeds": _rates_on_the_same_seeds(current.get("results", []), result, whole_chain),  # own tests' seeds
        "same_seeds_measure": "success rates over all runs" if whole_chain else "judged rates",
        "verdict_rules": verdict_rules(settings, inner, outer, judged["kind"],
                                       state.get("task") in TASKS and TASKS[state["task"]].is_score),
        "room": prompt_room_of(model),
    }
    try:
        critique: Critique = model.structured("critic", messages_for("critic", context), Critique, context)
    except ModelOutputError as exc:  # the graph decides from the numbers alone
        rate = judged_rate(kept)
        critique = Critique(sub_action=judged["name"], success_rate=min(max(rate, 0.0), 1.0),
                            verdict="pass" if round_passes(kept, settings.target_success, whole_chain) else "fail",
                            feedback=f"(no valid critique from the model: {exc.last_error[:300]})")
    c = cast(CritiqueEntry, critique.model_dump())
    # a pass keeps the subtask's best as nodes.measure recorded it (this round where it ranked as high, with the
    # chain's helpers from before where its rewrite lost: comparing the round's own code leaked a rejected
    # rewrite), and the threshold judges that one: a round that gained nothing on an earlier, better one would
    # otherwise turn a pass into a revise
    pass_keeps = best[subtask]
    kept_rate = judged_rate(round_best(pass_keeps))
    if c["verdict"] == "pass" and kept_rate < settings.skill_threshold:
        # a skill that mostly fails would be built on by every later subtask: the numbers overrule the model
        c.update({"verdict": "revise", "move_to": None, "feedback": (
            f"[graph] 'pass' refused: the measured rate {kept_rate:.0%} is below the skill threshold "
            f"{settings.skill_threshold:.0%}. {c['feedback']}")[:600]})
    update.update({
        "critiques": [{**c, "subtask": subtask, "kind": judged["kind"], "outer_iter": outer, "inner_iter": inner}],
        "events": [measure_event(result, c["verdict"])]})
    if c["verdict"] == "move":
        update["events"].append({"type": "move", "subtask": subtask, "sub_action": judged["name"],
                                 "from": judged["kind"], "to": c["move_to"], "success_rate": result["success_rate"],
                                 "episodes": result.get("episodes"), "feedback": c["feedback"]})

    def finish(attempt: MeasuredResult, target: str, **extra: Any) -> Command:
        more = extra.pop("more_events", [])
        record = skill_from_attempt(subtask, attempt, settings.skill_threshold)
        note = save_skill(settings, record) if target == "subtask" else None
        done = [{"type": "skill", "subtask": subtask, "kind": record["kind"],
                 "success_rate": record["success_rate"], "passing": record["passing"], "note": note}]
        return exit_to(target, {
            **update, **extra, "skills": {**(state.get("skills") or {}), subtask: record},
            "subtask_index": state["subtask_index"] + (1 if target == "subtask" else 0),
            "decomposition": None, "feedback": None, "forced_rl": None, "previous_attempt": None, "inner_iter": 0,
            "outer_iter": 0,
            "events": update["events"] + done + more})

    if c["verdict"] == "pass":  # the best attempt is what is kept: an earlier one may have measured higher
        return finish(pass_keeps, "subtask")
    stop = limit_reached(current, settings, model)
    if stop:
        return finish(best[subtask], "executor", stop_reason=stop, more_events=[{"type": "stop", "reason": stop}])
    if c["verdict"] == "revise" and judged["kind"] == "rl" and inner < max_inner:
        return Command(goto="fast", update={
            **update, **start_attempt_update(), "feedback": c, "inner_iter": inner + 1,
            "total_inner_iters": int(state.get("total_inner_iters", 0)) + 1})
    if c["verdict"] in ("move", "revise") and outer + 1 < max_outer:
        return exit_to("slow", {
            **update, "feedback": c, "forced_rl": None, "inner_iter": 0,
            "previous_attempt": {"sub_action": judged["name"], "code": last.get("code"), "report": last.get("report"),
                                 "result": last.get("result"), "outer_iter": outer}
            if judged["kind"] == "code" and last.get("code") else None,
            "outer_iter": outer + 1,
            "total_outer_iters": int(state.get("total_outer_iters", 0)) + 1})
    chosen = best[subtask]
    if judged_rate(chosen) >= settings.skill_threshold:
        return finish(chosen, "subtask")
    failed: FailedEntry = {"subtask": subtask, "best_rate": chosen["success_rate"], "feedback": c["feedback"]}
    return exit_to("planner", {
        **update, "failed": failed, "decomposition": None, "feedback": None, "forced_rl": None,
        "previous_attempt": None, "inner_iter": 0,
        "outer_iter": 0, "events": update["events"] + [{"type": "subtask_failed", **failed}]})
