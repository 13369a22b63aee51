"""Fast agent node: implements the current decomposition one answer at a time (the paper's inner loop).

Coded sub-actions are written one per call (`WriteCode`); the last one is tested in fresh episodes,
one per test seed, as part of the plan's solved prefix (nodes.skills.pool.test_program), and the test
report comes back to the fast agent, which repairs its code until it passes or its revisions
(RunSettings.max_inner_iters) run out; then the critic judges. Earlier coded sub-actions are only
loaded in the sandbox (no episode): they are tested through the one that uses them. A learned
sub-action is configured by naming coded actions from the library (`ConfigureRL`), then trained
(`TrainPolicy`).

The node turns each answer into the real tool calls (run_code_in_env, configure_rl, train_ppo) that
the ToolNode runs: seeds, task, sources and PPO defaults are the graph's facts, not the model's. An
answer the model cannot get right within its retries ends the attempt as failed (the critic records
it); an unchanged resubmission is not tested again.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import uuid
from collections.abc import Collection, Mapping
from typing import Any, Literal, cast

from langchain_core.messages import AIMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import ValidationError

from envs.seeds import RANGE_SIZE as SEED_RANGE
from envs.seeds import train_seeds
from envs.tasks import TASKS
from nodes.attempt.results import (
    CODE_TOOL,
    CONFIGURE_TOOL,
    HELPERS_BEFORE,
    TRAIN_TOOL,
    code_rate_floor,
    judged_rate,
    last_tool_calls,
    last_tool_round,
    pass_rule_text,
    plays_helpers_before,
    report_of,
    round_best,
    same_seed_rounds,
)
from nodes.attempt.rounds import (
    comparison_margin,
    ends_the_chain,
    helpers_not_played,
    is_the_plans_last,
    judged_functions,
    judged_sub_action,
    latest_versions,
    live_code,
    plan_of,
    round_id,
    tested_actions,
)
from nodes.context import RunContext, context_of
from nodes.entries import (
    CodeVersion,
    DecompositionEntry,
    Kind,
    PreviousAttempt,
    SubActionEntry,
    coded,
    learned,
)
from nodes.exits import exit_to
from nodes.limits import MIN_TRAIN_STEPS, budget_left, fit_calls_to_budget, limit_reached, train_steps_within
from nodes.models.base import ModelOutputError, prompt_room_of
from nodes.schemas import MAX_CODE_CHARS, TrainPolicy, configure_rl_answer, write_code_answer
from nodes.settings import RunSettings
from nodes.skills.pool import (
    CHAIN_HELPERS,
    Pool,
    action_head_sources,
    builtin_alias,
    definitions,
    function_names,
    listing,
    missing_problem,
    module_names,
    only_delegates,
    prefix_action,
    relocate_lines,
    reserved_problem,
    restored,
    revised,
    size_problem,
    test_program,
    with_library,
    without_definitions,
)
from nodes.skills.records import (
    earlier_entries,
    prerequisite_achievements,
    prior_sources,
    replaced_names,
    replays_earlier_skills,
    solved_pool,
)
from nodes.starts import STARTS_FOLDER, chain_starts, starts_text, write_start_set
from nodes.state import AttemptState, current_decomposition, log_lengths, with_update
from prompts.facts import FastFacts, RLFacts
from prompts.fewshot import examples_for, way_back_to_builtin
from prompts.templates import COMPACT, PROMPT_ROOMS, messages_for
from rl.stats import mcnemar_exact
from sandbox.lint import MAX_SOURCE_CHARS

MAX_TOOL_ROUNDS = 6  # non-measuring tool rounds (configure_rl, plugin tools) per attempt
TESTED_REPORT_CHARS = 700  # a head entry's test report, shown with the training's configuration
# a compact prompt's repair of a program longer than this shows no stay_alive example: with its code and its
# report the call would pass 8,000 tokens (eat_plant's repair measured 8,414 with it)
REPAIR_WITH_SURVIVAL_CHARS = 2500
# a first write of these kinds shows no stay_alive example either (the library lists its docstring): a place or
# make action takes a few steps beside what it needs, and no report has shown a death yet (a repair after one gets
# it; crafter_score's place_stone measured 8,145 tokens with it); a plant's own example is the longest (3,592
# characters) and calls stay_alive where it waits (crafter_score's eat_plant measured 8,048 tokens with both)
NO_SURVIVAL_EXAMPLE_KINDS = ("place", "make", "plant")
HEAD_BUILTINS = ("explore",)  # the built-in a policy may always call (listed in the library as built-in)
GRAPH_PPO_WORKERS = 2  # worker processes of a graph training ('actors'): fixed, so runs replay on any machine
# a graph training's policy decides again after this many steps of a coded call, which goes on if chosen again
# (rl.options.CodedActionsWrapper): it watches the code run and learns where to step in
GRAPH_DECISION_STEPS = 32


def ppo_defaults(settings: RunSettings, moved_from_code: bool = True) -> dict[str, Any]:
    """The PPO settings a training starts from. Small runs: 4 envs, one torch thread. The vector mode is the
    run's (RunSettings.vector_mode, 'actors' by default). The envs are split over GRAPH_PPO_WORKERS worker
    processes whatever the machine: each worker samples its actions from its own stream, so a fixed split
    makes a graph run replay the same on any machine, as 'sync' would (one process), and on 2 cores it
    trains 1.4-2x faster than 'sync' (docs/performance.md). With `moved_from_code`, the untrained policy
    gives 90% of its choices to the coded actions (`coded_prior`): it starts from the code it was moved
    from and learns where to leave it, instead of spending a short training on learning to call it
    (docs/evaluation.md, "Since the tables..."). A sub-action learned from the start (no code covered it)
    starts even over its head: a prior on exploring alone would keep it from trying the primitive that
    solves it (sleep, attack)."""
    return {"num_envs": 4, "num_steps": 128, "vector_mode": settings.vector_mode, "torch_threads": 1,
            "num_workers": GRAPH_PPO_WORKERS,
            "progress": "none", "hidden_size": 64, "seed": settings.seed + 1,
            "coded_prior": 0.9 if moved_from_code else 0.0}


# the plan's last subtask of a one-achievement task tests on this many times the seeds: its tests replay the whole
# chain, and answerers' diamond rounds reached the action in 2 to 7 of 8 runs, so its code was repaired, judged and
# kept on a handful of runs (a round kept on 3 of 3 reached held 30% of its starts over 200 held-out seeds)
WHOLE_CHAIN_SEED_FACTOR = 2


def test_seed_count(settings: RunSettings, state: Mapping[str, Any]) -> int:
    """Code-test seeds per round of the current subtask: the run's (`code_test_episodes`), or WHOLE_CHAIN_SEED_FACTOR
    times that where the tests replay the chain held-out play is (nodes.attempt.rounds.ends_the_chain) and measure
    the subtask's code: a building block of a policy's head is only checked before its training."""
    n = settings.code_test_episodes
    return n * WHOLE_CHAIN_SEED_FACTOR if ends_the_chain(state, settings.task) and not _building_block(state) else n


def test_ends_at_achievement(settings: RunSettings, state: Mapping[str, Any]) -> bool:
    """Whether the current subtask's code tests end at its achievement (tools.run_code `after_success_steps` 0)
    rather than play on to the code's return, the player to be alive then: held-out play goes on from there to the
    next skill, except after the plan's last subtask of a one-achievement task, where the episode has succeeded
    (nodes.attempt.rounds.is_the_plans_last; not for a building block of a policy's head). An answerer's diamond
    round counted a run that mined the diamond and died 13 steps later as a failure."""
    return is_the_plans_last(state, settings.task) and not _building_block(state)


def _building_block(state: Mapping[str, Any]) -> bool:
    """Whether the current code tests check a building block of a policy's head, before its training."""
    return bool(learned((state.get("decomposition") or {}).get("sub_actions") or []))


def code_test_seeds(settings: RunSettings, state: Mapping[str, Any]) -> list[int]:
    """Code-test seeds: training range, varied per subtask so tests do not all see the same worlds."""
    n = test_seed_count(settings, state)
    offset = (settings.seed * 1000 + 100 * int(state.get("subtask_index", 0))) % (SEED_RANGE - n)
    return train_seeds(n, offset=offset)


def test_max_steps(settings: RunSettings, state: Mapping[str, Any]) -> int:
    """A code test's episode length: `--test-max-steps`, else the subtask's step limit, or in a one-achievement task's
    plan, whose tests replay every earlier skill first, the longest limit of the plan up to it (a furnace tested after
    the iron runs as long as the iron's tests)."""
    if settings.test_max_steps:
        return int(settings.test_max_steps)
    plan, index = state["plan"], int(state.get("subtask_index", 0))
    earlier = [sub["name"] for sub in plan[:index]] if replays_earlier_skills(state.get("task")) else []
    return max([TASKS[plan[index]["name"]].max_steps, *(TASKS[name].max_steps for name in earlier if name in TASKS)])


class SubtaskCode:
    """The coded actions the current sub-action may use: every skill solved so far (nodes.skills.pool.pool_of),
    then this decomposition's code; the earlier skills a code test replays first are the prefix
    (nodes.skills.records.prior_sources: every earlier skill in a one-achievement task's plan, else what the
    subtask needs)."""

    def __init__(self, state: Mapping[str, Any], settings: RunSettings):
        self.subtask = state["plan"][state["subtask_index"]]["name"]
        self.prior = prior_sources(state)
        self.solved = solved_pool(state)  # as the subtask found it: a chain helper's rewrite is set against it
        self.pool = self.solved.copy()
        self.latest = latest_versions(state, self.subtask)
        # each definition once, as the answer that sent it last wrote it (nodes.attempt.rounds.live_code)
        decomposition = state["decomposition"]
        self.versions = live_code(state, self.subtask, [a["name"] for a in coded(decomposition["sub_actions"])]
                                  + self.hinted(decomposition))
        self.skill_entries = earlier_entries(state)  # a sub-action of one of these names reuses it
        # a non-final sub-action of one of these names replaces it (nodes.skills.records.replaced_names)
        self.replaced = set(self.pool.functions()) - self.skill_entries
        for sub in coded(state["decomposition"]["sub_actions"]):
            if sub["name"] in self.versions:
                self.pool.add(self.versions[sub["name"]], subtask=self.subtask, kind="code", this_subtask=True)
        for name in self.hinted(state["decomposition"]):
            # code written for this subtask before the critic moved it to rl: kept as a coded action of the head
            if name in self.versions and name not in self.pool:
                self.pool.add(self.versions[name], subtask=self.subtask, kind="code", this_subtask=True)
        # a skill whose entry is not among its functions (its code never defined it) cannot be replayed
        replayable = [p for p in self.prior if p.get("main") in self.pool]
        self.prefix = [p["main"] for p in replayable]
        self.replayed = [p["subtask"] for p in replayable]  # the skills of the prefix (Skill.replayed)
        self.max_steps = test_max_steps(settings, state)
        # moments where earlier tests reached this subtask's turn: a training starts there (nodes.starts)
        self.starts = chain_starts(state, self.subtask) if self.prefix else []
        # the best code attempt before this attempt's own tests (a move to rl keeps its code in the head)
        results = list(state.get("results") or [])
        before = results[:(state.get("log_marks") or {}).get("results", len(results))]
        self.code_results = [r for r in before if r.get("subtask") == self.subtask and r.get("kind") == "code"
                             and not r.get("head_test")]
        best = max(self.code_results, key=self.rate, default=None)
        self.best_code = best
        self.moved_code = best.get("sub_action") if best is not None and best.get("sub_action") in self.pool else None

    def replanned(self, sub_action: SubActionEntry) -> bool:
        """Whether this subtask's code of `sub_action` was written for a plan the slow agent has changed since."""
        latest = self.latest.get(sub_action["name"])
        return latest is not None and latest.get("plan") is not None and latest.get("plan") != plan_of(sub_action)

    def with_code(self, code: str) -> Pool:
        pool = self.pool.copy()
        pool.add(code, subtask=self.subtask, kind="code", this_subtask=True)
        return pool

    def rate(self, result: Mapping[str, Any]) -> float:
        """An attempt's rate as this subtask's training measures its own: given the start when the training
        starts where the chain stands, else from a fresh world."""
        return judged_rate(result) if self.starts else float(result.get("success_rate") or 0.0)

    def play_name(self) -> str | None:
        """The coded action that plays the code this subtask was moved from as held-out play runs it (the chain
        driver: retries, gathering, stay_alive between tries), offered to a policy's action head."""
        return f"play_{self.subtask}" if self.moved_code else None

    def graph_actions(self) -> list[tuple[str, str]]:
        """(name, what it does) of the coded actions the graph composes for an action head."""
        out: list[tuple[str, str]] = []
        play, reach = self.play_name(), self.reach_name()
        if play:
            out.append((play, f"plays {self.moved_code} as held-out play runs it (the chain driver retries it, "
                              "gathers what it lacks, calls stay_alive between tries)"))
        if reach:
            out.append((reach, f"plays the solved prefix ({' -> '.join(self.prefix)}) as one action"))
        return out

    def reach_name(self) -> str | None:
        """The coded action that plays the solved prefix, offered to a policy's action head; none when the
        training starts where the chain stands (saved moments, `starts`)."""
        return f"reach_{self.subtask}" if self.prefix and not self.starts else None

    @staticmethod
    def hinted(decomposition: DecompositionEntry) -> list[str]:
        """The coded actions the slow agent named for the learned sub-actions' heads."""
        return [n for a in learned(decomposition["sub_actions"]) for n in a.get("coded_actions") or []]

    def head_names(self, decomposition: DecompositionEntry) -> list[str]:
        """Names a learned sub-action may put in its action head."""
        own = [a["name"] for a in coded(decomposition["sub_actions"]) if a["name"] in self.pool]
        own += [n for n in self.hinted(decomposition) if n in self.pool and n not in own]
        names = own + [n for n in self.prefix if n in self.pool and n not in own]
        names += [n for n in HEAD_BUILTINS if n in self.pool and n not in names]
        return names + [name for name, _ in self.graph_actions()]

    def head_order(self, names: list[str]) -> list[str]:
        """The head's coded actions in their order on the head: the library's, then the graph's (play_, reach_)."""
        composed = [name for name, _ in self.graph_actions() if name in names]
        return [n for n in names if n not in composed and n in self.pool] + composed

    def head_sources(self, names: list[str]) -> list[str]:
        order = self.head_order(names)
        sources = action_head_sources(self.pool, [n for n in order if n in self.pool])
        if self.play_name() in order:
            steps = [*self.prefix, str(self.moved_code)]
            sources.append(prefix_action(self.pool, steps, self.max_steps, str(self.play_name())))
        if self.reach_name() in order:
            sources.append(prefix_action(self.pool, self.prefix, self.max_steps, str(self.reach_name())))
        return sources


def pending_code(decomposition: DecompositionEntry, lib: SubtaskCode) -> list[SubActionEntry]:
    """Coded sub-actions with no code for the current plan yet: none written for this subtask, unless the
    name is an earlier skill's coded action (reused as it is), or written in an earlier outer iteration for a
    plan the slow agent has changed since. A sub-action named after a built-in or after a helper of an earlier
    skill is written, and replaces that function (the slow agent's prompt says so)."""
    return [a for a in coded(decomposition["sub_actions"])
            if (lib.replanned(a) if a["name"] in lib.versions else a["name"] not in lib.skill_entries)]


def reused_skills(decomposition: DecompositionEntry, lib: SubtaskCode) -> list[str]:
    """Coded sub-actions that name an earlier skill and are not written for this subtask: played as they are
    (the complement of pending_code among earlier skills' names)."""
    return [a["name"] for a in coded(decomposition["sub_actions"])
            if a["name"] in lib.skill_entries and a["name"] not in lib.versions]


def _call(name: str, args: dict, prefix: str = "call_") -> dict:
    return {"name": name, "args": args, "id": f"{prefix}{uuid.uuid4().hex[:12]}", "type": "tool_call"}


def chain_helpers_before(before: Pool, pool: Pool, tested: Collection[str] = ()) -> tuple[dict[str, str], Pool]:
    """The chain's helpers (stay_alive, explore, collect_food, collect_drink) that this subtask's code in `pool`
    writes anew, each with whose version stood `before` it (the built-in, or one an earlier skill wrote), and
    `pool` with those versions back. What runs between every skill of held-out play is too easily made worse
    to take on the rewrite's own figures (answerers' rewrites of stay_alive lost most of their held-out runs):
    a round that rewrites one also plays its seeds with the one before (nodes.attempt.rounds.record_round).
    A helper that is one of the `tested` actions (a collect_drink subtask's own action) is what the round judges,
    not a rewrite to set beside it; nor is a definition that only plays the built-in where the built-in stood
    (`def stay_alive(game): yield from builtin_stay_alive(game)`: an answerer's way back cost a comparison of
    about 14,000 steps that could only tie)."""
    helpers: dict[str, str] = {}
    for name in CHAIN_HELPERS:
        if ((pool.origin.get(name) or {}).get("this_subtask") and name in before and name not in tested
                and pool.sources[name].strip() != before.sources[name].strip()):
            was = before.origin.get(name) or {}
            if was.get("kind") == "built-in" and only_delegates(pool.sources[name], builtin_alias(name)):
                continue
            helpers[name] = ("the built-in" if was.get("kind") == "built-in"
                             else f"written for {was.get('subtask') or 'an earlier skill'}")
    return helpers, restored(pool, helpers, before)


# a comparison runs only while the steps left cover both sets of tests at their full length (so that no test is
# cut for it) and this many more rounds of the sub-action's own tests at the last round's size: an answerer's
# last rounds had their episodes cut to 696 steps, the comparison taking half
COMPARE_ROUNDS_LEFT = 3


def helpers_compared_key(pool: Pool, helpers: Mapping[str, str]) -> str:
    """The rewritten helpers and everything they call, as one digest: a revision of the action alone plays them
    as the last comparison did."""
    return hashlib.sha256(pool.program(helpers).encode()).hexdigest()[:16] if helpers else ""


def already_compared(state: Mapping[str, Any], subtask: str, key: str) -> bool:
    """Whether a round of this subtask played the chain's helpers from before beside these rewrites (`key`)."""
    return any((r.get("helpers_before") or {}).get("helpers_key") == key for r in state.get("results") or []
               if r.get("subtask") == subtask and r.get("kind") == "code")


def compare_budget_short(state: Mapping[str, Any], subtask: str, judged: str, seeds: int, max_steps: int) -> str:
    """Why the budget leaves no room to play a round's seeds with the chain's helpers from before too, as a
    report says it (empty when it does): the comparison would cut a test short (the round's own tests at full
    length: `seeds` episodes of `max_steps`) or leave fewer than COMPARE_ROUNDS_LEFT rounds of the `judged`
    sub-action at the last one's size."""
    round_steps = seeds * max_steps
    own = [int(r.get("steps") or 0) for r in state.get("results") or [] if r.get("subtask") == subtask
           and r.get("kind") == "code" and r.get("sub_action") == judged and r.get("episodes")]
    left = budget_left(state)
    if own and left < COMPARE_ROUNDS_LEFT * own[-1]:  # first: a lower `max_steps` does not change this one
        return (f"{left:,} steps are left, fewer than {COMPARE_ROUNDS_LEFT} more rounds at your last round's "
                f"{own[-1]:,} steps")
    if left < 2 * round_steps:
        # the cap that lets them run, in numbers: an answerer read "a lower max_steps" beside its own 3,000 as unmet
        fits = _both_fit(left, seeds)
        return (f"both sets of tests at full length need {2 * round_steps:,} steps and {left:,} are left "
                + (f"(a `max_steps` of {fits:,} or less lets them run)" if fits else "(no `max_steps` lets them run)"))
    return ""


def _both_fit(left: int, seeds: int) -> int:
    """The longest `max_steps` at which both sets of a comparison (`seeds` episodes each) fit in `left` steps."""
    return left // (2 * seeds) if seeds else 0


def comparison_cap(state: Mapping[str, Any], subtask: str, judged: str, seeds: int, max_steps: int) -> int | None:
    """The `max_steps` below the one asked that lets a rewrite's comparison run (compare_budget_short says none
    is short at it), where it still covers the longest test episode of this subtask so far (or half the one asked,
    before any): no run that ended before it is cut. None where there is none such."""
    fits = _both_fit(budget_left(state), seeds)
    if fits >= max_steps or fits <= 0 or compare_budget_short(state, subtask, judged, seeds, fits):
        return None
    return fits if fits >= max(longest_test_run(state, subtask), max_steps // 2) else None


def longest_test_run(state: Mapping[str, Any], subtask: str) -> int:
    """The most steps one code-test episode of this subtask has taken so far (0 before any)."""
    return max((int(run.get("steps") or 0) for r in state.get("results") or []
                if r.get("subtask") == subtask and r.get("kind") == "code"
                for runs in (r.get("per_seed"), (r.get("helpers_before") or {}).get("per_seed")) for run in runs or []),
               default=0)


def max_steps_capped_text(attempt: Mapping[str, Any] | None) -> str:
    """A round whose `max_steps` was lowered so that a chain helper's rewrite could be compared, as a report says
    it."""
    capped = (attempt or {}).get("max_steps_capped")
    if not capped:
        return ""
    return (f"this round ran with `max_steps` {capped['ran']:,}, not the {capped['asked']:,} asked: both sets of tests "
            "(yours and the earlier helpers') fit the budget at that length, and it covers every test run so far")


def helpers_not_played_text(attempt: Mapping[str, Any] | None) -> str:
    """A round whose answer rewrote a chain helper that the budget left no room to set beside the one before it,
    so that the one before played in its place (`_write_code`), as a report says it."""
    skipped = (attempt or {}).get("helpers_not_played")
    if not skipped:
        return ""
    return (f"this round played the earlier {_helpers_named(skipped.get('helpers') or {})} in place of your rewrite, "
            f"which plays only beside it on the same seeds: {skipped.get('why')}")


def compared_rewrites(state: Mapping[str, Any], lib: SubtaskCode, under_test: Collection[str]) -> dict[str, str]:
    """The chain helpers whose rewrites the live code holds as an earlier round of this subtask compared them
    (name -> whose version stood before; `under_test`: the actions the round judges, no rewrite of theirs): the
    next round plays them again, not compared again, whatever the budget. An answerer read "else the earlier one
    plays in its place" as true of a rewrite that had lost, raised its `max_steps`, and had the same rewrite played
    again (7,416 steps)."""
    helpers, _ = chain_helpers_before(lib.solved, lib.pool, under_test)
    key = helpers_compared_key(lib.pool, helpers)
    return helpers if helpers and already_compared(state, lib.subtask, key) else {}


def _helpers_named(helpers: Mapping[str, str]) -> str:
    """"`stay_alive` (the built-in)", one per rewritten chain helper, as the report lines name them."""
    return ", ".join(f"`{name}` ({whose})" for name, whose in helpers.items())


def helpers_before_text(result: Mapping[str, Any] | None) -> str:
    """A round's code played with the chain's helpers before this subtask's rewrite, as a report says it: its
    figures on the same seeds and which of the two a verdict keeps (empty when the round rewrote none)."""
    before = (result or {}).get("helpers_before")
    if not before:
        return ""
    helpers = before.get("helpers") or {}
    which = _helpers_named(helpers)
    figures = f"{before.get('successes', 0)} of {before.get('episodes', 0)} succeeded"
    if before.get("prerequisites"):
        figures += f", {before.get('started', 0)} reached your action"
    back = "".join(f"; {way_back_to_builtin(name)}" for name, whose in helpers.items() if whose == "the built-in")
    # what this round stands for; a verdict keeps the best round of all (an answerer read "keeps your code with the
    # earlier one" as final, while an earlier round with its rewrite ranked as high and was what stayed)
    margin = comparison_margin(result or {})
    kept = (f"yours did not succeed on {margin} more of these seeds, so this round counts as your code with "
            "the earlier one (a pass or fail keeps the best round so far; your next revision is tested with yours "
            f"again, and a round of it is kept only where it does better than the best{back})"
            if before.get("ranks_above") else
            f"yours succeeded on {margin}+ more of these seeds, so this round counts as yours")
    return f"the same seeds with the earlier {which} in place of yours: {figures}; {kept}" + _chance_text(
        result or {}, before)


def _paired(result: Mapping[str, Any], other: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]] | None:
    """Two rounds' runs on the seeds both have: those seeds and McNemar's exact test, `only_b` the seeds only
    `result` won, `only_a` those only `other` won and `a`/`b` their successes there; None without a shared seed."""
    own = {e.get("seed"): int(bool(e.get("success"))) for e in result.get("per_seed") or []}
    theirs = {e.get("seed"): int(bool(e.get("success"))) for e in other.get("per_seed") or []}
    seeds = [seed for seed in own if seed in theirs]
    if not seeds:
        return None
    a, b = [theirs[s] for s in seeds], [own[s] for s in seeds]
    return seeds, {**mcnemar_exact(a, b), "a": sum(a), "b": sum(b)}


def _chance_text(result: Mapping[str, Any], before: Mapping[str, Any]) -> str:
    """'; on these 8 seeds the two are within chance (...)' where the paired seeds cannot tell the two versions
    apart: an answerer spent about 40,000 steps on rewrites of `stay_alive` one seed apart, told so only later."""
    paired = _paired(result, before)
    if paired is None:
        return ""
    seeds, test = paired
    if test["p_value"] < 0.05:
        return ""
    where = "this seed" if len(seeds) == 1 else f"these {len(seeds)} seeds"
    return (f"; on {where} the two are within chance (paired: {test['only_b']} seeds only yours "
            f"won, {test['only_a']} only the earlier one; McNemar p = {test['p_value']:.2f}), and each round "
            "replays the same worlds")


def best_round_text(state: Mapping[str, Any]) -> str:
    """The last round set seed for seed against the best earlier round of its sub-action on the same seeds, with
    McNemar's exact test: answerers steered each repair by a success or two on the same 16 worlds ("each verdict
    steered the next code on noise"), told that a difference was within chance only for a rewrite's comparison.
    Empty before a second round on these seeds, or when the last round measured nothing."""
    result = state.get("last_result") or {}
    if result.get("head_test"):  # a building block's test, filed under the policy's name: nothing of it to pair
        return ""
    # each round as a verdict keeps it (round_best: the earlier helpers' runs where a rewrite lost), as the
    # repairs' own rule ("a repair must beat your best round's successes") counts them
    earlier = [r for r in map(round_best, same_seed_rounds(state.get("results") or [], result)) if r.get("per_seed")]
    if not earlier:
        return ""
    best = max(earlier, key=lambda r: int(r.get("successes") or 0))  # the first of the best: max keeps it
    paired = _paired(round_best(result), best)
    if paired is None:
        return ""
    seeds, test = paired
    # the worlds replay exactly, so a seed that changed is the code's doing; chance is about other worlds (an
    # answerer read "within chance" as noise in the tests themselves and undid two rounds of sound edits)
    verdict = ("within chance: each seed that changed is your code's doing, but on other worlds the two may rank "
               "either way" if test["p_value"] >= 0.05 else "a difference beyond chance")
    return (f"against your best earlier round on these {len(seeds)} seeds (outer iteration "
            f"{int(best.get('outer_iter') or 0) + 1}, repair {int(best.get('inner_iter') or 0)}): "
            f"{test['b']} against {test['a']} successes; paired, "
            f"{test['only_b']} seeds only this round won and {test['only_a']} only that one (McNemar p = "
            f"{test['p_value']:.2f}): {verdict}")


def report_text(state: Mapping[str, Any], settings: RunSettings, room: str = COMPACT.name) -> str:
    """The last code-test round as the fast agent and the critic read it (its numbers are the round's
    result, nodes.attempt.rounds.record_round), its seeds set against the round before it of the same
    sub-action, and the chain's stay_alive named by who wrote it; as long as the model's prompt room allows
    (prompts.templates.PROMPT_ROOMS)."""
    from tools.run_code import summarise_reports_for_agent  # heavy (the sandbox): only with a code round

    messages = state.get("messages") or []
    reports: list[Any] = [report_of(m) for m in last_tool_round(messages)
                          if m.name == CODE_TOOL and not plays_helpers_before(m)]
    if not reports:
        return ""
    text = summarise_reports_for_agent(reports, max_chars=PROMPT_ROOMS[room].report_chars,
                                       prerequisites=prerequisite_achievements(state),
                                       judged=judged_functions(state["decomposition"], replaced_names(state)),
                                       last_round=_round_before(state),
                                       survival=survival_origin(_played_pool(state, settings)),
                                       compared="\n".join(filter(None, [
                                           max_steps_capped_text(state.get("last_attempt")),
                                           helpers_before_text(state.get("last_result"))
                                           or helpers_not_played_text(state.get("last_attempt")),
                                           best_round_text(state) if room != COMPACT.name else ""])))
    program = next((c["args"].get("code", "") for c in last_tool_calls(messages) if c["name"] == CODE_TOOL), "")
    # a rewrite that did not run holds no line of the program
    own = without_definitions((state.get("last_attempt") or {}).get("code") or "", helpers_not_played(state))
    return relocate_lines(text, program, own) if program else text


def _played_pool(state: Mapping[str, Any], settings: RunSettings) -> Pool:
    """The pool the last round's tests played: this subtask's, with the earlier chain helpers back where its
    rewrites did not play (helpers_not_played_text)."""
    lib = SubtaskCode(state, settings)
    return restored(lib.pool, helpers_not_played(state), lib.solved)


def program_identity(program: str) -> str:
    """What makes two test programs the same test: their top-level statements, in any order where no statement
    reads at load time (a constant's value, a decorator, a default) a name the program binds and no name is
    bound twice, else in program order. A resent answer can come back in another order once it is the live
    version (an answerer was charged a second test for it); where order could change what loads, it counts.
    A program that does not parse is its text."""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError):
        return hashlib.sha256(program.encode()).hexdigest()[:16]
    bound: list[str] = []
    read: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.append(node.name)
            load_time: list[ast.AST] = list(node.decorator_list)
            if not isinstance(node, ast.ClassDef):
                load_time += [d for d in (*node.args.defaults, *node.args.kw_defaults) if d is not None]
            else:
                load_time += [*node.bases, *node.keywords]
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound += [(a.asname or a.name).split(".")[0] for a in node.names]
            load_time = []
        else:
            bound += [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
            load_time = [node]
        read |= {n.id for part in load_time for n in ast.walk(part) if isinstance(n, ast.Name)
                 and isinstance(n.ctx, ast.Load)}
    statements = [ast.unparse(node) for node in tree.body]
    free = len(bound) == len(set(bound)) and not read & set(bound)
    text = json.dumps(sorted(statements) if free else statements)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _round_before(state: Mapping[str, Any]) -> list[dict]:
    """The per-seed endings of the code-test round before the latest one, of the same subtask and sub-action
    (empty before a second round)."""
    results = [r for r in state.get("results") or [] if r.get("kind") == "code"]
    if not results:
        return []
    last = results[-1]
    if last.get("head_test"):  # its sub_action names the policy, not the building block each such test tried
        return []
    key = (last.get("subtask"), last.get("sub_action"))
    same = [r for r in results[:-1] if (r.get("subtask"), r.get("sub_action")) == key and not r.get("head_test")]
    return list(same[-1].get("per_seed") or []) if same else []


def survival_origin(pool: Pool) -> str:
    """Whose `stay_alive` a chain in `pool` calls between skills and what the model can do about it, as a
    report says it (tools.run_code.summarise_reports_for_agent's `survival`); empty for the built-in, which the
    report names itself."""
    origin = pool.origin.get("stay_alive") or {}
    if origin.get("kind") in (None, "built-in"):
        return ""
    if origin.get("this_subtask"):
        # said to whichever sub-action is being written ("revise it there" sent an answerer back to the
        # sub-action that wrote it, which it could no longer answer for)
        return ("the `stay_alive` of this subtask's code: one your answer defines replaces it (the built-in is "
                f"`{builtin_alias('stay_alive')}`)")
    return (f"the `stay_alive` written for {origin.get('subtask') or 'an earlier skill'}: one you write replaces it "
            f"(the built-in is `{builtin_alias('stay_alive')}`)")


def _last_round_steps(state: Mapping[str, Any], subtask: str, name: str) -> int | None:
    """The env steps of the latest code-test round of this sub-action; None before its first."""
    rounds = [r for r in state.get("results") or [] if r.get("kind") == "code" and r.get("subtask") == subtask
              and r.get("sub_action") == name and r.get("episodes")]
    return int(rounds[-1].get("steps") or 0) if rounds else None


def in_run_names(examples: dict[str, str], state: Mapping[str, Any], pool: Pool) -> dict[str, str]:
    """The examples with each call of a skill by its subtask's name ('collect_stone(game)') renamed to the
    coded action this run's skill for that subtask plays ('mine_stone(game)') when the library has no function
    of the subtask's name: an example copied as shown then runs (an answerer's stone skill was `mine_stone`)."""
    entries = {name: str(record["entry"]) for name, record in (state.get("skills") or {}).items()
               if record.get("entry") and name not in pool and str(record["entry"]) in pool}
    if not entries:
        return examples
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, entries)) + r")(?=\()")

    def renamed(source: str) -> str:
        own = set(definitions(source))  # a function the example defines itself keeps its name
        return pattern.sub(lambda m: m.group(1) if m.group(1) in own else entries[m.group(1)], source)

    return {name: renamed(source) for name, source in examples.items()}


