"""Backends by name, so commands can take `--env NAME` and fail clearly when one is unavailable."""

from __future__ import annotations

from collections.abc import Callable

from envs.base import Backend


class BackendUnavailable(RuntimeError):
    """A backend that cannot run on this machine; the message says what to install or use instead."""


def _crafter() -> Backend:
    from envs.crafter_backend import CrafterBackend

    return CrafterBackend()


def _minedojo() -> Backend:
    try:
        import minedojo  # noqa: F401  (optional extra)
    except ImportError as exc:
        raise BackendUnavailable(
            "the minedojo backend needs the MineDojo package, Java 8 and the Minecraft assets it downloads "
            "(pip install 'rlgpt[minedojo]' on a machine that can reach them); use --env crafter here") from exc
    raise BackendUnavailable(
        "MineDojo is installed, but rlgpt's game API and tasks are written for Crafter's 2D world and have "
        "no MineDojo adapter yet (see envs/base.py for the protocol an adapter implements); use --env crafter")


BACKENDS: dict[str, Callable[[], Backend]] = {"crafter": _crafter, "minedojo": _minedojo}


def make_backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise BackendUnavailable(f"unknown environment '{name}'; available: {', '.join(BACKENDS)}")
    return BACKENDS[name]()
