"""The chain driver: the strategy every coded chain plays, as checked Python.

`prompts.fewshot.chain_source` writes a program whose `main` coded action plays a chain of coded
actions; the body of `play_chain` below is that `main`'s body, copied as text after assignments that
bind its parameters (everything but `game`) to the chain's data. So the body is agent code: it runs in
the sandbox and keeps to its rules (sandbox/lint.py: no imports, no attributes starting with '_', no
annotations inside it, which the sandbox would evaluate). It is copied rather than called so that the
program keeps one `main` with everything inside it: the library stores a program's functions one by
one (nodes.skills.pool.definitions), and a trace names the functions a step came from ('main > collect_wood').
Only the signature and the stubs below are for ruff and mypy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envs.game_api import GameAPI

    Action = Callable[[GameAPI], Iterator[str]]

    # Coded actions of the program the driver runs in, called between steps (prompts.fewshot.BUILTIN_ACTIONS
    # brings them when the library has none of that name).
    def stay_alive(game: GameAPI) -> Iterator[str]:
        ...

    def explore(game: GameAPI) -> Iterator[str]:
        ...


def play_chain(game: GameAPI, steps: Sequence[tuple[Action, str | None]], gather: Mapping[str, Action],
               placers: Mapping[str, Action], place_near: Mapping[str, Sequence[str]],
               needs: Mapping[str, Sequence[str]] | None, retries: int) -> Iterator[str]:
    """Play `steps` ((coded action, the achievement it is for or None), in order).

    A step named after an achievement is retried (up to `retries` calls) until the achievement unlocks;
    a step not named after one runs once. When the item a place_/make_ step needs lacks a material, that
    material's collect_ step (`gather`: material -> action) runs first. A station is placed next to the
    stations it will be used with (`place_near`: place_ step -> those stations), and placed again with
    `placers` (station -> action) when the one placed before is gone (arrows break tables and furnaces)
    or out of reach. Before every call the player drinks, eats and sleeps when it must (stay_alive); when an
    action finds nothing to act on, it explores, after stay_alive once more (night may have fallen since).

    `needs` None: a chain, where a step that fails ends it (the later steps need it). Otherwise a score
    plan (step -> the achievements it needs first): a step that fails is passed over, and so is a step
    whose needs did not unlock.
    """
    def gatherer(item):  # the collect_ step of the first material `item` lacks, when the chain has one
        lacking = [m for m, n in game.requirements(item).items() if not game.has(m, n)]
        return gather.get(lacking[0]) if lacking else None

    for action, goal in steps:
        if needs is not None and goal is not None and not all(a in game.achievements for a in needs.get(goal, ())):
            continue
        for _ in range(retries):
            if goal is not None and goal in game.achievements:
                break
            yield from stay_alive(game)
            todo = action
            if goal is not None and goal.startswith(("place_", "make_")):
                item = goal.split("_", 1)[1]
                stations = game.stations(item) if goal.startswith("make_") else place_near.get(goal, [])
                fetch = gatherer(item)
                if fetch is not None:
                    todo = fetch
                elif stations:
                    # Arrows turn tables and furnaces into path: walk to the stations still standing and
                    # place again there the ones placed before that are gone (or out of reach).
                    yield from game.go_near([s for s in stations if len(game.known(s)) > 0])
                    gone = [s for s in stations if not game.is_near(s) and s in placers
                            and "place_" + s in game.achievements]
                    if gone:
                        todo = gatherer(gone[0]) or placers[gone[0]]
            # `yield from`, not a loop over the action: the trace then names the action that runs and the
            # functions it is in, and a test can tell whether the judged action took a step
            before = game.step_count
            yield from todo(game)
            if game.step_count == before:
                # nothing to act on: the player explores, but first stay_alive again, since the eating or drinking
                # it did before this step may have taken the player into the night
                yield from stay_alive(game)
                yield from explore(game)
            if goal is None:
                break
        if needs is None and goal is not None and goal not in game.achievements:
            return
