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
from rl.ppo_fast import RolloutPolicy
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


@pytest.mark.parametrize("obs_shape", [(12,), (32, 32, 3)], ids=["mlp", "cnn"])
def test_the_rollout_policy_acts_as_the_torch_agent_does(obs_shape):
    """The rollout loop acts in numpy (RolloutPolicy); the update scores those actions with the torch agent.
    Their log-probabilities and values must agree, and actions must follow the agent's distribution."""
    torch.manual_seed(0)
    agent = Agent(obs_shape, 5)
    last = agent.actor[-1] if isinstance(agent.actor, torch.nn.Sequential) else agent.actor
    torch.nn.init.normal_(last.weight, std=0.5)  # a peaked distribution, not the near-uniform initial one
    rng = np.random.default_rng(1)
    obs = rng.integers(0, 255, size=(3, *obs_shape)).astype(np.uint8 if len(obs_shape) == 3 else np.float32)
    if len(obs_shape) == 1:
        obs = obs / 255.0
    mask = np.ones((3, 5), dtype=bool)
    mask[1, [0, 2]] = False
    policy = RolloutPolicy(agent, np.random.default_rng(2))
    draws = np.array([policy.act(obs, mask)[0] for _ in range(4000)])
    actions, logprobs, values = policy.act(obs, mask)
    with torch.no_grad():
        _, lp_torch, _, v_torch = agent.get_action_and_value(torch.as_tensor(obs), torch.as_tensor(mask),
                                                             torch.as_tensor(actions))
        logits = agent.actor(agent._features(torch.as_tensor(obs)))
        probs = torch.softmax(logits.masked_fill(~torch.as_tensor(mask), -1e8), -1).numpy()
    assert np.allclose(logprobs, lp_torch.numpy(), atol=1e-5)
    assert np.allclose(values, v_torch.numpy(), atol=1e-5)
    assert np.allclose(policy.value(obs), v_torch.numpy(), atol=1e-5)
    assert not np.isin(draws[:, 1], [0, 2]).any()  # masked actions are never drawn
    for i in range(3):
        freq = np.bincount(draws[:, i], minlength=5) / len(draws)
        assert np.abs(freq - probs[i]).max() < 0.03, (i, freq, probs[i])


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
    result = train(PPOSettings(total_steps=20_000, run_dir=str(tmp_path / "cp"), progress="none", seed=3),
                   "CartPole-v1")
    assert result.steps_used == 20_000
    assert result.final_mean_return > 50  # a random policy averages about 22; seeds 1-6 reach 62-89 here
    # CartPole reports neither success nor death: a falling pole is another end, 500 steps the step limit
    assert set(result.episode_outcomes) <= {"ended", "step limit"} and result.episode_outcomes["ended"] > 0
    assert sum(result.episode_outcomes.values()) == result.episodes
    run = tmp_path / "cp"
    assert (run / "metrics.csv").exists() and (run / "learning_curve.png").stat().st_size > 1000
    assert any((run / "tb").iterdir())
    agent, meta = load_policy(result.policy_path)
    assert meta["n_actions"] == 2 and meta["settings"]["total_steps"] == 20_000
    obs = torch.zeros(1, 4)
    assert agent.get_value(obs).shape == (1,)


def test_the_reference_acting_and_update_learn_cartpole(tmp_path):
    """rl.ppo on its own, as a reader checks it: acting through Agent.get_action_and_value (AgentPolicy) and
    learning through autograd (AutogradStep), none of rl.ppo_fast."""
    import dataclasses

    from rl.ppo import AgentPolicy, Collector, train_loop
    from rl.training import collector_spec
    from rl.vector_modes import make_vector_env

    s = PPOSettings(total_steps=20_000, run_dir=str(tmp_path / "ref"), progress="none", seed=3)
    torch.manual_seed(s.seed)
    envs = make_vector_env(EnvSource.from_any("CartPole-v1").env_fns(s.num_envs, s.seed, s.gamma), "sync")
    try:
        spec = dataclasses.replace(collector_spec(s, envs, []), make_policy=AgentPolicy)
        _, numbers = train_loop(s, spec, Collector(envs, spec, seed=s.seed), torch.device("cpu"), "ref")
    finally:
        envs.close()
    assert numbers["steps_used"] == 20_000
    assert numbers["final_mean_return"] > 50  # a random policy averages about 22; seeds 1-3 reach 75-91 here


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


def test_a_training_that_cannot_reach_its_rate_stops_at_half_its_budget(tmp_path):
    """No episode of this env succeeds: with 60% to reach, the training stops once half its budget is spent
    and says why; with 5% to reach (within the 95% interval of 0 of 50) it spends the whole budget."""
    from ppo_toys import RewardEveryStepEnv

    source = EnvSource(factory=RewardEveryStepEnv)
    stopped = train(small(tmp_path, total_steps=2000, stop_below=0.6), source)
    assert 1000 <= stopped.steps_used < 1100
    assert stopped.stopped_early and "0 of the last 50 episodes succeeded" in stopped.stopped_early
    full = train(small(tmp_path, total_steps=2000, stop_below=0.05, run_dir=str(tmp_path / "full")), source)
    assert full.steps_used >= 2000 and full.stopped_early is None
