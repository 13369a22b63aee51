"""How long one sandboxed code test takes: start-up of the child, and a 200-step run.

    .venv/bin/python benchmarks/sandbox_overhead.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from tools.run_code import run_code

NOOP = "def main(game):\n    yield 'noop'\n"
WALK = "def main(game):\n    while True:\n        yield from game.explore(20)\n"


def timed(code: str, max_steps: int) -> tuple[float, int]:
    start = time.perf_counter()
    report = run_code(code, max_steps=max_steps)
    if not report.ok:
        raise SystemExit(f"benchmark run failed: {report.error}")
    return time.perf_counter() - start, report.steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for label, code, steps in (("1-step run (start-up cost)", NOOP, 1), ("200-step explore run", WALK, 200)):
        times = [timed(code, steps)[0] for _ in range(args.runs)]
        print(f"{label}: median {statistics.median(times):.2f} s over {args.runs} runs "
              f"(min {min(times):.2f}, max {max(times):.2f})")


if __name__ == "__main__":
    main()
