"""The agent-session workload through the OpenAI Agents SDK's Session API (not run by CI).

    python python/bench/agents_session.py [--runs 5] [--turns 50] [--steps 4] [--json]

Drives the workload of ``shared/mission/workload.md`` the way the SDK's runner drives a
session: per turn, ``get_items()`` (the runner reads the history before calling the model),
``add_items([user message])`` (~400 bytes), then per step ``add_items([assistant message,
function_call])`` (the model's output: the step's ``tokens`` 24-byte fragments assembled into
one message, ~4.8 KB, and a ~200-byte call) and ``add_items([function_call_output])`` (~1 KiB).
Defaults: 50 turns of 4 steps, 450 ``add_items`` and 50 ``get_items`` per session. The text is
pseudo-random from a fixed seed: every backend writes the same items.

Backends, one fresh directory per run, every run interleaving them in a rotating order:

- ``factlog synced`` / ``sqlite FULL``: equal durability, each ``add_items`` on stable
  storage before it returns (factlog ``durability="synced"``; the SDK's file-backed
  ``SQLiteSession``, which runs SQLite in WAL mode, with ``PRAGMA synchronous=FULL``);
- ``factlog flushed`` / ``sqlite NORMAL``: equal durability, each ``add_items`` survives a
  crash of the process but not of the machine (WAL with ``synchronous=NORMAL``);
- ``sqlite default``: ``SQLiteSession`` as shipped (its ``synchronous`` as this SQLite build
  sets it; the table prints which) beside factlog's default, ``flushed``;
- ``floor synced``: what stable storage costs at least: each ``add_items`` appends its items'
  JSON lines to a file and ``fdatasync``s it; ``get_items`` decodes the lines kept in memory.

Reports, as medians over the runs: ms per session, µs per ``add_items`` and per ``get_items``
(each timed around the awaited call), bytes on disk at the end, and the ratio of each factlog
figure to its SQLite peer measured in the same runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List

from agents import SQLiteSession

from factlog.agents import FactlogSession

WORDS = ("the of and to in is that for it as was with be by on not he this are or his from at "
         "which but have an they you were her she there been one all we their has would when "
         "if so no out up into do any your what can more other some time could them these two "
         "may first then only new like over such our man me even most made after also did "
         "many before must through back years where much way well down should because each "
         "just those people how too little state good very make world still own see men work "
         "long get here between both life being under never day same another know while last")
WORD_LIST = WORDS.split()


def text(rng: random.Random, size: int) -> str:
    """Pseudo-random words, ``size`` characters."""
    out: List[str] = []
    length = 0
    while length < size:
        word = rng.choice(WORD_LIST)
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:size]


def workload(turns: int, steps: int, tokens: int, seed: int = 7) -> List[Dict[str, Any]]:
    """The session's operations: ``{"op": "get"}`` or ``{"op": "add", "items": [...]}``."""
    rng = random.Random(seed)
    ops: List[Dict[str, Any]] = []
    for turn in range(turns):
        ops.append({"op": "get"})
        ops.append({"op": "add", "items": [{"role": "user", "content": text(rng, 400)}]})
        for step in range(steps):
            call_id = f"call_{turn}_{step}"
            message = {
                "id": f"msg_{turn}_{step}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text(rng, 24 * tokens),
                             "annotations": []}],
            }
            call = {
                "id": f"fc_{turn}_{step}",
                "type": "function_call",
                "call_id": call_id,
                "name": "search",
                "arguments": json.dumps({"query": text(rng, 120)}),
                "status": "completed",
            }
            output = {"type": "function_call_output", "call_id": call_id,
                      "output": text(rng, 1024)}
            ops.append({"op": "add", "items": [message, call]})
            ops.append({"op": "add", "items": [output]})
    return ops


