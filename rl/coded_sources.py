"""Agent-written sources in an RL configuration (coded actions, reward shaping), behind the sandbox.

The configuration's validators only lint (`check_config_sources`: no code runs in this process); the
code itself is loaded and run only in a sandbox process (`agent_code`), one per environment, which
serves the coded actions' calls, their preconditions and the shaping function for every episode.
"""
from __future__ import annotations

from sandbox import AgentCode, CodeRejected, SandboxLimits, UnsafeCodeError, check_source
from sandbox.host import check_layers
from sandbox.lint import SHAPING_HINT, coded_action_names


def check_config_sources(sources: list[str]) -> list[str]:
    """Lint every coded-action source; their coded-action names, in order. ValueError names the source."""
    names: list[str] = []
    for i, src in enumerate(sources):
        if not isinstance(src, str) or not src.strip():
            raise ValueError(f"coded_actions[{i}] is empty: give the Python source of a generator function")
        try:
            check_source(src)
        except UnsafeCodeError as exc:
            raise ValueError(f"coded_actions[{i}] cannot be loaded: {exc}") from exc
        found = coded_action_names(src)
        if not found:
            raise ValueError(f"coded_actions[{i}] defines no coded action: write `def name(game): ... yield \"do\"`")
        names += found
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"coded action names must be unique, repeated: {', '.join(dupes)}")
    return names


def check_shaping(source: str) -> None:
    """Lint the shaping source and check that it defines `shaping`; ValueError otherwise."""
    try:
        check_source(source)
    except UnsafeCodeError as exc:
        raise ValueError(f"shaping code is not allowed: {exc}") from exc
    if "shaping" not in coded_action_names(source, generators=False):
        raise ValueError(SHAPING_HINT)


def agent_code(sources: list[str], shaping: str | None = None,
               limits: SandboxLimits | None = None) -> AgentCode | None:
    """The sandbox process serving these sources (None when there is nothing to run). ValueError when the
    code does not load (its top level failed, or it breaks a rule), with the reason."""
    if not sources and not shaping:
        return None
    try:
        return AgentCode(list(sources), shaping=shaping, limits=limits)
    except CodeRejected as exc:
        raise ValueError(f"the agent's code cannot be loaded: {exc}") from exc


def check_sandbox_first(sources: list[str], shaping: str | None = None) -> None:
    """Before a run with agent code builds its envs (in worker processes, maybe): one sandbox process
    started here, so that a strict refusal comes before any worker starts and a missing layer is reported
    once, by this process, whose workers inherit that it was (sandbox.host.check_layers)."""
    if sources or shaping:
        check_layers()
