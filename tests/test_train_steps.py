"""A training's total_steps is clamped by one rule (nodes.limits.train_steps_within)."""

from __future__ import annotations

from nodes.limits import MIN_TRAIN_STEPS, train_steps_within
from rl.config import PPO_BOUNDS


def test_a_training_is_held_between_the_smallest_run_and_what_it_may_spend():
    assert PPO_BOUNDS["total_steps"][0] == MIN_TRAIN_STEPS
    assert train_steps_within(5_000, most=3_000) == 3_000
    assert train_steps_within(10, most=3_000) == MIN_TRAIN_STEPS
    assert train_steps_within(5_000, most=10) == MIN_TRAIN_STEPS  # the floor wins: no shorter PPO run exists
    assert train_steps_within(5_000, most=10, least=None) == 10
    assert train_steps_within(-1, most=10, least=None) == -1  # left to the tool to refuse
