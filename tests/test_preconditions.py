"""Preconditions read on the trusted side (sandbox.preconditions): the mask equals the sandbox's answer, what
cannot be read stays with the sandbox, and code that defeats the reading changes only its own mask."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from envs.coded import LocalActions, as_coded_action, run_option
from envs.crafter_env import CrafterEnv
from sandbox import AgentCode
from sandbox import host as sandbox_host
from sandbox.lint import checker_disabled
from sandbox.preconditions import MAX_CALLS, host_preconditions

N_PRIMITIVE = 17


def _action(precondition: str, name: str = "act") -> str:
    return (f"from envs.coded import coded_action\n\n@coded_action(precondition={precondition})\n"
            f"def {name}(game):\n    yield 'noop'\n")


def _played_env(seed: int = 3, steps: int = 0, rng_seed: int = 0) -> CrafterEnv:
    env = CrafterEnv("collect_diamond")
    env.reset(seed=seed)
    rng = np.random.default_rng(rng_seed)
    for _ in range(steps):
        if any(env.step(int(rng.integers(1, 6)))[2:4]):
            env.reset()
    return env


def test_the_experts_masks_read_on_the_host_are_the_sandboxs_answers():
    """Every precondition of the expert's diamond chain is read on the host, and over 1,500 steps of play
    (primitive steps and coded calls) the host's mask is the one the sandbox answers, True and False alike."""
    from graph.evaluation.coded import coded_actions_for

    sources = list(coded_actions_for("collect_diamond").values())
    env = _played_env()
    rng = np.random.default_rng(1)
    seen = np.zeros((2, 11), dtype=bool)  # [value False seen, value True seen] per action
    with AgentCode(sources) as read_here, AgentCode(sources, host_masks=False) as asked:
        assert read_here._host_checks is not None and asked._host_checks is None
        names = read_here.names
        for step in range(1500):
            here, there = read_here.mask(env.game), asked.mask(env.game)
            assert here == there, f"step {step}"
            seen[np.array(here, dtype=int), np.arange(len(here))] = True
            allowed = [n for n, ok in zip(names, here) if ok and n != "explore"]
            if allowed and rng.random() < 0.1:  # a coded call now and then, played by the host-mask side
                outcome = read_here.execute(env, str(rng.choice(allowed)), max_steps=30)
                done = outcome.terminated or outcome.truncated
            else:
                done = any(env.step(int(rng.integers(N_PRIMITIVE)))[2:4])
            if done:
                env.reset()
    assert seen[1].sum() >= 4 and seen[0].sum() >= 8  # the masks changed: the test compared real answers


@pytest.mark.parametrize("precondition", [
    'lambda game: game.has("wood")',
    'lambda g: g.can_collect("tree") and len(g.known("tree")) > 0',
    'lambda game: not game.sleeping and game.health >= 3 or game.daylight < 0.2',
    'lambda game: 1 <= game.inventory["wood"] < 5',
    'lambda game: game.inventory.get("wood", 0) > 0',  # no: a method of a value, not of the game
    'lambda game: all(len(game.known(s)) > 0 for s in game.stations("wood_pickaxe"))',
    'lambda game: any(game.is_near(m) for m in ("tree", "water") if m != "lava")',
    'lambda game: game.tile(0, 1) in ("grass", "sand") and game.facing != (0, -1)',
    'lambda game: -1 < game.pos[0] and game.material_at((0, 0)) is not None',
    'lambda game: game.nearest("tree") is not None',  # no: a path search
    'lambda game: game.last_refusal is None',  # no: only the sandbox's mirror sets it
    'lambda game: len(game.known("tree")) > LIMIT',  # no: a module global
    'lambda game: [game.pos for _ in range(3)]',  # no: a list comprehension
    'lambda game, extra=1: game.has("wood")',  # no: a default argument
    " and ".join(['lambda game: game.has("wood")'] + [f'game.has("stone", {i})' for i in range(MAX_CALLS)]),
])
def test_a_read_precondition_answers_as_the_lambda_does(precondition):
    """What is read on the host answers what the lambda itself answers, on many game states; what is not
    read on the host is left to the sandbox (absent from host_preconditions)."""
    not_read = ('.get(' in precondition or "nearest" in precondition or "last_refusal" in precondition
                or "LIMIT" in precondition or "range" in precondition or "extra" in precondition
                or precondition.count("game.has") > MAX_CALLS)
    checks = host_preconditions([_action(precondition)])
    if not_read:
        assert checks == {}
        return
    lam = eval(precondition, {})  # the test's own text: the reference the host's reading must match
    env = _played_env()
    rng = np.random.default_rng(2)
    answers = set()
    for _ in range(400):
        if any(env.step(int(rng.integers(N_PRIMITIVE)))[2:4]):
            env.reset()
        try:
            expected = bool(lam(env.game))
        except Exception:
            expected = False
        assert checks["act"](env.game) == expected
        answers.add(expected)


