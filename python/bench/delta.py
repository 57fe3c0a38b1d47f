"""ns per streamed fragment from Python beside the Rust library, in one run (not run by CI).

    python python/bench/delta.py [--runs 21] [--per-run 50000] [--batch 16] [--json]

Appends 24-byte fragments (the size of the Rust figure in docs/performance.md) to one task of
a store in a temporary directory, in runs of ``--per-run`` fragments, three ways interleaved
run by run (the order rotated) on the same task of the same store:

- ``rust``: the library's ``factlog::Task::delta`` called in a loop from Rust (the private
  helper ``factlog._native._delta_loop_ns``): the floor the binding is measured against;
- ``python delta``: ``task.delta(text)``, one call per fragment;
- ``python deltas``: ``task.deltas(list)``, one call per ``--batch`` fragments (the list
  built outside the timing, as a stream's burst would arrive).

Prints the median, minimum and quartiles of each, and the ratio of each Python median to the
Rust one. The machine's load moves the absolute numbers a lot; the ratios, measured in the
same minutes on the same store, move less.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List

import factlog
from factlog import _native

FRAGMENT = "x" * 24


def measure(runs: int, per_run: int, batch: int) -> Dict[str, List[float]]:
    """ns per fragment of each way, one figure per run."""
    timings: Dict[str, List[float]] = {"rust": [], "python delta": [], "python deltas": []}
    with tempfile.TemporaryDirectory() as scratch:
        with factlog.Store(os.path.join(scratch, "store")) as store:
            task = store.task("session-1")
            bursts = [[FRAGMENT] * batch for _ in range(per_run // batch)]
            fragments = range(per_run)
            delta = task.delta
            deltas = task.deltas

            def rust() -> float:
                return _native._delta_loop_ns(task, FRAGMENT, per_run) / per_run

            def one_by_one() -> float:
                start = time.perf_counter_ns()
                for _ in fragments:
                    delta(FRAGMENT)
                return (time.perf_counter_ns() - start) / per_run

            def batched() -> float:
                start = time.perf_counter_ns()
                for burst in bursts:
                    deltas(burst)
                return (time.perf_counter_ns() - start) / (len(bursts) * batch)

            ways: Dict[str, Callable[[], float]] = {
                "rust": rust,
                "python delta": one_by_one,
                "python deltas": batched,
            }
            names = list(ways)
            for run in range(runs):
                order = names[run % len(names) :] + names[: run % len(names)]
                for name in order:
                    timings[name].append(ways[name]())
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--per-run", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    timings = measure(args.runs, args.per_run, args.batch)
    figures = {}
    for name, values in timings.items():
        ordered = sorted(values)
        quartile = len(ordered) // 4
        figures[name] = {
            "median_ns": statistics.median(ordered),
            "min_ns": ordered[0],
            "p25_ns": ordered[quartile],
            "p75_ns": ordered[-1 - quartile],
        }
    rust = figures["rust"]["median_ns"]
    for name in ("python delta", "python deltas"):
        figures[name]["ratio_to_rust"] = figures[name]["median_ns"] / rust
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"{len(FRAGMENT)}-byte fragments, {args.runs} interleaved runs of {args.per_run} "
        f"(deltas in lists of {args.batch}), Python {sys.version.split()[0]}"
    )
    for name, f in figures.items():
        ratio = f" ({f['ratio_to_rust']:.2f}x rust)" if "ratio_to_rust" in f else ""
        print(
            f"{name:<14} median {f['median_ns']:.0f} ns, min {f['min_ns']:.0f}, "
            f"p25 {f['p25_ns']:.0f}, p75 {f['p75_ns']:.0f}{ratio}"
        )


if __name__ == "__main__":
    main()