def fast_context(state: Mapping[str, Any], settings: RunSettings, lib: SubtaskCode, mode: Kind,
                 sub_action: SubActionEntry, round_: list[ToolMessage], room: str = COMPACT.name) -> FastFacts:
    """The facts of this call: what the prompt shows and what the rule-based expert reasons on. `room`: how
    much of the long texts the model's prompts hold (prompts.templates.PROMPT_ROOMS)."""
    subtask = lib.subtask
    decomposition: DecompositionEntry = state["decomposition"]
    left = budget_left(state)
    last_attempt = state.get("last_attempt") or {}
    repair = bool(last_attempt.get("report"))
    n_seeds = test_seed_count(settings, state)
    context: FastFacts = {
        "subtask": subtask, "task_description": TASKS[subtask].description, "mode": mode,
        "sub_action": sub_action, "decomposition": decomposition,
        "reused": reused_skills(decomposition, lib) if mode == "code" else [],  # a policy writes no code
        # the actions the graph composes go on an action head only: listed when a policy is configured
        "library": listing(lib.pool, lib.graph_actions() if mode == "rl" else []),
        "module_names": module_names(lib.pool) if mode == "code" and room != COMPACT.name else [],  # roomy only
        # the chain's own stay_alive, where tests replay earlier skills and the model has not replaced it; in a
        # compact prompt not beside a long program under repair, whose code and report fill the call (the
        # library still lists it)
        "examples": in_run_names(examples_for(sub_action.get("template"), chain_survival=bool(lib.prefix) and (
            lib.pool.origin.get("stay_alive", {}).get("kind") == "built-in") and (
            (room != COMPACT.name or len(last_attempt.get("code") or "") <= REPAIR_WITH_SURVIVAL_CHARS) if repair
            else sub_action.get("template") not in NO_SURVIVAL_EXAMPLE_KINDS), repair=repair), state, lib.pool),
        "last_attempt": state.get("last_attempt"), "feedback": (state.get("feedback") or {}).get("feedback"),
        "previous_attempt": _previous_attempt(state, mode, sub_action, lib),
        "limits": {"test_seeds": n_seeds, "max_steps_per_test": lib.max_steps, "budget_left": left,
                   "revision": int(state.get("inner_iter", 0)), "max_revisions": settings.max_inner_iters,
                   "pass_rule": pass_rule_text(n_seeds, settings.target_success,
                                               whole_chain=ends_the_chain(state, settings.task),
                                               every_count=room != COMPACT.name),
                   "max_code_chars": MAX_CODE_CHARS},
        "skill_threshold": settings.skill_threshold, "room": room,
        # for the expert (not rendered): the library's sources and the skills' entries
        "sources": dict(lib.pool.sources), "prefix": list(lib.prefix),
    }
    if mode == "code" and not learned(decomposition["sub_actions"]):
        skipped = set(state.get("skipped_code") or [])
        pending = [a["name"] for a in pending_code(decomposition, lib) if a["name"] not in skipped]
        kept = [a["name"] for a in coded(decomposition["sub_actions"])
                if a["name"] not in pending and a["name"] in lib.versions]
        if pending == [sub_action["name"]] and kept:
            context["kept_pieces"] = kept
    unloaded = dropped_code(state, lib, decomposition) if mode == "code" else {}
    if unloaded:
        context["unloaded"] = unloaded
    best = _best_attempt_shown(state, subtask) if room != COMPACT.name and mode == "code" else None
    if best:
        above: Mapping[str, Any] = context.get("last_attempt") or context.get("previous_attempt") or {}
        context["best_attempt"] = _apart_from(best, str(above.get("code") or ""))
    used = _last_round_steps(state, subtask, sub_action["name"])
    if used is not None:  # what a round really cost, beside its worst case: most episodes end well before their limit
        context["limits"]["last_round_steps"] = used
    if room != COMPACT.name and mode == "code" and not learned(decomposition["sub_actions"]):
        # said before the round, not only after it: an answerer read the whole budget as a round's room and
        # learned from the next report that its stay_alive rewrite had not been played against the earlier one
        judged_name = judged_sub_action(decomposition)["name"]
        under_test = {*tested_actions(decomposition, lib.replaced), judged_name}  # as chain_helpers_before
        compared = compared_rewrites(state, lib, under_test)
        if compared:
            context["limits"]["helpers_compared_already"] = compared
        short = compare_budget_short(state, subtask, judged_name, n_seeds, lib.max_steps)
        if short:  # the helpers a rewrite of which would be compared: not the action this round tests
            context["limits"]["helpers_compared_only_if"] = short
            cap = comparison_cap(state, subtask, judged_name, n_seeds, lib.max_steps)  # what a higher one is lowered to
            if cap is not None:
                context["limits"]["helpers_compared_cap"] = cap
            context["limits"]["helpers_compared"] = [name for name in sorted(CHAIN_HELPERS, key="stay_alive".__ne__)
                                                     if name not in under_test]
    if mode == "rl":
        subtasks_left = max(1, len(state["plan"]) - state["subtask_index"])
        previous = None
        for cfg in state.get("rl_configs", []):
            if cfg["subtask"] == subtask and cfg["sub_action"] == sub_action["name"]:
                previous = cfg["config"].get("ppo", {}).get("total_steps")
        context["rl"] = {"coded_actions": lib.head_names(decomposition), "train_steps": settings.train_steps,
                         "min_train_steps": MIN_TRAIN_STEPS, "max_train_steps": max(MIN_TRAIN_STEPS, left),
                         "subtasks_left": subtasks_left, "previous_train_steps": previous,
                         "revise": bool(state.get("feedback") and state["feedback"].get("verdict") == "revise")}
        if lib.starts:
            context["rl"]["episodes_start"] = starts_text(lib.starts)
        if GRAPH_DECISION_STEPS is not None:
            context["rl"]["decision_steps"] = GRAPH_DECISION_STEPS
        if fallback_training(state, subtask):  # said before the answer: the graph sets these
            context["rl"]["total_steps_set_by_the_graph"] = (
                f"{max(MIN_TRAIN_STEPS, left)}: the plan gave up, so the graph learns the task itself with the whole "
                "budget left, whatever total_steps you answer")
            reward = fallback_reward(subtask)
            if reward:
                context["rl"]["reward_set_by_the_graph"] = (
                    f"{reward}: the task needs nothing unlocked before it, so the policy is paid for the task "
                    "itself, whatever reward you answer")
        tested = [f"{t['sub_action']}: {t.get('successes')} of {t.get('episodes')} test episodes succeeded\n"
                  f"{t['report']}" for t in state.get("code_tested") or []]
        if tested:
            context["rl"]["coded_actions_tested_before_training"] = "\n".join(tested)
        left_out = [a["name"] for a in coded(decomposition["sub_actions"]) if a["name"] not in lib.pool]
        offered = set(context["rl"]["coded_actions"])
        unknown = [n for n in dict.fromkeys(lib.hinted(decomposition)) if n not in offered and n not in left_out]
        reasons = []  # said, not silent: the head is built without them
        if left_out:
            reasons.append(f"{', '.join(left_out)}: no code of it loaded (its answers could not be used or did "
                           "not load)")
        if unknown:
            reasons.append(f"{', '.join(unknown)}: named by the slow agent, but no coded action of that name is "
                           "in the library or was written for this subtask")
        if reasons:
            context["rl"]["left_out_of_the_head"] = "; ".join(reasons)
        for message in round_:
            if message.name == CONFIGURE_TOOL:
                report = report_of(message)
                if report.get("ok"):
                    context["configured"] = config = report.get("config")
                    # shown by name: the head's sources are the graph's to assemble, not the model's to read
                    named = next((c.get("coded_action_names") for c in reversed(state.get("rl_configs", []))
                                  if c["subtask"] == subtask), None)
                    if isinstance(config, dict) and named is not None:
                        context["configured_view"] = {**config, "coded_actions": ", ".join(named) or "none"}
                        if config.get("start_states"):  # a file of the graph's, said in words
                            context["configured_view"]["start_states"] = f"{len(lib.starts)} saved moments of the chain"
                else:
                    context["configure_error"] = report.get("error")
    return context


