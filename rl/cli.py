"""The PPO command line: ``python -m rl.ppo --task collect_wood --total-steps 200000`` (rl/ppo.py hands over
to ``main`` here; ``python -m rl.cli`` is the same).

Trains on a Crafter task (or a gymnasium id with --env-id), evaluates the policy on held-out worlds and
prints a JSON summary. Every PPOSettings field is an option, documented by the field's own doc.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from rl import ppo, ray_cluster
from rl.config import RLConfig, config_error_message
from rl.evaluate import evaluate_policy
from rl.ppo import PPOSettings
from rl.training import train


def _parse_bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


# the parser of each settings field, by its annotation (a string: rl.ppo uses postponed annotations)
FIELD_TYPES: dict[str, Any] = {"bool": _parse_bool, "int": int, "float": float, "str": str,
                               "float | None": float, "str | None": str, "int | None": int}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rl.ppo", description=(ppo.__doc__ or "").split("\n")[0])
    p.add_argument("--task", default="collect_wood", help="Crafter task name (see envs.tasks)")
    p.add_argument("--env-id", default=None, help="train on a gymnasium env id instead (e.g. CartPole-v1)")
    p.add_argument("--obs", default="symbolic", choices=["symbolic", "pixels"], help="Crafter observation kind")
    p.add_argument("--coded", nargs="*", default=[], metavar="FILE",
                   help="Python files of coded actions to append to the action head")
    p.add_argument("--max-episode-steps", type=int, default=None, help="Crafter episode limit (default: the task's)")
    p.add_argument("--eval-episodes", type=int, default=20, help="held-out episodes evaluated after training")
    p.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="the Ray cluster of --vector-mode ray: HOST:PORT of its head, 'auto' (the cluster started "
                        "on this machine) or 'local' (default: RAY_ADDRESS, else a local Ray started and stopped "
                        "here; docs/scaling.md)")
    for f in dataclasses.fields(PPOSettings):
        # argparse formats help with %: a field's doc that says "95%" broke --help
        doc = f"{f.metadata.get('doc', '')} (default {f.default})".replace("%", "%%")
        p.add_argument("--" + f.name.replace("_", "-"), type=FIELD_TYPES.get(str(f.type), str), default=f.default,
                       help=doc)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = PPOSettings(**{f.name: getattr(args, f.name) for f in dataclasses.fields(PPOSettings)})
    if args.ray is not None and settings.vector_mode != "ray":
        print("error: --ray ADDRESS is where --vector-mode ray runs; add --vector-mode ray", file=sys.stderr)
        return 2
    try:
        with ray_cluster.session(args.ray, connect_now=settings.vector_mode == "ray"):
            return _train_and_report(args, settings)
    except ray_cluster.RayClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _train_and_report(args: argparse.Namespace, settings: PPOSettings) -> int:
    try:
        if args.env_id:
            source: Any = args.env_id
        else:
            sources = [Path(f).read_text() for f in args.coded]
            try:
                source = RLConfig(task=args.task, obs_kind=args.obs, coded_actions=sources,
                                  max_episode_steps=args.max_episode_steps, eval_episodes=args.eval_episodes)
            except Exception as exc:  # pydantic ValidationError -> one readable message
                print(f"error: {config_error_message(exc)}", file=sys.stderr)
                return 2
        result = train(settings, source)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary = {k: v for k, v in dataclasses.asdict(result).items() if k != "curve"}
    if not args.env_id and args.eval_episodes > 0:
        summary["evaluation"] = evaluate_policy(result.policy_path, episodes=args.eval_episodes).as_dict()
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
