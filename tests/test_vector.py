"""BatchedVectorEnv returns exactly what one SyncVectorEnv over the same envs returns; workers fail loudly."""
import time
from pathlib import Path

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from ppo_toys import InfoVarietyFactory, OptionChainFactory

from rl.env_factory import CrafterFactory, EnvSource
from rl.ppo import PPOSettings
from rl.training import train
from rl.vector import BatchedVectorEnv, WorkerError
from rl.vector_modes import make_vector_env, resolve_vector_mode

EXAMPLES = Path(__file__).resolve().parents[1] / "prompts" / "examples"


def assert_same(a, b, where="infos"):
    """Deep equality with types: dict keys, array dtypes and shapes, object arrays element by element."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), f"{where}: keys {list(a)} != {list(b)}"
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b), f"{where}: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), f"{where}: {type(b)} is not an array"
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
        if a.dtype == object:
            for i, (x, y) in enumerate(zip(a, b)):
                assert_same(x, y, f"{where}[{i}]")
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)
    else:
        assert type(a) is type(b) and a == b, f"{where}: {a!r} != {b!r}"


def run_both(env_fns, steps, seed=7, workers=2, n_actions=4, resets_at=()):
    """Step a SyncVectorEnv and a BatchedVectorEnv side by side with the same actions; returns the end count."""
    sync = SyncVectorEnv(env_fns, autoreset_mode=AutoresetMode.SAME_STEP)
    batched = BatchedVectorEnv(env_fns, num_workers=workers)
    rng = np.random.default_rng(0)
    ends = np.zeros(2, dtype=int)  # (terminations, truncations)
    try:
        assert batched.single_observation_space == sync.single_observation_space
        assert batched.action_space == sync.action_space and batched.observation_space == sync.observation_space
        assert_same(sync.reset(seed=seed), batched.reset(seed=seed), "reset")
        for t in range(steps):
            if t in resets_at:
                mask = rng.random(len(env_fns)) < 0.5
                mask[0] = True
                assert_same(sync.reset(seed=t, options={"reset_mask": mask.copy()}),
                            batched.reset(seed=t, options={"reset_mask": mask.copy()}), f"reset at {t}")
            actions = rng.integers(n_actions, size=len(env_fns))
            a, b = sync.step(actions), batched.step(actions)
            assert_same(a, b, f"step {t}")
            ends += [a[2].sum(), a[3].sum()]
    finally:
        sync.close()
        batched.close()
    return ends


@pytest.mark.parametrize("first, n, workers", [(0, 4, 2), (0, 5, 3), (1, 5, 3), (0, 3, 1)])
def test_matches_sync_vector_env_on_varied_infos(first, n, workers):
    # 'mixed' is a float in even envs and an int in odd ones; the batch array takes the type of env 0's.
    # (0, 5, 3): the last worker's slice starts with an int env yet its 4.5 must stay 4.5, as in Sync;
    # (1, 5, 3): env 0 reports an int, so every float is truncated, as in Sync.
    fns = [InfoVarietyFactory(first + i) for i in range(n)]
    ends = run_both(fns, 300, workers=workers, resets_at=(150,))
    assert ends[0] > 20 and ends[1] > 20  # plenty of both kinds of episode end, with final_obs/final_info


def test_matches_sync_vector_env_on_crafter_with_a_coded_action():
    from rl.config import RLConfig

    cfg = RLConfig(task="collect_wood", max_episode_steps=10, coded_actions=[(EXAMPLES / "explore.py").read_text()])
    fns = [CrafterFactory(cfg.model_dump_json(), i, 4, 0, 0.99) for i in range(4)]
    n_actions = fns[0]().action_space.n
    ends = run_both(fns, 24, n_actions=n_actions)
    assert ends.sum() >= 4  # truncations at the step limit, some inside the coded action


def test_a_raising_env_names_its_worker_and_the_exception_and_stops_every_worker():
    fns = [InfoVarietyFactory(i, fail_at=5 if i == 3 else None) for i in range(4)]
    envs = BatchedVectorEnv(fns, num_workers=2)
    envs.reset(seed=0)
    with pytest.raises(WorkerError, match=r"worker 1 \(envs 2\.\.3.*raised KeyError: .env 3 broke on call 5"):
        for _ in range(10):
            envs.step(np.zeros(4, dtype=int))
    assert envs.closed and not any(p.is_alive() for p in envs._procs)
    with pytest.raises(RuntimeError, match="closed"):
        envs.step(np.zeros(4, dtype=int))


def test_a_failure_between_commands_is_the_answer_to_the_next_command():
    """Work a worker does while no command waits (the next worlds, rl.vector.BETWEEN_COMMANDS) has nobody to
    answer; when it raises, the next command gets the error, with the worker named, not a dead pipe."""
    from ppo_toys import leave_failing_work

    envs = BatchedVectorEnv([InfoVarietyFactory(0)] * 2, num_workers=1)
    assert envs.run_in_workers(leave_failing_work, [()]) == ["left"]
    with pytest.raises(WorkerError, match=r"worker 0 .*between commands failed: OSError: no room to build"):
        for _ in range(50):  # the worker works between commands only when no command waits yet
            time.sleep(0.05)
            envs.run_in_workers(leave_failing_work, [()])
    assert envs.closed and not any(p.is_alive() for p in envs._procs)


def test_a_dying_worker_is_reported_and_a_hung_one_times_out():
    envs = BatchedVectorEnv([InfoVarietyFactory(i, die_at=3 if i == 0 else None) for i in range(2)], num_workers=2)
    envs.reset(seed=0)
    with pytest.raises(WorkerError, match=r"worker 0 \(envs 0\.\.0.*died with exit code 3"):
        for _ in range(5):
            envs.step(np.zeros(2, dtype=int))
    assert not any(p.is_alive() for p in envs._procs)

    envs = BatchedVectorEnv([InfoVarietyFactory(i, hang_at=2 if i == 1 else None) for i in range(2)],
                            num_workers=2, timeout=1.5)
    envs.reset(seed=0)
    start = time.monotonic()
    with pytest.raises(WorkerError, match=r"worker 1 .*did not answer within 1.5 s"):
        for _ in range(3):
            envs.step(np.zeros(2, dtype=int))
    assert time.monotonic() - start < 10
    assert not any(p.is_alive() for p in envs._procs)


def test_a_failing_constructor_is_reported_and_close_reaps_the_workers():
    with pytest.raises(WorkerError, match=r"worker 1 .*raised TypeError: .*colour"):
        BatchedVectorEnv([InfoVarietyFactory(0), InfoVarietyFactory(1, colour=2)], num_workers=2)
    envs = BatchedVectorEnv([InfoVarietyFactory(i) for i in range(3)], num_workers=2)
    procs = list(envs._procs)
    assert envs.get_attr("index") == (0, 1, 2)
    envs.close()
    envs.close()  # idempotent
    assert all(p.exitcode == 0 for p in procs)


def test_auto_mode_picks_actors_for_crafter_and_sync_for_cheap_envs():
    from rl.config import RLConfig

    crafter = EnvSource.from_any(RLConfig(task="collect_wood"))
    assert resolve_vector_mode("auto", crafter, 4) == "actors"
    assert resolve_vector_mode("auto", crafter, 1) == "sync"
    assert resolve_vector_mode("auto", EnvSource.from_any("CartPole-v1"), 4) == "sync"
    assert resolve_vector_mode("async", crafter, 4) == "async"
    with pytest.raises(ValueError, match="vector_mode"):
        resolve_vector_mode("threads", crafter, 4)
    envs = make_vector_env([InfoVarietyFactory(0)] * 2, "batched")
    assert isinstance(envs, BatchedVectorEnv)
    envs.close()


def test_training_is_identical_with_sync_and_batched_envs(tmp_path):
    def run(mode):
        s = PPOSettings(total_steps=600, num_envs=3, num_steps=16, num_minibatches=2, update_epochs=2, seed=5,
                        run_dir=str(tmp_path / mode), progress="none", vector_mode=mode)
        return train(s, EnvSource(factory=OptionChainFactory([]), coded_names=["opt", "masked"]))

    sync, batched = run("sync"), run("batched")
    assert batched.steps_used == sync.steps_used and batched.episodes == sync.episodes
    assert batched.coded_action_counts == sync.coded_action_counts
    assert batched.curve == sync.curve


def test_overlapped_sync_env_matches_sync_env_and_keeps_several_sandboxes_busy(monkeypatch):
    """OverlappedSyncVectorEnv steps the expert's sandboxed coded actions side by side: step for step it
    returns what SyncVectorEnv returns (episodes end inside calls too), and at times several envs' sandbox
    processes hold a request at once, which SyncVectorEnv never lets happen."""
    from graph.evaluation.coded import coded_actions_for
    from rl.config import RLConfig
    from rl.options import OverlappedSyncVectorEnv
    from sandbox.host import AgentCode

    in_flight: set[int] = set()  # the sandboxes (AgentCode) that hold a request now
    stepping = {"env": "sync"}
    most = {"sync": 0, "overlapped": 0}  # the most sandboxes that held a request at once, per vector env
    send, receive = AgentCode._send, AgentCode._receive

    def counting_send(self, *args, **kwargs):
        sent = send(self, *args, **kwargs)
        if sent:
            in_flight.add(id(self))
            most[stepping["env"]] = max(most[stepping["env"]], len(in_flight))
        return sent

    def counting_receive(self):
        in_flight.discard(id(self))
        return receive(self)

    monkeypatch.setattr(AgentCode, "_send", counting_send)
    monkeypatch.setattr(AgentCode, "_receive", counting_receive)
    cfg = RLConfig(task="collect_diamond", max_episode_steps=40,
                   coded_actions=list(coded_actions_for("collect_diamond").values()))
    fns = [CrafterFactory(cfg.model_dump_json(), i, 3, 0, 0.99) for i in range(3)]
    sync = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    overlapped = OverlappedSyncVectorEnv(fns)
    rng = np.random.default_rng(0)
    n_primitive = 17
    calls = ends = 0
    try:
        first = sync.reset(seed=3)
        stepping["env"] = "overlapped"
        assert_same(first, overlapped.reset(seed=3), "reset")
        masks = first[1]["action_mask"]
        for t in range(60):
            # mostly coded actions (those their preconditions allow), so that calls overlap and episodes end in them
            actions = np.array([rng.choice(np.flatnonzero(m[n_primitive:])) + n_primitive
                                if m[n_primitive:].any() and rng.random() < 0.7 else rng.integers(n_primitive)
                                for m in masks])
            stepping["env"] = "sync"
            a = sync.step(actions)
            stepping["env"] = "overlapped"
            b = overlapped.step(actions)
            assert_same(a, b, f"step {t}")
            masks = a[4]["action_mask"]
            calls += int((actions >= n_primitive).sum())
            ends += int(a[2].sum() + a[3].sum())
    finally:
        sync.close()
        overlapped.close()
    assert calls > 60 and ends >= 3
    assert most == {"sync": 1, "overlapped": 3}
