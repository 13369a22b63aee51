"""What a language model sees, per role: a system prompt and the facts of the moment.

Each node builds a `context` dict of facts (the rule-based expert reasons on it directly) and calls
`messages_for(role, context)`. The system prompt is the role's text, prompts/<role>.md, filled with the
generated references (rule sheet, GameAPI reference); the facts are rendered here, compactly, because
the fast agent's whole prompt must fit a small model's window (8k tokens, the answer included). Keys
a role does not render are ignored and optional keys may be absent; long texts (test reports, code)
are clipped to a fixed share of the window. The keys each role gets are typed in prompts.facts
(PlannerFacts, SlowFacts, FastFacts, CriticFacts), shared by the node that builds them and the expert.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from envs.tasks import TASKS
from prompts.api_reference import api_reference, api_summary
from prompts.facts import DEFAULT_SKILL_THRESHOLD, CriticFacts, FastFacts, PlannerFacts, SlowFacts
from prompts.fewshot import (
    BUILTIN_ACTIONS,
    CHAIN_HELPERS,
    REWRITE_MARGIN_TEXT,
    builtin_alias,
    builtin_source,
    rewrite_margin,
    rewrite_margin_text,
    way_back_to_builtin,
)
from prompts.loader import render
from prompts.rules import achievements, game_facts, recipes, rule_sheet

ROLES = ("planner", "slow", "fast", "critic")

FEEDBACK_CHARS = 600  # what a Critique's feedback holds
CONFIG_CHARS = 600  # a validated RL configuration: the model only has to see that it passed
DOC_CHARS = 140


@dataclass(frozen=True)
class PromptRoom:
    """Character caps of the long texts of the fast and critic prompts, by the room the model's window leaves.

    `compact` keeps every call of a run inside SmolLM2's 8,192-token window (benchmarks/prompt_budget.py): the
    fast prompt at depth near 20k characters, its last code and test report cut. `roomy` is for a model with a
    large window (nodes.models.base.prompt_room_of: a served model with a large window or on OpenAI's API, a
    `file:` answerer): it sees its whole last code (a model with no memory of its answers repairs from what the
    prompt shows) and its best attempt beside a later, lower round, the critic the whole judged code, and a
    report with every failing seed's line in full and more seeds in detail (answerers repairing deaths in a
    long chain read most seeds cut to "... before your action ...")."""
    name: str
    report_chars: int  # the code-test report as nodes.fast.report_text makes it
    code_chars: int  # the fast agent's last code
    critic_code_chars: int  # the critic judges the code: it sees more of it than the fast agent's reminder
    result_chars: int
    library_lines: int  # coded actions listed with signature and doc; the rest by signature (or name) only
    rest_chars: int

    @property
    def shown_report_chars(self) -> int:
        """The report's cap in a prompt: a little above the summary's, for the lines added after it."""
        return self.report_chars + 250


COMPACT = PromptRoom("compact", report_chars=2050, code_chars=1800, critic_code_chars=3000, result_chars=1500,
                     library_lines=12, rest_chars=600)
ROOMY = PromptRoom("roomy", report_chars=7000, code_chars=8400, critic_code_chars=8400, result_chars=3000,
                   library_lines=40, rest_chars=2000)
PROMPT_ROOMS = {room.name: room for room in (COMPACT, ROOMY)}


def room_of(c: Mapping[str, Any]) -> PromptRoom:
    """The room a prompt context asks for (its `room` key; compact where it names none)."""
    name = c.get("room") or COMPACT.name
    if name not in PROMPT_ROOMS:
        raise ContextError(f"unknown prompt room {name!r}; rooms: {', '.join(PROMPT_ROOMS)}")
    return PROMPT_ROOMS[name]


class ContextError(ValueError):
    """A context lacks a key its role cannot do without."""


def _require(role: str, c: Mapping[str, Any], *keys: str) -> None:
    missing = [k for k in keys if c.get(k) is None]
    if missing:
        raise ContextError(f"the {role} prompt needs context keys: {', '.join(missing)}")


def clip(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters: its start and its end, which hold the error and the outcome."""
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    # the rest of a line cut in two goes on the marker's line: agent text cut there cannot start a line
    return f"{text[:head]}\n[... {len(text) - limit} characters cut ...] {text[-tail:]}"


