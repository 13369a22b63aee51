"""CodedActionsWrapper: option semantics, discounting, masking, failures, step accounting."""
from pathlib import Path

import numpy as np
import pytest
from ppo_toys import RewardEveryStepEnv, bad_name, forever, nothing, raise_after_two, three_steps

from envs.coded import CodedAction, as_coded_action
from rl.options import CodedActionsWrapper

GAMMA = 0.9


def wrap(*actions, length=10):
    env = RewardEveryStepEnv(length)
    wrapper = CodedActionsWrapper(env, list(actions), gamma=GAMMA)
    wrapper.reset(seed=0)
    return env, wrapper


def test_action_space_appends_coded_actions_after_primitives():
    _, w = wrap(as_coded_action(three_steps), as_coded_action(forever))
    assert w.action_space.n == 3 + 2
    assert w.action_names == ["noop", "step", "bad", "three_steps", "forever"]


def test_primitive_action_is_one_step():
    env, w = wrap(as_coded_action(three_steps))
    _, reward, _, _, info = w.step(1)
    assert info["primitive_steps"] == 1 and reward == 1.0 and env.actions_taken == [1]
    assert info["coded_call"] == "" and info["action_mask"].tolist() == [True, True, True, True]


def test_coded_action_returns_discounted_sum_and_step_count():
    env, w = wrap(as_coded_action(three_steps))
    _, reward, term, trunc, info = w.step(3)
    assert env.actions_taken == [1, 1, 1]
    assert info["primitive_steps"] == 3
    assert reward == pytest.approx(1 + GAMMA + GAMMA ** 2)
    assert info["option_reward"] == pytest.approx(3.0)
    assert info["coded_call"] == "three_steps" and info["coded_error"] == ""
    assert not term and not trunc


def test_coded_action_stops_at_its_step_limit():
    env, w = wrap(CodedAction("forever", forever, max_steps=4), length=100)
    _, _, _, _, info = w.step(3)
    assert info["primitive_steps"] == 4 and len(env.actions_taken) == 4


def test_coded_action_stops_when_episode_ends():
    env, w = wrap(CodedAction("forever", forever, max_steps=50), length=6)
    w.step(1)
    _, _, term, _, info = w.step(3)
    assert term and info["primitive_steps"] == 5 and len(env.actions_taken) == 6


def test_raising_coded_action_is_stopped_counted_and_episode_goes_on():
    env, w = wrap(as_coded_action(raise_after_two))
    _, reward, term, trunc, info = w.step(3)
    assert info["primitive_steps"] == 2 and reward == pytest.approx(1 + GAMMA)
    assert "KeyError" in info["coded_error"] and "no tree here" in info["coded_error"]
    assert not term and not trunc
    assert w.failure_counts == {"raise_after_two": 1} and w.call_counts == {"raise_after_two": 1}
    _, _, _, _, info = w.step(1)  # the episode is still running
    assert info["primitive_steps"] == 1


def test_call_that_moves_nothing_still_costs_one_noop():
    env, w = wrap(as_coded_action(nothing), as_coded_action(bad_name))
    _, _, _, _, info = w.step(3)
    assert env.actions_taken == [0] and info["primitive_steps"] == 1 and info["coded_error"] == ""
    _, _, _, _, info = w.step(4)
    assert env.actions_taken == [0, 0] and info["primitive_steps"] == 1
    assert "fly" in info["coded_error"] and w.failure_counts["bad_name"] == 1


def test_precondition_masks_the_action_and_a_forced_call_fails_cheaply():
    gated = CodedAction("three_steps", three_steps, precondition=lambda game: game.allow)
    broken = CodedAction("broken", three_steps, precondition=lambda game: 1 / 0)
    env, w = wrap(gated, broken)
    assert w.action_mask().tolist() == [True, True, True, True, False]  # raising precondition masks
    env.game.allow = False
    _, _, _, _, info = w.step(1)
    assert info["action_mask"].tolist() == [True, True, True, False, False]
    _, _, _, _, info = w.step(3)  # forced despite the mask: a failed call costing one noop
    assert info["primitive_steps"] == 1 and env.actions_taken[-1] == 0
    assert "precondition" in info["coded_error"] and w.failure_counts["three_steps"] == 1


def test_reset_info_carries_mask_and_zero_steps():
    env = RewardEveryStepEnv()
    w = CodedActionsWrapper(env, [CodedAction("g", three_steps, precondition=lambda g: False)])
    _, info = w.reset()
    assert info["primitive_steps"] == 0 and info["action_mask"].tolist() == [True, True, True, False]


def test_out_of_range_action_is_a_clear_error():
    _, w = wrap(as_coded_action(three_steps))
    with pytest.raises(ValueError, match="outside Discrete"):
        w.step(7)


