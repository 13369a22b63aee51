"""PPO training loop: masking, primitive-step accounting, learning, outputs, save/load."""
import csv
import math

import numpy as np
import pytest
import torch
from ppo_toys import OptionChainFactory

from rl.env_factory import EnvSource
from rl.policy_io import load_policy
from rl.ppo import Agent, PPOSettings
from rl.training import train


def small(tmp_path, **kw):
    base = dict(total_steps=400, num_envs=2, num_steps=16, num_minibatches=2, update_epochs=2,
                run_dir=str(tmp_path / "run"), progress="none", vector_mode="sync")
    return PPOSettings(**{**base, **kw})


def test_masked_logits_are_never_sampled_and_carry_no_probability():
    torch.manual_seed(0)
    agent = Agent((3,), 4)
    obs = torch.randn(512, 3)
    mask = torch.tensor([True, False, True, False]).repeat(512, 1)
    action, logprob, entropy, _ = agent.get_action_and_value(obs, mask)
    assert set(action.tolist()) <= {0, 2}
    _, lp_masked, _, _ = agent.get_action_and_value(obs, mask, action=torch.ones(512, dtype=torch.long))
    assert (lp_masked < -1e6).all()
    assert (entropy <= math.log(2) + 1e-5).all()  # only two actions share the probability


def test_step_budget_counts_primitive_steps_not_decisions(tmp_path):
    ledger: list[int] = []
    source = EnvSource(factory=OptionChainFactory(ledger), coded_names=["opt", "masked"])
    result = train(small(tmp_path), source)
    # the learner's counter equals the primitive steps the environments really took
    assert result.steps_used == sum(ledger)
    assert result.steps_used >= 400 and result.steps_used < 400 + 2 * 5  # stops as soon as the budget is spent
    assert len(ledger) < result.steps_used  # options took several steps per decision
    # action 2 is masked in every state: the policy never chose it (the env would raise)
    assert result.coded_action_counts["masked"] == 0
    assert result.coded_action_counts["opt"] == sum(1 for k in ledger if k == 5)
    rows = list(csv.DictReader(open(tmp_path / "run" / "metrics.csv")))
    assert int(rows[-1]["step"]) == result.steps_used


def test_cartpole_learns_and_writes_its_run_folder(tmp_path):
    result = train(PPOSettings(total_steps=12_000, run_dir=str(tmp_path / "cp"), progress="none", seed=3),
                   "CartPole-v1")
    assert result.steps_used == 12_000
    assert result.final_mean_return > 45  # a random policy averages about 22
    run = tmp_path / "cp"
    assert (run / "metrics.csv").exists() and (run / "learning_curve.png").stat().st_size > 1000
    assert any((run / "tb").iterdir())
    agent, meta = load_policy(result.policy_path)
    assert meta["n_actions"] == 2 and meta["settings"]["total_steps"] == 12_000
    obs = torch.zeros(1, 4)
    assert agent.get_value(obs).shape == (1,)


def test_bad_inputs_give_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown gymnasium environment id"):
        train(small(tmp_path), "NoSuchEnv-v9")
    with pytest.raises(ValueError, match="vector_mode"):
        train(small(tmp_path, vector_mode="threads"), "CartPole-v1")
    with pytest.raises(FileNotFoundError, match="no saved policy"):
        load_policy(tmp_path / "missing.pt")


def test_pixel_observations_use_the_cnn():
    agent = Agent((64, 64, 3), 20)
    assert agent.is_image
    obs = torch.randint(0, 255, (2, 64, 64, 3), dtype=torch.uint8)
    action, _, _, value = agent.get_action_and_value(obs, torch.ones(2, 20, dtype=torch.bool))
    assert action.shape == (2,) and value.shape == (2,)
    assert np.isfinite(value.detach().numpy()).all()
