"""Small statistics of success rates, with no dependency: Wilson intervals and McNemar's exact test.

rl.ppo reads the Wilson interval to stop a training that cannot reach its target; rl.evaluate, the graph's
reports and the evaluation tables use both.
"""
from __future__ import annotations

import math
from typing import Any


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