def fallback_training(state: Mapping[str, Any], subtask: str) -> bool:
    """Whether this training is the planner's fallback (nodes.planner._learn_the_task): the model's plan gave
    up on an unsolved task, so the task itself is learned, with the budget left; a weak model's choice of a
    short training would otherwise end the run with most of its budget unspent."""
    return state.get("forced_rl") == subtask and subtask == state.get("task")


def dropped_code(state: Mapping[str, Any], lib: SubtaskCode, decomposition: DecompositionEntry) -> dict[str, list[str]]:
    """Sub-action of this subtask that the slow agent's decomposition no longer has -> the functions its code
    defined that nothing loads now. Code belongs to its sub-action, so it leaves with it: an answerer whose
    other code still called a dropped sub-action's helpers found them gone from the listing without a word."""
    # a sub-action still planned, coded or learned (its code then a head entry), has not been dropped
    kept = {a["name"] for a in decomposition["sub_actions"]} | set(lib.hinted(decomposition))
    defined: dict[str, dict[str, None]] = {}  # every version's names: a revision keeps what it does not resend
    for version in state.get("code_versions", []):
        if version["subtask"] == lib.subtask and version["sub_action"] not in kept:
            defined.setdefault(version["sub_action"], {}).update(dict.fromkeys(function_names(version["source"])))
    loaded = set(lib.pool.functions())
    return {sub: gone for sub, names in defined.items() if (gone := [name for name in names if name not in loaded])}


