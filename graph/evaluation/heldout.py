"""Playing what a method produced on held-out worlds (envs.seeds.eval_seeds), one episode each.

Every method is measured by the same protocol: nodes.executor.evaluate_chain, the graph's own
executor, which runs a chain of skills (coded or learned) in one episode per evaluation seed
and counts the task's success. The Crafter-score episodes record every achievement instead.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from envs.seeds import eval_seeds
from rl.stats import wilson_interval


def rate_fields(successes: int, episodes: int) -> dict[str, Any]:
    """Success rate with its 95% Wilson interval (None when nothing was played)."""
    if episodes <= 0:
        return {"successes": 0, "episodes": 0, "success_rate": None, "ci_low": None, "ci_high": None}
    low, high = wilson_interval(successes, episodes)
    return {"successes": successes, "episodes": episodes, "success_rate": successes / episodes,
            "ci_low": low, "ci_high": high}


def evaluate_skills(task: str, skills: list[tuple[str, dict]], episodes: int, seed: int = 0) -> dict[str, Any]:
    """Run the (subtask, skill record) chain on `episodes` held-out seeds and count the task's success.

    An empty chain is still played: the agent then does nothing, which is what a method that produced
    no skill can do."""
    from nodes.executor import evaluate_chain

    plan = [{"name": name} for name, _ in skills]
    result = evaluate_chain(task, plan, dict(skills), episodes, seed)
    if not result.get("ran"):
        raise RuntimeError(f"held-out evaluation of {task} did not run: {result.get('reason')}")
    return {**rate_fields(int(result["successes"]), episodes), "eval_steps": int(result["steps"]),
            "seeds": eval_seeds(episodes), "reached": result.get("reached", {}), "outcomes": result.get("outcomes"),
            "ended": result.get("ended", []), "errors": result.get("errors", []), "chain": result.get("chain", []),
            "replays": result.get("replays", {})}  # two episodes' actions, for videos (graph/video.py)


def code_skill(source: str, entry: str) -> dict:
    return {"kind": "code", "sources": [source], "entry": entry}


def policy_skill(policy_path: str) -> dict:
    return {"kind": "rl", "policy_path": policy_path}


# ---- Crafter-score episodes: every achievement counts ----------------------------------------
def play_code_episode(env, code, entry: str, max_steps: int) -> int:
    """Run the coded program (a sandbox.AgentCode, loaded once for all episodes) once; when it returns the
    episode is over for scoring purposes, since standing still unlocks no achievement. Returns the steps."""
    if entry not in code.names:
        raise ValueError(f"the program defines no coded action '{entry}'; it has {', '.join(code.names)}")
    return code.execute(env, entry, max_steps=max_steps).steps


def play_policy_episode(env, policy, max_steps: int) -> int:
    """Run a learned policy until the episode ends (death or the step limit)."""
    return policy.run(env, max_steps=max_steps, until=lambda ach, inv: False).steps


def crafter_episodes(play: Callable[[Any, int], int], episodes: int, episode_steps: int,
                     log: Callable[[str], None] = print, label: str = "") -> dict[str, Any]:
    """Play `episodes` held-out Crafter episodes of up to `episode_steps` steps; the achievements of each."""
    from envs.crafter_env import CrafterEnv

    env = CrafterEnv(task="crafter_score", obs_kind="symbolic", max_steps=episode_steps, reward="crafter")
    unlocked, steps, start = [], [], time.time()
    for i, world in enumerate(eval_seeds(episodes)):
        env.reset(seed=world)
        steps.append(play(env, episode_steps))
        unlocked.append(sorted(env.game.achievements))
        if (i + 1) % max(1, episodes // 5) == 0:
            log(f"    {label} crafter episodes {i + 1}/{episodes} ({time.time() - start:.0f} s)")
    return {"achievements": unlocked, "episode_steps": steps, "eval_steps": sum(steps),
            "seeds": eval_seeds(episodes)}
