"""configure_rl / train_ppo tools, reward shaping, the policy loaded back as a skill, evaluation."""
import json
from pathlib import Path

import pytest

from envs.seeds import (
    EVAL_SEED_BASE,
    VALIDATION_SEED_BASE,
    check_training_seed,
    check_validation_seed,
    eval_seeds,
    is_eval_seed,
    is_validation_seed,
    train_seeds,
    validation_seeds,
)
from rl.run_log import episode_outcome, outcome_counts, outcomes_text
from rl.stats import wilson_interval
from tools.rl_tools import configure_rl, configure_rl_tool, outcome_summary, train_ppo, train_ppo_tool

EXAMPLES = Path(__file__).resolve().parents[1] / "prompts" / "examples"


def test_configure_normalises_an_alias_and_fills_defaults():
    report = configure_rl({"task": "harvest log", "coded_actions": [(EXAMPLES / "explore.py").read_text()]})
    assert report.ok and report.config["task"] == "collect_wood"
    assert report.coded_action_names == ["explore"] and report.config["ppo"]["gamma"] == 0.99


def test_configure_names_each_bad_field_and_what_is_allowed():
    report = configure_rl({"task": "collect_wood", "obs_kind": "rgb", "colour": 1,
                           "ppo": {"learning_rate": 5.0, "vector_mode": "threads", "epochs": 3}})
    assert not report.ok
    err = report.error
    assert "obs_kind: Input should be 'symbolic' or 'pixels'" in err
    assert "ppo.learning_rate" in err and "allowed: 1e-06 .. 0.01" in err
    assert "ppo.vector_mode" in err and "'auto', 'sync', 'batched', 'async', 'actors' or 'ray'" in err
    assert "ppo.epochs: unknown field" in err and "update_epochs" in err
    assert "colour: unknown field" in err and "coded_actions" in err


def test_configure_rejects_unknown_tasks_and_unsafe_or_broken_code():
    assert "Did you mean" in configure_rl({"task": "collect wod"}).error
    unsafe = configure_rl({"task": "collect_wood", "coded_actions": ["import os\ndef a(game):\n    yield 'do'\n"]})
    assert not unsafe.ok and "coded_actions" in unsafe.error and "os" in unsafe.error
    shaping = configure_rl({"task": "collect_wood", "shaping": "def shaping(prev, curr):\n    return open('x')\n"})
    assert not shaping.ok and "shaping" in shaping.error
    nofn = configure_rl({"task": "collect_wood", "shaping": "def bonus(prev, curr):\n    return 1.0\n"})
    assert not nofn.ok and "def shaping(prev, curr)" in nofn.error
    crafter_only = configure_rl({"task": "collect_wood", "terminate_on_success": False})
    assert not crafter_only.ok and "reward='crafter'" in crafter_only.error
    named = configure_rl({"task": "collect_wood", "coded_actions": ["collect_wood"]})
    assert not named.ok and "coded_actions[0] is the bare name 'collect_wood', not the Python source" in named.error
    broken = configure_rl({"task": "collect_wood", "coded_actions": [
        (EXAMPLES / "explore.py").read_text(), "x = 1 / 0\ndef chop(game):\n    yield 'do'\n"]})
    assert not broken.ok and broken.error.startswith("coded_actions (explore, chop): ")
    assert "line 1 in <module> (`x = 1 / 0`): ZeroDivisionError" in broken.error


