"""The Python package's figures in one run (not run by CI): FactlogSaver's operations against
LangGraph's SQLite saver, and a streamed fragment from Python against the Rust library.

    python python/bench/python_figures.py [--runs 5] [--turns 50] [--steps 4] [--json]

Needs the LangGraph extra and the SQLite saver: ``pip install "./python[langgraph]"
langgraph-checkpoint-sqlite==3.1.2``; a release build (``pip install ./python``) for figures.

Savers. Each run drives every backend, in a rotated order, on a fresh directory with the
checkpoint stream of the agent-session workload (``langgraph_saver.py``: per session
``--turns`` turns of ``--steps`` steps, 500 puts at the defaults, each checkpoint holding the
whole conversation so far, from a few hundred bytes to about 350 KB), timing every call:

- ``put``: each ``put`` of the stream; ``put_writes``: each ``put_writes``;
- ``get latest``: ``get_tuple`` of the thread without a checkpoint id, 200 times after the
  stream (the newest checkpoint, with its pending writes);
- ``get by id``: ``get_tuple`` of 200 checkpoints picked at random (fixed seed) among all;
- ``list 10``: ``list(thread, limit=10)``, 20 times; ``list all``: ``list(thread)`` whole,
  once (every checkpoint with its writes, about 88 MB of checkpoints at the defaults).

Backends: ``factlog flushed`` (``FactlogSaver()`` under LangGraph's default ``async`` mode)
beside ``sqlite NORMAL`` (WAL, ``synchronous=NORMAL``), its equal-durability peer, and
``factlog synced`` beside ``sqlite FULL`` (each commit synced). Reads do not depend on the
durability; they are measured on every backend anyway.

Deltas. Between the savers' runs, one run of ``delta.py``'s measure (``task.delta``,
``task.deltas`` in lists of 16, and the library's ``factlog::Task::delta`` called from Rust,
interleaved on one store) per saver run.

Prints the medians over the runs of each figure's per-run median, and the ratios factlog /
SQLite (below 1: factlog is faster) and Python / Rust.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import delta as delta_bench  # noqa: E402
import langgraph_saver as stream  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402

from factlog.langgraph import FactlogSaver  # noqa: E402

OPS = ("put", "put_writes", "get latest", "get by id", "list 10", "list all")
GETS = 200
LISTS = 20


def factlog_saver(durability: str) -> Callable[[str], Any]:
    def open_saver(scratch: str) -> Any:
        return FactlogSaver(os.path.join(scratch, "store"), durability=durability)

    return open_saver


def sqlite_saver(synchronous: str) -> Callable[[str], Any]:
    def open_saver(scratch: str) -> Any:
        conn = sqlite3.connect(os.path.join(scratch, "checkpoints.sqlite"), check_same_thread=False)
        conn.execute(f"PRAGMA synchronous={synchronous}")
        saver = SqliteSaver(conn)
        saver.setup()
        saver.close = conn.close  # type: ignore[attr-defined]
        return saver

    return open_saver


BACKENDS: Dict[str, Callable[[str], Any]] = {
    "factlog flushed": factlog_saver("flushed"),
    "sqlite NORMAL": sqlite_saver("NORMAL"),
    "factlog synced": factlog_saver("synced"),
    "sqlite FULL": sqlite_saver("FULL"),
}
PEERS = [("factlog flushed", "sqlite NORMAL"), ("factlog synced", "sqlite FULL")]


def one_run(name: str, ops: List[stream.Op], scratch: str, seed: int) -> Dict[str, float]:
    """Median µs of each operation on one fresh saver."""
    saver = BACKENDS[name](scratch)
    timings: Dict[str, List[float]] = {op: [] for op in OPS}
    thread = {"configurable": {"thread_id": "session-1", "checkpoint_ns": ""}}
    config: Dict[str, Any] = thread
    ids: List[str] = []
    clock = time.perf_counter
    try:
        for kind, args in ops:
            if kind == "put":
                checkpoint, metadata, versions = args
                start = clock()
                config = saver.put(config, checkpoint, metadata, versions)
                timings["put"].append(clock() - start)
                ids.append(checkpoint["id"])
            elif "checkpoint_id" in config["configurable"]:
                channel, values, task_id = args
                writes = [(channel, v) for v in values]
                start = clock()
                saver.put_writes(config, writes, task_id)
                timings["put_writes"].append(clock() - start)
        for _ in range(GETS):
            start = clock()
            got = saver.get_tuple(thread)
            timings["get latest"].append(clock() - start)
        assert got.checkpoint["id"] == ids[-1]
        rng = random.Random(seed)
        for checkpoint_id in (rng.choice(ids) for _ in range(GETS)):
            by_id = {"configurable": dict(thread["configurable"], checkpoint_id=checkpoint_id)}
            start = clock()
            got = saver.get_tuple(by_id)
            timings["get by id"].append(clock() - start)
            assert got.checkpoint["id"] == checkpoint_id
        for _ in range(LISTS):
            start = clock()
            listed = list(saver.list(thread, limit=10))
            timings["list 10"].append(clock() - start)
        assert [t.checkpoint["id"] for t in listed] == ids[::-1][:10]
        start = clock()
        count = sum(1 for _ in saver.list(thread))
        timings["list all"].append(clock() - start)
        assert count == len(ids)
    finally:
        saver.close()
    return {op: statistics.median(values) * 1e6 for op, values in timings.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--delta-runs", type=int, default=5, help="delta runs per saver run")
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    ops = stream.session_calls(args.turns, args.steps, seed=7)
    names = list(BACKENDS)
    savers: Dict[str, List[Dict[str, float]]] = {name: [] for name in names}
    deltas: Dict[str, List[float]] = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        for run in range(args.runs):
            order = names[run % len(names) :] + names[: run % len(names)]
            for name in order:
                where = os.path.join(scratch, f"{run}-{name.replace(' ', '-')}")
                os.mkdir(where)
                savers[name].append(one_run(name, ops, where, seed=run))
            for way, values in delta_bench.measure(args.delta_runs, 50_000, 16).items():
                deltas.setdefault(way, []).extend(values)
            print(f"run {run + 1}/{args.runs} done", file=sys.stderr)
    medians = {
        name: {op: statistics.median(r[op] for r in runs) for op in OPS}
        for name, runs in savers.items()
    }
    ratios = {
        f"{a} / {b}": {op: medians[a][op] / medians[b][op] for op in OPS} for a, b in PEERS
    }
    delta_ns = {way: statistics.median(values) for way, values in deltas.items()}
    delta_ratios = {
        f"{way} / rust": delta_ns[way] / delta_ns["rust"] for way in delta_ns if way != "rust"
    }
    meta = {
        "runs": args.runs,
        "turns": args.turns,
        "steps": args.steps,
        "puts": sum(1 for kind, _ in ops if kind == "put"),
        "delta_runs": args.runs * args.delta_runs,
        "sqlite_version": sqlite3.sqlite_version,
        "python": sys.version.split()[0],
    }
    if args.json:
        print(
            json.dumps(
                {
                    "meta": meta,
                    "saver_us": medians,
                    "saver_ratios": ratios,
                    "delta_ns": delta_ns,
                    "delta_ratios": delta_ratios,
                },
                indent=2,
            )
        )
        return 0
    print(
        f"Savers on the agent-session checkpoint stream ({args.turns} turns x {args.steps} "
        f"steps, {meta['puts']} puts), µs per call, medians of {args.runs} interleaved runs; "
        f"SQLite {meta['sqlite_version']}, Python {meta['python']}"
    )
    print(f"{'backend':<16}" + "".join(f"{op:>12}" for op in OPS))
    for name in names:
        print(f"{name:<16}" + "".join(f"{medians[name][op]:>12.1f}" for op in OPS))
    for label, r in ratios.items():
        print(f"{label:<32}" + "".join(f"{r[op]:>9.2f}x" for op in OPS))
    print(
        f"Deltas (24-byte fragments, {meta['delta_runs']} runs of 50,000 in the same run), "
        "ns per fragment: "
        + ", ".join(f"{way} {ns:.0f}" for way, ns in delta_ns.items())
        + "; "
        + ", ".join(f"{label} {ratio:.2f}x" for label, ratio in delta_ratios.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