class FloorSession:
    """The floor: one file, each ``add_items`` one ``write`` of its items' JSON lines and an
    ``fdatasync``; ``get_items`` decodes the lines kept in memory (fresh objects, as the
    sessions return)."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.lines: List[str] = []

    async def get_items(self, limit=None):
        lines = list(self.lines)
        return await asyncio.to_thread(lambda: [json.loads(line) for line in lines])

    async def add_items(self, items):
        lines = [json.dumps(item) for item in items]
        data = "".join(line + "\n" for line in lines).encode()

        def write():
            os.write(self.fd, data)
            os.fdatasync(self.fd)

        await asyncio.to_thread(write)
        self.lines.extend(lines)

    def close(self) -> None:
        os.close(self.fd)


def sqlite_session(synchronous: str) -> Callable[[str], Any]:
    """A factory of file-backed ``SQLiteSession``s with ``PRAGMA synchronous`` set (or as
    shipped for ``"default"``)."""

    class Session(SQLiteSession):
        @staticmethod
        def _configure_connection(conn: sqlite3.Connection) -> None:
            SQLiteSession._configure_connection(conn)
            if synchronous != "default":
                conn.execute(f"PRAGMA synchronous={synchronous}")

    return lambda directory: Session("bench", os.path.join(directory, "session.db"))


BACKENDS: Dict[str, Callable[[str], Any]] = {
    "factlog synced": lambda d: FactlogSession("bench", os.path.join(d, "store"),
                                              durability="synced"),
    "sqlite FULL": sqlite_session("FULL"),
    "factlog flushed": lambda d: FactlogSession("bench", os.path.join(d, "store")),
    "sqlite NORMAL": sqlite_session("NORMAL"),
    "sqlite default": sqlite_session("default"),
    "floor synced": lambda d: FloorSession(os.path.join(d, "floor.jsonl")),
}
PEERS = [("factlog synced", "sqlite FULL"), ("factlog flushed", "sqlite NORMAL"),
         ("factlog flushed", "sqlite default"), ("factlog synced", "floor synced")]


def disk_bytes(directory: str) -> int:
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(directory) for name in names)


async def drive(session: Any, ops: List[Dict[str, Any]]) -> Dict[str, float]:
    add_s: List[float] = []
    get_s: List[float] = []
    expected = 0
    start = time.perf_counter()
    for op in ops:
        began = time.perf_counter()
        if op["op"] == "get":
            items = await session.get_items()
            get_s.append(time.perf_counter() - began)
            assert len(items) == expected, (len(items), expected)
        else:
            await session.add_items(op["items"])
            add_s.append(time.perf_counter() - began)
            expected += len(op["items"])
    total = time.perf_counter() - start
    assert len(await session.get_items()) == expected
    return {"session_ms": total * 1e3, "add_us": statistics.median(add_s) * 1e6,
            "get_us": statistics.median(get_s) * 1e6}


def one_run(name: str, ops: List[Dict[str, Any]]) -> Dict[str, float]:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as directory:
        session = BACKENDS[name](directory)
        try:
            figures = asyncio.run(drive(session, ops))
        finally:
            session.close()
        figures["disk_bytes"] = disk_bytes(directory)
    return figures


def sqlite_default_synchronous() -> int:
    with tempfile.TemporaryDirectory() as directory:
        conn = sqlite3.connect(os.path.join(directory, "probe.db"))
        conn.execute("PRAGMA journal_mode=WAL")
        value = conn.execute("PRAGMA synchronous").fetchone()[0]
        conn.close()
    return int(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    ops = workload(args.turns, args.steps, args.tokens)
    names = list(BACKENDS)
    results: Dict[str, List[Dict[str, float]]] = {name: [] for name in names}
    for run in range(args.runs):
        order = names[run % len(names):] + names[:run % len(names)]
        for name in order:
            results[name].append(one_run(name, ops))
    medians = {name: {key: statistics.median(r[key] for r in runs) for key in runs[0]}
               for name, runs in results.items()}
    ratios = {f"{a} / {b}": {key: medians[a][key] / medians[b][key]
                             for key in ("session_ms", "add_us", "get_us", "disk_bytes")
                             if medians[b][key]}
              for a, b in PEERS}
    adds = sum(1 for op in ops if op["op"] == "add")
    items = sum(len(op["items"]) for op in ops if op["op"] == "add")
    payload = sum(len(json.dumps(item)) for op in ops if op["op"] == "add" for item in op["items"])
    meta = {"runs": args.runs, "turns": args.turns, "steps": args.steps, "tokens": args.tokens,
            "add_items_calls": adds, "items": items, "payload_bytes": payload,
            "sqlite_version": sqlite3.sqlite_version,
            "sqlite_default_synchronous": sqlite_default_synchronous(),
            "python": sys.version.split()[0]}
    if args.json:
        print(json.dumps({"meta": meta, "medians": medians, "ratios": ratios}, indent=2))
        return
    print(f"agent-session workload through the Session API: {args.turns} turns x {args.steps} "
          f"steps; {adds} add_items ({items} items, {payload / 1e6:.2f} MB of JSON) and "
          f"{args.turns} get_items per session; medians of {args.runs} interleaved runs")
    print(f"SQLite {meta['sqlite_version']} (WAL; default synchronous="
          f"{meta['sqlite_default_synchronous']}: 0 OFF, 1 NORMAL, 2 FULL), "
          f"Python {meta['python']}")
    print(f"{'backend':<16} {'ms/session':>11} {'us/add_items':>13} {'us/get_items':>13} "
          f"{'disk MB':>8}")
    for name in names:
        m = medians[name]
        print(f"{name:<16} {m['session_ms']:>11.1f} {m['add_us']:>13.1f} {m['get_us']:>13.1f} "
              f"{m['disk_bytes'] / 1e6:>8.2f}")
    print("ratios (lower is better for the first):")
    for label, r in ratios.items():
        print(f"  {label:<34} session {r['session_ms']:.2f}x, add_items {r['add_us']:.2f}x, "
              f"get_items {r['get_us']:.2f}x, disk {r['disk_bytes']:.2f}x")


if __name__ == "__main__":
    main()