def test_seed_ranges_are_disjoint_and_checked():
    assert eval_seeds(2) == [EVAL_SEED_BASE, EVAL_SEED_BASE + 1]
    assert validation_seeds(2, offset=5) == [VALIDATION_SEED_BASE + 5, VALIDATION_SEED_BASE + 6]
    ranges = [train_seeds(3, offset=999_997), eval_seeds(3, offset=999_997), validation_seeds(3, offset=999_997)]
    assert max(ranges[0]) < min(ranges[1]) and max(ranges[1]) < min(ranges[2])
    assert all(is_eval_seed(s) and not is_validation_seed(s) for s in ranges[1])
    assert all(is_validation_seed(s) and not is_eval_seed(s) for s in ranges[2])
    for make in (train_seeds, eval_seeds, validation_seeds):
        with pytest.raises(ValueError, match="must lie in"):
            make(3, offset=999_998)  # would cross into the next range
    with pytest.raises(ValueError, match="held-out evaluation seed"):
        check_training_seed(EVAL_SEED_BASE)
    with pytest.raises(ValueError, match="is a validation seed"):
        check_training_seed(VALIDATION_SEED_BASE)
    with pytest.raises(ValueError, match="above the training range"):
        check_training_seed(VALIDATION_SEED_BASE + 1_000_000)
    for seed in (0, 999_999, EVAL_SEED_BASE + 3, VALIDATION_SEED_BASE - 1, VALIDATION_SEED_BASE + 1_000_000):
        with pytest.raises(ValueError, match="is not a validation seed"):
            check_validation_seed(seed)
    assert check_training_seed(999_999) == 999_999
    assert check_validation_seed(VALIDATION_SEED_BASE) == VALIDATION_SEED_BASE


@pytest.mark.slow
def test_train_ppo_evaluates_on_validation_seeds_from_the_config_configure_rl_returned(tmp_path, monkeypatch):
    from envs.crafter_env import TaskEnv

    played: list[int] = []
    reset = TaskEnv.reset

    def recording_reset(self, *, seed=None, options=None):
        played.append(seed)
        return reset(self, seed=seed, options=options)

    monkeypatch.setattr(TaskEnv, "reset", recording_reset)
    configured = configure_rl_tool.invoke({"type": "tool_call", "id": "1", "name": "configure_rl", "args": {
        "rl_config": {"task": "collect_wood", "eval_episodes": 3, "max_episode_steps": 250,
                      "ppo": {"total_steps": 1000, "num_envs": 1, "num_steps": 64, "vector_mode": "sync",
                              "progress": "none", "device": "cpu"}}}})
    config = json.loads(configured.content)["config"]  # what the model reads back, passed on unchanged
    trained = train_ppo_tool.invoke({"type": "tool_call", "id": "2", "name": "train_ppo",
                                     "args": {"rl_config": config, "run_dir": str(tmp_path / "run")}})
    report = trained.artifact
    assert report.ok, report.error
    assert [s for s in played if s is not None and s >= EVAL_SEED_BASE] == validation_seeds(3)
    assert all(s is None or s < EVAL_SEED_BASE for s in played[:-3])  # the training worlds
    assert report.eval_seeds == (VALIDATION_SEED_BASE, VALIDATION_SEED_BASE + 2)
    assert "validation seeds 2000000..2000002" in report.rate_sources["final_success_rate"]
    assert "training" in report.rate_sources["final_train_success_rate"]
    assert json.loads(trained.content)["eval_seeds"] == [VALIDATION_SEED_BASE, VALIDATION_SEED_BASE + 2]


def test_tool_wrapper_returns_json_content_and_the_report_artifact():
    msg = configure_rl_tool.invoke({"type": "tool_call", "id": "1", "name": "configure_rl",
                                    "args": {"rl_config": {"task": "place table"}}})
    assert json.loads(msg.content)["config"]["task"] == "place_table"
    assert msg.artifact.ok
    bad = train_ppo_tool.invoke({"rl_config": {"task": "collect_wood", "ppo": {"total_steps": 5}}})
    assert '"ok":false' in bad and "ppo.total_steps" in bad


def test_episode_outcomes_are_counted_and_told_in_words():
    nan = float("nan")
    ends = [episode_outcome(1.0, True), episode_outcome(0.0, True, "zombie"), episode_outcome(0.0, True, "thirst"),
            episode_outcome(0.0, True, "zombie"), episode_outcome(0.0, False), episode_outcome(nan, True),
            episode_outcome(1.0, False), episode_outcome(nan, False, None)]
    # success first (Crafter's own reward plays on after it), a death by its cause, the step limit, anything else
    assert ends == ["succeeded", "died: zombie", "died: thirst", "died: zombie", "step limit", "ended", "succeeded",
                    "step limit"]
    counts = outcome_counts(ends)
    assert list(counts.items()) == [("died: zombie", 2), ("step limit", 2), ("succeeded", 2), ("died: thirst", 1),
                                    ("ended", 1)]  # the most first, ties by name
    assert outcomes_text(counts, 1000) == ("2 succeeded, 3 died (zombie 2, thirst 1), 2 hit the 1,000-step limit, "
                                           "1 ended otherwise")
    assert outcomes_text({"died: skeleton arrow": 1}) == "0 succeeded, 1 died (skeleton arrow 1)"
    assert outcome_summary(counts, outcome_counts(ends[-3:]), 1000) == (
        "last 3 episodes: 1 succeeded, 1 hit the 1,000-step limit, 1 ended otherwise; "
        "all 8: 2 succeeded, 3 died (zombie 2, thirst 1), 2 hit the 1,000-step limit, 1 ended otherwise")
    assert outcome_summary(counts, counts, 1000).startswith("all 8 episodes: 2 succeeded, 3 died")
    assert outcome_summary({}, {}) == "no training episode finished"


