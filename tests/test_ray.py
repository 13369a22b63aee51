"""Ray: PPO's 'ray' vector mode, evaluation cells and code tests as Ray tasks, on a real two-node cluster.

The session fixture starts a head node and a second node on this machine (one CPU each, as
docs/scaling.md shows) and always stops them with `ray stop --force`. These tests need the `ray` extra,
which `make test` installs; they are never skipped.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import ray  # the ray extra: a missing install must fail the suite, never skip it
import torch

from rl import ray_cluster
from rl.config import RLConfig
from rl.env_factory import EnvSource
from rl.ppo import PPOSettings
from rl.training import train

ROOT = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).with_name("ray"))
WALL_FIELDS = {"wall_s", "train_wall_s", "wall_time_s"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_cli(*args: str, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([RAY, *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def cluster():
    """The address of a head node and a worker node on 127.0.0.1, one CPU each, for this module's tests
    (stopped after them, so that the other modules' tests run on a quiet machine)."""
    port = _free_port()
    # a short folder: Ray's unix sockets live under it, and their paths may not exceed 107 characters
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0",
           # the toy envs of tests/ppo_toys.py are unpickled in the nodes' worker processes
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("RAY_ADDRESS", None)
    address = f"127.0.0.1:{port}"
    try:
        head = _ray_cli("start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus", "1",
                        "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}",
                        f"--ray-client-server-port={_free_port()}", env=env)
        assert head.returncode == 0, head.stdout + head.stderr
        worker = _ray_cli("start", f"--address={address}", "--node-ip-address=127.0.0.1", "--num-cpus", "1",
                          env=env)
        assert worker.returncode == 0, worker.stdout + worker.stderr
        ray.init(address=address)
        try:
            deadline = time.monotonic() + 60
            while len([n for n in ray.nodes() if n["Alive"]]) < 2:
                assert time.monotonic() < deadline, "the second node did not join the cluster"
                time.sleep(0.5)
        finally:
            ray.shutdown()
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        _ray_cli("stop", "--force", env=env, timeout=60)
        shutil.rmtree(temp, ignore_errors=True)


def _without_wall_times(value):
    if isinstance(value, dict):
        return {k: _without_wall_times(v) for k, v in value.items() if k not in WALL_FIELDS}
    if isinstance(value, list):
        return [_without_wall_times(v) for v in value]
    return value


# ---- PPO: the 'ray' vector mode ------------------------------------------------------------------------
NOOP_TWICE = '''
def noop_twice(game):
    """Stand still for two steps."""
    yield "noop"
    yield "noop"
'''


def test_ray_mode_trains_exactly_as_actors_with_the_same_workers(cluster, tmp_path, monkeypatch):
    # Crafter with a coded action in the head: every actor builds its envs and their sandbox process on its node
    config = RLConfig(task="collect_wood", coded_actions=[NOOP_TWICE], eval_episodes=0)
    monkeypatch.setattr("rl.vector.usable_cpus", lambda: 2)  # 'actors' with 2 workers, as the 2-CPU cluster

    def run(mode):
        s = PPOSettings(total_steps=700, num_envs=2, num_steps=48, num_minibatches=2, update_epochs=2, seed=4,
                        vector_mode=mode, progress="none", run_dir=str(tmp_path / mode))
        return train(s, config)

    with ray_cluster.session(cluster):
        on_ray = run("ray")
    on_actors = run("actors")
    assert 700 <= on_ray.steps_used < 700 + 2 * 2  # the budget, overrun by at most a coded call per env
    assert on_ray.coded_action_counts["noop_twice"] > 0  # the coded action ran, in the actors' sandboxes
    for field in ("steps_used", "episodes", "updates", "coded_action_counts", "curve"):
        # as JSON: the curve's rates are NaN before the first episode ends, and NaN != NaN
        assert json.dumps(getattr(on_ray, field)) == json.dumps(getattr(on_actors, field)), field
    a = torch.load(on_ray.policy_path, weights_only=False)["state_dict"]
    b = torch.load(on_actors.policy_path, weights_only=False)["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_ray_actors_build_the_next_worlds_between_rollouts(cluster):
    """As in the 'actors' mode, each Ray actor builds its envs' next worlds after a rollout; Ray runs an
    actor's calls in order, so the probe after it sees them built: the worlds the next resets start."""
    from ppo_toys import next_worlds

    from rl.ppo import Agent
    from rl.training import collector_spec
    from rl.vector_modes import actor_jobs, collect_slice
    from rl.vector_ray import RayVectorEnv

    s = PPOSettings(num_steps=8)
    config = RLConfig(task="collect_diamond", max_episode_steps=30)
    with ray_cluster.session(cluster):
        envs = RayVectorEnv(EnvSource.from_any(config).env_fns(2, s.seed, s.gamma))
        try:
            spec = collector_spec(s, envs, [])  # type: ignore[arg-type]  # the spaces collector_spec reads
            agent = Agent(spec.obs_shape, spec.n_actions, spec.hidden_size)
            weights = {k: v.numpy() for k, v in agent.state_dict().items()}
            envs.run_in_workers(collect_slice, actor_jobs(spec, envs.worker_slices, 2, weights, 10_000))
            worlds = [w for slice_worlds in envs.run_in_workers(next_worlds, [()] * len(envs.worker_slices))
                      for w in slice_worlds]
        finally:
            envs.close()
    assert len(worlds) == 2
    assert [prepared for prepared, _ in worlds] == [upcoming for _, upcoming in worlds]


def test_ray_actors_spread_over_the_nodes_and_count_every_primitive_step(cluster, tmp_path):
    from ppo_toys import FileLedger, FileLedgerOptionChainFactory

    from rl.vector_ray import RayVectorEnv

    with ray_cluster.session(cluster):
        envs = RayVectorEnv([FileLedgerOptionChainFactory(tmp_path)] * 4)
        try:
            assert envs.worker_slices == [(0, 2), (2, 4)]
            assert len(set(envs.nodes)) == 2  # one actor per CPU: one on each node
        finally:
            envs.close()
        ledgers = tmp_path / "ledgers"
        ledgers.mkdir()
        source = EnvSource(factory=FileLedgerOptionChainFactory(ledgers), coded_names=["opt", "masked"])
        result = train(PPOSettings(total_steps=400, num_envs=4, num_steps=16, num_minibatches=2, update_epochs=2,
                                   seed=5, run_dir=str(tmp_path / "run"), progress="none", vector_mode="ray"), source)
    taken = [k for f in ledgers.iterdir() for k in FileLedger(f).entries()]
    assert result.steps_used == sum(taken)  # the learner counted what the envs on the nodes really took
    assert 400 <= result.steps_used < 400 + 4 * 5  # each actor stops at its share of the budget left
    assert result.coded_action_counts["masked"] == 0  # the env raises if a masked action is chosen


def test_a_failing_env_in_a_ray_actor_stops_training_with_the_actor_named(cluster, tmp_path):
    from ppo_toys import InfoVarietyFactory

    from rl.vector import WorkerError

    with ray_cluster.session(cluster), pytest.raises(
            WorkerError, match=r"Ray actor \d of the 'ray' vector mode \(envs \d\.\.\d.*raised KeyError: .env 1 broke"):
        train(PPOSettings(total_steps=400, num_envs=2, num_steps=16, seed=5, run_dir=str(tmp_path / "run"),
                          progress="none", vector_mode="ray"), EnvSource(factory=InfoVarietyFactory(1, fail_at=7)))


def test_rl_ppo_command_line_trains_on_the_cluster(cluster, tmp_path):
    done = subprocess.run([sys.executable, "-m", "rl.ppo", "--env-id", "CartPole-v1", "--vector-mode", "ray",
                           "--ray", cluster, "--total-steps", "2000", "--num-envs", "2", "--progress", "none",
                           "--run-dir", str(tmp_path / "run")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout[done.stdout.index("{"):])
    assert 2000 <= summary["steps_used"] < 2002 and Path(summary["policy_path"]).is_file()


def test_an_unreachable_cluster_fails_fast_with_a_clear_error(tmp_path):
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "rl.ppo", "--env-id", "CartPole-v1", "--vector-mode", "ray",
                           "--ray", f"127.0.0.1:{_free_port()}", "--run-dir", str(tmp_path / "run")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert time.monotonic() - start < 30
    assert done.returncode == 2
    assert "error: cannot reach the Ray cluster at 127.0.0.1:" in done.stderr
    assert "Traceback" not in done.stderr


def test_without_the_ray_extra_ray_mode_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    from rl import cli

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails, as without the extra
    with pytest.raises(ray_cluster.RayClusterError, match=r"pip install -e '\.\[ray\]'"):
        train(PPOSettings(total_steps=100, vector_mode="ray", progress="none", run_dir=str(tmp_path / "a")),
              "CartPole-v1")
    assert cli.main(["--env-id", "CartPole-v1", "--vector-mode", "ray", "--run-dir", str(tmp_path / "b")]) == 2
    assert "install the ray extra: pip install -e '.[ray]'" in capsys.readouterr().err


# ---- evaluation cells as Ray tasks --------------------------------------------------------------------
def test_evaluation_cells_on_ray_equal_the_serial_ones(cluster, tmp_path, monkeypatch):
    from graph import evaluate

    monkeypatch.chdir(tmp_path)
    smallest = ["--quick", "--tables", "2", "--tasks", "collect_wood", "--episodes", "1", "--test-episodes", "1",
                "--task-budget", "1000", "--train-steps", "1000", "--no-videos"]
    assert evaluate.main([*smallest, "--out", "serial"]) == 0
    assert evaluate.main([*smallest, "--out", "onray", "--ray", cluster]) == 0

    def cells(out):
        found = {}
        for path in sorted((tmp_path / out / "cells").glob("*.json")):
            text = path.read_text().replace(str((tmp_path / out).resolve()), "OUT").replace(out, "OUT")
            found[path.name] = _without_wall_times(json.loads(text))
        return found

    serial, on_ray = cells("serial"), cells("onray")
    assert len(serial) == 3 and {c["method"] for c in serial.values()} == {"rlgpt", "pure_rl", "pure_code"}
    assert on_ray == serial
    # the files a cell wrote on its node came back under the driver's results folder
    policy = json.loads((tmp_path / "onray/cells/pure_rl-collect_wood-b1000-e1-s0.json").read_text())["policy_path"]
    assert policy.startswith("onray/") and (tmp_path / policy).is_file()
    reports = [json.loads((tmp_path / out / "report.json").read_text()) for out in ("serial", "onray")]
    assert json.dumps(reports[0]["tables"]).replace("serial", "OUT") == json.dumps(reports[1]["tables"]).replace(
        "onray", "OUT")  # the same report
    assert (reports[1]["meta"]["measured"], reports[1]["meta"]["cached"]) == (3, 0)  # counted as a serial run


# ---- code tests as Ray tasks ----------------------------------------------------------------------------
def test_code_tests_on_ray_report_what_a_local_run_reports(cluster):
    from prompts.fewshot import example_sources
    from tools.run_code import run_code, run_code_where_asked

    good = example_sources()["collect_wood"]
    unsafe = "def main(game):\n    open('/etc/passwd')\n    yield 'noop'\n"
    crashing = "def main(game):\n    yield 'noop'\n    raise ValueError('no tree')\n"
    cases = [(good, 3), (good, 4), (unsafe, 3), (crashing, 3)]
    ray_cluster.history.clear()
    with ray_cluster.session(cluster, connect_now=True):
        results: dict = {}
        threads = [threading.Thread(target=lambda i=i, c=c, s=s: results.__setitem__(
            i, run_code_where_asked(c, task="collect_wood", seed=s, max_steps=200))) for i, (c, s) in enumerate(cases)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    ran = [node for name, node in ray_cluster.history if name == "run_code"]
    assert len(ran) == len(cases) and set(ran) <= nodes  # each test was a task on a node of the cluster
    for i, (code, seed) in enumerate(cases):
        local = run_code(code, task="collect_wood", seed=seed, max_steps=200)
        assert results[i].model_dump(exclude={"wall_time_s"}) == local.model_dump(exclude={"wall_time_s"})
    assert results[0].task_success and results[2].failure_kind == "unsafe" and results[3].failure_kind == "runtime"


def test_graph_run_with_ray_runs_its_code_tests_on_the_cluster(cluster, tmp_path):
    from graph import run

    ray_cluster.history.clear()
    code = run.main(["harvest log", "--ray", cluster, "--test-episodes", "3", "--eval-episodes", "3", "--no-live",
                     "--out", str(tmp_path / "runs")])
    assert code == 0
    assert [name for name, _ in ray_cluster.history].count("run_code") >= 3  # one task per test seed
    report = json.loads(next((tmp_path / "runs").glob("*/report.json")).read_text())
    assert [(s["subtask"], s["passing"]) for s in report["skills"]["skills"]] == [("collect_wood", True)]
