"""Seed ranges that keep evaluation honest.

Training runs and code tests draw seeds below EVAL_SEED_BASE; evaluation uses seeds from
EVAL_SEED_BASE upward, so a reported success rate is always measured on worlds that nothing
trained or tested on.
"""

EVAL_SEED_BASE = 1_000_000


def eval_seeds(n: int, offset: int = 0) -> list[int]:
    """The first `n` held-out evaluation seeds (after skipping `offset`)."""
    if n < 0 or offset < 0:
        raise ValueError("eval_seeds needs n >= 0 and offset >= 0")
    return [EVAL_SEED_BASE + offset + i for i in range(n)]


def train_seeds(n: int, offset: int = 0) -> list[int]:
    """`n` training seeds, guaranteed to stay below the evaluation range."""
    if n < 0 or offset < 0 or offset + n > EVAL_SEED_BASE:
        raise ValueError(f"train seeds must lie in [0, {EVAL_SEED_BASE})")
    return [offset + i for i in range(n)]


def is_eval_seed(seed: int) -> bool:
    return seed >= EVAL_SEED_BASE


def check_training_seed(seed: int, what: str = "training") -> int:
    """Refuse an evaluation seed where training or code testing is about to use it."""
    if is_eval_seed(seed):
        raise ValueError(
            f"seed {seed} is a held-out evaluation seed (>= {EVAL_SEED_BASE}); "
            f"{what} must use seeds below {EVAL_SEED_BASE} so evaluation stays on unseen worlds")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    return seed
