"""The GameAPI reference a model writes code against, generated from the code itself.

Each public member of `envs.game_api.GameAPI` gets one line: its call form (property, method, or a
helper that acts, used with `yield from`) and the first paragraph of its docstring. Generated with
`inspect` when first asked for, so a member added, renamed or re-documented in the game API shows up
here without anyone editing a prompt. The conventions above the list are what the docstrings of
envs/game_api.py and envs/observation.py say about coordinates, written once instead of per member.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import cache
from itertools import groupby
from typing import Any, cast

from envs.coded import coded_action
from envs.game_api import GameAPI
from envs.observation import VIEW_HEIGHT, VIEW_RADIUS_X, VIEW_RADIUS_Y, VIEW_WIDTH

# Members whose name and type say too little and which have no docstring to quote. The test suite
# fails when one of them gains a docstring, so that its note here is dropped.
NOTES = {
    "facing_pos": "Absolute position of the tile in front of the player.",
    "daylight": "1.0 in full day, near 0.0 in the darkest night.",
    "achievements": "Names of the achievements unlocked in this episode.",
}

_CONVENTIONS = f"""\
Positions (Pos) are absolute (x, y) tiles counted from where the player stood at the episode start;
x grows to the right, y grows downward (move_down adds 1 to y). `tile`, `visible` and `creatures` give
offsets (dx, dy) from the player instead: the view is {VIEW_WIDTH}x{VIEW_HEIGHT}, dx in \
[-{VIEW_RADIUS_X}, {VIEW_RADIUS_X}], dy in [-{VIEW_RADIUS_Y}, {VIEW_RADIUS_Y}]; absolute = game.pos + offset.
`known`, `nearest`, `material_at`, `path_to` and the walking helpers use the memory of every tile seen in
this episode ('unknown' where never seen). Members marked `yield from` step the game (they yield
primitive action names); the others only read."""


def first_paragraph(doc: str | None) -> str:
    """The docstring's first paragraph on one line ('' when there is none)."""
    if not doc:
        return ""
    paragraph = inspect.cleandoc(doc).split("\n\n", 1)[0]
    return " ".join(paragraph.split())


def _parameters(fn: Any) -> str:
    parts = []
    for p in list(inspect.signature(fn).parameters.values())[1:]:  # not self
        if p.default is not inspect.Parameter.empty:
            parts.append(f"{p.name}={p.default!r}")
        elif p.annotation is not inspect.Parameter.empty:
            parts.append(f"{p.name}: {p.annotation}")
        else:
            parts.append(p.name)
    return ", ".join(parts)


def _function(member: Any) -> Callable[..., Any]:
    """The function behind a member: a property's getter, else the method itself."""
    return cast(Callable[..., Any], member.fget) if isinstance(member, property) else member


def _call_form(name: str, member: Any) -> str:
    if isinstance(member, property):
        return f"game.{name} -> {inspect.signature(_function(member)).return_annotation}"
    returns = str(inspect.signature(member).return_annotation)
    call = f"game.{name}({_parameters(member)})"
    if not inspect.isgeneratorfunction(member):
        return f"{call} -> {returns}"
    # a helper that acts: its yields are primitive actions; a Generator's return value is what
    # `yield from` evaluates to
    value = returns.rsplit(",", 1)[1].strip(" ]") if returns.startswith("Generator[") else None
    return f"yield from {call}" + (f" -> {value}" if value and value != "None" else "")


def public_members() -> list[str]:
    """Public GameAPI members, in the order the class defines them."""
    return [name for name in vars(GameAPI) if not name.startswith("_")]


def _text(name: str) -> str:
    return first_paragraph(_function(vars(GameAPI)[name]).__doc__) or NOTES.get(name, "")


def member_lines() -> dict[str, str]:
    """Member name -> its reference line."""
    lines = {}
    for name in public_members():
        text = _text(name)
        lines[name] = f"- {_call_form(name, vars(GameAPI)[name])}" + (f": {text}" if text else "")
    return lines


def _decorator_line() -> str:
    params = ", ".join(f"{p.name}={p.default!r}" for p in inspect.signature(coded_action).parameters.values())
    # a model reading 'checked before each call' took a false precondition for a no-op inside its chain
    return (f"@coded_action({params}): {first_paragraph(coded_action.__doc__)} Both hold for a call made on its "
            "own (a policy's choice, a test of the action alone): a false `precondition` (game -> bool) makes it "
            "do nothing; `max_steps` ends it. `yield from name(game)` checks neither.")


def _plain_type(name: str) -> str | None:
    """The type of a property whose line says nothing beyond it (no docstring, no note), else None."""
    member = vars(GameAPI)[name]
    if isinstance(member, property) and not _text(name):
        returns = inspect.signature(_function(member)).return_annotation
        return None if returns is inspect.Signature.empty else str(returns)
    return None


def _grouped_lines() -> list[str]:
    """member_lines, with neighbouring plain properties of one type on one line (game.food, game.drink)."""
    lines = member_lines()
    out = []
    for kind, group in groupby(lines, key=lambda name: _plain_type(name) or f"(own line) {name}"):
        names = list(group)
        out.append(f"- {', '.join(f'game.{n}' for n in names)} -> {kind}" if len(names) > 1 else lines[names[0]])
    return out


@cache
def api_reference() -> str:
    """Conventions, the coded_action decorator and one line per public GameAPI member (neighbouring plain
    properties of one type share a line)."""
    return "\n".join([_CONVENTIONS, _decorator_line(), *_grouped_lines()])


@cache
def api_summary() -> str:
    """Only the member names, for agents that plan code but do not write it."""
    return ", ".join(public_members())
