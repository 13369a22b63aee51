"""The Crafter benchmark's score: the geometric mean of the 22 achievements' success rates.

Hafner (2021), "Benchmarking the Spectrum of Agent Capabilities": S = exp(mean_i ln(1 + s_i)) - 1,
with s_i the percentage (0..100) of episodes in which achievement i was unlocked at least once.
The +1 keeps an achievement that is never unlocked from zeroing the whole score.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np

from envs.tasks import ACHIEVEMENTS

Episodes = Sequence[set[str] | frozenset[str] | list[str]]  # the achievements each episode unlocked


def crafter_score(success_percent: Mapping[str, float] | Iterable[float]) -> float:
    """The score in percent from per-achievement success rates given in percent (0..100)."""
    values = list(success_percent.values()) if isinstance(success_percent, Mapping) else list(success_percent)
    if not values:
        raise ValueError("the Crafter score needs at least one achievement's success rate")
    for v in values:
        if not 0.0 <= float(v) <= 100.0:
            raise ValueError(f"success rates are percentages in [0, 100], got {v}")
    return math.exp(sum(math.log1p(float(v)) for v in values) / len(values)) - 1.0


def achievement_rates(episodes: Episodes,
                      achievements: tuple[str, ...] = ACHIEVEMENTS) -> dict[str, float]:
    """Percent of episodes that unlocked each achievement at least once (all 22, zeros included)."""
    if not episodes:
        raise ValueError("achievement rates need at least one episode")
    n = len(episodes)
    unlocked = [set(e) for e in episodes]
    unknown = sorted(set().union(*unlocked) - set(achievements))
    if unknown:
        raise ValueError(f"unknown achievements {unknown}; Crafter's are: {', '.join(achievements)}")
    return {a: 100.0 * sum(a in e for e in unlocked) / n for a in achievements}


def _interval(values: list[float]) -> tuple[float, float]:
    """The central 95% of bootstrap draws."""
    return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def _resampled_seeds(n: int, draws: int, seed: int) -> Iterator[np.ndarray]:
    """`draws` bootstrap samples of n seed indices, drawn with replacement."""
    rng = np.random.default_rng(seed)
    return (rng.integers(0, n, n) for _ in range(draws))


def bootstrap_score(episodes: Episodes, draws: int = 1000, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of the Crafter score, resampling episodes with replacement."""
    return _interval([crafter_score(achievement_rates([episodes[i] for i in picks]))
                      for picks in _resampled_seeds(len(episodes), draws, seed)])


def bootstrap_score_difference(a: Episodes, b: Episodes, draws: int = 1000,
                               seed: int = 0) -> tuple[float, float, float]:
    """Score of `a` minus score of `b`, played on the same seeds (`a[i]` and `b[i]` on seed i), with a
    95% percentile interval that resamples seeds, each draw taking both methods' episodes of a seed
    together: the pairing removes the seeds' own difficulty from the interval."""
    if len(a) != len(b):
        raise ValueError(f"a paired score difference needs the same seeds: {len(a)} vs {len(b)} episodes")
    observed = crafter_score(achievement_rates(a)) - crafter_score(achievement_rates(b))
    low, high = _interval([crafter_score(achievement_rates([a[i] for i in picks]))
                           - crafter_score(achievement_rates([b[i] for i in picks]))
                           for picks in _resampled_seeds(len(a), draws, seed)])
    return observed, low, high
