"""The 'actors' vector mode: workers hold a policy copy and collect their share of each rollout."""

import json

import pytest
from ppo_toys import FileLedger, FileLedgerOptionChainFactory, InfoVarietyFactory, next_worlds

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


def test_actor_workers_build_the_next_worlds_while_the_learner_updates():
    """After each rollout an actor worker builds its envs' next worlds (before the next command comes), so
    world generation leaves the rollout's critical path; the worlds are the ones the next resets start."""
    import time

    import torch

    from rl.config import RLConfig
    from rl.training import collector_spec
    from rl.vector import BatchedVectorEnv
    from rl.vector_modes import actor_jobs, collect_slice

    s = PPOSettings(num_steps=8)
    cfg = RLConfig(task="collect_diamond", max_episode_steps=30)
    envs = BatchedVectorEnv(EnvSource.from_any(cfg).env_fns(2, s.seed, s.gamma), num_workers=1)
    try:
        spec = collector_spec(s, envs, [])
        from rl.ppo import Agent
        agent = Agent(spec.obs_shape, spec.n_actions, spec.hidden_size)
        weights = {k: v.numpy() for k, v in agent.state_dict().items()}
        torch.manual_seed(0)
        envs.run_in_workers(collect_slice, actor_jobs(spec, envs.worker_slices, 2, weights, 10_000))
        for _ in range(100):  # the worker prepares once it has answered and no command waits
            time.sleep(0.05)
            worlds = envs.run_in_workers(next_worlds, [()])[0]
            if all(prepared is not None for prepared, _ in worlds):
                break
        assert [prepared for prepared, _ in worlds] == [upcoming for _, upcoming in worlds]
    finally:
        envs.close()


def test_one_actor_trains_on_crafter_exactly_as_sync_while_building_worlds_ahead(tmp_path, monkeypatch):
    """With one worker, 'actors' draws the same action stream as 'sync'; its worker builds the next worlds
    while the learner updates, and 'sync' builds them at reset. The trainings must be the same, update
    for update and weight for weight: preparing a world changes when it is built, never which world."""
    import torch

    from rl.config import RLConfig

    monkeypatch.setattr("rl.vector.usable_cpus", lambda: 1)
    config = RLConfig(task="collect_diamond", max_episode_steps=40)

    def run(mode):
        return train(settings(tmp_path, mode, total_steps=1200, num_envs=2, num_steps=32, vector_mode=mode), config)

    synced, acted = run("sync"), run("actors")
    assert acted.episodes >= 20  # many resets, most of them into prepared worlds
    for field in ("steps_used", "episodes", "updates", "curve"):
        assert json.dumps(getattr(acted, field)) == json.dumps(getattr(synced, field)), field
    a = torch.load(acted.policy_path, weights_only=False)["state_dict"]
    b = torch.load(synced.policy_path, weights_only=False)["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_fixed_number_of_workers_gives_the_same_run_whatever_the_core_count(tmp_path, monkeypatch):
    """num_workers fixes how the envs are split (each worker samples from its own stream), so the graph's
    trainings (two workers) replay the same on a machine of 1 core or of 8."""
    def run(name, cores, workers=None):
        monkeypatch.setattr("rl.vector.usable_cpus", lambda: cores)
        result = train(PPOSettings(total_steps=3000, num_envs=4, num_steps=32, seed=2, vector_mode="actors",
                                   num_workers=workers, progress="none", run_dir=str(tmp_path / name)),
                       "CartPole-v1")
        return [(r["step"], r["mean_return"], r["mean_length"]) for r in result.curve]

    assert run("two_on_one_core", 1, workers=2) == run("two_on_eight_cores", 8, workers=2)
    # without it the split follows the cores (one worker per core, at most one per env), and so does the run
    assert run("default_on_one_core", 1) != run("default_on_eight_cores", 8)


def test_num_workers_below_one_is_refused_with_its_name(tmp_path):
    with pytest.raises(ValueError, match="num_workers"):
        train(settings(tmp_path, "zero", num_workers=0), "CartPole-v1")


def test_a_missing_sandbox_layer_is_reported_once_per_run_not_once_per_worker(tmp_path):
    """Issue 26: `python -m rl.ppo` with agent code in two worker processes, where bwrap cannot create
    namespaces: the learner checks the sandbox before it starts them, and the warning comes once."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    fake = tmp_path / "bin" / "bwrap"  # as under Docker's default profile: installed, but no namespaces
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace (test)' >&2\nexit 1\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLGPT_SANDBOX")}
    env["PATH"] = f"{fake.parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        [sys.executable, "-m", "rl.ppo", "--task", "collect_wood", "--coded",
         str(root / "prompts" / "examples" / "explore.py"), "--vector-mode", "actors", "--num-workers", "2",
         "--num-envs", "2", "--total-steps", "64", "--num-steps", "16", "--max-episode-steps", "20",
         "--coded-prior", "0.9", "--eval-episodes", "0", "--progress", "none", "--run-dir", str(tmp_path / "run")],
        cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout[done.stdout.index("{"):])
    assert summary["steps_used"] >= 64 and summary["coded_action_counts"]["explore"] >= 1  # the code ran
    assert done.stderr.count("agent code runs without these sandbox layers: namespaces") == 1, done.stderr[-3000:]
    assert "No permissions to create new namespace (test)" in done.stderr