@pytest.mark.parametrize("source", [
    # the action is bound twice: which one loads is not certain from the text
    _action('lambda game: game.has("wood")') + "act = None\n",
    _action('lambda game: game.has("wood")') + _action('lambda game: True'),
    # a builtin the expression uses is rebound
    "len = lambda x: 0\n" + _action('lambda game: len(game.known("tree")) > 0'),
    # coded_action is not the project's decorator
    "def coded_action(**kw):\n    return lambda f: f\n" + _action('lambda game: game.has("wood")').split("\n", 1)[1],
    # a second decorator could wrap the function
    _action('lambda game: game.has("wood")').replace("def act", "@staticmethod\ndef act"),
    # a precondition given as a function, not a lambda
    "def _ready(game):\n    return game.has('wood')\n" + _action("_ready"),
    # text that does not parse, and nesting deep enough to break the parser
    "@coded_action(precondition=lambda game: (\n",
    _action("lambda game: " + "(" * 300 + "True" + ")" * 300),
    _action("lambda game: " + " and ".join(["True"] * 100)),
])
def test_what_cannot_be_read_for_certain_stays_with_the_sandbox(source):
    assert host_preconditions([source]) == {}


def test_an_action_named_in_two_sources_is_not_read():
    first, second = _action('lambda game: game.has("wood")'), _action('lambda game: game.has("stone")')
    assert host_preconditions([first, second]) == {}
    assert set(host_preconditions([first, _action("lambda game: True", name="other")])) == {"act", "other"}


def test_one_unreadable_precondition_leaves_every_mask_to_the_sandbox():
    readable = _action('lambda game: game.has("wood")')
    unreadable = _action('lambda game: game.nearest("tree") is not None', name="other")
    env = _played_env()
    with AgentCode([readable + unreadable.split("\n", 1)[1]]) as code:
        assert code._host_checks is None
        assert code.mask(env.game) == [False, env.game.nearest("tree") is not None]


def test_code_that_defeats_the_reading_changes_only_its_own_mask():
    """The function's precondition replaced after its definition, in a way the reading does not see (its
    attribute reached through __dict__; the lint, off here, would refuse the name): the host reads the
    decorator's (always true), the loaded code has another (always false). The mask allows the call; the
    sandbox checks the real precondition when the call begins, so the call takes no step (in a training it
    costs one noop, as any call whose precondition fails)."""
    source = (_action("lambda game: True", name="sneak") + "sneak.__dict__['precondition'] = lambda game: False\n")
    env = _played_env()
    with checker_disabled(), AgentCode([source]) as code:  # the lint would refuse the assignment
        assert code._host_checks is not None and code.mask(env.game) == [True]
        outcome = code.execute(env, "sneak", max_steps=5)
    assert outcome.precondition_failed and outcome.steps == 0