def test_example_coded_actions_run_in_crafter():
    from envs.crafter_env import CrafterEnv
    from rl.coded_sources import agent_code

    root = Path(__file__).resolve().parents[1] / "prompts" / "examples"
    actions = agent_code([(root / "explore.py").read_text()])
    env = CrafterEnv("collect_wood")
    w = CodedActionsWrapper(env, actions, gamma=0.99)
    w.reset(seed=3)
    _, _, _, _, info = w.step(env.action_space.n)  # explore
    assert info["coded_call"] == "explore" and info["coded_error"] == ""
    assert 1 <= info["primitive_steps"] <= 20
    assert info["episode_steps"] == info["primitive_steps"]
    assert isinstance(info["action_mask"], np.ndarray) and info["action_mask"].shape == (18,)


WAIT = '''@coded_action(max_steps=300)
def wait(game):
    """Stand still for 300 steps: a long coded call."""
    for _ in range(300):
        yield "noop"
'''


@pytest.mark.parametrize("mode", ["sync", "actors"])
def test_a_long_coded_call_cannot_overrun_the_training_budget(tmp_path, mode):
    """Four envs each starting a 300-step call in the budget's last step would overrun it by up to 1,200
    steps; the shared allowance cuts the calls so the budget holds to within num_envs - 1 steps."""
    from rl.config import RLConfig
    from rl.env_factory import EnvSource
    from rl.ppo import PPOSettings
    from rl.training import train

    budget = 2_000
    cfg = RLConfig(task="collect_wood", max_episode_steps=400, coded_actions=[WAIT])
    settings = PPOSettings(total_steps=budget, num_envs=4, num_steps=8, num_minibatches=2, update_epochs=1,
                           run_dir=str(tmp_path / "run"), progress="none", vector_mode=mode, seed=5)
    result = train(settings, EnvSource.from_any(cfg))
    assert result.coded_action_counts["wait"] > 0
    assert budget <= result.steps_used <= budget + 3


def _alternating(game):
    for i in range(7):
        yield "step" if i % 2 == 0 else "noop"


def test_with_decision_steps_a_call_goes_on_where_it_stopped_until_another_choice_ends_it():
    env = RewardEveryStepEnv(100)
    w = CodedActionsWrapper(env, [CodedAction("alternating", _alternating, max_steps=50)], gamma=GAMMA,
                            decision_steps=3)
    w.reset(seed=0)
    _, _, _, _, info = w.step(3)
    assert info["primitive_steps"] == 3 and env.actions_taken == [1, 0, 1]
    _, _, _, _, info = w.step(3)  # the same choice: the call goes on from its fourth action
    assert info["primitive_steps"] == 3 and env.actions_taken[3:] == [0, 1, 0]
    _, _, _, _, info = w.step(3)  # its last action, then it returns by itself
    assert info["primitive_steps"] == 1 and env.actions_taken[6:] == [1]
    assert w.call_counts["alternating"] == 1  # one call, three decisions
    w.step(3)
    w.step(0)  # another choice ends the open call
    w.step(3)
    assert env.actions_taken[7:] == [1, 0, 1, 0, 1, 0, 1] and w.call_counts["alternating"] == 3
    with pytest.raises(ValueError, match="decision_steps must be >= 1"):
        CodedActionsWrapper(RewardEveryStepEnv(5), [CodedAction("alternating", _alternating)], decision_steps=0)


def test_with_decision_steps_a_call_keeps_its_own_step_limit_in_all():
    env = RewardEveryStepEnv(100)
    w = CodedActionsWrapper(env, [CodedAction("forever", forever, max_steps=5)], gamma=GAMMA, decision_steps=3)
    w.reset(seed=0)
    assert [w.step(3)[4]["primitive_steps"] for _ in range(3)] == [3, 2, 3]  # 3 + 2 = its 5, then a new call
    assert w.call_counts["forever"] == 2


def test_a_call_left_open_in_the_sandbox_goes_on_there():
    from envs.crafter_env import CrafterEnv
    from sandbox import AgentCode

    source = ("@coded_action(precondition=lambda game: True)\n"  # a precondition: masks ask the sandbox
              "def walk(game):\n    for i in range(10):\n        yield 'move_left' if i % 2 == 0 else 'noop'\n")
    with AgentCode([source]) as code:
        w = CodedActionsWrapper(CrafterEnv(task="collect_diamond"), code, decision_steps=3)
        w.reset(seed=3)
        walk = w.n_primitive
        assert [w.step(walk)[4]["primitive_steps"] for _ in range(4)] == [3, 3, 3, 1]
        assert w.call_counts["walk"] == 1
        w.step(walk)
        w.reset(seed=4)  # a reset ends the open call: the next choice begins a new one
        assert w.step(walk)[4]["primitive_steps"] == 3 and w.call_counts["walk"] == 3