def _compact(value: Any) -> str:
    """One line: a string as is, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(", ", ": "), default=str)


def _section(title: str, body: Any) -> str:
    """A titled block; nothing when the body is empty. Mappings read as 'key value; ...'."""
    if body is None or body == "" or body == [] or body == {}:
        return ""
    if isinstance(body, Mapping):
        body = _pairs(body)
    return f"## {title}\n{body if isinstance(body, str) else _compact(body)}\n"


def _flat(value: Any) -> str:
    return "/".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _pairs(value: Mapping[str, Any]) -> str:
    """'key value; key value' of the non-empty entries, nested mappings and lists flattened."""
    parts = []
    for key, item in value.items():
        if item is None or item == [] or item == {}:
            continue
        if isinstance(item, Mapping):
            text = ", ".join(f"{k} {_flat(v)}" for k, v in item.items() if v not in (None, [], {}))
        elif isinstance(item, (list, tuple)):
            text = ", ".join(map(str, item))
        else:
            text = str(item)
        if text:
            parts.append(f"{key} {text}")
    return "; ".join(parts)


def _subtask_line(subtask: Any, description: str | None = None) -> str:
    if isinstance(subtask, Mapping):
        line = f"{subtask.get('name')}: {subtask.get('goal', '')}"
        if subtask.get("success_condition"):
            line += f" (success: {subtask['success_condition']})"
    else:
        line = str(subtask)
    if description:
        line += f"\nTask description: {description}"
    return line


def _sub_action_line(a: Mapping[str, Any]) -> str:
    extra = _pairs({"template": a.get("template") if a.get("template") != "custom" else None,
                    "target": a.get("target"), "item": a.get("item"), "calls": a.get("coded_actions")})
    return f"- {a.get('name')} ({a.get('kind')}): {a.get('reason', '')}" + (f" [{extra}]" if extra else "")


def _decomposition(d: Mapping[str, Any] | None, current: str | None = None, reused: Sequence[str] = ()) -> str:
    """The plan's lines; `current` marked, `reused` (earlier skills the plan names) said to play as they are."""
    if not d:
        return ""
    lines = []
    for a in d.get("sub_actions", []):
        line = _sub_action_line(a)
        if a.get("name") in reused:  # no call asks for it: a model expecting to rewrite it would wait in vain
            line += "  <- an earlier skill, reused as it is (to change it, write it under its name)"
        lines.append(line + "  <- this one now" if a.get("name") == current else line)
    if d.get("reason"):
        lines.append(f"Reason: {d['reason']}")
    return "\n".join(lines)


# -- planner ----------------------------------------------------------------------------------------

def _render_planner(c: PlannerFacts) -> str:
    """Keys: task, task_description, recipes, failed, remaining; a score task (crafter_score) also gets
    prompts/planner_score.md. The tech-tree chain (`prerequisites`)
    is never rendered: the planner works it out from the recipes. Recipes are listed by name, so their
    order cannot hand it the chain either."""
    _require("planner", c, "task")
    facts = sorted(c.get("recipes") or [], key=lambda r: str(r.get("achievement", r)))
    recipe_lines = "\n".join(
        f"- {r.get('achievement')}: {_pairs({k: v for k, v in r.items() if k != 'achievement'}) or 'no recipe'}"
        for r in facts)
    remaining = c.get("remaining") or []
    score = c["task"] in TASKS and TASKS[c["task"]].is_score
    return "".join([
        _section("Task", f"{c['task']}: {c.get('task_description', '')}"),
        _section("How this task is scored", render("planner_score").strip() if score else ""),
        _section("What achievements need (recipe facts, by name)", recipe_lines),
        _section("Failed subtask to re-plan around", c.get("failed")),
        _section("Plan remaining before the failure", "\n".join(_subtask_line(s) for s in remaining)),
    ]) + "Answer with the Plan."


def _planner_system(c: PlannerFacts) -> str:
    return render("planner", achievements=achievements(), rule_sheet=rule_sheet())


# -- slow -------------------------------------------------------------------------------------------

