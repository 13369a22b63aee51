"""envs.describe: the player's view in words and the likely cause of a health loss, from what it observes."""

import numpy as np
import pytest

from envs.describe import damage_cause, describe_view, offset_text
from envs.observation import MATERIAL_IDS, VIEW_HEIGHT, VIEW_WIDTH, PlayerObservation

FULL = {"health": 9, "food": 9, "drink": 9, "energy": 9}


def observation(creatures=(), under="grass", daylight=1.0, sleeping=False, **bars) -> PlayerObservation:
    materials = np.full((VIEW_WIDTH, VIEW_HEIGHT), MATERIAL_IDS["grass"], np.uint8)
    materials[0, :] = MATERIAL_IDS["water"]
    materials[6, 1] = MATERIAL_IDS["tree"]
    materials[4, 3] = MATERIAL_IDS[under]
    return PlayerObservation(materials=materials, creatures=tuple(creatures), inventory={**FULL, **bars},
                             facing=(1, 0), pos=(0, 0), daylight=daylight, sleeping=sleeping, episode_step=5)


@pytest.mark.parametrize("obs, lost, cause", [
    (observation(under="lava", health=0), 9, "lava"),
    (observation([("zombie", 1, 0)]), 2, "zombie"),
    (observation([("zombie", 0, -1)], sleeping=True), 7, "zombie"),
    (observation([("skeleton", 3, -2)]), 2, "skeleton arrow"),
    (observation([("arrow", -1, 0)]), 2, "skeleton arrow"),
    (observation(food=0), 1, "starvation"),
    (observation([("zombie", 3, 0)], drink=0, food=0, energy=0), 1, "starvation, thirst and exhaustion"),
    (observation(drink=0), 2, "unseen attacker"),  # two at once is a hit, whatever the bars say
    (observation([("zombie", 1, 0)], energy=0), 1, "exhaustion"),  # one health at a time: the empty bar
    (observation(energy=0, sleeping=True), 1, "unseen attacker"),  # asleep, an empty energy bar costs nothing
    (observation(), 2, "unseen attacker"),  # a hit by something out of sight
])
def test_damage_cause_follows_crafter_damage_rules(obs, lost, cause):
    assert damage_cause(obs, lost) == cause


def test_a_bar_refilled_in_the_step_that_cost_health_is_still_named():
    """Crafter takes the health before the player's action: drinking on that step refills the bar the loss
    came from, so only the inventory before the step shows it empty."""
    assert damage_cause(observation(), 1, before={**FULL, "drink": 0}) == "thirst"
    assert damage_cause(observation(), 1, before=FULL) == "unseen attacker"


def test_view_is_a_grid_with_a_legend_and_the_nearest_things():
    obs = observation([("zombie", 1, 0), ("cow", -2, 2)], daylight=0.2, health=3)
    text = describe_view(obs)
    lines = text.splitlines()
    assert lines[0].startswith("@ you, on grass, facing right; night (daylight 0.20); health 3, food 9")
    grid = lines[1:8]
    assert all(len(row) == VIEW_WIDTH for row in grid)
    assert grid[3] == "~...@Z..." and grid[1][6] == "T" and grid[5][2] == "C"
    assert lines[8] == "legend: ~ water, . grass, T tree, Z zombie, C cow"
    assert lines[9] == "nearest: zombie 1 right; cow 2 left 2 down; water 4 left; tree 2 right 2 up"
    assert len(describe_view(obs, max_chars=120)) <= 120


def test_offsets_in_words():
    assert offset_text(0, 0) == "here" and offset_text(-2, 1) == "2 left 1 down" and offset_text(3, 0) == "3 right"
