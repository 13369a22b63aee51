"""The Crafter environment: gymnasium conformance, seeding, tasks, rewards and truncation."""

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from envs.crafter_env import ACTION_INDEX, CrafterEnv
from envs.seeds import EVAL_SEED_BASE, check_training_seed, eval_seeds, train_seeds
from envs.tasks import ACHIEVEMENTS, TASKS, UnknownTaskError, get_task


@pytest.mark.parametrize("obs_kind", ["symbolic", "pixels"])
def test_check_env_passes(obs_kind):
    check_env(CrafterEnv("collect_wood", obs_kind=obs_kind), skip_render_check=True)


def _rollout(env, seed, n=150):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(123)
    frames, infos = [obs], []
    for _ in range(n):
        obs, reward, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        frames.append(obs)
        infos.append((reward, terminated, truncated, info["inventory"], info["achievements"]))
        if terminated or truncated:
            break
    return frames, infos


@pytest.mark.parametrize("obs_kind", ["symbolic", "pixels"])
def test_same_seed_replays_the_same_episode(obs_kind):
    a, b = CrafterEnv("collect_diamond", obs_kind=obs_kind), CrafterEnv("collect_diamond", obs_kind=obs_kind)
    frames_a, infos_a = _rollout(a, seed=7)
    frames_b, infos_b = _rollout(b, seed=7)
    assert len(frames_a) == len(frames_b)
    assert all(np.array_equal(x, y) for x, y in zip(frames_a, frames_b))
    assert infos_a == infos_b
    # The same env object replays too, after other episodes in between.
    _rollout(a, seed=8)
    frames_c, _ = _rollout(a, seed=7)
    assert all(np.array_equal(x, y) for x, y in zip(frames_a, frames_c))


def test_different_seeds_give_different_worlds():
    env = CrafterEnv("collect_wood")
    views = {tuple(np.ravel(env.reset(seed=s)[0])) for s in range(5)}
    assert len(views) > 1


def test_unseeded_resets_move_to_new_worlds():
    env = CrafterEnv("collect_wood")
    first = env.reset(seed=3)[0]
    second = env.reset()[0]
    assert not np.array_equal(first, second)


def test_symbolic_observation_is_in_its_space_and_finite():
    env = CrafterEnv("collect_wood")
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32 and obs.shape == env.observation_space.shape
    assert env.observation_space.contains(obs)


def test_every_achievement_is_a_task_and_aliases_resolve():
    assert set(ACHIEVEMENTS) <= set(TASKS)
    assert get_task("obtain diamond").name == "collect_diamond"
    assert get_task("harvest log").name == "collect_wood"
    assert get_task("Craft a wooden pickaxe").name == "make_wood_pickaxe"
    assert get_task("collect_stone").prerequisites == ("collect_wood", "place_table", "make_wood_pickaxe")
    assert get_task("collect_diamond").chain[-2:] == ("make_iron_pickaxe", "collect_diamond")


def test_unknown_task_lists_close_matches():
    with pytest.raises(UnknownTaskError) as err:
        get_task("obtain diamnd")
    assert "collect_diamond" in str(err.value) and "Did you mean" in str(err.value)
    with pytest.raises(UnknownTaskError):
        get_task("")
    with pytest.raises(UnknownTaskError):
        CrafterEnv("fly to the moon")


def test_bad_arguments_are_refused_clearly():
    with pytest.raises(ValueError, match="obs_kind"):
        CrafterEnv("collect_wood", obs_kind="voxels")
    with pytest.raises(ValueError, match="reward"):
        CrafterEnv("collect_wood", reward="money")
    env = CrafterEnv("collect_wood")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action"):
        env.step(99)


def test_task_reward_terminates_on_success():
    env = CrafterEnv("collect_wood")
    env.reset(seed=3)  # a tree stands four tiles to the left, two down (see the game API test)
    game = env.game
    target = game.nearest("tree")
    for move in game.path_to(target):
        env.step(ACTION_INDEX[move])
    for move in game.face(target):
        env.step(ACTION_INDEX[move])
    assert game.is_facing("tree")
    obs, reward, terminated, truncated, info = env.step(ACTION_INDEX["do"])
    assert reward == 1.0 and terminated and not truncated and info["success"]
    assert "collect_wood" in info["achievements"] and info["inventory"]["wood"] == 1
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


def test_a_code_test_s_env_plays_on_past_the_success_and_rewards_it_once():
    env = CrafterEnv("collect_wood", end_on_success=False)  # run_code's: the code plays on to its return
    env.reset(seed=3)
    game = env.game
    target = game.nearest("tree")
    for move in [*game.path_to(target), *game.face(target)]:
        env.step(ACTION_INDEX[move])
    _, reward, terminated, _, info = env.step(ACTION_INDEX["do"])
    assert reward == 1.0 and not terminated and info["success"] and info["inventory"]["wood"] == 1
    later = [env.step(ACTION_INDEX["do"]) for _ in range(3)]  # a second wood: no second reward, still going
    assert [o[1] for o in later] == [0.0] * 3 and not any(o[2] for o in later) and all(o[4]["success"] for o in later)


def test_truncation_at_max_steps_and_crafter_reward_kind():
    env = CrafterEnv("collect_diamond", max_steps=5, reward="crafter")
    env.reset(seed=0)
    outcomes = [env.step(ACTION_INDEX["noop"]) for _ in range(5)]
    assert [o[3] for o in outcomes] == [False] * 4 + [True]
    assert all(not o[2] for o in outcomes)


def test_a_death_is_named_in_the_info_as_the_code_test_report_names_it():
    from tools.run_code import run_code

    env = CrafterEnv("collect_diamond", max_steps=2000)
    env.reset(seed=0)
    for _ in range(2000):  # standing still on the grass: the first night's zombies kill the player
        _, _, terminated, truncated, info = env.step(ACTION_INDEX["noop"])
        if terminated or truncated:
            break
        assert "death_cause" not in info  # only on the step the player dies
    assert terminated and info["inventory"]["health"] <= 0
    report = run_code("def main(game):\n    while True:\n        yield 'noop'\n", task="collect_diamond", seed=0,
                      max_steps=2000)
    assert report.ended == "died" and report.steps == env.episode_steps
    assert info["death_cause"] == report.death_cause == "zombie"
    # the first night's zombies: the report says it was dark, from the game's own daylight at that step
    assert report.daylight_at_end == round(env.game.daylight, 2) < 0.4 and ", at night (zombie)" in report.to_text()


def test_seed_ranges_keep_evaluation_apart():
    assert min(eval_seeds(3)) == EVAL_SEED_BASE
    assert max(train_seeds(10)) < EVAL_SEED_BASE
    with pytest.raises(ValueError, match="held-out"):
        check_training_seed(EVAL_SEED_BASE + 5)


def test_every_task_is_registered_with_gymnasium_and_passes_its_checker():
    import warnings

    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    from envs.registration import env_id
    from envs.tasks import TASKS

    assert all(env_id(name) in gym.registry for name in TASKS)
    env = gym.make("rlgpt/Crafter-collect_diamond-v0")
    obs, info = env.reset(seed=5)
    assert env.unwrapped.task.name == "collect_diamond" and obs.shape == env.observation_space.shape
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(gym.make("rlgpt/Crafter-collect_wood-v0").unwrapped, skip_render_check=True)
    assert [str(w.message) for w in caught] == []
    assert gym.make("rlgpt/Crafter-place_table-v0", obs_kind="pixels").reset(seed=0)[0].shape == (64, 64, 3)