def _render_slow(c: SlowFacts) -> str:
    """Keys: subtask, task_description, recipe, template, prior_skills, previous, critique, best,
    forced_rl, rewritten, outer_iter, max_outer_iters."""
    _require("slow", c, "subtask")
    skills = "\n".join(f"- {s.get('subtask')} ({s.get('kind')}, success {s.get('success_rate')})"
                       for s in c.get("prior_skills") or [])
    forced = c.get("forced_rl")
    rewritten = c.get("rewritten") or {}
    return "".join([
        _section("Subtask", _subtask_line(c["subtask"], c.get("task_description"))),
        _section("Recipe facts", c.get("recipe")),
        _section("Few-shot template that fits", c.get("template")),
        _section("Skills solved earlier (listed, reused as they are)", skills),
        _section("Current decomposition", _decomposition(c.get("previous"))),
        _section("Latest critique", c.get("critique")),
        _section("Best measured attempt so far", c.get("best")),
        _section("Built-in coded actions (list one, or an earlier skill's helper, only to write it anew; yours "
                 "replaces it in this subtask's tests and, once kept, in later subtasks; a coded decomposition's "
                 "new stay_alive, explore, collect_food or collect_drink is tested beside the earlier one on the "
                 "same seeds once per version (budget short: the earlier alone); yours is kept with "
                 f"{rewrite_margin_text(8, 16)})",
                 ", ".join(name + (f" (written anew for {rewritten[name]})" if name in rewritten else "")
                           for name in BUILTIN_ACTIONS)),
        _section("Moved to rl by the graph", forced and (
            f"The plan gave up on `{forced}`, so the graph learns it: mark `{forced}` kind 'rl' in your answer "
            "(coded sub-actions go into its action head).")),
        f"Outer iteration {int(c.get('outer_iter', 0)) + 1} of {c.get('max_outer_iters', '?')}.\n",
    ]) + "Answer with the Decomposition."


def _slow_system(c: SlowFacts) -> str:
    return render("slow", recipes=recipes(), game_facts=game_facts(), api_summary=api_summary())


# -- fast -------------------------------------------------------------------------------------------

def _signature(e: Mapping[str, Any]) -> str:
    """`name` for a coded action's usual `name(game)` (the heading says how to call one), else the full
    signature: a plain helper is called without `yield from`."""
    signature = str(e.get("signature") or e.get("name"))
    return str(e.get("name")) if signature == f"{e.get('name')}(game)" and not e.get("helper") else signature


def _library(entries: list[Mapping[str, Any]], shown: frozenset[str] = frozenset(), room: PromptRoom = COMPACT) -> str:
    """One line per coded action; `shown`: names whose source the prompt's examples hold (no docstring then)."""
    lines = []
    for e in entries[:room.library_lines]:
        rate = e.get("success_rate")
        where = _where(e)
        tag = where + (", not a coded action" if e.get("helper") else "") + (
            f", success {rate:.2f}" if isinstance(rate, (int, float)) else "") + (
            f"; the built-in is {e['builtin_alias']}" if e.get("builtin_alias") else "")
        doc = " ".join(str(e.get("doc") or "").split())
        doc = doc if len(doc) <= DOC_CHARS else doc[:DOC_CHARS - 3] + "..."
        doc = "source under Few-shot examples" if e.get("name") in shown and e.get("kind") == "built-in" else doc
        lines.append(f"- {_signature(e)} [{tag}]" + (f": {doc}" if doc else ""))
    rest = [_signature(e) for e in entries[room.library_lines:]]
    if sum(len(r) + 2 for r in rest) > room.rest_chars:  # every name still, without its arguments
        rest = [str(e.get("name")) for e in entries[room.library_lines:]]
    if rest:
        lines.append(f"- also loaded: {', '.join(rest)}")
    return "\n".join(lines)


def _where(entry: Mapping[str, Any]) -> str:
    """Where a library entry came from, as the listing says it."""
    if entry.get("kind") == "built-in":
        return "built-in"
    if entry.get("this_subtask"):
        return "yours, this subtask"
    return f"from {entry['subtask']}" if entry.get("subtask") else str(entry.get("kind", "code"))


def _module_names(entries: Sequence[Mapping[str, Any]] | None, room_chars: int = 500) -> str:
    """The library's constants and imports (nodes.skills.pool.module_names), grouped by where they came from and
    said with the functions, within `room_chars`: answerers sent theirs again, unsure whether they carried over."""
    if not entries:
        return ""
    names: dict[str, list[str]] = {}
    for entry in entries:
        names.setdefault(_where(entry), []).append(str(entry["name"]))
    groups, used, left_out = [], 0, 0
    for where, group in names.items():
        shown = []
        for name in group:
            if used + len(name) + 4 > room_chars:
                left_out += 1
                continue
            shown.append(f"`{name}`")
            used += len(name) + 4
        if shown:
            groups.append(f"{', '.join(shown)} ({where})")
            used += len(where) + 5
    more = f"; and {left_out} more" if left_out else ""
    return f"\n- module-level names, loaded for any code that reads them: {'; '.join(groups)}{more}" if groups else ""


