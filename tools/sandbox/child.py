"""Entry point of the sandbox child process: `python -m tools.sandbox.child`.

Reads one pickled job from stdin, applies the limits, runs the job and writes pickled messages
to the file descriptor named on the command line: ("ready",), ("progress", item)...,
then one final (kind, payload, details, applied). stdout/stderr stay free for stray output.
"""

from __future__ import annotations

import pickle
import sys
import traceback
from multiprocessing.connection import Connection

from tools.sandbox.limits import apply_child_limits


def main(argv: list[str]) -> int:
    conn = Connection(int(argv[1]), readable=False)
    try:
        job = pickle.load(sys.stdin.buffer)
        sys.path[:0] = [p for p in job["sys_path"] if p not in sys.path]
        for module in job["preload"]:
            __import__(module)  # before the limits, so imports do not count against them
        # After sys.path is set, so that the target's module is found.
        target, kwargs, setup, setup_kwargs = pickle.loads(job["call"])
        if setup is not None:  # trusted preparation (e.g. building the environment): not limited
            kwargs = dict(kwargs, prepared=setup(**setup_kwargs))
        applied = apply_child_limits(job["limits"], job["scratch"])
    except Exception as exc:  # a broken sandbox must not run the code unprotected
        conn.send(("error", f"the sandbox could not be set up: {type(exc).__name__}: {exc}",
                   traceback.format_exc(), {}))
        return 1
    conn.send(("ready",))
    if job["with_progress"]:
        kwargs["progress"] = lambda item: conn.send(("progress", item))
    try:
        value = target(**kwargs)
        conn.send(("ok", value, None, applied))
    except MemoryError:
        conn.send(("memory", None, None, applied))
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent as text
        conn.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc(), applied))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
