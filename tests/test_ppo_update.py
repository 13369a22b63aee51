"""The MLP's hand-derived PPO gradient (rl.ppo_fast.HandGradientStep) against autograd (rl.ppo.AutogradStep).

Both steps leave the clipped gradient in every parameter's ``.grad`` and return the minibatch's
statistics; they must agree for every loss option, with the ratio inside and outside the clip range,
at the ties of the clipped terms (the first epoch, where the ratio is exactly 1), and with masked actions.
"""
from __future__ import annotations

import copy

import pytest
import torch

from rl.ppo import Agent, AutogradStep, Batch, PPOSettings, make_optimizer, ppo_update
from rl.ppo_fast import HandGradientStep

N, OBS, ACTIONS = 96, 40, 7


def _batch(agent: Agent, seed: int, ratio_spread: float, used_columns: int = OBS) -> Batch:
    """A minibatch whose stored log-probabilities and values are the agent's own, shifted by ``ratio_spread``
    (0: ratios of exactly 1, every clipped term tied; 1: most ratios outside the clip range). Only the first
    ``used_columns`` observation columns are ever non-zero."""
    g = torch.Generator().manual_seed(seed)
    obs = (torch.rand(N, OBS, generator=g) < 0.3).float() * torch.rand(N, OBS, generator=g)
    obs[:, used_columns:] = 0.0
    masks = torch.rand(N, ACTIONS, generator=g) < 0.7
    masks[:, 0] = True
    with torch.no_grad():
        logits = agent.actor(obs).masked_fill(~masks, -1e8)
        actions = torch.multinomial(torch.softmax(logits, -1), 1, generator=g)[:, 0]
        _, logprob, _, value = agent.get_action_and_value(obs, masks, actions)
    return Batch(obs=obs, masks=masks, actions=actions,
                 logprobs=logprob + ratio_spread * torch.randn(N, generator=g),
                 values=value + ratio_spread * torch.randn(N, generator=g),
                 advantages=torch.randn(N, generator=g), returns=value + torch.randn(N, generator=g))


def _grads_and_stats(step_cls, agent: Agent, s: PPOSettings, mb: Batch):
    agent = copy.deepcopy(agent)
    step = step_cls(agent, s)
    stats = step(step.prepare(mb))
    return [p.grad.clone() for p in agent.parameters()], stats


