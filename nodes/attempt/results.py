"""Turning the tool messages of one attempt into a measured result the critic can judge.

A code attempt is several `run_code_in_env` calls (one per test seed); a learned attempt is one
`train_ppo` call. Tools return their full pydantic report as the ToolMessage artifact and a text
or JSON summary as content; the artifact is used when present (in-process), the JSON content
otherwise (after a checkpoint round trip or from a tool that only returns JSON).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage

from nodes.entries import MeasuredResult
from rl.stats import wilson_interval
from tools.trace import reached_action

CODE_TOOL = "run_code_in_env"
CONFIGURE_TOOL = "configure_rl"
TRAIN_TOOL = "train_ppo"
MEASURING_TOOLS = (CODE_TOOL, TRAIN_TOOL)
HARNESS_FAILURE = "harness"  # a tool run that failed on the harness's side: never counted against the code
# The id prefix of a code test that plays the round's code with the chain's helpers (stay_alive, ...) as they
# stood before this subtask rewrote them (nodes.fast.chain_helpers_before): the same seeds, set beside the
# round's own tests, never counted in them. A rewrite of what runs between every skill is kept only where it
# measures at least as high as what it replaces (nodes.attempt.rounds.record_round).
HELPERS_BEFORE = "helpers-before-"


def report_of(message: ToolMessage) -> dict:
    """The tool's report as plain data, whatever form it came back in."""
    art = getattr(message, "artifact", None)
    if art is not None:
        if hasattr(art, "model_dump"):
            return art.model_dump(mode="json")
        if isinstance(art, dict):
            return dict(art)
    content = message.content if isinstance(message.content, str) else json.dumps(message.content)
    try:
        data = json.loads(content)
        if isinstance(data, dict):
            return data
    except (json.JSONDecodeError, TypeError):
        pass
    # a tool error caught by ToolNode comes back as text with status="error"
    return {"ok": False, "error": content[:2000], "failure_kind": "tool_error"}