def fallback_reward(subtask: str) -> str | None:
    """The reward of the planner's fallback training (fallback_training) where the graph sets it: 'task' for a
    task that needs nothing unlocked before it. A SmolLM2 fallback on "harvest log" answered 'crafter', whose
    health terms drown the one achievement: 46% held-out against 74% and 70% with the task reward, same steps
    and seeds 1 and 2 (rl.training.train, 97,000 steps, no coded action in the head); collect_drink 66% against
    38%. eat_cow, which a plain policy rarely meets by chance, learns little either way: 0% and 0% against 12%
    and 2%. With prerequisites to reach first the model's choice stands (the prompt calls 'crafter' the denser
    signal there)."""
    task = TASKS.get(subtask)
    return "task" if task is not None and task.achievement and not task.prerequisites else None


def _best_attempt_shown(state: Mapping[str, Any], subtask: str) -> dict[str, Any] | None:
    """The subtask's best code attempt so far (what a `fail` keeps) where it is not the last round's: its code,
    its figures and whose chain helpers it played. A model keeps nothing between calls: an answerer whose later
    rewrites scored lower went back to its best from memory, which a served model could not. None where the
    best is the last round's own (its code and report are shown already) or no code attempt was measured."""
    best = (state.get("best") or {}).get(subtask)
    last = state.get("last_result") or {}
    if not best or best.get("kind") != "code" or not best.get("sources"):
        return None
    same_round = (best.get("outer_iter"), best.get("inner_iter")) == (last.get("outer_iter"), last.get("inner_iter"))
    if last.get("subtask") == subtask and same_round:
        return None
    return {"code": "\n\n\n".join(str(source).rstrip() for source in best["sources"]),
            "successes": best.get("successes"), "episodes": best.get("episodes"), "started": best.get("started"),
            "started_successes": best.get("started_successes"), "prerequisites": bool(best.get("prerequisites")),
            "outer_iter": best.get("outer_iter"), "inner_iter": best.get("inner_iter"),
            "helpers": best.get("helpers") or {}}


