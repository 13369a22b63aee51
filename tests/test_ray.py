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
    for field in ("steps_used", "episodes", "episode_outcomes", "updates", "coded_action_counts", "curve"):
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


def _tree(root: int) -> set[int]:
    """``root`` and every live process below it."""
    parents: dict[int, int] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != b"Z":
            parents[int(entry)] = int(fields[1])
    found, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found.update(children)
        frontier += children
    return found


def _proc_address(text: str) -> tuple[str, int]:
    """'0100007F:1F90' (a /proc/net table's byte order) -> ('127.0.0.1', 8080); an IPv4-mapped IPv6
    address comes back as the IPv4 one."""
    import ipaddress

    host, port = text.split(":")
    raw = bytes.fromhex(host)
    ip = ipaddress.ip_address(b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)))
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), int(port, 16)


def _listening(pids: set[int]) -> set[tuple[str, str, int]]:
    """(protocol, address, port) of each TCP socket in LISTEN and each unconnected UDP socket of ``pids``."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:["):-1])
        except OSError:
            continue
    found = set()
    for table in ("tcp", "tcp6", "udp", "udp6"):
        with open(f"/proc/net/{table}") as fh:
            for line in fh.readlines()[1:]:
                fields = line.split()
                local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
                waiting = state == "0A" if table.startswith("tcp") else _proc_address(remote)[1] == 0
                if inode in inodes and waiting:
                    found.add((table, *_proc_address(local)))
    return found


def test_a_local_ray_that_a_command_starts_trains_and_listens_on_loopback_only(tmp_path):
    """Issue 26: `python -m rl.ppo --vector-mode ray` as a newcomer runs it (no RAY_ADDRESS, no `ray start`)
    starts a private Ray, trains on it, and stops it. Watched from outside while it runs: every socket its
    processes listen on is on 127.0.0.1; afterwards none of its processes is left, and nothing was written
    to ~/.ray (a token there would turn authentication on for a later `ray start --head`: see the fixture)."""
    import ipaddress

    temp = tempfile.mkdtemp(prefix="rl", dir="/tmp")  # short: Ray's unix sockets live under it
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    env.update(RAY_TMPDIR=temp, RAY_USAGE_STATS_ENABLED="0", HOME=str(home))
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    listening: set[tuple[str, str, int]] = set()
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "rl.ppo", "--env-id", "CartPole-v1", "--vector-mode", "ray",
                                 "--num-envs", "2", "--num-workers", "2", "--total-steps", "256", "--num-steps", "64",
                                 "--progress", "none", "--run-dir", str(tmp_path / "run")],
                                cwd=ROOT, env=env, stdout=stdout, stderr=stderr)
    try:
        deadline = time.monotonic() + 300
        while proc.poll() is None:
            assert time.monotonic() < deadline, "the command did not finish within 300 s"
            listening |= _listening(_tree(proc.pid))
            time.sleep(0.25)
        assert proc.returncode == 0, err.read_text()[-3000:]
        summary = json.loads(out.read_text()[out.read_text().index("{"):])
        assert summary["steps_used"] >= 256 and Path(summary["policy_path"]).is_file()
        assert any(port for _, _, port in listening), "saw no listening socket of the command's Ray"
        outside = sorted(s for s in listening if not ipaddress.ip_address(s[1]).is_loopback)
        assert outside == [], f"listening beyond loopback: {outside}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline_has(pid, temp)]
            if not left:
                break
            time.sleep(0.5)
        assert left == [], f"processes of the command's Ray outlived it: {left}"
        assert not (home / ".ray").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(temp, ignore_errors=True)


def _cmdline_has(pid: str, text: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return text.encode() in fh.read()
    except OSError:
        return False


def test_a_local_ray_off_loopback_is_stopped_and_refused(monkeypatch):
    """The check after a local start: a node or GCS on another address stops the cluster with a clear error.
    And the start's switch of Ray's cluster constant is put back afterwards."""
    import types

    class Started:
        stopped = False

        def get_runtime_context(self):
            return types.SimpleNamespace(gcs_address="192.0.2.2:6379")

        def nodes(self):
            return [{"NodeManagerAddress": "192.0.2.2"}]

        def shutdown(self):
            self.stopped = True

    started = Started()
    with pytest.raises(ray_cluster.RayClusterError, match="not on 127.0.0.1 only, and was stopped"):
        ray_cluster._check_loopback(started)
    assert started.stopped
    constants = ray._private.ray_constants
    before = constants.ENABLE_RAY_CLUSTER
    with ray_cluster._loopback_kept(ray):
        assert constants.ENABLE_RAY_CLUSTER is False
    assert constants.ENABLE_RAY_CLUSTER == before


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