def _unloaded(unloaded: Mapping[str, Sequence[str]] | None) -> str | None:
    """The functions that left with a dropped sub-action's code, said where the listing no longer has them."""
    if not unloaded:
        return None
    lines = [f"- `{sub}`: {', '.join(names[:12])}" + (f" and {len(names) - 12} more" if len(names) > 12 else "")
             for sub, names in list(unloaded.items())[:6]]
    if len(unloaded) > 6:
        lines.append(f"- and {len(unloaded) - 6} more dropped sub-actions")
    return "\n".join([*lines, "Nothing loads these now; send again in your code any of them it still calls."])


def _builtins_shown(examples: Mapping[str, str]) -> frozenset[str]:
    """The examples that are a built-in's own source: what runs under that name."""
    return frozenset(name for name, src in examples.items()
                     if name in BUILTIN_ACTIONS and src.strip() == builtin_source(name).strip())


def _examples(examples: Mapping[str, str], builtins: frozenset[str], writing: str = "") -> str:
    """The examples, each built-in's own source (`_builtins_shown`) headed as what runs under its name, and
    for the one being written anew (`writing`) the name it stays callable by."""
    def heading(name: str) -> str:
        if name not in builtins:
            return f"### {name}"
        kept = (f"; yours replaces it, and it stays callable as {builtin_alias(name)}"
                if name == writing and name in CHAIN_HELPERS else "")
        return f"### {name} (the built-in's source, as it runs{kept})"
    return "\n".join(f"{heading(name)}\n```python\n{src.rstrip()}\n```" for name, src in examples.items())


def _last_attempt(last: Mapping[str, Any] | None, mode: str, room: PromptRoom = COMPACT) -> tuple[str, str]:
    if not last or not (last.get("code") or last.get("report")):
        return "", ""
    title = f"Your last {'code' if mode == 'code' else 'training'}"
    body = ""
    if last.get("code"):
        body += f"```python\n{clip(str(last['code']).rstrip(), room.code_chars)}\n```\n"
    if last.get("report"):
        title += " and what happened"
        # "unchanged" is the program's: an answerer edited a line of an action whose stay_alive it had rewritten
        fix = ("the code (a program sent again with no piece and no max_steps changed goes to the critic untested)"
               if mode == "code" else "the configuration")
        result = last.get("result") or {}
        if mode == "code" and result.get("prerequisites") and result.get("episodes") and not result.get("started"):
            # nothing of the code was judged: asking to fix it would send the model after a cause not in it
            ask = ("No test run reached your action: every run ended in the chain before it (earlier skills and "
                   "the stay_alive between their steps), so the report says nothing about your code. What can "
                   "change that is a `stay_alive` you write, which replaces the chain's in every skill's play once "
                   "it beats it on the same seeds.")
        elif (mode == "code" and result.get("prerequisites") and result.get("success_given_start") == 1.0
              and int(result.get("started") or 0) < int(result.get("episodes") or 0)):
            # an answerer asked to "fix it in the code" spent 8 rounds on deaths before its action, within noise
            ask = ("Every run that reached your action succeeded: the others ended in the chain before it. Only a "
                   "`stay_alive` you write changes those; a program with no piece and no max_steps changed goes to "
                   "the critic untested.")
        elif result.get("episodes") and float(result.get("success_rate") or 0.0) >= 1.0:
            # an answerer whose 8 of 8 the critic sent back was asked for "the cause of the failure"
            ask = f"Every test run succeeded: the critic's feedback says what to change in {fix}."
        else:
            ask = f"Find the cause of the failure in the report and fix it in {fix}."
        body += f"Report:\n{clip(str(last['report']).rstrip(), room.shown_report_chars)}\n{ask}"
    return title, body


def _best_attempt(best: Mapping[str, Any] | None, room: PromptRoom) -> str:
    """The subtask's best code attempt so far, where a later round ranked lower: what `fail` keeps, and how to go
    back to it."""
    same = best.get("same_as_above") or [] if best else []
    if not best or not (best.get("code") or same):
        return ""
    figures = f"{best.get('successes')} of {best.get('episodes')} runs succeeded"
    if best.get("prerequisites") and best.get("started") is not None:
        figures += f", {best.get('started_successes')} of the {best.get('started')} that reached the action"
    played = "".join(f"; its runs played the earlier `{name}` ({whose}) in place of a rewrite"
                     for name, whose in (best.get("helpers") or {}).items())
    title = (f"Your best attempt at this subtask so far (outer iteration {int(best.get('outer_iter') or 0) + 1}, "
             f"revision {best.get('inner_iter')}: {figures}{played})")
    # whole where the room allows two answers' worth: an answerer read it cut and could not send it back as it was
    code = f"```python\n{clip(str(best['code']).rstrip(), 2 * room.code_chars)}\n```\n" if best.get("code") else ""
    if same:  # the rest is in the code above, word for word: an answerer's repair prompt carried one program twice
        names = ", ".join(f"`{name}`" for name in same)
        code = (f"Besides the definitions shown here, it holds {names}, word for word as in the code above (not "
                "repeated).\n" + code if code else f"Every definition of it ({names}) is in the code above, word "
                "for word (not repeated).\n")
    back = ("To go back to it, send its definitions again: each replaces the later one of its name; what later "
            "answers added besides stays loaded." if not same else
            "To go back to it, send the definitions shown here again (the ones named are loaded already): each "
            "replaces the later one of its name." if best.get("code") else
            "Its definitions are all loaded as they are.")
    body = code + "A `fail` verdict keeps this one unless a later round ranks higher. " + back
    return _section(title, body)


