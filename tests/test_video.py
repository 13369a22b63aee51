"""Videos of play: held-out episodes recorded as primitive actions, replayed on a fresh env, filmed every k-th
step with the skill and coded action as caption, each GIF under 2 MB (graph/video.py, envs/replay.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from PIL import Image

from envs.replay import EpisodeRecord, RecordingEnv, replay
from envs.seeds import eval_seeds
from graph.video import MAX_BYTES, caption, caption_text, frame_steps, write_video


def _random_episode(seed: int, steps: int):
    """A RecordingEnv episode of random moves and 'do' among 'noop's, with the symbolic observation and status
    after every step (on a training seed: these are tests of the env, not evaluations)."""
    env = RecordingEnv(task="collect_diamond", obs_kind="symbolic", reward="task")
    obs, _ = env.reset(seed=seed)
    seen = [(obs, sorted(env.game.achievements), dict(env.game.inventory), env.game.health)]
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(int(rng.integers(1, 6)) if rng.random() < 0.3 else 0)
        seen.append((obs, sorted(env.game.achievements), dict(env.game.inventory), env.game.health))
        if terminated or truncated:
            break
    return env.record(), seen


def test_replaying_the_recorded_actions_gives_the_same_episode_even_when_filmed():
    record, seen = _random_episode(3, 400)  # the player dies at night, among zombies: creatures matter
    assert record.steps == len(seen) - 1 and seen[-1][3] <= 0
    again, daylight = [], []

    def look(t, env):
        env.frame(32)  # drawn at every state, nights included: it must not change what happens next
        again.append((env.observation(), sorted(env.game.achievements), dict(env.game.inventory), env.game.health))
        daylight.append(env.backend._sim._world.daylight)

    end = replay(EpisodeRecord.from_json(json.loads(json.dumps(record.to_json()))), look)
    assert end.matches and end.ended and len(again) == len(seen) and min(daylight) < 0.5
    for t, (first, second) in enumerate(zip(seen, again)):
        assert np.array_equal(first[0], second[0]), f"observation differs at step {t}"
        assert first[1:] == second[1:], f"status differs at step {t}"


def test_pictures_for_humans_leave_the_world_random_state_alone_where_crafters_drawing_does_not():
    env = RecordingEnv(task="collect_diamond")
    env.reset(seed=0)
    world = env.backend._sim._world  # type: ignore[attr-defined]
    while world.daylight >= 0.5:  # wait for the night, standing still
        env.step(env.primitive_actions.index("noop"))
    before = world.random.get_state()[1].copy()
    frame = env.frame(90)
    assert frame.shape == (90, 90, 3) and frame.dtype == np.uint8
    assert np.array_equal(world.random.get_state()[1], before)
    env.render()  # the debugging GIFs' frames (tools/run_code.py)
    assert np.array_equal(world.random.get_state()[1], before)
    env.backend._sim.render()  # type: ignore[attr-defined]  # Crafter's own drawing: night noise from that generator
    assert not np.array_equal(world.random.get_state()[1], before)


# ---- the held-out evaluation records what it played ---------------------------------------------
@pytest.fixture(scope="module")
def evaluation():
    """The expert's wood -> table chain on 3 held-out seeds, through the executor (agent code in the sandbox)."""
    from graph.evaluation.coded import coded_actions_for
    from graph.evaluation.heldout import code_skill
    from nodes.executor import evaluate_chain

    sources = coded_actions_for("place_table")
    skills = {name: code_skill(sources[name], name) for name in ("collect_wood", "place_table")}
    return evaluate_chain("place_table", [{"name": "collect_wood"}, {"name": "place_table"}], skills, 3, seed=0)


def test_the_evaluation_keeps_the_first_and_the_furthest_episode(evaluation):
    first = EpisodeRecord.from_json(evaluation["replays"]["first"])
    furthest = EpisodeRecord.from_json(evaluation["replays"]["furthest"])
    assert first.seed == eval_seeds(3)[0] and furthest.seed in eval_seeds(3)
    assert first.task == "place_table" and first.chain_length == furthest.chain_length == 2
    # an episode passes the chain's steps in order: the most any passed is the number of steps any reached
    assert furthest.reached == sum(1 for n in evaluation["reached"].values() if n > 0) >= first.reached >= 1
    if first.reached == furthest.reached and first.success == furthest.success:
        assert furthest.seed == first.seed  # a tie goes to the earliest seed
    assert 0 < first.steps and first.steps + (furthest.steps if furthest.seed != first.seed else 0) <= \
        evaluation["steps"]
    for record in (first, furthest):
        end = replay(record)
        assert end.matches and end.steps == record.steps
        assert ("place_table" in end.achievements) == record.success