def test_the_mirror_hears_of_primitive_steps_before_it_lags_out_of_reach(monkeypatch):
    """With masks read on the host, only calls and the occasional sync message carry observations to the
    sandbox. After 700 primitive steps a call sees the same game as a trusted in-process copy of the same
    code (its moves come from explore's random stream, which a resync from the memory map would restart),
    and the catch-ups never had to fall back to the memory map."""
    source = ("from envs.coded import coded_action\n\n"
              "@coded_action(precondition=lambda game: game.step_count >= 0, max_steps=40)\n"
              "def wander(game):\n    yield from game.explore(40)\n")
    fallbacks = []
    catch_up = sandbox_host.AgentCode._send

    def watching_send(self, message, game, *args, **kwargs):
        if game is not None:
            update = game._catch_up(self._point)
            if update is not None and "state" in update:
                fallbacks.append(message.get("op"))
        return catch_up(self, message, game, *args, **kwargs)

    monkeypatch.setattr(sandbox_host.AgentCode, "_send", watching_send)
    from sandbox.loader import load_coded_actions

    trusted = LocalActions([as_coded_action(a.fn) for a in load_coded_actions(source)])
    envs = [_played_env(seed=5), _played_env(seed=5)]
    rng = np.random.default_rng(4)
    with AgentCode([source]) as code:
        for round_ in range(3):
            for _ in range(700):
                action = int(rng.integers(N_PRIMITIVE))
                results = [env.step(action) for env in envs]
                assert code.mask(envs[0].game) == [True]
                if any(results[0][2:4]):
                    for env in envs:
                        env.reset()
            sandboxed = code.execute(envs[0], "wander", max_steps=40)
            local = run_option(envs[1], trusted, "wander", max_steps=40)
            assert sandboxed.actions == local.actions, f"round {round_}"
    assert fallbacks == []


def test_training_with_masks_read_on_the_host_is_the_training_with_masks_asked(tmp_path, monkeypatch):
    """Same seed, same run: a PPO training with the expert's coded actions gives the same weights and the
    same coded calls whether its masks are read on the host or asked of the sandbox."""
    from graph.evaluation.coded import coded_actions_for
    from rl.config import RLConfig
    from rl.training import train

    cfg = RLConfig(task="collect_diamond", max_episode_steps=300,
                   coded_actions=list(coded_actions_for("collect_diamond").values()))
    runs = []
    for host_masks in (True, False):
        if not host_masks:
            monkeypatch.setattr(sandbox_host.AgentCode, "_checks_read_here", lambda self: None)
        settings = cfg.ppo_settings(total_steps=1536, num_envs=2, vector_mode="sync", progress="none",
                                    run_dir=str(tmp_path / str(host_masks)))
        result = train(settings, cfg)
        runs.append((result, torch.load(result.policy_path, weights_only=False)["state_dict"]))
    (read_here, weights_a), (asked, weights_b) = runs
    assert read_here.coded_action_counts == asked.coded_action_counts
    assert sum(read_here.coded_action_counts.values()) > 20
    assert weights_a.keys() == weights_b.keys() and all(torch.equal(weights_a[k], weights_b[k]) for k in weights_a)


@pytest.mark.parametrize("source", [
    # a loop inside a loop, a long text, a far is_near: unbounded work on the trusted side, which gives these
    # checks no deadline
    _action("lambda game: any(any(a != b for b in 'ab') for a in 'ab')"),
    _action("lambda game: 'x' in '" + "a" * 100 + "'"),
    _action("lambda game: game.is_near('diamond', 1000)"),
    _action("lambda game: game.is_near('diamond', game.step_count)"),
    # a loop over a long collection that calls the game for each item
    _action("lambda game: any(game.is_near('water') for p in game.known('grass'))"),
    # identity of values Python may or may not share
    _action("lambda game: game.facing_material() is 'grass'"),
    # a name bound by a match pattern, and coded_action called a second time
    "match 0:\n    case any:\n        pass\n" + _action("lambda game: any(x for x in (1, 2))"),
    _action("lambda game: False") + "coded_action(precondition=lambda game: True)(act)\n",
])
def test_what_could_cost_without_bound_or_differ_from_python_stays_with_the_sandbox(source):
    assert host_preconditions([source]) == {}


def test_a_loop_over_a_recipes_stations_may_ask_the_game_and_a_loop_over_tiles_may_compare():
    checks = host_preconditions([
        _action("lambda game: all(len(game.known(s)) > 0 for s in game.stations('wood_pickaxe'))", name="a"),
        _action("lambda game: any(p[0] > 0 for p in game.known('tree'))", name="b"),
        _action("lambda game: game.facing_material() is not None and game.is_near('tree', 3)", name="c")])
    assert set(checks) == {"a", "b", "c"}