def _limits(limits: Mapping[str, Any] | None, mode: str) -> str:
    if not limits:
        return ""
    seeds, steps = limits.get("test_seeds"), limits.get("max_steps_per_test")
    lines = []
    left = limits.get("budget_left")
    # no round when nothing is left: the budget line alone says so
    round_line = False
    if mode == "code" and seeds is not None and steps is not None and (left is None or int(left) > 0):
        round_line = True
        cost = int(seeds) * int(steps)
        spent = min(cost, int(left)) if left is not None else cost
        capped = " (capped: each episode gets its share)" if spent < cost else ""
        of_left = f" of the {left} budget steps left" if left is not None else " steps in all"
        used = limits.get("last_round_steps")
        typical = f"; your last round used {used}" if used is not None else ""
        # answerers found a worst case near the whole budget left unremarked, and cut it themselves
        # (a last round that spent nothing, code that did not load, says nothing of what a round costs)
        heavy = left is not None and 0 < int(left) <= spent * 4 and (not used or used * 4 >= int(left))
        # (and room for the earlier skills a test replays: a cap cut too far ends episodes before the action)
        cap = "`max_steps` caps it" + (": keep steps for later subtasks, and room in each episode for the earlier "
                                       "skills" if heavy else "")
        lines.append(f"A test round: {seeds} episodes of up to {steps} steps, up to {spent}{of_left}{capped}"
                     f"{typical}; {cap}.")
    if mode == "code" and limits.get("max_code_chars"):
        lines.append(f"An answer's code holds at most {limits['max_code_chars']} characters.")
    if left is not None and not round_line:
        lines.append(f"Environment steps left in the budget: {left}.")
    already = limits.get("helpers_compared_already") or {}
    if mode == "code" and already:
        names = ", ".join(f"`{name}`" for name in already)
        back = "; ".join(way_back_to_builtin(name) for name, whose in already.items() if whose == "the built-in")
        lines.append(f"Your rewrite of {names} loaded now was compared with the earlier one already: the next round "
                     "plays it again as it is, not beside the earlier one and whatever `max_steps`; a round of a "
                     "rewrite that lost is kept only where it does better than the best. Change it for a new "
                     f"comparison" + (f", or {back}" if back else "") + ".")
    if mode == "code" and limits.get("helpers_compared_only_if"):
        first, *others = [f"`{name}`" for name in limits.get("helpers_compared") or ["stay_alive"]]
        also = f" (or {', '.join(others)})" if others else ""
        most = limits.get("helpers_compared_cap")
        lowered = (f". A round with one runs with `max_steps` at most {most:,} (a higher one is lowered to it where it "
                   "is at least half of that one and covers your longest test run so far; else the earlier one plays "
                   "in its place)." if most else " (the earlier one would play in its place).")
        lines.append(f"A new rewrite of {first}{also} plays only beside the earlier one on the same seeds, and this "
                     f"round the budget leaves no room for both: {limits['helpers_compared_only_if']}{lowered}")
    if limits.get("revision") is not None:  # per decomposition: answerers read a bare "revision 0" as a stuck count
        lines.append(f"Repairs of this decomposition used: {limits['revision']} of {limits.get('max_revisions', '?')}.")
    if mode == "code" and limits.get("pass_rule"):
        lines.append(f"Pass rule: {limits['pass_rule']}.")
    rest = {k: v for k, v in limits.items()
            if k not in ("test_seeds", "max_steps_per_test", "budget_left", "pass_rule", "last_round_steps",
                         "max_code_chars", "helpers_compared_only_if", "helpers_compared", "helpers_compared_cap",
                         "helpers_compared_already",
                         "revision",
                         "max_revisions")}
    if rest:
        lines.append(_pairs(rest))
    return "\n".join(lines)