def last_tool_round(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    """The ToolMessages that answer the most recent AIMessage."""
    out: list[ToolMessage] = []
    for m in reversed(messages):
        if isinstance(m, ToolMessage):
            out.append(m)
        elif isinstance(m, AIMessage):
            break
    return list(reversed(out))


def last_tool_calls(messages: Sequence[BaseMessage]) -> list[ToolCall]:
    for m in reversed(messages):
        if isinstance(m, AIMessage):
            return list(m.tool_calls or [])
    return []


def plays_helpers_before(message: BaseMessage) -> bool:
    """Whether a tool message answers a test of the round's code with the chain's helpers before this subtask's."""
    return str(getattr(message, "tool_call_id", "") or "").startswith(HELPERS_BEFORE)


def _outcome(report: dict) -> str:
    """ok | no_action (ran no step: nothing to act on) | no_success | the tool's failure kind."""
    if report.get("failure_kind"):
        return str(report["failure_kind"])
    if report.get("task_success"):
        return "ok"
    return "no_action" if not report.get("steps") else "no_success"


def summarise_code_runs(reports: list[dict], prerequisites: Sequence[str] = (),
                        judged: Sequence[str] = ()) -> MeasuredResult:
    """Success rate, steps and failure breakdown over several code test runs.

    `prerequisites` are the achievements the replayed prefix must unlock before the judged sub-action
    gets its turn, and `judged` names its functions. `started` counts the runs that got there
    (tools.trace.reached_action), and `success_given_start` is the sub-action's own rate over those runs:
    a run that died on the way says nothing about the sub-action's code.
    """
    harness = [r for r in reports if r.get("failure_kind") == HARNESS_FAILURE]
    reports = [r for r in reports if r.get("failure_kind") != HARNESS_FAILURE]  # not the code's doing
    n = len(reports)
    successes = sum(bool(r.get("task_success")) for r in reports)
    needed = set(prerequisites)
    started = [r for r in reports if reached_action(r, needed, judged)]
    started_ok = sum(bool(r.get("task_success")) for r in started)
    kinds = Counter(_outcome(r) for r in reports)
    errors = [f"seed {r.get('seed')}: {r['error']}" for r in reports if r.get("error")]
    return {
        "kind": "code", "episodes": n, "successes": successes,
        "success_rate": successes / n if n else 0.0, "rate_source": "code_tests",
        "prerequisites": list(dict.fromkeys(prerequisites)), "started": len(started), "started_successes": started_ok,
        "success_given_start": started_ok / len(started) if started else None,
        "steps": sum(int(r.get("steps") or 0) for r in reports),
        "outcomes": dict(sorted(kinds.items())),
        "errors": errors[:6], "harness_failures": len(harness),
        "seeds": [r.get("seed") for r in reports],
        "per_seed": [{"seed": r.get("seed"), "success": bool(r.get("task_success")), "steps": r.get("steps", 0),
                      "failure": r.get("failure_kind"), "ended": r.get("ended"),
                      "death_cause": r.get("death_cause"), "inventory_after": r.get("inventory_after", {}),
                      "success_step": r.get("success_step")}
                     for r in reports],
    }


# A test round's success count is a sample: a code whose true rate is exactly the target still misses it
# often on 8 seeds (0.9 on 8 seeds gives 8 of 8 only 43% of the time). An attempt meets the target when
# its count is one a code at the target would reach or fall below at least this often.
PASS_ALPHA = 0.2


def successes_needed(n: int, target: float) -> int:
    """The fewest successes of `n` test episodes that meet a `target` rate: the smallest k with
    P(X <= k) >= PASS_ALPHA for X ~ Binomial(n, target). 8 seeds and 0.9: 7."""
    if n <= 0:
        return 0
    if target >= 1.0:
        return n
    cumulative = 0.0
    for k in range(n + 1):
        cumulative += math.comb(n, k) * target ** k * (1 - target) ** (n - k)
        if cumulative >= PASS_ALPHA:
            return k
    return n


def judged_count(result: Mapping[str, Any]) -> tuple[int, int] | None:
    """(successes, episodes) behind a code test's judged rate (over the runs that reached the sub-action's
    start, when the test replayed a prefix); None for a training's rate (many episodes, no count kept)."""
    if result.get("kind") != "code" or not result.get("episodes"):
        return None
    if result.get("success_given_start") is not None and result.get("started_successes") is not None:
        return int(result["started_successes"]), int(result.get("started") or 0)
    return int(result.get("successes") or 0), int(result["episodes"])


def meets_target(result: Mapping[str, Any], target: float) -> bool:
    """Whether a measured attempt meets the target rate: a code test by its count (`successes_needed`),
    a training by its rate."""
    count = judged_count(result)
    if count is None:
        return judged_rate(result) >= target
    successes, n = count
    return n > 0 and successes >= successes_needed(n, target)


def skill_meets_target(skill: Mapping[str, Any], target: float) -> bool:
    """Whether a kept skill (a SkillRecord) met the target: a coded one by the pass rule's count of its test
    seeds, over the runs that reached it when its tests replayed earlier skills; a learned one by its rate."""
    rate, given = float(skill.get("success_rate") or 0.0), skill.get("success_given_start")
    episodes, started = skill.get("episodes") or 0, skill.get("started") or 0
    if skill.get("kind") == "code" and episodes and given is None:
        return meets_target({"kind": "code", "episodes": episodes, "successes": round(rate * episodes)}, target)
    if skill.get("kind") == "code" and given is not None and started:
        return meets_target({"kind": "code", "episodes": episodes, "success_given_start": given,
                             "started": started, "started_successes": round(given * started)}, target)
    return judged_rate(skill) >= target


def round_passes(result: Mapping[str, Any], target: float, whole_chain: bool = False) -> bool:
    """Whether a measured round ends the fast agent's repairs: it meets the target (`meets_target`, over the
    runs that reached the sub-action) and, where held-out play is this very chain (`whole_chain`: the plan's
    last subtask of a one-achievement task), at least half of its runs reached the action
    (`reached_by_enough_runs`), so that the count says something about it. Until then a death on the way is
    the fast agent's to repair while its revisions last (a stay_alive it writes). Graph rules 13 to 15 asked
    the pass count over every run instead: no chain measured came near it (the expert's 29.5% held out), and
    the rounds it asked for were rewrites of survival on the same 8 seeds, which cost the answerers' chains
    that kept one 5 points on average against the built-in (benchmarks.builtin_survival, eight runs)."""
    if not meets_target(result, target):
        return False
    if not whole_chain or result.get("kind") != "code" or not result.get("episodes"):
        return True
    return reached_by_enough_runs(result)


def reached_by_enough_runs(result: Mapping[str, Any]) -> bool:
    """The plan's last subtask's second rule (round_passes' `whole_chain`): at least half of a code round's
    runs reached the action (`runs_needed_to_reach`); a round that replayed no earlier skill reached it in all."""
    runs = int(result.get("episodes") or 0)
    return runs_reaching(result) >= runs_needed_to_reach(runs)


def runs_reaching(result: Mapping[str, Any]) -> int:
    """How many of a code round's runs reached its action: `started` where the test replayed earlier skills
    (0 when none did), else every run."""
    started = result.get("started")
    return int(started) if started is not None else int(result.get("episodes") or 0)


def runs_needed_to_reach(runs: int) -> int:
    """How many of a last subtask's `runs` must reach its action for the pass count to judge it: half."""
    return (runs + 1) // 2


def pass_rule_text(n: int, target: float, whole_chain: bool = False, every_count: bool = False) -> str:
    """The pass rule in plain numbers for a test round of `n` seeds (`whole_chain`: see round_passes); a long list
    of counts shows its ends only, unless `every_count` (the roomy prompts: the counts are no simple ratio)."""
    if not whole_chain:
        k = successes_needed(n, target)
        chance = sum(math.comb(n, j) * target ** j * (1 - target) ** (n - j) for j in range(k, n + 1))
        return (f"{k} or more successes of {n} test seeds meet the target {target:.0%}, counting runs that reach "
                f"the sub-action after earlier skills (a skill truly at {target:.0%} scores {k}+ in {chance:.0%} of "
                "rounds)")
    # the count is over the runs that reach the action: said for each number of them that may pass
    h = runs_needed_to_reach(n)
    first, *fewer = [f"{successes_needed(m, target)} of {m}" for m in range(n, h - 1, -1)]
    if len(fewer) > 5 and not every_count:  # 16 seeds: the ends, within the compact prompts' tokens
        fewer = [fewer[0], "...", fewer[-1]]
    return (f"the plan's last subtask (its chain is held-out play) meets the target {target:.0%} when {h}+ of the "
            f"{n} test runs reach your action after earlier skills and {first} of those succeed"
            + (f" (or {', '.join(fewer)})" if fewer else "") + ". Until then the round comes back to you while "
            "revisions last; a repair must beat your best round's successes (else the critic judges, keeping the "
            "best)")


def training_pass_rule_text(target: float, from_chain: bool = False) -> str:
    """The pass rule of a training, whose rate comes from many episodes (no seed count to allow for)."""
    if from_chain:
        return (f"a training meets the target when its success_rate reaches {target:.0%}; its episodes started "
                "where the chain reached this subtask, so it is compared with the code's success_given_start")
    return (f"a training meets the target when its success_rate reaches {target:.0%}; it is compared with "
            "the code's success_rate, which also counts from a fresh world")


CHAIN_STARTS = "chain_training"  # rate_source of a training whose episodes start where the chain stands


def code_rate_floor(result: Mapping[str, Any], given_start: bool) -> float:
    """The low end of a code attempt's 95% Wilson interval: over the runs that reached its start
    (`given_start`, its judged count), else over all its test runs. 8 of 8 seeds: 68%."""
    count = judged_count(result) if given_start else None
    if count is None:
        count = int(result.get("successes") or 0), int(result.get("episodes") or 0)
    successes, n = count
    return wilson_interval(successes, n)[0] if n else 0.0


def judged_rate(result: Mapping[str, Any]) -> float:
    """The rate that judges an attempt's own code or policy: for code tests that replay a prefix, the
    success over the runs that reached the sub-action's start (when any did), else the plain rate.
    Code and RL are compared on the plain `success_rate`, which both measure from a fresh world."""
    given = result.get("success_given_start")
    return float(result.get("success_rate") or 0.0) if given is None else float(given)


def rate_text(result: Mapping[str, Any]) -> str:
    """A measured rate for logs: '38%', or '38% (3 of 8 reached its start: 100%)' when a code test
    replayed a prefix that not every run got through."""
    text = f"{float(result.get('success_rate') or 0.0):.0%}"
    given, started, n = result.get("success_given_start"), result.get("started"), result.get("episodes")
    if given is not None and started is not None and n and started < n:
        text += f" ({started} of {n} reached its start: {float(given):.0%})"
    return text


def summarise_training(report: dict) -> MeasuredResult:
    """The numbers of one PPO training the critic needs; the moving-window training success decides
    (held-out evaluation seeds stay reserved for the final report). Only a training that finished no
    episode to rate falls back on PPO's own evaluation on validation seeds, when the config asked for one;
    `rate_source` says which of the two `success_rate` is."""
    rate, source = report.get("final_train_success_rate"), "training"
    if rate is None and report.get("final_success_rate") is not None:
        rate, source = report.get("final_success_rate"), "validation"
    from_chain = int(report.get("start_states") or 0) > 0 and source == "training"
    curve = [p.get("success_rate") for p in report.get("learning_curve", []) if p.get("success_rate") is not None]
    return {
        "kind": "rl", "ok": bool(report.get("ok")),
        "success_rate": float(rate or 0.0), "rate_source": CHAIN_STARTS if from_chain else source,
        # episodes that started where the chain reached the sub-action: the rate is one given the start
        **({"success_given_start": float(rate or 0.0)} if from_chain else {}),
        "steps": int(report.get("steps_used") or 0) + int(report.get("eval_steps") or 0),
        "curve_start": curve[0] if curve else None, "curve_end": curve[-1] if curve else None,
        "episode_outcomes": report.get("outcome_summary"),  # how episodes ended: deaths by cause, the step limit
        **({"stopped_early": report["stopped_early"]} if report.get("stopped_early") else {}),
        "coded_action_counts": report.get("coded_action_counts", {}),
        "coded_action_failures": report.get("coded_action_failures", {}),
        "errors": ([report["error"]] if report.get("error") else []) + list(report.get("coded_action_errors", []))[:5],
        "policy_path": report.get("policy_path"),
        "run_dir": report.get("run_dir"),
        "wall_time_s": report.get("wall_time_s"),
    }


def round_result(messages: Sequence[BaseMessage], prerequisites: Sequence[str] = (),
                 judged: Sequence[str] = ()) -> MeasuredResult | None:
    """The measured result of the latest tool round, or None if it measured nothing.
    `prerequisites` and `judged`: what a code test must reach first (see summarise_code_runs)."""
    round_ = last_tool_round(messages)
    code = [report_of(m) for m in round_ if m.name == CODE_TOOL and not plays_helpers_before(m)]
    before = [report_of(m) for m in round_ if m.name == CODE_TOOL and plays_helpers_before(m)]
    train = [report_of(m) for m in round_ if m.name == TRAIN_TOOL]
    if train:
        return summarise_training(train[-1])
    if code:
        result = summarise_code_runs(code, prerequisites, judged)
        # set beside the round's own tests on the seeds those measured (a harness failure measures nothing)
        measured = {r.get("seed") for r in code if r.get("failure_kind") != HARNESS_FAILURE}
        paired = [r for r in before if r.get("seed") in measured]
        if paired:
            result["helpers_before"] = dict(summarise_code_runs(paired, prerequisites, judged))
        return result
    return None


def round_steps(result: Mapping[str, Any]) -> int:
    """The env steps a round spent: its own tests' and, where it had them, its seeds played with the chain's
    helpers from before a rewrite."""
    return int(result.get("steps", result.get("env_steps", 0)) or 0) + int(
        (result.get("helpers_before") or {}).get("steps") or 0)


def round_best(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """The attempt a round stands for: its own code, or that code with the chain's helpers before this
    subtask's rewrite when the rewrite did not gain enough on them (nodes.attempt.rounds.record_round)."""
    before = result.get("helpers_before") or {}
    return before if before.get("ranks_above") else result


def same_seed_rounds(results: Sequence[Mapping[str, Any]], result: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The earlier code rounds of `result`'s sub-action tested on the same seeds: each round replays the same
    worlds, so these are the rounds it can be set against seed for seed."""
    if result.get("kind") != "code" or not result.get("seeds"):
        return []
    return [r for r in results
            if r is not result and r != result and r.get("kind") == "code" and r.get("seeds") == result["seeds"]
            and not r.get("head_test")  # a policy's building block, tested before its training
            and (r.get("subtask"), r.get("sub_action")) == (result.get("subtask"), result.get("sub_action"))]


def repair_stalls(results: Sequence[Mapping[str, Any]], result: Mapping[str, Any], *, whole_chain: bool,
                  repair: int, max_repairs: int, target: float) -> bool:
    """Whether the fast agent's repairs end at this round while some are left (`repair` < `max_repairs`): the
    plan's last subtask (`whole_chain`), a round that repairs a round of the same decomposition (an earlier
    round of its outer iteration on the same seeds), does not pass, ran without an error (the error report is
    what a repair needs) and scores no more successes over all its runs than the best earlier round on the
    same seeds (each as a verdict keeps it: round_best). Its chain's rate sits far below any whole-chain target,
    and more rounds on the same worlds tune to those worlds (answerers spent 40,000-70,000 steps so)."""
    if not whole_chain or not 1 <= repair < max_repairs or result.get("errors"):
        return False
    earlier = same_seed_rounds(results, result)
    if not any(r.get("outer_iter") == result.get("outer_iter") for r in earlier):
        return False  # the decomposition's first round, however many answers were refused before it
    best = max(int(round_best(r).get("successes") or 0) for r in earlier)
    kept = round_best(result)
    return not round_passes(kept, target, whole_chain) and int(kept.get("successes") or 0) <= best


def steps_of(messages: Sequence[BaseMessage]) -> int:
    """Environment steps spent by every tool call of the latest round (plugin tools may report `steps`)."""
    total = 0
    for m in last_tool_round(messages):
        r = report_of(m)
        total += int(r.get("steps") or 0) + int(r.get("steps_used") or 0) + int(r.get("eval_steps") or 0)
    return total
