"""Ray against one machine, side by side in one run: evaluation cells per hour (serial vs Ray tasks) and PPO
training steps/s (`sync` vs `actors` vs `ray`).

    python -m benchmarks.ray_scaling [--ray ADDRESS] [--steps 8192] [--num-envs 4]
                                     [--tasks collect_wood,place_table] [--repeats 1]

Without --ray it starts a cluster of two nodes on this machine (a head and a worker, one CPU each, as
docs/scaling.md shows) and stops it at the end (`ray stop --force`, also after a failure). On one
machine Ray can at best break even with `actors`: its actors sit on the same cores, and a rollout's
weights and segments go through Ray's object store instead of a pipe. The figures show that cost.

Evaluation: table 2 of `graph.evaluate` on the given tasks at the smallest budgets (1,000 env steps per
method and task, 2 held-out episodes, 2 code-test seeds, PPO in `sync`), measured once serially and once
with `--ray` (every cell a Ray task): cells per hour. PPO: `collect_diamond` (symbolic, never succeeds by
chance, so episodes run to their limit), `--num-envs` envs, `--steps` steps: steps/s of the training loop
(first reset to last update), and of the whole call (with the workers' start-up).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))


@contextlib.contextmanager
def two_node_cluster() -> Iterator[str]:
    """A head and a second node on 127.0.0.1, one CPU each; stopped with `ray stop --force` at the end."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    temp = tempfile.mkdtemp(prefix="rs", dir="/tmp")  # short: Ray's unix sockets live under it
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    address = f"127.0.0.1:{port}"
    try:
        for args in (["--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus", "1",
                      "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"],
                     [f"--address={address}", "--num-cpus", "1"]):
            done = subprocess.run([RAY, "start", *args], env=env, capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise RuntimeError(f"ray start {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
        yield address
    finally:
        subprocess.run([RAY, "stop", "--force"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)


def wait_for_nodes(n: int, timeout_s: float = 60.0) -> None:
    import ray

    deadline = time.monotonic() + timeout_s
    while len([node for node in ray.nodes() if node["Alive"]]) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {n} nodes joined the cluster")
        time.sleep(0.5)


def evaluation_cells(out: Path, tasks: tuple[str, ...], on_ray: bool) -> tuple[int, float]:
    """(cells measured, wall seconds) of table 2 at the smallest budgets, its output kept out of the way."""
    from graph.evaluate import run
    from graph.evaluation.tables import EvalConfig

    cfg = EvalConfig(out=out, budget=1_000, task_budget=1_000, episodes=2, train_steps=1_000, test_episodes=2,
                     tasks=tasks, quick=True, videos=False)
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        run(cfg, [2], resume=False, on_ray=on_ray)
    wall = time.perf_counter() - start
    return len(list((out / "cells").glob("*.json"))), wall


def ppo(mode: str, steps: int, num_envs: int, run_dir: Path) -> tuple[float, float, int]:
    """(steps/s of the training loop, steps/s of the whole call, workers) for one training."""
    from rl.config import RLConfig
    from rl.training import train
    from rl.vector import usable_cpus

    cfg = RLConfig(task="collect_diamond", eval_episodes=0)
    settings = cfg.ppo_settings(total_steps=steps, num_envs=num_envs, vector_mode=mode, progress="none",
                                device="cpu", run_dir=str(run_dir))
    start = time.perf_counter()
    result = train(settings, cfg)
    total = time.perf_counter() - start
    if mode == "sync":
        workers = 0
    elif mode == "ray":
        from rl import ray_cluster

        workers = min(num_envs, ray_cluster.cluster_cpus(ray_cluster.connect()))
    else:
        workers = min(num_envs, usable_cpus())
    return result.steps_used / result.wall_time_s, result.steps_used / total, workers


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ray_scaling", description=__doc__.split("\n")[0])
    p.add_argument("--ray", metavar="ADDRESS", help="an existing cluster (default: start two nodes here)")
    p.add_argument("--steps", type=int, default=8192, help="PPO steps per training (default 8192)")
    p.add_argument("--num-envs", type=int, default=4, help="PPO envs (default 4)")
    p.add_argument("--tasks", default="collect_wood,place_table", help="tasks of the evaluation's table 2")
    p.add_argument("--repeats", type=int, default=1, help="PPO trainings per mode; the best is kept")
    args = p.parse_args(argv)
    tasks = tuple(t.strip() for t in args.tasks.split(",") if t.strip())

    from rl import ray_cluster
    from rl.vector import usable_cpus

    work = Path(tempfile.mkdtemp(prefix="ray_scaling_"))
    rows: list[tuple[str, str, str]] = []
    try:
        with contextlib.ExitStack() as stack:
            address = args.ray or stack.enter_context(two_node_cluster())
            print(f"cluster: {address}" + ("" if args.ray else " (two nodes on this machine, one CPU each)"),
                  flush=True)

            print("evaluation, serial ...", flush=True)
            n_serial, wall_serial = evaluation_cells(work / "eval-serial", tasks, on_ray=False)
            best: dict[str, tuple[float, float, int]] = {}
            for mode in ("sync", "actors"):
                for r in range(args.repeats):
                    print(f"PPO {mode} ({r + 1}/{args.repeats}) ...", flush=True)
                    figure = ppo(mode, args.steps, args.num_envs, work / f"ppo-{mode}-{r}")
                    best[mode] = max(best.get(mode, figure), figure)

            stack.enter_context(ray_cluster.session(address, connect_now=True))
            import ray

            wait_for_nodes(1 if args.ray else 2)
            nodes = len([n for n in ray.nodes() if n["Alive"]])
            cpus = ray_cluster.cluster_cpus(ray)
            print("evaluation, Ray tasks ...", flush=True)
            n_ray, wall_ray = evaluation_cells(work / "eval-ray", tasks, on_ray=True)
            for r in range(args.repeats):
                print(f"PPO ray ({r + 1}/{args.repeats}) ...", flush=True)
                figure = ppo("ray", args.steps, args.num_envs, work / f"ppo-ray-{r}")
                best["ray"] = max(best.get("ray", figure), figure)

        rows.append(("evaluation cells/hour, serial (one process)", f"{n_serial / wall_serial * 3600:,.0f}",
                     f"{n_serial} cells in {wall_serial:.1f} s"))
        rows.append((f"evaluation cells/hour, Ray tasks ({nodes} nodes, {cpus} CPUs)",
                     f"{n_ray / wall_ray * 3600:,.0f}",
                     f"{n_ray} cells in {wall_ray:.1f} s; {wall_serial / wall_ray:.2f}x serial"))
        for mode, label in (("sync", "PPO sync (one process)"), ("actors", "PPO actors (worker processes)"),
                            ("ray", "PPO ray (Ray actors)")):
            loop, whole, workers = best[mode]
            rows.append((label + (f", {workers} workers" if workers else ""), f"{loop:,.0f} steps/s",
                         f"{whole:,.0f} steps/s with start-up; {loop / best['sync'][0]:.2f}x sync, "
                         f"{loop / best['actors'][0]:.2f}x actors"))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"machine: {usable_cpus()} usable CPU cores; PPO: collect_diamond, {args.num_envs} envs, {args.steps:,} "
          f"steps, best of {args.repeats}; evaluation: table 2 on {', '.join(tasks)} at 1,000 steps per cell")
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>16}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
