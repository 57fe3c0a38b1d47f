"""ns per `task.delta` from Python (not run by CI): `python python/bench/delta.py [RUNS]`.

Appends 24-byte fragments (the size of the Rust figure in docs/performance.md) to one task
of a store in a temporary directory, in runs of 50,000, and prints the median, minimum and quartiles of the runs. The machine's load moves these numbers a lot:
compare with the Rust `Task::delta` measured in the same minutes, not with a number from
another day.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import timeit

import factlog

FRAGMENT = "x" * 24
PER_RUN = 50_000


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    with tempfile.TemporaryDirectory() as scratch:
        with factlog.Store(os.path.join(scratch, "store")) as store:
            task = store.task("session-1")
            timings = sorted(
                timeit.timeit("delta(text)", globals={"delta": task.delta, "text": FRAGMENT},
                              number=PER_RUN) / PER_RUN * 1e9
                for _ in range(runs)
            )
    quartile = len(timings) // 4
    print(f"task.delta, {len(FRAGMENT)}-byte fragment, {runs} runs of {PER_RUN}: "
          f"median {statistics.median(timings):.0f} ns, min {timings[0]:.0f}, "
          f"p25 {timings[quartile]:.0f}, p75 {timings[-1 - quartile]:.0f}")


if __name__ == "__main__":
    main()
