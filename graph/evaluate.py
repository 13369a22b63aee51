"""`python -m graph.evaluate`: the paper's tables re-run on Crafter, written to a results folder.

    python -m graph.evaluate --quick --out results/quick      # CI: every table on a tiny budget
    python -m graph.evaluate                                   # the full benchmark into results/full
    python -m graph.evaluate --tables 1,5 --budget 1000000     # some tables only

Writes report.md, report.json, one CSV and one PNG per table, and prints the tables. Every finished
cell is cached in OUT/cells/, so re-running the same command after a kill skips what is done
(`--no-resume` measures everything again). See docs/evaluation.md.
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from graph.evaluation.tables import BUILDERS, TECH_TREE, EvalConfig, Runner, Table
from nodes.settings import VECTOR_MODE_CHOICES
from rl import MIN_TRAIN_STEPS

QUICK = dict(budget=2_000, task_budget=2_000, episodes=3, train_steps=1_000, test_episodes=2,
             tasks=("collect_wood", "place_table", "make_wood_pickaxe"), ablation_task="collect_wood",
             crafter_episode_steps=300)


def build_parser() -> argparse.ArgumentParser:
    d = EvalConfig(out=Path("results/full"))
    p = argparse.ArgumentParser(prog="python -m graph.evaluate", description=__doc__.split("\n")[0],
                                epilog="\n".join(__doc__.split("\n")[2:6]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=None, help="results folder (default: results/full, or "
                                                          "results/quick with --quick)")
    p.add_argument("--tables", default="1,2,3,4,5", help="which tables, e.g. 1,3 (default: all five)")
    p.add_argument("--quick", action="store_true", help="tiny budgets and 3 episodes: checks the pipeline "
                                                        "and the report's structure in a few minutes")
    p.add_argument("--budget", type=int, help=f"env steps per method for tables 1 and 5 (default {d.budget:,})")
    p.add_argument("--task-budget", type=int, help=f"env steps per method and task for tables 2-4 "
                                                   f"(default {d.task_budget:,})")
    p.add_argument("--episodes", type=int, help=f"held-out episodes per rate (default {d.episodes})")
    p.add_argument("--seed", type=int, help="training seed (default 0)")
    p.add_argument("--train-steps", type=int, help=f"PPO steps of one training inside RL-GPT "
                                                   f"(default {d.train_steps:,})")
    p.add_argument("--test-episodes", type=int, help=f"code-test seeds per measurement (default {d.test_episodes})")
    p.add_argument("--tasks", help=f"comma-separated tasks of table 2 (default: {','.join(TECH_TREE)})")
    p.add_argument("--iteration-task", help="task of table 3 (default collect_wood, the paper's harvest log)")
    p.add_argument("--ablation-task", help=f"task of table 4 (default {d.ablation_task})")
    p.add_argument("--crafter-episode-steps", type=int, help="episode length of table 5 (default 10000, the "
                                                             "benchmark's)")
    p.add_argument("--vector-mode", choices=VECTOR_MODE_CHOICES,
                   help="how every PPO training steps its envs (default sync: the same figures on any machine; "
                        "actors: fastest on many cores, cells cached apart; docs/performance.md)")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="measure the cells in parallel, one Ray task each, on this cluster: HOST:PORT of its head "
                        "or 'auto'; same cache and report as a serial run (docs/scaling.md)")
    p.add_argument("--no-resume", action="store_true", help="ignore the cell cache and measure everything again")
    p.add_argument("--no-videos", action="store_true", help="no GIFs of play for table 1 (default: one per method "
                                                            "in OUT/videos/, under 2 MB each)")
    return p


def config_from(args: argparse.Namespace) -> EvalConfig:
    from envs.tasks import get_task

    values: dict = dict(QUICK) if args.quick else {}
    for name in ("budget", "task_budget", "episodes", "seed", "train_steps", "test_episodes",
                 "crafter_episode_steps", "iteration_task", "ablation_task", "vector_mode"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    if args.tasks:
        values["tasks"] = tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    for name in ("iteration_task", "ablation_task"):
        if name in values:
            values[name] = get_task(values[name]).name
    if "tasks" in values:
        values["tasks"] = tuple(get_task(t).name for t in values["tasks"])
    out = args.out or Path("results/quick" if args.quick else "results/full")
    cfg = EvalConfig(out=out, quick=args.quick, videos=not args.no_videos, **values)
    for name in ("budget", "task_budget"):
        if getattr(cfg, name) < MIN_TRAIN_STEPS:
            raise ValueError(f"--{name.replace('_', '-')} must be at least {MIN_TRAIN_STEPS} env steps "
                             "(the smallest PPO run)")
    if cfg.episodes < 1 or cfg.test_episodes < 1:
        raise ValueError("--episodes and --test-episodes must be at least 1")
    return cfg


def parse_tables(text: str) -> list[int]:
    try:
        chosen = sorted({int(t) for t in text.split(",") if t.strip()})
    except ValueError:
        raise ValueError(f"--tables takes numbers 1-5 separated by commas, got {text!r}") from None
    bad = [t for t in chosen if t not in BUILDERS]
    if bad or not chosen:
        raise ValueError(f"--tables takes numbers 1-5 separated by commas, got {text!r}")
    return chosen


def run(cfg: EvalConfig, tables: list[int], resume: bool = True, command: str = "",
        on_ray: bool = False) -> tuple[list[Table], Path]:
    from graph.evaluation.cache import CellCache
    from graph.evaluation.report import machine, now, print_tables, write_results

    cache = CellCache(cfg.out / "cells", enabled=resume)
    start = time.time()
    if on_ray:  # the missing cells first, in parallel on the cluster; the tables are then built as below
        from graph.evaluation.ray_cells import measure_on_ray

        cache = measure_on_ray(cfg, tables, cache)
    runner = Runner(cfg, cache)
    built: list[Table] = []
    for number in tables:
        print(f"== table {number} ==", flush=True)
        result = BUILDERS[number](runner)
        built += result if isinstance(result, list) else [result]
    wall_total = sum(float(v.get("wall_s") or 0) for v in runner.used.values())
    meta = {"command": command or "python -m graph.evaluate", "date": now(), "machine": machine(),
            "wall_s_session": time.time() - start, "wall_s_total": wall_total, "cached": cache.hits,
            "measured": cache.runs, "tables": tables}
    path = write_results(built, cfg, meta)
    print_tables(built)
    print(f"report: {path} ({time.time() - start:.0f} s this session, {cache.runs} cells measured, "
          f"{cache.hits} from the cache)")
    return built, path


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = config_from(args)
        tables = parse_tables(args.tables)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    command = "python -m graph.evaluate " + " ".join(shlex.quote(a) for a in (argv if argv is not None
                                                                                else sys.argv[1:]))
    from rl.ray_cluster import RayClusterError, session

    if args.ray is not None and cfg.vector_mode == "ray":
        print("error: with --ray every cell is one Ray task, and a training inside it would wait for CPUs that the "
              "other cells hold: use --vector-mode sync or actors with --ray", file=sys.stderr)
        return 2
    try:
        with session(args.ray, connect_now=args.ray is not None or cfg.vector_mode == "ray"):
            run(cfg, tables, resume=not args.no_resume, command=command.strip(), on_ray=args.ray is not None)
    except RayClusterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted; finished cells are kept in {cfg.out / 'cells'}: run the same command again "
              "to continue", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