WAIT = '''
def wait(game):
    """Stand still for a while."""
    for _ in range(100):
        yield "noop"
'''


def _is_death_cause(cause: str) -> bool:
    """envs.describe.damage_cause's words: a hit, or the empty status bars named together."""
    bars = set(cause.replace(" and ", ", ").split(", "))
    hits = ("lava", "zombie", "skeleton arrow", "unseen attacker")
    return cause in hits or bars <= {"starvation", "thirst", "exhaustion"}


def test_train_ppo_reports_how_episodes_ended_and_what_killed_the_player(tmp_path, monkeypatch):
    """Standing still for most of the first night gets the player killed: in the actors' worker processes the env
    names each death's cause, and the report counts every finished episode once."""
    from nodes.attempt.results import summarise_training
    from prompts.templates import messages_for

    monkeypatch.setattr("rl.vector.usable_cpus", lambda: 2)  # two worker processes, whatever the machine
    config = {"task": "collect_diamond", "coded_actions": [WAIT], "eval_episodes": 0, "max_episode_steps": 300,
              "ppo": {"total_steps": 1500, "num_envs": 2, "num_steps": 16, "vector_mode": "actors", "num_workers": 2,
                      "coded_prior": 0.9, "window": 4, "progress": "none"}}
    trained = train_ppo_tool.invoke({"type": "tool_call", "id": "1", "name": "train_ppo",
                                     "args": {"rl_config": config, "run_dir": str(tmp_path / "run")}})
    report = trained.artifact
    assert report.ok, report.error
    assert report.episodes > 4 and sum(report.episode_outcomes.values()) == report.episodes
    assert sum(report.recent_episode_outcomes.values()) == 4
    deaths = {k.removeprefix("died: "): n for k, n in report.episode_outcomes.items() if k.startswith("died: ")}
    assert deaths and all(_is_death_cause(c) for c in deaths), report.episode_outcomes
    assert set(report.episode_outcomes) - {"died: " + c for c in deaths} <= {"succeeded", "step limit"}
    died = sum(deaths.values())
    assert f"all {report.episodes}: {report.episode_outcomes.get('succeeded', 0)} succeeded, {died} died (" in (
        report.outcome_summary)
    if "step limit" in report.episode_outcomes:
        assert f"{report.episode_outcomes['step limit']} hit the 300-step limit" in report.outcome_summary
    # what the model reads: the tool's JSON, and the critic's facts of the training
    assert json.loads(trained.content)["outcome_summary"] == report.outcome_summary
    result = summarise_training(report.model_dump(mode="json"))
    assert result["episode_outcomes"] == report.outcome_summary
    critic = messages_for("critic", {"subtask": "collect_diamond", "sub_action": {"name": "x", "kind": "rl"},
                                     "result": result})
    assert f"episode_outcomes {report.outcome_summary}" in critic[1].content