@pytest.mark.parametrize("ratio_spread", [0.0, 0.05, 1.0])
@pytest.mark.parametrize("options", [
    {},
    {"clip_vloss": False},
    {"norm_adv": False},
    {"ent_coef": 0.0, "vf_coef": 1.0},
    {"max_grad_norm": 1e3},  # no clipping
    {"clip_coef": 0.05, "ent_coef": 0.1},
])
def test_the_hand_gradient_is_autograds(options, ratio_spread):
    torch.manual_seed(0)
    agent = Agent((OBS,), ACTIONS, hidden=16)
    s = PPOSettings(**options)
    mb = _batch(agent, seed=1, ratio_spread=ratio_spread)
    auto, auto_stats = _grads_and_stats(AutogradStep, agent, s, mb)
    hand, hand_stats = _grads_and_stats(HandGradientStep, agent, s, mb)
    assert any(g.abs().max() > 1e-4 for g in auto)  # a gradient worth comparing
    for (name, _), a, h in zip(agent.named_parameters(), auto, hand):
        torch.testing.assert_close(h, a, rtol=1e-4, atol=1e-6, msg=lambda m, name=name: f"{name}: {m}")
    torch.testing.assert_close(hand_stats, auto_stats, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("ratio_spread", [0.0, 1.0])
def test_the_hand_gradient_on_the_used_columns_is_autograds(ratio_spread):
    """A batch that leaves most observation columns at zero (as Crafter's one-hot view does) is narrowed to
    the columns it uses; the gradient is still autograd's, with exact zeros for the unused columns."""
    torch.manual_seed(2)
    agent = Agent((OBS,), ACTIONS, hidden=16)
    s = PPOSettings()
    mb = _batch(agent, seed=9, ratio_spread=ratio_spread, used_columns=12)
    step = HandGradientStep(copy.deepcopy(agent), s)
    narrowed = step.prepare(mb)
    assert step.columns is not None and narrowed.obs.shape == (N, 12)  # the narrowed path is the one tested
    auto, auto_stats = _grads_and_stats(AutogradStep, agent, s, mb)
    hand, hand_stats = _grads_and_stats(HandGradientStep, agent, s, mb)
    for (name, _), a, h in zip(agent.named_parameters(), auto, hand):
        torch.testing.assert_close(h, a, rtol=1e-4, atol=1e-6, msg=lambda m, name=name: f"{name}: {m}")
    first_layers = [g for (name, _), g in zip(agent.named_parameters(), hand) if name.endswith("0.0.weight")]
    assert len(first_layers) == 2 and all(g[:, 12:].abs().max() == 0 and g[:, :12].abs().max() > 0
                                          for g in first_layers)
    torch.testing.assert_close(hand_stats, auto_stats, rtol=1e-5, atol=1e-6)


def test_a_ratio_outside_the_clip_range_gets_no_policy_gradient():
    """With every ratio far outside the range (and the advantage on the clipped side), only the value and
    entropy terms move the actor; both steps agree that the surrogate contributes nothing."""
    torch.manual_seed(3)
    agent = Agent((OBS,), ACTIONS, hidden=16)
    mb = _batch(agent, seed=4, ratio_spread=0.0)
    mb.logprobs -= 5.0  # ratio = e**5, far above 1 + clip_coef
    mb.advantages = mb.advantages.abs() + 0.1  # positive advantages: the clipped term is the max
    s = PPOSettings(ent_coef=0.0, max_grad_norm=1e3, norm_adv=False)
    hand, _ = _grads_and_stats(HandGradientStep, agent, s, mb)
    actor_grads = hand[:len(list(agent.actor.parameters()))]
    assert all(g.abs().max() == 0 for g in actor_grads)


@pytest.mark.parametrize("used_columns", [OBS, 12])  # dense, and narrowed to the used columns
def test_a_whole_update_moves_the_weights_as_autograd_does(used_columns):
    """ppo_update (hand gradient) against the same epochs driven by AutogradStep: the same weights after."""
    torch.manual_seed(5)
    agent = Agent((OBS,), ACTIONS, hidden=16)
    twin, before = copy.deepcopy(agent), copy.deepcopy(agent)
    s = PPOSettings(update_epochs=2, num_minibatches=3)
    batch = _batch(agent, seed=6, ratio_spread=0.0, used_columns=used_columns)
    torch.manual_seed(7)
    ppo_update(agent, make_optimizer(agent, s.learning_rate), s, batch, make_step=HandGradientStep)

    torch.manual_seed(7)  # the same shuffles
    opt, step = make_optimizer(twin, s.learning_rate), AutogradStep(twin, s)
    mb_size = N // s.num_minibatches
    for _ in range(s.update_epochs):
        perm = torch.randperm(N)
        for lo in range(0, N, mb_size):
            idx = perm[lo:lo + mb_size]
            step(Batch(**{k: v[idx] for k, v in vars(batch).items()}))
            opt.step()
    for (name, p), q in zip(agent.named_parameters(), twin.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6, msg=lambda m, name=name: f"{name}: {m}")
    assert any((p - p0).abs().max() > 1e-4 for p, p0 in zip(agent.parameters(), before.parameters()))


def test_a_coded_prior_starts_the_policy_on_the_coded_actions():
    """coded_prior: the untrained policy gives that share of its choices to the coded actions (the last ones
    of the head), evenly; 0 leaves the usual near-uniform start."""
    torch.manual_seed(8)
    n_primitive, n_coded = 17, 3
    obs = torch.rand(256, OBS)
    for share in (0.0, 0.5, 0.9):
        agent = Agent((OBS,), n_primitive + n_coded, hidden=16)
        agent.start_with_share(n_primitive, share)
        with torch.no_grad():
            probs = torch.softmax(agent.actor(obs), -1)
        coded = probs[:, n_primitive:].sum(-1)
        expected = share if share else n_coded / (n_primitive + n_coded)
        assert abs(coded.mean().item() - expected) < 0.02
        assert (probs[:, n_primitive:].std(-1) < 0.02).all()  # evenly among the coded actions


def test_a_prior_action_starts_the_policy_as_that_one_coded_action():
    """prior_action: the coded action a sub-action was moved from gets the whole coded_prior share, so the
    untrained policy plays that code; an index outside the coded actions is a clear error."""
    torch.manual_seed(9)
    n_primitive, n_coded = 17, 4
    obs = torch.rand(256, OBS)
    agent = Agent((OBS,), n_primitive + n_coded, hidden=16)
    agent.start_with_share(n_primitive, 0.9, favoured=2)
    with torch.no_grad():
        probs = torch.softmax(agent.actor(obs), -1)
    assert abs(probs[:, n_primitive + 2].mean().item() - 0.9) < 0.02
    others = torch.cat([probs[:, :n_primitive + 2], probs[:, n_primitive + 3:]], -1)
    assert abs(others.mean().item() - 0.1 / (n_primitive + n_coded - 1)) < 0.002
    with pytest.raises(ValueError, match="not one of the 4 coded actions"):
        agent.start_with_share(n_primitive, 0.9, favoured=4)