def _apart_from(best: dict[str, Any], shown_above: str) -> dict[str, Any]:
    """The best attempt without the definitions the prompt shows already, word for word, in the code above it
    (`same_as_above` names them): an answerer's repair prompt carried 7,700 characters of one program twice, the
    critic's round and the best one sharing ten of sixteen functions. Whole where either does not parse."""
    own, above = definitions(best["code"]), definitions(shown_above)
    same = [name for name, source in own.items() if above.get(name, "").strip() == source.strip()]
    if not own or not same or _unparsed_rest(best["code"]):
        return best
    rest = [source.rstrip() for name, source in own.items() if name not in same]
    return {**best, "code": "\n\n\n".join(rest), "same_as_above": same}


def _unparsed_rest(program: str) -> bool:
    """Whether a program holds a statement that binds no name (a bare call, a docstring), which `definitions`
    leaves out: such a program is shown whole."""
    binding = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Import | ast.ImportFrom | ast.Assign \
        | ast.AnnAssign | ast.AugAssign
    try:
        return any(not isinstance(node, binding) for node in ast.parse(program).body)
    except (SyntaxError, ValueError):
        return True


def _previous_attempt(state: Mapping[str, Any], mode: str, sub_action: SubActionEntry,
                      lib: SubtaskCode) -> PreviousAttempt | None:
    """The code the critic sent back to the slow agent and its report, while this attempt has none of its
    own yet: the next outer iteration starts from it, not from nothing. For a sub-action the slow agent
    planned differently since its code was written, that code (`replanned`: the prompt says why it is asked
    again)."""
    previous = state.get("previous_attempt") or {}
    if mode != "code" or state.get("last_attempt"):
        return None
    if previous.get("sub_action") == sub_action.get("name"):
        return cast(PreviousAttempt, previous)
    if lib.replanned(sub_action):
        latest = lib.latest[sub_action["name"]]
        code, outer = newest_definitions(lib, state, latest)
        return {"sub_action": sub_action["name"], "code": code, "outer_iter": outer, "replanned": True}
    return None


