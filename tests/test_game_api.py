"""The game API: it reports what the player sees, remembers it, and plans over it."""

import pytest

from envs.coded import AGENT_CODE_FILENAME, as_coded_action, coded_action, execute
from envs.crafter_env import ACTION_INDEX, CrafterEnv
from prompts.fewshot import combined_source, example_sources, fill


def _world_material(env, dx, dy):
    """Ground truth from the simulator, for checking the API (tests only)."""
    sim = env.backend._sim
    px, py = sim._player.pos
    return sim._world[(px + dx, py + dy)][0]


def test_local_view_matches_the_simulator():
    env = CrafterEnv("collect_wood")
    env.reset(seed=11)
    for _ in range(30):
        env.step(ACTION_INDEX["move_left"])
    game = env.game
    for dx in range(-4, 5):
        for dy in range(-3, 4):
            truth = _world_material(env, dx, dy)
            assert game.tile(dx, dy) == (truth if truth is not None else "void")
    assert game.tile(5, 0) is None
    assert len(game.local_view()) == 7 and len(game.local_view()[0]) == 9


def test_memory_keeps_tiles_that_left_the_view():
    env = CrafterEnv("collect_wood")
    env.reset(seed=3)
    game = env.game
    start_view = {(dx, dy): game.tile(dx, dy) for dx in range(-4, 5) for dy in range(-3, 4)}
    for _ in range(6):
        env.step(ACTION_INDEX["noop"])
    moved = 0
    for _ in range(8):
        before = game.pos
        env.step(ACTION_INDEX["move_right"])
        moved += game.pos != before
    assert game.pos[0] == moved > 0  # odometry follows the player's own moves
    for (dx, dy), material in start_view.items():
        if material not in ("grass", "sand", "path"):  # walkable tiles can gain a creature's shadow only
            assert game.material_at((dx, dy)) == material


def test_returned_values_are_copies_and_properties_are_read_only():
    env = CrafterEnv("collect_wood")
    env.reset(seed=0)
    game = env.game
    inventory = game.inventory
    inventory["diamond"] = 99
    assert game.inventory["diamond"] == 0
    assert env.backend.inventory()["diamond"] == 0
    with pytest.raises(AttributeError):
        game.health = 1
    with pytest.raises(AttributeError):
        game.new_attribute = 1


def test_path_to_leads_next_to_the_target():
    env = CrafterEnv("collect_wood")
    env.reset(seed=3)
    game = env.game
    target = game.nearest("tree")
    path = game.path_to(target)
    assert path is not None and len(path) >= abs(target[0]) + abs(target[1]) - 1
    for move in path:
        env.step(ACTION_INDEX[move])
    x, y = game.pos
    assert abs(x - target[0]) + abs(y - target[1]) == 1
    assert game.path_to((500, 500)) is None


def test_can_make_and_can_place_follow_the_recipes():
    env = CrafterEnv("make_wood_pickaxe")
    env.reset(seed=0)
    game = env.game
    assert not game.can_make("wood_pickaxe") and not game.can_place("table")
    assert game.requirements("wood_pickaxe") == {"wood": 1}
    with pytest.raises(ValueError, match="unknown item"):
        game.can_make("laser")


def _load(source):
    namespace = {"coded_action": coded_action}
    exec(compile(source, AGENT_CODE_FILENAME, "exec"), namespace)
    return namespace


def test_example_chain_makes_a_wood_pickaxe_on_most_seeds():
    source = combined_source(["collect_wood", "place_table", "make_wood_pickaxe", "explore",
                              "obtain_wood_pickaxe"])
    action = as_coded_action(_load(source)["obtain_wood_pickaxe"], source)
    wins = 0
    for seed in range(10):
        env = CrafterEnv("make_wood_pickaxe")
        env.reset(seed=seed)
        outcome = execute(env, action, max_steps=1500)
        assert outcome.error is None
        assert outcome.steps == env.episode_steps  # every primitive step is counted
        wins += outcome.info["success"]
    assert wins >= 8


def test_execute_reports_the_agent_line_of_an_error_and_bad_actions():
    source = "def broken(game):\n    yield 'noop'\n    x = 1 / 0\n    yield 'do'\n"
    env = CrafterEnv("collect_wood")
    env.reset(seed=0)
    outcome = execute(env, as_coded_action(_load(source)["broken"], source))
    assert outcome.steps == 1 and "line 3" in outcome.error and "ZeroDivisionError" in outcome.error
    bad = "def bad(game):\n    yield 'fly'\n"
    outcome = execute(env, as_coded_action(_load(bad)["bad"], bad))
    assert outcome.steps == 0 and "'fly'" in outcome.error


