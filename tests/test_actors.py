"""The 'actors' vector mode: workers hold a policy copy and collect their share of each rollout."""

import pytest
from ppo_toys import FileLedger, FileLedgerOptionChainFactory, InfoVarietyFactory

from rl.env_factory import EnvSource
from rl.ppo import PPOSettings
from rl.training import train
from rl.vector import WorkerError
from rl.vector_modes import resolve_vector_mode


def settings(tmp_path, name, **kw):
    base = dict(total_steps=400, num_envs=4, num_steps=16, num_minibatches=2, update_epochs=2, seed=5,
                run_dir=str(tmp_path / name), progress="none", vector_mode="actors")
    return PPOSettings(**{**base, **kw})


def test_actors_count_every_primitive_step_and_never_pick_a_masked_action(tmp_path):
    ledgers = tmp_path / "ledgers"
    ledgers.mkdir()
    source = EnvSource(factory=FileLedgerOptionChainFactory(ledgers), coded_names=["opt", "masked"])
    result = train(settings(tmp_path, "run"), source)
    taken = [k for f in ledgers.iterdir() for k in FileLedger(f).entries()]
    assert result.steps_used == sum(taken)  # the learner's counter equals what the envs really took
    # each of the 2 workers stops once its half of the budget is spent: overshoot < one option per env
    assert 400 <= result.steps_used < 400 + 4 * 5
    assert result.coded_action_counts["masked"] == 0  # the env raises if the masked action is chosen
    assert result.coded_action_counts["opt"] == sum(1 for k in taken if k == 5)
    finished = 0
    for f in ledgers.iterdir():  # one file per env: replay its episodes (each ends at 40 steps)
        t = 0
        for k in FileLedger(f).entries():
            t += k
            if t >= 40:
                finished, t = finished + 1, 0
    assert result.episodes == finished > 0


def test_actors_learn_cartpole_and_are_reproducible(tmp_path):
    def run(name):
        return train(PPOSettings(total_steps=12_000, num_envs=4, seed=3, vector_mode="actors", progress="none",
                                 run_dir=str(tmp_path / name)), "CartPole-v1")

    first, second = run("a"), run("b")
    assert first.final_mean_return > 45  # a random policy averages about 22
    def key(result):  # success_rate is NaN for CartPole, and NaN != NaN
        return [(r["step"], r["mean_return"], r["mean_length"]) for r in result.curve]

    assert key(first) == key(second)  # each worker samples from its own seeded stream


def test_a_failing_env_in_an_actor_stops_training_with_the_worker_named(tmp_path):
    source = EnvSource(factory=InfoVarietyFactory(1, fail_at=7))
    with pytest.raises(WorkerError, match=r"worker \d .*raised KeyError: .env 1 broke on call 7"):
        train(settings(tmp_path, "fail", num_envs=2), source)


def test_auto_mode_uses_actors_for_crafter():
    from rl.config import RLConfig

    assert resolve_vector_mode("auto", EnvSource.from_any(RLConfig(task="collect_wood")), 4) == "actors"
    assert resolve_vector_mode("auto", EnvSource.from_any("CartPole-v1"), 4) == "sync"


@pytest.mark.parametrize("mode", ["sync", "actors"])
def test_a_raising_coded_action_is_counted_as_a_failure_with_its_error(tmp_path, mode):
    from ppo_toys import FailingCodedActionFactory

    source = EnvSource(factory=FailingCodedActionFactory(), coded_names=["raise_after_two"])
    result = train(settings(tmp_path, mode, vector_mode=mode, num_envs=2), source)
    calls = result.coded_action_counts["raise_after_two"]
    # it raises on its third step, unless the episode (20 steps) ends first
    assert 0.8 * calls <= result.coded_action_failures["raise_after_two"] <= calls and calls > 0
    assert result.coded_action_errors == ["raise_after_two: KeyError: 'no tree here'"]
