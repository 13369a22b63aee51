"""Every task registered with gymnasium: `gymnasium.make("rlgpt/Crafter-collect_diamond-v0")`.

Importing this module registers them (envs.crafter_env imports it, so whatever builds a Crafter env has
them); from a fresh interpreter, `gymnasium.make("envs.registration:rlgpt/Crafter-collect_wood-v0")`
imports it on the way. Keyword arguments of CrafterEnv pass through, e.g. `obs_kind="pixels"`.
It stays out of envs/__init__: the sandbox process imports envs/ and has no use for gymnasium.
"""

from __future__ import annotations

import gymnasium as gym

from envs.tasks import TASKS

NAMESPACE = "rlgpt"
ENTRY_POINT = "envs.crafter_env:CrafterEnv"


def env_id(task: str) -> str:
    return f"{NAMESPACE}/Crafter-{task}-v0"


def register_tasks() -> None:
    for name in TASKS:
        if env_id(name) not in gym.registry:
            # CrafterEnv ends its own episodes at the task's step limit; no TimeLimit on top
            gym.register(id=env_id(name), entry_point=ENTRY_POINT, kwargs={"task": name})


register_tasks()
