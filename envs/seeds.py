"""Seed ranges that keep evaluation honest: three disjoint ranges of world seeds.

- training seeds, 0 .. 999,999: PPO's training worlds and the code tests;
- evaluation seeds, 1,000,000 .. 1,999,999 (`eval_seeds`): the final held-out evaluation only (the
  executor's run of the finished chain, graph.evaluate), so a reported success rate is measured on
  worlds that nothing trained on, tested on or chose between;
- validation seeds, 2,000,000 .. 2,999,999 (`validation_seeds`): every evaluation made while a run is
  still deciding, such as the episodes train_ppo plays after training (RLConfig.eval_episodes).

Validation sits above the evaluation range, not below it: PPO's training seed streams
(rl/env_factory.py) wrap around below EVAL_SEED_BASE and the PPO `seed` setting may be anything below
it, so every seed under 1,000,000 can be a training world.
"""

EVAL_SEED_BASE = 1_000_000
VALIDATION_SEED_BASE = 2_000_000
RANGE_SIZE = 1_000_000  # seeds in each range


def eval_seeds(n: int, offset: int = 0) -> list[int]:
    """The first `n` held-out evaluation seeds (after skipping `offset`): for the final evaluation only."""
    return _seeds_from(EVAL_SEED_BASE, "eval_seeds", n, offset)


def validation_seeds(n: int, offset: int = 0) -> list[int]:
    """The first `n` validation seeds (after skipping `offset`): for evaluations during a run."""
    return _seeds_from(VALIDATION_SEED_BASE, "validation_seeds", n, offset)


def train_seeds(n: int, offset: int = 0) -> list[int]:
    """`n` training seeds, guaranteed to stay below the evaluation range."""
    return _seeds_from(0, "train_seeds", n, offset)


def _seeds_from(base: int, what: str, n: int, offset: int) -> list[int]:
    if n < 0 or offset < 0 or offset + n > RANGE_SIZE:
        raise ValueError(f"{what} needs n >= 0, offset >= 0 and offset + n <= {RANGE_SIZE}: its seeds must lie "
                         f"in [{base}, {base + RANGE_SIZE}), got n={n}, offset={offset}")
    return [base + offset + i for i in range(n)]


def is_eval_seed(seed: int) -> bool:
    return EVAL_SEED_BASE <= seed < EVAL_SEED_BASE + RANGE_SIZE


def is_validation_seed(seed: int) -> bool:
    return VALIDATION_SEED_BASE <= seed < VALIDATION_SEED_BASE + RANGE_SIZE


def check_training_seed(seed: int, what: str = "training") -> int:
    """Refuse an evaluation or validation seed (or any seed above the training range) where training or
    code testing is about to use it."""
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    if seed >= EVAL_SEED_BASE:
        kind = ("a held-out evaluation seed" if is_eval_seed(seed) else
                "a validation seed" if is_validation_seed(seed) else "above the training range")
        raise ValueError(f"seed {seed} is {kind} (>= {EVAL_SEED_BASE}); {what} must use seeds below "
                         f"{EVAL_SEED_BASE} so evaluation stays on unseen worlds")
    return seed


def check_validation_seed(seed: int, what: str = "validation") -> int:
    """Refuse any seed outside the validation range where an evaluation during a run is about to use it."""
    if not is_validation_seed(seed):
        raise ValueError(f"seed {seed} is not a validation seed; {what} must use seeds in "
                         f"[{VALIDATION_SEED_BASE}, {VALIDATION_SEED_BASE + RANGE_SIZE}) (envs.seeds.validation_seeds)")
    return seed