@pytest.mark.slow
def test_train_ppo_with_coded_actions_and_shaping_then_run_as_skill(tmp_path):
    from envs.crafter_env import CrafterEnv
    from rl.policy_skill import PolicySkill

    shaping = "def shaping(prev, curr):\n    return 0.1 * (curr['inventory']['wood'] - prev['inventory']['wood'])\n"
    config = {"task": "collect_wood", "shaping": shaping, "eval_episodes": 3, "max_episode_steps": 150,
              "coded_actions": [(EXAMPLES / n).read_text() for n in ("collect_wood.py", "explore.py")],
              "ppo": {"total_steps": 1000, "num_envs": 2, "num_steps": 32, "progress": "none"}}
    report = train_ppo(config, run_dir=str(tmp_path / "run"))
    assert report.ok, report.error
    assert 1000 <= report.steps_used < 1000 + 2 * 80
    assert set(report.coded_action_counts) == {"collect_wood", "explore"}
    assert sum(report.coded_action_counts.values()) > 0
    assert report.eval_episodes == 3 and 0 <= report.final_success_rate <= 1
    lo, hi = report.success_ci
    assert lo <= report.final_success_rate <= hi
    assert Path(report.learning_curve_png).exists() and Path(report.metrics_csv).exists()
    evaluation = json.loads((tmp_path / "run" / "evaluation.json").read_text())
    assert evaluation["seeds"][0] == VALIDATION_SEED_BASE and evaluation["seed_range"] == "validation"

    # the saved policy runs as a skill, also in an episode that is already under way
    skill = PolicySkill(report.policy_path, seed=1)
    env = CrafterEnv("make_wood_pickaxe")
    env.reset(seed=7)
    for _ in range(3):
        env.step(0)
    run = skill.run(env, max_steps=120)
    assert run.steps >= 1 and env.episode_steps == 3 + run.steps
    assert run.success == ("collect_wood" in env.game.achievements)
    assert set(run.coded_calls) == {"collect_wood", "explore"}


def test_skill_refuses_a_mismatched_observation_kind(tmp_path):
    from envs.crafter_env import CrafterEnv
    from rl.config import RLConfig
    from rl.env_factory import EnvSource
    from rl.policy_io import save_policy
    from rl.policy_skill import PolicySkill
    from rl.ppo import Agent, PPOSettings

    cfg = RLConfig(task="collect_wood")
    path = save_policy(tmp_path / "p.pt", Agent((10,), 17), EnvSource.from_any(cfg), PPOSettings(), 17, [])
    with pytest.raises(ValueError, match="obs_kind='symbolic'"):
        PolicySkill(path).run(CrafterEnv("collect_wood", obs_kind="pixels"))


def test_wilson_interval_always_holds_the_estimate():
    for n in (1, 7, 100, 200, 999, 10_000):
        for k in {0, 1, n // 3, n - 1, n}:
            lo, hi = wilson_interval(k, n)
            assert 0.0 <= lo <= k / n <= hi <= 1.0, (k, n, lo, hi)


def test_wilson_interval_matches_known_values():
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-3)
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-3) and hi == pytest.approx(0.7634, abs=1e-3)
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


def test_reward_shaping_adds_the_bonus_each_step_and_reports_a_broken_function():
    import gymnasium as gym
    import numpy as np

    from rl.env_factory import RewardShaping
    from sandbox import AgentCode

    def compile_shaping(source):
        return AgentCode([], shaping=source).shape

    class WoodEnv(gym.Env):
        action_space = gym.spaces.Discrete(2)
        observation_space = gym.spaces.Box(0, 1, (1,), np.float32)

        def reset(self, *, seed=None, options=None):
            self.wood = 0
            return np.zeros(1, np.float32), {"inventory": {"wood": 0}, "achievements": []}

        def step(self, action):
            self.wood += int(action)
            return np.zeros(1, np.float32), 0.0, False, False, {"inventory": {"wood": self.wood}, "achievements": []}

    fn = compile_shaping("def shaping(prev, curr):\n"
                         "    return 0.5 * (curr['inventory']['wood'] - prev['inventory']['wood'])\n")
    env = RewardShaping(WoodEnv(), fn)
    env.reset()
    assert env.step(1)[1] == 0.5 and env.step(0)[1] == 0.0 and env.step(1)[1] == 0.5
    broken = RewardShaping(WoodEnv(), compile_shaping("def shaping(prev, curr):\n    return curr['missing']\n"))
    broken.reset()
    with pytest.raises(RuntimeError, match="shaping function raised KeyError"):
        broken.step(1)


def test_a_prior_action_outside_the_head_is_a_clear_config_error():
    report = configure_rl({"task": "collect_wood", "ppo": {"prior_action": 0, "coded_prior": 0.9}})
    assert not report.ok and "ppo.prior_action: 0 is not one of the 0 coded actions" in (report.error or "")
