"""How far the coded diamond chain gets and what ends its episodes, on training seeds.

    python -m benchmarks.chain_survival --episodes 200
    python -m benchmarks.chain_survival --episodes 100 --task crafter_score   # the coded plan over all 22
    git show 693353d:prompts/examples/stay_alive.py > /tmp/old_stay_alive.py
    python -m benchmarks.chain_survival --episodes 200 --compare /tmp/old_stay_alive.py

Plays the pure-code program for the task (collect_diamond by default; the expert's filled examples
chained by prompts.fewshot.chain_source, graph.evaluation.coded.pure_code_program) once per training
seed and prints, per stay_alive version, how many episodes unlocked each tech-tree achievement, the
Crafter score of those episodes, the mean episode length and the causes of death. With
`--compare FILE`, a second stay_alive source is played on the same seeds in the same run. The cause
of death is read from the simulator (benchmark bookkeeping only; agent code never sees it).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from envs.crafter_env import CrafterEnv
from envs.score import achievement_rates, crafter_score
from envs.seeds import train_seeds
from envs.tasks import get_task
from graph.evaluation.coded import pure_code_program
from graph.evaluation.heldout import play_code_episode
from prompts.fewshot import example_sources
from sandbox import AgentCode

SHOWN = ("make_stone_pickaxe", "collect_iron", "place_furnace", "make_iron_pickaxe", "collect_diamond", "wake_up")
SCORE_SHOWN = ("collect_sapling", "place_plant", "make_iron_sword", "eat_plant", "defeat_skeleton")


def _death_cause(env) -> str:
    """Why the player died, from the simulator's state right after its last step."""
    sim = env.backend._sim
    player, world = sim._player, sim._world
    inventory = player.inventory
    if world[player.pos][0] == "lava":
        return "lava"
    empty = [bar for bar in ("food", "drink", "energy") if inventory[bar] == 0]
    if empty:
        return "no " + "/".join(empty)
    near = {type(o).__name__.lower() for o in world.objects
            if o is not player and abs(o.pos[0] - player.pos[0]) + abs(o.pos[1] - player.pos[1]) <= 1}
    for creature in ("arrow", "zombie", "skeleton"):
        if creature in near:
            return f"{creature} ({'night' if world.daylight < 0.4 else 'day'})"
    return "other"


def play(task: str, stay_alive: str, seeds: list[int]) -> dict:
    program = pure_code_program(task, replace={"stay_alive": stay_alive})
    env = CrafterEnv(task=task, obs_kind="symbolic", reward="task", max_steps=10_000)
    reached, causes, steps, start = Counter(), Counter(), 0, time.perf_counter()
    unlocked = []
    with AgentCode([program]) as code:
        for seed in seeds:
            env.reset(seed=seed)
            steps += play_code_episode(env, code, "main", 10_000)
            reached.update(env.game.achievements)
            unlocked.append(sorted(env.game.achievements))
            causes[_death_cause(env) if env.game.health <= 0 else "alive at the end"] += 1
    return {"reached": reached, "causes": causes, "mean_steps": steps / len(seeds),
            "score": crafter_score(achievement_rates(unlocked)), "wall_s": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=100, help="training seeds to play (default 100)")
    parser.add_argument("--offset", type=int, default=8000, help="first training seed offset (default 8000)")
    parser.add_argument("--compare", type=Path, help="a stay_alive source file to play beside the current one")
    parser.add_argument("--task", default="collect_diamond",
                        help="a tech-tree task, or crafter_score for the coded plan over every achievement")
    args = parser.parse_args()
    task = get_task(args.task).name
    seeds = train_seeds(args.episodes, offset=args.offset)
    versions = {"current": example_sources()["stay_alive"]}
    if args.compare:
        versions[args.compare.name] = args.compare.read_text(encoding="utf-8")
    print(f"pure-code {task} program, {len(seeds)} training seeds {seeds[0]}..{seeds[-1]}")
    for name, source in versions.items():
        result = play(task, source, seeds)
        shown = SHOWN + (SCORE_SHOWN if task == "crafter_score" else ())
        counts = ", ".join(f"{a} {result['reached'][a]}" for a in shown)
        print(f"\n[{name}] episodes reaching: {counts}")
        print(f"[{name}] Crafter score of these episodes {result['score']:.1f}; mean episode length "
              f"{result['mean_steps']:.0f} steps; {result['wall_s']:.0f} s wall")
        print(f"[{name}] episode ends: " + ", ".join(f"{c} {n}" for c, n in result["causes"].most_common()))


if __name__ == "__main__":
    main()
