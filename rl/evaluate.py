"""Success rate of a saved policy on unseen worlds, with a Wilson interval (rl.stats).

Two seed ranges (envs.seeds): "validation" for an evaluation made while a run is still deciding (train_ppo),
"evaluation" for the final held-out evaluation only.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from envs.seeds import eval_seeds, validation_seeds
from rl.stats import wilson_interval

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
