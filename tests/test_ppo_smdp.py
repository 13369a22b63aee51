"""Semi-Markov GAE against hand computations."""
import numpy as np
import pytest

from rl.ppo import smdp_gae


def t(rows):
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), 1)


def test_reduces_to_standard_gae_when_every_transition_is_one_step():
    rng = np.random.default_rng(0)
    T, N, gamma, lam = 7, 3, 0.97, 0.9
    r, v, nv = rng.normal(size=(T, N)), rng.normal(size=(T, N)), rng.normal(size=N)
    ends = (rng.random((T, N)) < 0.3).astype(float)
    # textbook GAE, written out independently
    adv, last = np.zeros((T, N)), np.zeros(N)
    for i in reversed(range(T)):
        nxt = nv if i == T - 1 else v[i + 1]
        delta = r[i] + gamma * nxt * (1 - ends[i]) - v[i]
        last = delta + gamma * lam * (1 - ends[i]) * last
        adv[i] = last
    def f(a):
        return np.asarray(a, dtype=np.float32)

    got, ret = smdp_gae(f(r), f(v), f(ends), np.ones((T, N), dtype=np.float32), f(nv), gamma, lam)
    assert np.allclose(got, adv, atol=1e-5)
    assert np.allclose(ret, adv + v, atol=1e-5)


def test_discounts_by_gamma_to_the_number_of_primitive_steps():
    g, lam = 0.9, 0.5
    # transition 0: an option of 3 steps, reward 2; transition 1: one step, reward 1; then bootstrap V=4
    rewards, values, steps, ends = t([2.0, 1.0]), t([1.0, 3.0]), t([3, 1]), t([0, 0])
    adv, ret = smdp_gae(rewards, values, ends, steps, np.float32([4.0]), g, lam)
    d1 = 1.0 + g * 4.0 - 3.0                     # 1.6
    d0 = 2.0 + g ** 3 * 3.0 - 1.0                # 3.187
    a0 = d0 + g ** 3 * lam * d1                  # lambda once per decision, gamma**k for the time passed
    assert adv[1, 0].item() == pytest.approx(d1)
    assert adv[0, 0].item() == pytest.approx(a0)
    assert ret[0, 0].item() == pytest.approx(a0 + 1.0)


def test_episode_end_cuts_bootstrap_and_advantage_flow():
    g, lam = 0.99, 0.95
    rewards, values, steps, ends = t([1.0, 5.0]), t([0.5, 2.0]), t([4, 2]), t([1, 0])
    adv, _ = smdp_gae(rewards, values, ends, steps, np.float32([10.0]), g, lam)
    assert adv[0, 0].item() == pytest.approx(1.0 - 0.5)  # nothing after the end leaks back
    assert adv[1, 0].item() == pytest.approx(5.0 + g ** 2 * 10.0 - 2.0)


def test_long_option_is_discounted_more_than_a_short_one():
    kw = dict(values=t([0.0]), ends=t([0]), next_value=np.float32([1.0]), gamma=0.9, lam=0.95)
    short, _ = smdp_gae(t([0.0]), steps=t([1]), **kw)
    long, _ = smdp_gae(t([0.0]), steps=t([10]), **kw)
    assert short.item() == pytest.approx(0.9) and long.item() == pytest.approx(0.9 ** 10)