def newest_definitions(lib: SubtaskCode, state: Mapping[str, Any], version: Mapping[str, Any]) -> tuple[str, int]:
    """A code version's definitions, each as its tests load it (`lib.versions`, nodes.attempt.rounds.live_code:
    as the last answer that sent it wrote it), and the outer iteration of the newest answer that sent one: an
    answerer that rewrote `stay_alive` inside three answers for the last piece was shown its first `stay_alive`
    as its code when the slow agent planned that one anew."""
    own = definitions(str(version["source"]))
    live: dict[str, str] = {}
    for source in lib.versions.values():
        live.update({key: src for key, src in definitions(source).items() if key in own})
    if all(live.get(key, source) == source for key, source in own.items()):
        return str(version["source"]), int(version.get("outer_iter") or 0)
    outer = max(int(v.get("outer_iter") or 0) for v in state.get("code_versions", []) if v["subtask"] == lib.subtask
                and any(definitions(v["source"]).get(key) == src for key, src in live.items()))
    return "\n\n\n".join(live.get(key, source).rstrip() for key, source in own.items()) + "\n", outer


def fast(state: AttemptState, runtime: Runtime[RunContext]) -> Command[Literal["tools", "critic", "fast", "leave"]]:
    settings, model = context_of(runtime).settings, context_of(runtime).model
    messages = list(state.get("messages") or [])
    update: dict[str, Any] = {}
    if not state.get("log_marks"):
        update["log_marks"] = log_lengths(state)
    round_ = last_tool_round(messages) if round_id(messages) else []  # measured already (nodes.measure)
    current = with_update(state, update)
    decomposition = current_decomposition(state)
    policies = learned(decomposition["sub_actions"])

    stop = limit_reached(current, settings, model, need_steps=MIN_TRAIN_STEPS if policies else 1)
    if stop:
        return exit_to("executor", {**update, "stop_reason": stop,
                                    "events": [*update.get("events", []), {"type": "stop", "reason": stop}]})
    rounds = sum(isinstance(m, AIMessage) for m in messages)
    if round_ and not any(m.name in (CODE_TOOL, TRAIN_TOOL) for m in round_) and rounds >= MAX_TOOL_ROUNDS:
        return to_critic(update, f"{rounds} tool rounds without a measurement (code test or training)")

    lib = SubtaskCode(current, settings)
    skipped = set(state.get("skipped_code") or [])
    pending = [a for a in pending_code(decomposition, lib) if a["name"] not in skipped]
    mode: Kind
    if pending:
        mode, target = "code", pending[0]
    elif policies:
        mode, target = "rl", policies[-1]
    else:
        mode, target = "code", judged_sub_action(decomposition)
    context = fast_context(current, settings, lib, mode, target, round_, prompt_room_of(model))
    if mode == "code":  # a building block of a coded decomposition is only loaded: its tool says so
        schema: Any = write_code_answer(target["name"], building_block=not policies and len(pending) > 1)
    elif context.get("configured"):
        schema = TrainPolicy
    else:
        rl = context["rl"]
        schema = configure_rl_answer(rl["coded_actions"], MIN_TRAIN_STEPS, rl["max_train_steps"])
    tools = [schema, *context_of(runtime).plugin_tools]
    try:
        answer: AIMessage = model.tool_call("fast", messages_for("fast", context), tools, context)
    except ModelOutputError as exc:
        if policies and mode == "code":  # a building block of the policy's action head: it trains without it
            return Command(goto="fast", update={**update, "skipped_code": [*sorted(skipped), target["name"]]})
        return to_critic(update, f"no usable answer: {exc.last_error}"[:1500])
    calls = list(answer.tool_calls or [])
    if not calls:
        return to_critic(update, "the fast agent called no tool")
    call = calls[0]
    if call["name"] in ANSWER_NAMES:
        args, problem = validated_args(call, schema)
        if args is None:
            return to_critic(update, f"unusable answer: {problem}")
        call = {**call, "args": args}
    elif call["name"] not in {getattr(t, "name", None) for t in context_of(runtime).plugin_tools}:
        return to_critic(update, f"the fast agent called an unknown tool '{call['name']}'")
    if call["name"] == "WriteCode":
        return _write_code(current, update, settings, lib, target, call["args"], pending, answer)
    if call["name"] == "ConfigureRL":
        configured, config_calls = configure_rl_calls(state, settings, lib, target, context["rl"], call["args"])
        return _dispatch(current, {**update, **configured,
                                   "events": [*update.get("events", []), *configured.get("events", [])]},
                         config_calls, answer)
    if call["name"] == "TrainPolicy":
        return _dispatch(current, update, train_policy_calls(current, settings, context["configured"]), answer)
    return _dispatch(current, update, calls, answer)  # a plugin tool, called as the model wrote it


