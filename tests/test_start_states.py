"""Trainings start where the chain stands: moments saved from successful code tests, restored exactly,
read back only as game state, and used by a later subtask's training in place of a fresh world."""

from __future__ import annotations

import os
import pickle
import zlib

import numpy as np
import pytest

from envs.crafter_env import CrafterEnv
from envs.saved_state import MAGIC, SavedState, StateFileError, read_states, write_states
from nodes.attempt.results import code_rate_floor
from nodes.models.expert import ExpertModel


def _played(seed: int = 5, steps: int = 60) -> CrafterEnv:
    env = CrafterEnv(task="collect_diamond")
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        env.step(int(rng.choice([0, 1, 2, 3, 4, 5])))  # noop, moves, do: no sleep, so the episode goes on
    return env


def _play(env: CrafterEnv, actions) -> list:
    out = []
    for a in actions:
        obs, reward, terminated, truncated, info = env.step(int(a))
        out.append((obs.tobytes(), reward, terminated, truncated, info["inventory"], info["episode_steps"]))
        if terminated or truncated:
            break
    return out


def test_a_saved_moment_plays_on_the_same_in_any_env_and_its_limit_counts_from_there(tmp_path):
    env = _played()
    saved = env.save_state(source="test")
    assert saved.steps == 60 and saved.achievements == tuple(sorted(env.game.achievements))
    path = tmp_path / "one.states"
    write_states(path, [saved, saved])
    back = read_states(path)
    assert len(back) == 2 and back[0] == saved

    a, b = CrafterEnv(task="collect_diamond", max_steps=40), CrafterEnv(task="collect_diamond", max_steps=40)
    obs_a, info_a = a.reset(seed=77, options={"start": back[0]})
    obs_b, _ = b.reset(seed=77, options={"start": back[1]})
    assert np.array_equal(obs_a, env.observation()) and np.array_equal(obs_a, obs_b)
    assert info_a["episode_steps"] == 60 and info_a["achievements"] == list(saved.achievements)
    assert a.game._current().pos == env.game._current().pos  # positions stay relative to the same spawn
    actions = np.random.default_rng(1).choice([0, 1, 2, 3, 4, 5], size=40)
    played_a, played_b = _play(a, actions), _play(b, actions)
    assert played_a == played_b  # the same moment and creature seed: the same episode
    assert played_a[-1][5] <= 100 and (played_a[-1][2] or played_a[-1][3])  # ends by 60 + 40 steps
    c = CrafterEnv(task="collect_diamond", max_steps=40)
    c.reset(seed=78, options={"start": back[0]})
    # another creature seed: the world and player are the same, and the creatures move otherwise
    assert np.array_equal(c.observation(), obs_a)
    assert _play(c, actions) != played_a


def test_a_saved_moment_keeps_what_the_player_had_seen_and_the_sandbox_knows_it(tmp_path):
    """Code played from a saved moment knows the map the chain had seen, as in held-out play: the game API
    on this side and its mirror in the sandbox both."""
    from sandbox import AgentCode

    env = _played(steps=150)
    seen = sorted(env.game.known("tree")) + sorted(env.game.known("water"))
    saved = env.save_state()
    path = tmp_path / "s.states"
    write_states(path, [saved])
    other = CrafterEnv(task="collect_diamond")
    other.reset(seed=9, options={"start": read_states(path)[0]})
    assert sorted(other.game.known("tree")) + sorted(other.game.known("water")) == seen and seen
    source = ("def count(game):\n"
              "    print(len(game.known('tree')) + len(game.known('water')))\n"
              "    yield 'noop'\n")
    printed: list[str] = []
    with AgentCode([source]) as code:
        code.execute(other, "count", on_print=printed.append)
    assert printed and int(printed[0]) == len(seen)


def test_a_state_file_that_names_anything_but_the_game_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    blob = zlib.compress(pickle.dumps((Payload(),), protocol=5))
    forged = SavedState(world=blob, seed=1, steps=1, achievements=(), spawn=(0, 0))
    path = tmp_path / "forged.states"
    write_states(path, [forged])
    env = CrafterEnv(task="collect_diamond")
    with pytest.raises(StateFileError, match="may not contain"):
        env.reset(seed=1, options={"start": read_states(path)[0]})
    assert not marker.exists()

    for bad, message in ((b"not a state file", "is not a start-state file"),
                         (MAGIC + b'{"seed": 1}\n', "damaged"),
                         (MAGIC + b'{"seed": 1, "steps": 0, "achievements": [], "spawn": [0, 0], "source": "", '
                                  b'"bytes": 999}\nshort', "damaged")):
        path.write_bytes(bad)
        with pytest.raises(StateFileError, match=message):
            read_states(path)
    with pytest.raises(StateFileError, match="cannot be read"):
        read_states(tmp_path / "missing.states")