def test_execute_stops_code_that_never_yields():
    source = "def stuck(game):\n    while True:\n        pass\n    yield 'noop'\n"
    env = CrafterEnv("collect_wood")
    env.reset(seed=0)
    from sandbox import AgentCode, SandboxLimits

    with AgentCode([source], limits=SandboxLimits(step_timeout_s=0.5)) as code:
        outcome = code.execute(env, "stuck")
    assert outcome.steps == 0 and "no action yielded" in outcome.error and "line 2" in outcome.error


def test_precondition_masks_a_call_without_taking_steps():
    env = CrafterEnv("place_table")
    env.reset(seed=0)
    place = as_coded_action(_load(example_sources()["place_table"])["place_table"])
    outcome = execute(env, place)
    assert outcome.precondition_failed and outcome.steps == 0 and env.episode_steps == 0


def test_fill_makes_new_actions_from_the_examples():
    source = fill("collect", material="stone", item="stone")
    assert "def collect_stone(game)" in source and '"tree"' not in source
    namespace = _load(source)
    assert "collect_stone" in namespace
    assert "def make_stone_pickaxe(game)" in fill("make", item="stone_pickaxe")
    with pytest.raises(ValueError):
        fill("teleport")


# ---- the world seed stays on the trusted side (issue 26) ----------------------------------------------

WORLD_SEED = 654321


def _world_values(seed: int) -> set[int]:
    """The world seed and the value Crafter seeds the world's own generator with (crafter_backend)."""
    return {seed, hash((seed, 0)) % (2 ** 31 - 1)}


def _ints_and_digits(value, found: set[int], texts: list[str]) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        found.add(value)
    elif isinstance(value, str):
        texts.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _ints_and_digits(k, found, texts)
            _ints_and_digits(v, found, texts)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            _ints_and_digits(v, found, texts)


def test_helper_seeds_come_from_the_envs_own_stream_not_from_the_world():
    """Fresh envs draw the same first helper seed whatever world they reset to; a second episode draws
    another; the same resets replay the same seeds and so the same explore() moves."""
    firsts = []
    for seed in (0, 7, WORLD_SEED):
        env = CrafterEnv("collect_wood")
        env.reset(seed=seed)
        firsts.append(env.game._helper_seed)
        assert env.game._helper_seed not in _world_values(seed)
    assert len(set(firsts)) == 1
    runs = []
    for _ in range(2):
        env = CrafterEnv("collect_wood")
        seeds, moves = [], []
        for seed in (WORLD_SEED, WORLD_SEED, 3):
            env.reset(seed=seed)
            seeds.append(env.game._helper_seed)
            moves.append([next(env.game.explore(1)) for _ in range(20)])
        runs.append((seeds, moves))
        assert len(set(seeds)) == 3  # the same world twice still gets a new helper seed
    assert runs[0] == runs[1]
    assert not hasattr(env.game, "_seed")


@pytest.mark.parametrize("path", ["observe", "reset", "state"])
def test_no_mirror_update_carries_the_world_seed(path):
    """Each way the host brings a mirror in step (GameAPI._catch_up) holds neither the world seed nor the
    world generator's seed, and neither does the mirror once it applied the update."""
    from envs.game_api import GameAPI
    from sandbox.wire import obs_from_wire, obs_to_wire

    env = CrafterEnv("collect_wood")
    env.reset(seed=WORLD_SEED)
    mirror = GameAPI()
    mirror._apply(env.game._catch_up(None))
    for _ in range(3):
        env.step(ACTION_INDEX["noop"])
    if path == "state":  # an episode longer than the window the host keeps: the memory map crosses
        for _ in range(1100):
            env.game._observe(env.game._current())
    # the host's own sync point as a mirror that missed the three steps would hold it (None: a fresh mirror)
    point = (env.game._identity, env.game._episode, env.game._version - 3) if path == "observe" else None
    update = env.game._catch_up(point)
    assert set(update) - {"observe"} == {path} - {"observe"}
    wire = dict(update, observe=[obs_to_wire(o) for o in update["observe"]])
    found: set[int] = set()
    texts: list[str] = []
    _ints_and_digits(wire, found, texts)
    assert env.game._helper_seed in found or path == "observe"
    for value in _world_values(WORLD_SEED):
        assert value not in found
        assert not any(str(value) in t for t in texts)
    mirror._apply(dict(wire, observe=[obs_from_wire(o) for o in wire["observe"]]))
    held = [getattr(mirror, name) for name in type(mirror).__slots__]
    found, texts = set(), []
    _ints_and_digits(held, found, texts)
    found |= set(mirror._rng.getstate()[1])
    assert not found & _world_values(WORLD_SEED)


# --- the searches read the memory through fast paths; they answer as a plain reading would ------------