def _mode(c: FastFacts) -> str:
    mode = c.get("mode") or (c.get("sub_action") or {}).get("kind")
    if mode not in ("code", "rl"):
        raise ContextError(f"the fast prompt's mode must be 'code' or 'rl', got {mode!r}")
    return str(mode)


def _render_fast(c: FastFacts) -> str:
    """Keys: subtask, task_description, mode, sub_action, decomposition, reused (code mode: the plan's earlier
    skills, played as they are), library, examples (code mode),
    last_attempt (or previous_attempt, the code the critic sent back), best_attempt (a roomy repair: the best
    code so far beside a later, lower round), feedback, limits, rl / configured (configured_view: the same with
    coded actions by name) / configure_error (rl mode), room (PROMPT_ROOMS; compact when absent)."""
    _require("fast", c, "subtask", "sub_action")
    mode, action, room = _mode(c), c["sub_action"], room_of(c)
    name = action.get("name")
    template = action.get("template") if action.get("template") != "custom" else None
    todo = _pairs({"template": template, "target": action.get("target"),
                   "item": action.get("item"), "coded actions": action.get("coded_actions")})
    job = (f"Write the coded action `{name}`." if mode == "code" else f"Train the learned sub-action `{name}`.")
    listed = any(a.get("name") == name for a in (c.get("decomposition") or {}).get("sub_actions", []))
    if not listed:  # else its line above, marked "this one now", carries the reason and the hints
        job += f" Why it is {mode}: {action.get('reason', '-')}" + (f"\nSlow agent's hints: {todo}" if todo else "")
    kept = c.get("kept_pieces") or []
    if kept:  # an answerer expected to be asked for those next, and its test ran on this answer alone
        job += (f" The other pieces keep their code from before ({', '.join(f'`{k}`' for k in kept)}; send one "
                "again in this answer only to change it): the test of the whole decomposition runs on this answer.")
    attempt_title, attempt = _last_attempt(c.get("last_attempt"), mode, room)
    previous = c.get("previous_attempt")
    if not attempt and previous:
        attempt_title, attempt = _last_attempt(previous, mode, room)
        outer = int(previous.get("outer_iter") or 0) + 1
        attempt_title = (f"Your code of outer iteration {outer}, written before the slow agent changed its plan for "
                         f"`{name}` (resend it unchanged if it still fits the new plan)" if previous.get("replanned")
                         else f"Your code of outer iteration {outer}, which the critic sent back"
                         + (" and what happened" if previous.get("report") else ""))
    examples = (c.get("examples") or {}) if mode == "code" else {}
    shown = _builtins_shown(examples)  # listed without their docstrings: the examples hold them
    parts = [
        _section("Subtask", _subtask_line(c["subtask"], c.get("task_description"))),
        _section("Decomposition (the slow agent's plan for it)",
                 _decomposition(c.get("decomposition"), name, c.get("reused") or ())),
        _section("Your job now", job),
        _section("Library: coded actions already written" + (
            " (call with `yield from name(game)`)" if mode == "code" else ""),
            _library(list(c.get("library") or []), shown, room) + (
                "" if room is COMPACT else _module_names(c.get("module_names")))),
        _section("Unloaded: code of sub-actions the decomposition dropped", _unloaded(c.get("unloaded"))),
    ]
    if mode == "code":
        parts.append(_section("Few-shot examples", _examples(examples, shown, str(action.get("name") or ""))))
    else:
        rl: dict[str, Any] = dict(c.get("rl") or {})
        bounds = _pairs({"default": rl.pop("train_steps", None), "min": rl.pop("min_train_steps", None),
                         "max": rl.pop("max_train_steps", None)})
        tested = rl.pop("coded_actions_tested_before_training", None)
        left_out = rl.pop("left_out_of_the_head", None)
        parts += [
            _section("Coded actions available for the action head", ", ".join(rl.pop("coded_actions", None) or [])),
            _section("Left out of the action head", left_out),
            _section("Your coded actions, tested before the training",
                     tested and clip(tested, room.shown_report_chars // 2)),
            _section("total_steps bounds", bounds),
            _section("About the training", _pairs(rl)),
            _section("Validated configuration: answer TrainPolicy now",
                     c.get("configured") and clip(_pairs(c.get("configured_view") or c["configured"]), CONFIG_CHARS)),
            _section("Configuration error to fix", c.get("configure_error")),
        ]
    parts += [
        _section(attempt_title, attempt),
        _best_attempt(c.get("best_attempt"), room),
        # the critic speaks when an attempt ends, and a new one starts with no last test: beside one, its feedback
        # is older (an answerer read the old verdict's deaths beside the new report's as the same round)
        _section("Critic feedback" + (" on an earlier attempt (older than your last test above)"
                                      if mode == "code" and c.get("last_attempt") else ""),
                 clip(str(c["feedback"]), FEEDBACK_CHARS) if c.get("feedback") else None),
        _section("Limits", _limits(c.get("limits"), mode)),
    ]
    answer = "WriteCode" if mode == "code" else (
        "TrainPolicy" if c.get("configured") and not c.get("configure_error") else "ConfigureRL")
    return "".join(parts) + f"Answer with {answer} now."


def _fast_system(c: FastFacts) -> str:
    if _mode(c) == "code":
        # a context built by hand (tests, a plugin) may leave the threshold out: the run's default then
        threshold = c.get("skill_threshold", DEFAULT_SKILL_THRESHOLD)
        rules = render("fast_code", api_reference=api_reference(), kept_rate=f"{threshold:.0%}",
                       rewrite_margin=REWRITE_MARGIN_TEXT if room_of(c) is COMPACT else rewrite_margin_text(8, 16))
    else:
        rules = render("fast_rl")
    return render("fast", mode_rules=rules.rstrip(), rule_sheet=rule_sheet())


# -- critic -----------------------------------------------------------------------------------------

def _render_critic(c: CriticFacts) -> str:
    """Keys: subtask, sub_action, result, code, report, fast_error, target, pass_rule, meets_target,
    judged_count, best_by_kind, loops, budget_left, same_seeds (same_seeds_measure), verdict_rules, room."""
    _require("critic", c, "subtask", "sub_action")
    action, code, report, room = c["sub_action"], c.get("code"), c.get("report"), room_of(c)
    facts = [f"Target success rate: {c.get('target')}." if c.get("target") is not None else "",
             f"Pass rule: {c['pass_rule']}." if c.get("pass_rule") else "",
             _target_verdict(c) if c.get("meets_target") is not None else "",
             _same_seeds_text(c.get("same_seeds") or [], c.get("same_seeds_measure") or "judged rates"),
             # named by its measure: an answerer read 'code 0.625' beside a judged 71% as a contradiction
             f"Best {c.get('best_measure') or 'rates'} of the earlier attempts at this subtask, by kind: "
             f"{_pairs(c['best_by_kind']) or 'none yet'}." if c.get("best_by_kind") is not None else "",
             f"Loops: {_pairs(c['loops'])}." if c.get("loops") else "",
             f"Environment steps left in the budget: {c['budget_left']}." if c.get("budget_left") is not None else ""]
    return "".join([
        _section("Subtask", _subtask_line(c["subtask"])),
        _section("Sub-action judged", f"{action.get('name')} ({action.get('kind')})"),
        _section("Measured", _measured_text(c.get("result") or {}, str(action.get("name")), room.result_chars,
                                            c.get("rewrite_result"))),
        _section("Where it stands", "\n".join(f for f in facts if f)),
        _section("The judged code", code and f"```python\n{clip(code.rstrip(), room.critic_code_chars)}\n```"),
        _section("The test report the fast agent saw", report and clip(report.rstrip(), room.shown_report_chars)),
        _section("The fast agent's error (no answer of it could be used)", c.get("fast_error")),
        _section("What the graph does with your verdict now", c.get("verdict_rules")),
    ]) + "Answer with the Critique."


def _measured_text(result: Mapping[str, Any], action: str, limit: int = COMPACT.result_chars,
                   rewrite: Mapping[str, Any] | None = None) -> str:
    """The measured result, led by its two rates in words where a test replayed earlier skills first (an
    answerer read 'successes 6; success_rate 0.75' as the count the pass rule judged: 6 of 7 that reached it),
    and by which chain helpers played where they are not the code's own (with the rewrite's own figures,
    `rewrite`, which the code and report below measured)."""
    fields = _pairs({k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()
                     if k not in ("rewrite_not_played", "replayed")})  # the note says the one, prerequisites the other
    note = ""
    if result.get("helpers"):  # three answerers read this beside the rewrite's own report as one measurement
        which = ", ".join(f"`{name}` ({whose})" for name, whose in result["helpers"].items())
        own = ""
        if rewrite and rewrite.get("episodes"):
            own = f" ({rewrite.get('successes')} of {rewrite.get('episodes')} succeeded with the rewrite"
            own += (f", {rewrite.get('started_successes')} of the {rewrite.get('started')} that reached the action)"
                    if rewrite.get("started") is not None and result.get("prerequisites") else ")")
        # "ranked lower" was read as a loss where the rewrite had won by less than the margin (5 of 8 against 4)
        margin = rewrite_margin(int(result.get("episodes") or 0))
        note = (f"These figures are the runs that played the earlier {which} in place of the rewrite (the rewrite "
                f"did not succeed on {margin} more of the same seeds than they did): the code and report below are "
                f"the rewrite's{own}."
                if not result.get("rewrite_not_played") else
                f"These runs played the earlier {which} in place of the rewrite in the code below, which the budget "
                "left no room to compare with it: the report below is of these runs.")
    runs, started = result.get("episodes"), result.get("started")
    if result.get("kind") != "code" or not result.get("prerequisites") or not runs or started is None:
        return (note + "\n" if note else "") + clip(fields, limit)
    lead = f"In words: {result.get('successes')} of {runs} test runs succeeded from a fresh world (success_rate); "
    lead += (f"{started} of the {runs} reached {action} after the earlier skills, and "
             f"{result.get('started_successes')} of those succeeded (success_given_start: the rate the pass rule and "
             "the skill threshold judge)." if started else
             f"none reached {action} after the earlier skills, so the pass rule and the skill threshold judge "
             "success_rate.")
    return lead + (" " + note if note else "") + "\n" + clip(fields, limit)


def _same_seeds_text(rates: list[float], measure: str = "judged rates") -> str:
    """What a comparison of versions on one set of test seeds can and cannot tell."""
    if not rates:
        return ""
    return (f"The {len(rates)} earlier code attempt{'s' if len(rates) > 1 else ''} of this sub-action ran on the "
            f"same test seeds ({measure} {', '.join(f'{r:.0%}' for r in rates)}): versions a seed or two apart "
            "differ within chance, and the best of several rates on the same seeds overstates what held-out "
            "play, on other worlds, will give.")


def _target_verdict(c: CriticFacts) -> str:
    """Whether the attempt meets the target, with the count the pass rule judged for a code test."""
    verdict = "meets" if c["meets_target"] else "does not meet"
    count = c.get("judged_count")
    reached = c.get("reached_count")
    if count and reached:  # the plan's last subtask: both rules, said as two (an answerer read one as a contradiction)
        text = (f"This attempt {verdict} the target: {count[0]} of the {count[1]} runs that reached the action "
                f"succeeded, and {reached[0]} of all {reached[1]} runs reached it (the plan's last subtask needs "
                f"both: at least {reached[2]} to reach it).")
    else:
        text = f"This attempt {verdict} the target" + (
            f" by the pass rule: {count[0]} of {count[1]} judged runs succeeded." if count else ".")
    runs = int((c.get("result") or {}).get("episodes") or 0)
    if count and 2 * count[1] < runs:  # a rate over a few runs: the chain before the action is what failed
        text += (f" Only {count[1]} of {runs} test runs reached the action, so this says little about it; the "
                 "others ended in the chain before it (earlier skills, stay_alive).")
    return text


def _critic_system(c: CriticFacts) -> str:
    return render("critic", game_facts=game_facts())


_RENDER: dict[str, tuple[Callable[[Any], str], Callable[[Any], str]]] = {  # each role's on its facts (prompts.facts)
    "planner": (_planner_system, _render_planner),
    "slow": (_slow_system, _render_slow),
    "fast": (_fast_system, _render_fast),
    "critic": (_critic_system, _render_critic),
}


@overload
def messages_for(role: Literal["planner"], context: PlannerFacts) -> list[BaseMessage]: ...
@overload
def messages_for(role: Literal["slow"], context: SlowFacts) -> list[BaseMessage]: ...
@overload
def messages_for(role: Literal["fast"], context: FastFacts) -> list[BaseMessage]: ...
@overload
def messages_for(role: Literal["critic"], context: CriticFacts) -> list[BaseMessage]: ...
def messages_for(role: str, context: Mapping[str, Any]) -> list[BaseMessage]:
    """System prompt + the rendered facts for one role."""
    if role not in _RENDER:
        raise ValueError(f"unknown role '{role}'; roles: {', '.join(ROLES)}")
    system, human = _RENDER[role]
    facts = human(context)  # first: it names the context keys a role cannot do without
    return [SystemMessage(system(context)), HumanMessage(facts)]