def test_further_means_more_chain_steps_then_success_then_achievements():
    from nodes.executor import _further

    def rec(reached, success, achievements):
        return EpisodeRecord(0, "place_table", 10, "task", ["noop"], [], reached=reached, success=success,
                             achievements=achievements)

    assert _further(rec(2, False, []), rec(1, False, ["a", "b", "c"]))
    assert _further(rec(2, True, []), rec(2, False, ["a"]))
    assert _further(rec(1, False, ["a", "b"]), rec(1, False, ["a"]))
    assert not _further(rec(1, False, ["a"]), rec(1, False, ["b"]))  # equal: the earlier episode stays


def test_each_step_is_labelled_with_the_skill_and_coded_action_that_played_it(evaluation):
    record = EpisodeRecord.from_json(evaluation["replays"]["furthest"])
    unlocked_at: dict[str, int] = {}

    def watch(t, env):
        for a in env.game.achievements:
            unlocked_at.setdefault(a, t - 1)  # state t follows step t - 1

    replay(record, watch)
    wood = unlocked_at["collect_wood"]
    assert record.label_at(wood) == ("[1/2] collect_wood (code)", "play_collect_wood")
    assert record.label_at(0) == record.label_at(wood)
    if "place_table" in unlocked_at:
        assert record.label_at(unlocked_at["place_table"]) == ("[2/2] place_table (code)", "play_place_table")
        assert record.label_at(wood + 1)[0] == "[2/2] place_table (code)"


def test_a_learned_skill_names_its_coded_calls_and_its_primitive_steps(tmp_path):
    """An untrained policy with two coded actions in its head (no training: the labels are what is tested)."""
    from envs.crafter_backend import SYMBOLIC_SIZE
    from nodes.executor import evaluate_chain
    from prompts.fewshot import example_sources
    from rl.config import RLConfig
    from rl.env_factory import EnvSource
    from rl.policy_io import save_policy
    from rl.ppo import Agent, PPOSettings

    coded = ["collect_wood", "explore"]
    cfg = RLConfig(task="collect_wood", coded_actions=[example_sources()[n] for n in coded])
    path = save_policy(tmp_path / "p.pt", Agent((SYMBOLIC_SIZE,), 17 + len(coded)), EnvSource.from_any(cfg),
                       PPOSettings(), 17, coded)
    result = evaluate_chain("collect_wood", [{"name": "collect_wood"}], {"collect_wood": {
        "kind": "rl", "policy_path": str(path)}}, 1, seed=0)
    record = EpisodeRecord.from_json(result["replays"]["first"])
    labels = {record.label_at(t) for t in range(record.steps)}
    assert {skill for skill, _ in labels} == {"[1/1] collect_wood (PPO)"}
    actions = {action for _, action in labels}
    calls = {"collect_wood (coded action)", "explore (coded action)"}
    assert "policy (primitive action)" in actions and actions & calls
    assert actions <= {"policy (primitive action)"} | calls
    assert replay(record).matches


# ---- the GIF -----------------------------------------------------------------------------------------
def _gif_frames(path):
    with Image.open(path) as gif:
        return gif.n_frames, json.loads(gif.info["comment"])


def test_a_video_has_one_frame_per_stride_with_its_caption_and_stays_under_2_mb(evaluation, tmp_path):
    record = EpisodeRecord.from_json(evaluation["replays"]["furthest"])
    info = write_video(record, tmp_path / "v.gif", max_frames=30)
    k, n = info["stride"], record.steps
    assert k == max(1, math.ceil(n / 29))  # no need to grow: a short episode is small
    assert info["frames"] == math.ceil(n / k) + 1 == len(info["captions"])
    assert info["frame_steps"] == frame_steps(n, k) == list(range(0, n, k)) + [n]
    assert info["episode_steps"] == n and info["seed"] == record.seed
    for t, text in zip(info["frame_steps"][:-1], info["captions"][:-1]):
        assert text == "{}: {}".format(*record.label_at(t))  # the coded action that plays step t
    assert info["captions"][-1] == caption_text(caption(record, n, info["outcome"]))
    assert (tmp_path / "v.gif").stat().st_size == info["bytes"] < MAX_BYTES
    frames, comment = _gif_frames(tmp_path / "v.gif")
    assert frames == info["frames"]
    assert comment == {"stride": k, "frames": info["frames"], "episode_steps": n, "seed": record.seed}
    assert json.loads((tmp_path / "v.json").read_text()) == info


def test_the_stride_doubles_until_the_file_fits(tmp_path):
    record, _ = _random_episode(1, 300)
    loose = write_video(record, tmp_path / "loose.gif", max_frames=400, max_bytes=10**9, size=96)
    limit = loose["bytes"] // 3
    tight = write_video(record, tmp_path / "tight.gif", max_frames=400, max_bytes=limit, size=96)
    assert loose["stride"] == 1 and tight["stride"] in (4, 8)
    assert tight["bytes"] <= limit and tight["frames"] == math.ceil(record.steps / tight["stride"]) + 1
    assert _gif_frames(tmp_path / "tight.gif")[0] == tight["frames"]