def _plain_walkable(game, pos):
    from envs.observation import WALKABLE

    return game.material_at(pos) in WALKABLE


def _plain_search(game, is_goal, moves):
    """Breadth-first search written the plain way (tile by tile through material_at): the oracle."""
    from collections import deque

    start, blocked = game.pos, game._creature_positions()
    previous = {start: None}
    queue = deque([start])
    while queue:
        cur = queue.popleft()
        if cur != start and is_goal(cur):
            path = []
            while previous[cur] is not None:
                cur, move = previous[cur]
                path.append(move)
            return path[::-1]
        for d, move in moves:
            nxt = (cur[0] + d[0], cur[1] + d[1])
            if nxt not in previous and nxt not in blocked and _plain_walkable(game, nxt):
                previous[nxt] = (cur, move)
                queue.append(nxt)
    return None


def _plain_known(game, name):
    from envs.observation import MATERIAL_IDS

    memory = game._memory
    found = [(x - 80, y - 80) for x in range(memory.shape[0]) for y in range(memory.shape[1])
             if memory[x, y] == MATERIAL_IDS.get(name, -1)]
    px, py = game.pos
    return sorted(found, key=lambda p: (abs(p[0] - px) + abs(p[1] - py), p))


def test_fast_memory_reads_answer_as_the_plain_ones():
    """known(), the breadth-first searches and their goal tests read the memory through a flat view, per
    material counts and a walkable table; along random walks in several worlds they give what a plain
    tile-by-tile reading gives (also right after a mirror catches up from a full state)."""
    import random as _random

    from envs.game_api import GameAPI, _unflat
    from envs.observation import MOVE_FOR_DIRECTION, UNKNOWN

    rng = _random.Random(0)
    checked = 0
    for seed in (1, 2, 3):
        env = CrafterEnv(task="collect_diamond")
        env.reset(seed=seed)
        game = env.game
        for step in range(160):
            _, _, terminated, truncated, _ = env.step(
                ACTION_INDEX[rng.choice(["move_left", "move_right", "move_up", "move_down", "do"])])
            if terminated or truncated:
                env.reset(seed=seed + 100)
            if step % 20:
                continue
            mirror = GameAPI()  # caught up from the full state, as a sandbox mirror past its window is
            mirror._apply({"state": {"helper_seed": 0, "memory": game._memory.tobytes().hex(), "cows": []},
                           "observe": [game._current()]})
            for view in (game, mirror):
                for name in ("tree", "water", "stone", "grass", "diamond", UNKNOWN, "no such thing"):
                    assert view.known(name) == _plain_known(view, name), (seed, step, name)
                moves = list(MOVE_FOR_DIRECTION.items())
                rng.shuffle(moves)

                def frontier(pos, view=view):
                    return any(view.material_at((pos[0] + dx, pos[1] + dy)) == UNKNOWN
                               for dx, dy in MOVE_FOR_DIRECTION)

                found = view._search(lambda at: frontier(_unflat(at)), moves=moves)
                assert found == _plain_search(view, frontier, moves)
                for target in [(view.pos[0] + 3, view.pos[1] - 2), (view.pos[0] - 7, view.pos[1] + 5)]:
                    goals = {(target[0] + dx, target[1] + dy) for dx, dy in MOVE_FOR_DIRECTION}
                    assert view.path_to(target) == _plain_search(view, goals.__contains__,
                                                                 list(MOVE_FOR_DIRECTION.items()))
                for wanted in (["tree"], ["water", "grass"], ["table"]):
                    def near(pos, wanted=wanted, view=view):
                        return all(any(view.material_at((pos[0] + dx, pos[1] + dy)) == m
                                       for dx in (-1, 0, 1) for dy in (-1, 0, 1)) for m in wanted)

                    assert view._path_to_spot_near(wanted) == _plain_search(
                        view, near, list(MOVE_FOR_DIRECTION.items())), (seed, step, wanted)
                checked += 1
    assert checked == 3 * 8 * 2


def test_a_pickled_or_copied_game_has_its_own_memory():
    """The flat view of the memory is not pickled: a copy rebuilds it on its own memory (saved envs)."""
    import copy
    import pickle

    env = CrafterEnv(task="collect_wood")
    env.reset(seed=1)
    for _ in range(5):
        env.step(ACTION_INDEX["move_left"])
    for other in (pickle.loads(pickle.dumps(env)).game, copy.deepcopy(env).game):
        assert other.known("tree") == env.game.known("tree") and other.path_to((0, 9)) == env.game.path_to((0, 9))
        other._memory[0, 0] = 7
        assert other.material_at((-80, -80)) != env.game.material_at((-80, -80))
