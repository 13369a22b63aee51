"""How far the coded diamond chain gets and what ends its episodes, on training seeds.

    python -m benchmarks.chain_survival --episodes 200
    git show 693353d:prompts/examples/stay_alive.py > /tmp/old_stay_alive.py
    python -m benchmarks.chain_survival --episodes 200 --compare /tmp/old_stay_alive.py

Plays the pure-code program for collect_diamond (the expert's filled examples chained by
prompts.fewshot.chain_source) once per training seed and prints, per stay_alive version, how many
episodes unlocked each tech-tree achievement, the mean episode length and the causes of death. With
`--compare FILE`, a second stay_alive source is played on the same seeds in the same run. The cause
of death is read from the simulator (benchmark bookkeeping only; agent code never sees it).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from envs.crafter_env import CrafterEnv
from envs.seeds import train_seeds
from graph.evaluation.coded import chain_of, coded_actions_for
from graph.evaluation.heldout import play_code_episode
from prompts.fewshot import chain_source, example_sources
from sandbox import AgentCode

TASK = "collect_diamond"
SHOWN = ("make_stone_pickaxe", "collect_iron", "place_furnace", "make_iron_pickaxe", "collect_diamond", "wake_up")


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


def play(stay_alive: str, seeds: list[int]) -> dict:
    sources = {**coded_actions_for(TASK), "stay_alive": stay_alive}
    program = chain_source(sources, chain_of(TASK), 10_000)
    env = CrafterEnv(task=TASK, obs_kind="symbolic", reward="task")
    reached, causes, steps, start = Counter(), Counter(), 0, time.perf_counter()
    with AgentCode([program]) as code:
        for seed in seeds:
            env.reset(seed=seed)
            steps += play_code_episode(env, code, "main", 10_000)
            reached.update(env.game.achievements)
            causes[_death_cause(env) if env.game.health <= 0 else "alive at the end"] += 1
    return {"reached": reached, "causes": causes, "mean_steps": steps / len(seeds),
            "wall_s": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=100, help="training seeds to play (default 100)")
    parser.add_argument("--offset", type=int, default=8000, help="first training seed offset (default 8000)")
    parser.add_argument("--compare", type=Path, help="a stay_alive source file to play beside the current one")
    args = parser.parse_args()
    seeds = train_seeds(args.episodes, offset=args.offset)
    versions = {"current": example_sources()["stay_alive"]}
    if args.compare:
        versions[args.compare.name] = args.compare.read_text(encoding="utf-8")
    print(f"pure-code {TASK} chain, {len(seeds)} training seeds {seeds[0]}..{seeds[-1]}")
    for name, source in versions.items():
        result = play(source, seeds)
        counts = ", ".join(f"{a} {result['reached'][a]}" for a in SHOWN)
        print(f"\n[{name}] episodes reaching: {counts}")
        print(f"[{name}] mean episode length {result['mean_steps']:.0f} steps; {result['wall_s']:.0f} s wall")
        print(f"[{name}] episode ends: " + ", ".join(f"{c} {n}" for c, n in result["causes"].most_common()))


if __name__ == "__main__":
    main()
