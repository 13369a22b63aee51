"""A trained policy on disk: the agent's weights with what is needed to run it again (network shape, coded
actions' names and sources, the environment it was trained on, the PPO settings), and loading it back."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from rl.ppo import Agent, PPOSettings

POLICY_FORMAT = "rlgpt-ppo-policy-v1"


def save_policy(path: Path, agent: Agent, env_source, s: PPOSettings, n_primitive: int,
                coded_names: list[str]) -> Path:
    """Write ``agent`` to ``path``; ``env_source`` is the rl.env_factory.EnvSource it was trained on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({
        "format": POLICY_FORMAT,
        "state_dict": {k: v.cpu() for k, v in agent.state_dict().items()},
        "obs_shape": list(agent.obs_shape),
        "n_actions": agent.n_actions,
        "n_primitive": n_primitive,
        "hidden_size": s.hidden_size,
        "coded_action_names": coded_names,
        "coded_action_sources": env_source.coded_action_sources(),
        "env": env_source.to_json(),
        "settings": dataclasses.asdict(s),
    }, path)
    return path


def load_policy(path: str | Path, device: str = "cpu") -> tuple[Agent, dict]:
    """Load a saved policy; returns the agent (eval mode) and the saved metadata."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no saved policy at {path} (train_ppo writes <run_dir>/policy.pt)")
    data = torch.load(path, map_location=device, weights_only=False)
    if not isinstance(data, dict) or data.get("format") != POLICY_FORMAT:
        raise ValueError(f"{path} is not a policy saved by rl.ppo (expected format {POLICY_FORMAT})")
    agent = Agent(tuple(data["obs_shape"]), int(data["n_actions"]), int(data["hidden_size"]))
    agent.load_state_dict(data["state_dict"])
    agent.eval()
    return agent.to(device), data
