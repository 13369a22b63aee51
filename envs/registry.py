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
    # named so that `--env minedojo` gets an answer, not an unknown-choice error; no adapter exists yet
    raise BackendUnavailable(
        "there is no minedojo backend yet (MineDojo): rlgpt's game API and tasks are written for Crafter's "
        "2D world, and a MineDojo adapter (the protocol in envs/base.py) has not been written; use --env crafter")


BACKENDS: dict[str, Callable[[], Backend]] = {"crafter": _crafter, "minedojo": _minedojo}


def make_backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise BackendUnavailable(f"unknown environment '{name}'; available: {', '.join(BACKENDS)}")
    return BACKENDS[name]()
