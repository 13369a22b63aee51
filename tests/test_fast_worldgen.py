"""The array-based world generation builds exactly the worlds Crafter's own generator builds."""

import crafter
import numpy as np
import pytest
from crafter import engine, objects, worldgen

from envs import fast_worldgen


def _world(generate, seed):
    world = engine.World((64, 64), crafter.constants.materials, (12, 12))
    world.reset(seed=seed)
    player = objects.Player(world, (32, 32))
    world.add(player)
    generate(world, player)
    creatures = sorted((type(o).__name__, int(o.pos[0]), int(o.pos[1])) for o in world.objects)
    return world._mat_map.copy(), creatures, world.random.uniform()


@pytest.mark.parametrize("seed", [0, 1, 7, 12345, 2**31 - 2])
def test_worlds_match_crafter_tile_for_tile(seed):
    ours = _world(fast_worldgen.generate_world, seed)
    theirs = _world(worldgen.generate_world, seed)
    assert np.array_equal(ours[0], theirs[0])
    assert ours[1] == theirs[1]
    assert ours[2] == theirs[2]  # the random stream is left in the same state


def test_backend_reset_builds_crafters_world():
    from envs.crafter_backend import CrafterBackend

    backend = CrafterBackend()
    backend.reset(seed=42, episode=0)
    reference = crafter.Env(seed=42)
    reference.reset()
    assert np.array_equal(backend._sim._world._mat_map, reference._world._mat_map)
    assert [tuple(o.pos) for o in backend._sim._world.objects] == [tuple(o.pos) for o in reference._world.objects]


def test_backend_steps_replay_crafters_own_step():
    """Our step (no frame, int distance test) against Crafter's, from the same worlds and actions."""
    from envs.crafter_backend import CrafterBackend, _Simulator

    class Reference(_Simulator):
        step = crafter.Env.step  # Crafter's own step, with the same deterministic chunk order

    ours = CrafterBackend()
    reference = Reference(area=(64, 64), view=(9, 9), size=(64, 64), length=None, seed=0)

    def reset_both(seed):
        ours.reset(seed=seed)
        reference._seed, reference._episode = seed, 0
        reference.reset()

    seed = 5
    reset_both(seed)
    rng = np.random.default_rng(1)
    for t in range(1500):
        action = int(rng.integers(0, 17))
        reward, dead = ours.step(action)
        _, ref_reward, ref_done, _ = reference.step(action)
        assert reward == ref_reward and dead == bool(ref_done), t
        assert np.array_equal(ours._sim._world._mat_map, reference._world._mat_map), t
        assert [tuple(o.pos) for o in ours._sim._world.objects] == [tuple(o.pos) for o in reference._world.objects], t
        assert ours._sim._player.inventory == reference._player.inventory, t
        if dead:  # compare on in the next world
            seed += 1
            reset_both(seed)


def _episode_trace(backend, steps: int = 300) -> list:
    """What an episode does from the current world: rewards, deaths, the map and the creatures' places."""
    rng = np.random.default_rng(3)
    trace = []
    for _ in range(steps):
        reward, dead = backend.step(int(rng.integers(0, 17)))
        trace.append((reward, dead, backend._sim._world._mat_map.tobytes(),
                      tuple(tuple(int(v) for v in o.pos) for o in backend._sim._world.objects)))
        if dead:
            break
    return trace


def test_a_world_prepared_ahead_plays_as_one_built_at_reset():
    """CrafterBackend.prepare builds the next world on a spare simulator; the reset that swaps it in starts
    the same episode, step for step, as a reset that builds it (the actor workers prepare while the
    learner updates, rl.vector_modes.prepare_resets)."""
    from envs.crafter_backend import CrafterBackend

    plain, ahead = CrafterBackend(), CrafterBackend()
    for backend in (plain, ahead):
        backend.reset(seed=11, episode=0)
        _episode_trace(backend, 50)  # an episode under way: its world must not be touched by prepare
    before = ahead._sim._world._mat_map.copy()
    ahead.prepare(seed=12, episode=3)
    assert np.array_equal(ahead._sim._world._mat_map, before)  # the world in play is left alone
    assert _episode_trace(ahead, 20) == _episode_trace(plain, 20)
    prepared = ahead._spare
    plain.reset(seed=12, episode=3)
    ahead.reset(seed=12, episode=3)
    assert ahead._sim is prepared  # swapped in, not generated again
    assert _episode_trace(ahead) == _episode_trace(plain)
    # a prepared world that the next reset does not ask for is passed over
    ahead.prepare(seed=99, episode=0)
    plain.reset(seed=13, episode=0)
    ahead.reset(seed=13, episode=0)
    assert _episode_trace(ahead) == _episode_trace(plain)


def test_the_training_env_stack_prepares_the_world_its_next_reset_starts():
    """TrainingSeeds.prepare_reset builds the world of the next training seed: the episodes after it are the
    ones a stack that never prepares plays."""
    from rl.config import RLConfig
    from rl.env_factory import CrafterFactory

    payload = RLConfig(task="collect_diamond", max_episode_steps=60).model_dump_json()
    plain, ahead = CrafterFactory(payload, 1, 4, 3, 0.99)(), CrafterFactory(payload, 1, 4, 3, 0.99)()
    prepared_swaps = 0
    rng = np.random.default_rng(0)
    obs_plain, obs_ahead = plain.reset()[0], ahead.reset()[0]
    for _ in range(200):  # several episodes of 60 steps
        assert np.array_equal(obs_plain, obs_ahead)
        ahead.get_wrapper_attr("prepare_reset")()
        action = int(rng.integers(0, 17))
        obs_plain, r1, term1, trunc1, _ = plain.step(action)
        obs_ahead, r2, term2, trunc2, _ = ahead.step(action)
        assert (r1, term1, trunc1) == (r2, term2, trunc2)
        if term1 or trunc1:
            backend = ahead.unwrapped.backend
            prepared = backend._spare
            obs_plain, obs_ahead = plain.reset()[0], ahead.reset()[0]
            prepared_swaps += backend._sim is prepared
    assert prepared_swaps >= 3