ANSWER_NAMES = ("WriteCode", "ConfigureRL", "TrainPolicy")  # the fast agent's answers, each turned into tool calls


def validated_args(call: Mapping[str, Any], schema: Any) -> tuple[dict | None, str]:
    """(the answer's arguments as the asked schema validates them, or None; why not). The model layer validated
    the answer already; a replayed or scripted answer is checked here again."""
    if call["name"] != schema.__name__:
        return None, f"answered {call['name']} where {schema.__name__} was asked"
    try:
        return schema.model_validate(call["args"]).model_dump(), ""
    except ValidationError as exc:
        return None, str(exc).splitlines()[0]


def configure_rl_calls(state: Mapping[str, Any], settings: RunSettings, lib: SubtaskCode, target: SubActionEntry,
                       rl: RLFacts, args: Mapping[str, Any]) -> tuple[dict, list[dict]]:
    """A ConfigureRL answer as (the state update, the configure_rl tool call): the graph's facts (task, the head's
    sources, PPO defaults) around the model's choices, its total_steps held within the budget."""
    subtask = lib.subtask
    update: dict[str, Any] = {}
    asked = int(args["total_steps"])
    fallback = fallback_training(state, subtask)
    least = rl["max_train_steps"] if fallback else MIN_TRAIN_STEPS
    total_steps = train_steps_within(asked, rl["max_train_steps"], least)
    if total_steps != asked:  # the graph, not the model, holds the budget
        update["events"] = [{"type": "budget_fit", "subtask": subtask,
                             "changes": [f"ConfigureRL: total_steps {asked} -> {total_steps}"]}]
    names = list(args.get("coded_actions") or [])
    moved = bool(lib.code_results)
    asked_reward = str(args.get("reward", "task"))
    reward = (fallback_reward(subtask) if fallback else None) or asked_reward
    if reward != asked_reward:  # said before the answer (reward_set_by_the_graph)
        update["events"] = [*update.get("events", []), {"type": "fallback_reward", "subtask": subtask,
                                                        "asked": asked_reward, "reward": reward}]
    config = {"task": subtask, "obs_kind": "symbolic", "reward": reward,
              "coded_actions": lib.head_sources(names), "eval_episodes": 0, "decision_steps": GRAPH_DECISION_STEPS,
              "ppo": {**ppo_defaults(settings, moved_from_code=moved), "total_steps": total_steps}}
    version = sum(1 for c in state.get("rl_configs", []) if c["subtask"] == subtask) + 1
    best = lib.best_code
    if best is not None and not fallback:
        head = lib.head_order(names)
        favoured = next((n for n in (lib.play_name(), lib.moved_code) if n in head), None)
        if favoured is not None:
            # the policy starts as the code it was moved from, played as held-out play plays it, and learns
            # where to leave it
            config["ppo"]["prior_action"] = head.index(favoured)
        reach = code_rate_floor(best, given_start=bool(lib.starts))
        if reach > 0:
            # a training that cannot reach the code it would replace, even at the low end of the code's own
            # interval, stops at half its budget; the rest stays in the budget
            config["ppo"]["stop_below"] = round(reach, 4)
    if lib.starts:  # episodes start where the chain reaches this subtask, not in a fresh world
        path = settings.run_dir / STARTS_FOLDER / f"{subtask}-o{state.get('outer_iter', 0)}-v{version}.states"
        if write_start_set(lib.starts, path):
            config["start_states"] = str(path.resolve())
    update["rl_configs"] = [{"subtask": subtask, "sub_action": target["name"], "version": version,
                             "config": config, "coded_action_names": lib.head_order(names)}]
    return update, [_call(CONFIGURE_TOOL, {"rl_config": config})]


def train_policy_calls(state: Mapping[str, Any], settings: RunSettings, configured: dict) -> list[dict]:
    """A TrainPolicy answer as the train_ppo call of the validated configuration, in a run folder of its own."""
    subtask = state["plan"][state["subtask_index"]]["name"]
    version = sum(1 for c in state.get("rl_configs", []) if c["subtask"] == subtask)
    run_dir = settings.run_dir / "ppo" / (  # the config's version: a re-planned subtask keeps its old policy
        f"{subtask}-o{state.get('outer_iter', 0)}-i{state.get('inner_iter', 0)}-v{version}")
    return [_call(TRAIN_TOOL, {"rl_config": configured, "run_dir": str(run_dir.resolve())})]


def _dispatch(state: Mapping[str, Any], update: dict, calls: list[Any], answer: AIMessage) -> Command:
    fitted_calls, notes = fit_calls_to_budget(calls, budget_left(state))
    events = [{"type": "budget_fit", "subtask": state["plan"][state["subtask_index"]]["name"], "changes": notes}]
    ai = AIMessage(content=answer.content or "", tool_calls=fitted_calls, id=f"ai_{uuid.uuid4().hex[:12]}")
    return Command(goto="tools", update={**update, "messages": [ai], "fast_error": None,
                                         "events": [*update.get("events", []), *(events if notes else [])]})