# ---- where videos are made -----------------------------------------------------------------------
def test_table1_makes_one_video_per_method_behind_the_cell_cache(evaluation, tmp_path, monkeypatch):
    from graph.evaluation import methods
    from graph.evaluation.cache import CellCache
    from graph.evaluation.tables import EvalConfig, Runner, table_diamond

    cell = {"successes": 0, "episodes": 3, "success_rate": 0.0, "ci_low": 0.0, "ci_high": 0.56, "env_steps": 10,
            "eval_steps": evaluation["steps"], "replays": evaluation["replays"]}
    for name in ("run_rlgpt", "run_pure_rl", "run_pure_code"):
        monkeypatch.setattr(methods, name, lambda *a, **k: dict(cell))
    logged: list[str] = []
    runner = Runner(EvalConfig(out=tmp_path, episodes=3, budget=1000), CellCache(tmp_path / "cells"), logged.append)
    table = table_diamond(runner)
    record = EpisodeRecord.from_json(evaluation["replays"]["furthest"])
    for method in ("rlgpt", "pure_rl", "pure_code"):
        info = json.loads((tmp_path / "videos" / f"table1_{method}.json").read_text())
        assert info["seed"] == record.seed and info["episode"] == "furthest" and info["bytes"] < MAX_BYTES
        assert f"(videos/table1_{method}.gif)" in table.notes[-1]
    logged.clear()
    table_diamond(Runner(EvalConfig(out=tmp_path, episodes=3, budget=1000), CellCache(tmp_path / "cells"),
                         logged.append))
    assert sum("cached" in line and ".gif" in line for line in logged) == 3  # cells and videos both reused
    logged.clear()
    table = table_diamond(Runner(EvalConfig(out=tmp_path / "off", episodes=3, budget=1000, videos=False),
                                 CellCache(tmp_path / "off" / "cells"), logged.append))
    assert not (tmp_path / "off" / "videos").exists() and "Videos" not in " ".join(table.notes)


def test_a_video_that_cannot_be_made_costs_one_warning_line(evaluation, tmp_path, monkeypatch, capsys):
    from graph import run, video
    from nodes.settings import RunSettings

    tampered = dict(evaluation["replays"]["first"], achievements=["collect_diamond"])  # not what the replay gives
    warnings: list[str] = []
    written = video.write_run_videos({"replays": {"first": tampered, "furthest": evaluation["replays"]["furthest"]}},
                                     tmp_path, warn=warnings.append)
    assert written == [tmp_path / "videos" / "furthest.gif"] and not (tmp_path / "videos" / "final_chain.gif").exists()
    assert len(warnings) == 1 and "final_chain.gif: VideoError: the replay of seed 1000000" in warnings[0]

    def broken(*args, **kwargs):
        raise OSError("disk full\nsecond line")

    import graph.pictures

    monkeypatch.setattr(video, "write_run_videos", broken)
    monkeypatch.setattr(graph.pictures, "write_run_pictures", lambda *args, **kwargs: [])  # videos only
    run._write_pictures_and_videos(object(), {}, RunSettings(out_dir=tmp_path, run_id="r"), {"evaluation": evaluation})
    err = capsys.readouterr().err
    assert err == "warning: no videos of play: OSError: disk full\n"


@pytest.mark.slow
def test_a_run_writes_two_videos_before_its_report(tmp_path, capsys):
    from graph import run

    code = run.main(["harvest log", "--out", str(tmp_path), "--run-id", "film", "--no-live", "--eval-episodes", "2",
                     "--test-episodes", "2", "--budget-steps", "3000"])
    assert code == 0
    videos = tmp_path / "film" / "videos"
    for name, episode in (("final_chain", "first"), ("furthest", "furthest")):
        info = json.loads((videos / f"{name}.json").read_text())
        assert info["episode"] == episode and info["seed"] in eval_seeds(2)
        assert (videos / f"{name}.gif").stat().st_size == info["bytes"] < MAX_BYTES
        assert info["frames"] == math.ceil(info["episode_steps"] / info["stride"]) + 1
        assert all(text.startswith("[1/1] collect_wood (") for text in info["captions"])
    assert json.loads((videos / "final_chain.json").read_text())["seed"] == eval_seeds(1)[0]
    assert "video: " in capsys.readouterr().out
    report = json.loads((tmp_path / "film" / "report.json").read_text())
    assert report["evaluation"]["ran"] and "replays" not in report["evaluation"]