def test_a_training_starts_its_episodes_from_the_saved_moments_of_training_seeds(tmp_path):
    from rl.config import RLConfig
    from rl.env_factory import build_crafter_env

    env = _played()
    path = tmp_path / "starts.states"
    write_states(path, [env.save_state()])
    cfg = RLConfig(task="collect_diamond", start_states=str(path), eval_episodes=0)
    train_env = build_crafter_env(cfg.model_dump_json(), 0.99, seeds=(0, 1, 3), keep_info=True)
    _, info = train_env.reset()
    assert info["episode_steps"] == 60
    train_env.close()

    with pytest.raises(ValueError, match="eval_episodes to 0"):
        RLConfig(task="collect_diamond", start_states=str(path))
    from envs.seeds import EVAL_SEED_BASE
    held_out = SavedState(**{**env.save_state().__dict__, "seed": EVAL_SEED_BASE + 3})
    write_states(path, [held_out])
    with pytest.raises(ValueError, match="held-out evaluation seed"):
        RLConfig(task="collect_diamond", start_states=str(path), eval_episodes=0).load_starts()
    from tools.rl_tools import configure_rl
    report = configure_rl({"task": "collect_diamond", "start_states": str(path), "eval_episodes": 0})
    assert not report.ok and "held-out evaluation seed" in (report.error or "")


class _LearnsTheTable(ExpertModel):
    """The rule-based expert, except that its slow agent learns place_table with PPO from the start."""

    def __init__(self) -> None:
        super().__init__()
        self.rl_facts: list[dict] = []

    def _decompose(self, c):
        if c["subtask"]["name"] == "place_table":
            return self._coded_version("place_table", None, reason="learn it")
        return super()._decompose(c)

    def _configure_rl(self, c):
        self.rl_facts.append(dict(c["rl"]))
        return {**super()._configure_rl(c), "total_steps": 1000}


def test_a_later_training_starts_where_the_tests_of_earlier_skills_succeeded(tmp_path):
    """collect_wood's code tests succeed and leave their moments; place_table's training then starts every
    episode there (the wood in hand), with no action to replay the chain in its head."""
    from graph.builder import build_graph, run_config, run_context, start_state
    from nodes.settings import RunSettings

    settings = RunSettings(task="place table", budget_steps=6000, test_episodes=2, eval_episodes=1,
                           max_outer_iters=1, max_inner_iters=1, out_dir=tmp_path / "runs", run_id="starts")
    model = _LearnsTheTable()
    final = build_graph().invoke(start_state(settings), config=run_config(settings),
                                 context=run_context(settings, model))
    saved = final["start_states"]
    assert saved and all("collect_wood" in e["achievements"] for e in saved)
    assert model.rl_facts and "episodes_start" in model.rl_facts[0]
    assert not any(n.startswith("reach_") for n in model.rl_facts[0]["coded_actions"])
    config = next(c["config"] for c in final["rl_configs"] if c["subtask"] == "place_table")
    starts = read_states(config["start_states"])
    assert {s.steps for s in starts} == {e["steps"] for e in saved}
    training = next(r for r in final["results"] if r["kind"] == "rl")
    assert training["rate_source"] == "chain_training" and training["success_given_start"] is not None
    assert final["best"]["place_table"]["kind"] == "rl"  # the test of explore, a building block, is not kept
    assert any(r.get("head_test") for r in final["results"])


class _MovesTheTable(ExpertModel):
    """The rule-based expert, except that its critic moves place_table to RL after its first code test."""

    def __init__(self) -> None:
        super().__init__()
        self.moved = False

    def _critique(self, c):
        from nodes.attempt.results import judged_rate
        from nodes.schemas import Critique

        if c["subtask"] == "place_table" and c["sub_action"]["kind"] == "code" and not self.moved:
            self.moved = True
            return Critique(sub_action=c["sub_action"]["name"], verdict="move", move_to="rl",
                            success_rate=judged_rate(c["result"]), feedback="learn it")
        return super()._critique(c)

    def _configure_rl(self, c):
        return {**super()._configure_rl(c), "total_steps": 1000}


def test_a_policy_moved_from_code_starts_as_that_code_and_stops_when_it_cannot_reach_it(tmp_path):
    """After a move, the head holds play_place_table (the code as held-out play runs it) and the untrained
    policy gives it the coded prior alone; the code's rate given the start is the rate to reach."""
    from graph.builder import build_graph, run_config, run_context, start_state
    from nodes.settings import RunSettings

    settings = RunSettings(task="place table", budget_steps=8000, test_episodes=2, eval_episodes=1,
                           max_outer_iters=2, max_inner_iters=1, out_dir=tmp_path / "runs", run_id="moved")
    final = build_graph().invoke(start_state(settings), config=run_config(settings),
                                 context=run_context(settings, _MovesTheTable()))
    entry = next(c for c in final["rl_configs"] if c["subtask"] == "place_table")
    names, ppo = entry["coded_action_names"], entry["config"]["ppo"]
    assert "play_place_table" in names and not any(n.startswith("reach_") for n in names)
    head = [n for n in names if not n.startswith("play_")] + ["play_place_table"]  # the graph's actions come last
    assert ppo["prior_action"] == head.index("play_place_table") and ppo["coded_prior"] == 0.9
    code = next(r for r in final["results"] if r["subtask"] == "place_table" and r["kind"] == "code")
    assert ppo["stop_below"] == round(code_rate_floor(code, given_start=True), 4) > 0
    assert "def play_place_table(game)" in entry["config"]["coded_actions"][-1]