def _write_code(state: Mapping[str, Any], update: dict, settings: RunSettings, lib: SubtaskCode,
                target: SubActionEntry, args: dict, pending: list[SubActionEntry], answer: AIMessage) -> Command:
    subtask = lib.subtask
    code = str(args["code"])
    max_steps = asked = int(args.get("max_steps") or lib.max_steps)
    last = state.get("last_attempt") or {}
    n = sum(1 for v in state.get("code_versions", []) if v["subtask"] == subtask) + 1
    # a revision replaces what it defines; the rest of the sub-action's previous version stays (its test loads it)
    previous = lib.versions.get(target["name"])
    source = revised(previous, code)
    sent = definitions(code)  # empty when it does not parse: the sandbox's error goes back (below)
    version: list[CodeVersion] = [{"subtask": subtask, "sub_action": target["name"], "version": n, "source": source,
                "plan": plan_of(target), "outer_iter": int(state.get("outer_iter", 0))}]
    trains = bool(learned(state["decomposition"]["sub_actions"]))
    is_last_code = not trains and len(pending) <= 1
    defined = bool(sent) and target["name"] in function_names(source)
    if not is_last_code:  # a building block: loaded in the sandbox, tested through the action that uses it
        if defined and _load_problem(lib.with_code(code)) is None:
            if not trains:
                return Command(goto="fast", update={**update, "code_versions": version, "last_attempt": None})
            # an entry of a policy's action head: tested on its own before the training, so that the
            # training does not learn around a broken action unseen (below, as the last code would be)
        elif trains and target["name"] in {t.get("sub_action") for t in state.get("code_tested") or []}:
            # tested once already and still broken: the policy trains without this action (its prompt says so)
            return _left_out_of_head(state, update, target["name"])
        else:
            defined = False  # broken: a one-seed test below brings back the sandbox's own error, to repair from
    revision = int(state.get("inner_iter", 0)) + (1 if last.get("report") is not None and last else 0)
    seeds = code_test_seeds(settings, state)
    pool = lib.with_code(code)
    helpers: dict[str, str] = {}
    program_before = rewrite_key = ""
    not_played: dict[str, Any] = {}
    capped: dict[str, int] = {}
    if defined:
        actions = [name for name in tested_actions(state["decomposition"], lib.replaced) if name in pool]
        program, action = test_program(pool, lib.prefix, actions or [target["name"]], max_steps)
        if not trains:  # the judged action's test: a rewrite of a chain helper is set against the one before
            helpers, before = chain_helpers_before(lib.solved, pool, actions or [target["name"]])
            rewrite_key = helpers_compared_key(pool, helpers)  # the rewrites this round plays, compared now or before
            judged = judged_sub_action(state["decomposition"])["name"]
            # once per version of the rewrites, where it changes what plays; the one before alone without the budget
            candidate = test_program(before, lib.prefix, actions or [target["name"]], max_steps)[0]
            # else a lone action that calls none of them: nothing to compare
            if helpers and candidate != program and not already_compared(state, lib.subtask, rewrite_key):
                why = compare_budget_short(state, lib.subtask, judged, len(seeds), max_steps)
                cap = comparison_cap(state, lib.subtask, judged, len(seeds), max_steps) if why else None
                if cap is not None:  # a lower `max_steps` lets both run and still covers every test run so far:
                    # an answerer that asked 5,000 where 4,820 fit lost its round to the earlier helper
                    capped, max_steps, why = {"asked": max_steps, "ran": cap}, cap, ""
                    program, action = test_program(pool, lib.prefix, actions or [target["name"]], max_steps)
                    candidate = test_program(before, lib.prefix, actions or [target["name"]], max_steps)[0]
                if why:  # no room for both: the one before plays, as after a loss. A rewrite taken on its own
                    # figures where the comparison did not fit was a loophole: an answerer set its `max_steps`
                    # above the cap the prompt gave, to have its stay_alive played alone
                    program, rewrite_key, not_played = candidate, "", {"helpers": helpers, "why": why}
                else:
                    program_before = candidate
            if not program_before:
                helpers = {}
    else:  # the sandbox says what is wrong with it (a syntax error, a missing function); one seed tells
        program, action, seeds = with_library(lib.pool, code), target["name"], seeds[:1]
    # the same program on the same seeds is the same test: it would only spend the budget, and the critic judges
    # it. The program, not the answer, is compared: a building block rewritten since changes what a test plays.
    tested_as = program_identity(program)
    # whichever sub-action the answer was for: an answerer's resend of the judged action after the last piece's
    # test (of the same program) was tested again, and charged
    # (a round of it run at a lower `max_steps` for a comparison, or its set with the earlier helpers, is the same)
    ran_as_asked = (last.get("max_steps_capped") or {}).get("asked") == asked and last.get("code") == code
    if (last.get("max_steps") == max_steps and tested_as in (last.get("program"), last.get("program_before")) or (
            last.get("max_steps") == max_steps and "program" not in last and last.get("sub_action") == target["name"]
            and last.get("code") == code) or (ran_as_asked and last.get("sub_action") == target["name"])):
        if trains:  # a building block of a policy's head: the policy trains without it (a SmolLM2 fallback
            # training never ran: a block sent again unchanged ended the attempt untrained)
            return _left_out_of_head(state, update, target["name"])
        return to_critic(update, "the fast agent resubmitted unchanged code" + (
            f" (its rewrite of {_helpers_named(not_played['helpers'])} did not play: "
            f"{not_played['why']})" if not_played else ""))
    too_big = (reserved_problem(code)
               or size_problem(pool if defined else lib.pool, program, [target["name"]], MAX_SOURCE_CHARS)
               or missing_problem(program))
    if too_big:  # refused before any step is spent, with what is large or missing: the model answers again
        update = {**update, "code_versions": version, "inner_iter": revision,
                  "last_attempt": {"sub_action": target["name"], "code": code, "max_steps": max_steps,
                                   "report": too_big}}
        if revision >= settings.max_inner_iters:
            if trains:  # as above: the policy trains without this building block
                return _left_out_of_head(state, update, target["name"])
            return to_critic(update, too_big)
        return Command(goto="fast", update=update)
    base = {"code": program, "task": subtask, "max_steps": max_steps, **({"action": action} if action else {}),
            **({"after_success_steps": 0} if test_ends_at_achievement(settings, state) else {})}
    calls = [_call(CODE_TOOL, {**base, "seed": int(seed)}) for seed in seeds]
    if helpers:  # after the round's own tests, on the same seeds (compare_budget_short: both fit at full length)
        calls += [_call(CODE_TOOL, {**base, "code": program_before, "seed": int(seed)}, prefix=HELPERS_BEFORE)
                  for seed in seeds]
    repaired = revision - int(state.get("inner_iter", 0))
    update = {**update, "code_versions": version, "inner_iter": revision,
              "total_inner_iters": int(state.get("total_inner_iters", 0)) + repaired,
              "attempt": int(state.get("attempt", 0)) + (0 if last else 1),
              "last_attempt": {"sub_action": target["name"], "code": code, "max_steps": max_steps, "report": None,
                               "program": tested_as, "replayed": lib.replayed if defined else [],
                               **({"helpers_before": helpers} if helpers else {}),
                               **({"rewrite_key": rewrite_key} if rewrite_key else {}),
                               **({"helpers_not_played": not_played} if not_played else {}),
                               **({"max_steps_capped": capped} if capped and program_before else {}),
                               **({"program_before": program_identity(program_before)} if program_before else {})}}
    return _dispatch(state, update, calls, answer)


def to_critic(update: dict, fast_error: str) -> Command:
    """To the critic without a new measurement: the last test round is judged as it is, and the critic
    logs it (not as a repair, since none came)."""
    events = [e for e in update.get("events", []) if e.get("verdict") != "repair"]
    return Command(goto="critic", update={**update, "events": events, "fast_error": fast_error})


def _left_out_of_head(state: Mapping[str, Any], update: dict, name: str) -> Command:
    """A building block of a policy's action head that cannot be had (still broken after its test, sent again
    unchanged, refused past its repairs): the policy trains without it, and its prompt says so."""
    return Command(goto="fast", update={**update, "skipped_code": [*skipped_of(state), name]})


def skipped_of(state: Mapping[str, Any]) -> list[str]:
    return list(state.get("skipped_code") or [])


def _load_problem(pool: Pool) -> str | None:
    """Why these functions do not load in the sandbox, or None."""
    from sandbox import AgentCode, CodeRejected, SandboxUnavailable, UnsafeCodeError, check_source

    source = pool.program(pool.sources)
    try:
        check_source(source)
        with AgentCode([source]):
            return None
    except UnsafeCodeError as exc:
        return str(exc)
    except CodeRejected as exc:
        return str(exc)
    except SandboxUnavailable as exc:
        return f"the sandbox could not start ({exc}); not the code's fault"


def start_attempt_update() -> dict:
    """What a fresh attempt (after the slow agent or a critic's 'revise') starts from."""
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)], "last_attempt": None, "fast_error": None,
            "code_tested": []}
