"""Success rate of a saved policy on unseen worlds, with a Wilson interval.

Two seed ranges (envs.seeds): "validation" for an evaluation made while a run is still deciding (train_ppo),
"evaluation" for the final held-out evaluation only.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from envs.seeds import eval_seeds, validation_seeds

SeedRange = Literal["evaluation", "validation"]
SEED_RANGES: dict[str, Callable[..., list[int]]] = {"evaluation": eval_seeds, "validation": validation_seeds}


@dataclass
class EvalResult:
    task: str
    episodes: int
    successes: int
    success_rate: float
    ci_low: float
    ci_high: float
    """95% Wilson score interval of the success rate"""
    mean_steps: float
    """mean primitive steps per episode (to success or to the end)"""
    total_steps: int
    seeds: list[int]
    seed_range: str = "evaluation"
    """which range the seeds come from: 'validation' (during a run) or 'evaluation' (held out, final)"""

    def as_dict(self) -> dict:
        return asdict(self)


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval: well behaved at 0 and n successes, unlike the normal approximation."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, {n}], got {successes}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # The interval holds the estimate; at 0 or n successes rounding can leave a bound a hair past it
    # (200/200 gave an upper bound of 0.9999999999999999).
    return max(0.0, min(centre - half, p)), min(1.0, max(centre + half, p))


def mcnemar_exact(a: list[int], b: list[int]) -> dict[str, Any]:
    """McNemar's exact test of two methods played on the same seeds (`a[i]`, `b[i]`: success 1/0 on seed i).
    Only the seeds where they differ tell them apart: under 'no difference' each of those n discordant seeds
    favours a or b with probability 1/2, so the two-sided p is twice the smaller binomial tail (at most 1)."""
    if len(a) != len(b):
        raise ValueError(f"paired outcomes need the same seeds: {len(a)} vs {len(b)} episodes")
    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    n = only_a + only_b
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1)) / 2 ** n if n else 1.0
    both = sum(1 for x, y in zip(a, b) if x and y)
    return {"episodes": len(a), "only_a": only_a, "only_b": only_b, "both": both,
            "neither": len(a) - only_a - only_b - both, "difference": (only_a - only_b) / len(a) if a else 0.0,
            "p_value": min(1.0, 2 * tail)}


def evaluate_policy(path: str | Path, episodes: int = 20, deterministic: bool = False,
                    seed_offset: int = 0, seed_range: SeedRange = "evaluation") -> EvalResult:
    """Run the policy at ``path`` for one episode on each of ``episodes`` seeds of ``seed_range``: "evaluation"
    (the default) for a final held-out evaluation, "validation" for one made during a run."""
    # deferred, heavy: crafter (and numba), and torch for the policy; wilson_interval alone needs neither
    from envs.crafter_env import CrafterEnv
    from rl.policy_skill import PolicySkill

    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if seed_range not in SEED_RANGES:
        raise ValueError(f"seed_range must be one of {list(SEED_RANGES)}, got {seed_range!r}")
    seeds = SEED_RANGES[seed_range](episodes, offset=seed_offset)
    skill = PolicySkill(path, deterministic=deterministic)
    cfg = skill.config
    env = CrafterEnv(task=cfg.task, obs_kind=cfg.obs_kind, max_steps=cfg.max_episode_steps, reward="task")
    successes, steps = 0, []
    try:
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            run = skill.run(env, obs=obs, max_steps=env.max_steps)
            successes += int(run.success)
            steps.append(run.steps)
    finally:
        skill.close()
    low, high = wilson_interval(successes, episodes)
    return EvalResult(task=cfg.task, episodes=episodes, successes=successes, success_rate=successes / episodes,
                      ci_low=low, ci_high=high, mean_steps=sum(steps) / len(steps), total_steps=sum(steps),
                      seeds=seeds, seed_range=seed_range)
