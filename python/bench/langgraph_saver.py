"""FactlogSaver against LangGraph's SQLite saver on the agent-session workload (not run by CI).

    python python/bench/langgraph_saver.py [--runs 5] [--turns 50] [--steps 4]

Needs the LangGraph extra and the SQLite saver: ``pip install "./python[langgraph]"
langgraph-checkpoint-sqlite==3.1.2``.

The workload is the agent-session one (``shared/mission/workload.md``) as the stream of calls
a LangGraph agent hands its checkpointer, one thread per session. Per turn: the user's
message (~400 bytes) as the input's pending write and the input checkpoint; per step the
model's message with its tool call (~200 bytes) as a write, a checkpoint, the tool's result
(~1 KiB) as a write, a checkpoint; then the final answer as a write and the turn's last
checkpoint. Every checkpoint holds the whole conversation so far, as a LangGraph
``messages`` channel does (both savers store whole checkpoints). Streamed tokens are not
checkpointed by LangGraph, so none are written; "ns/token" divides the session's time by the
workload's token count (turns x steps x 200) only to set the figure beside the other
benchmarks'. The text is pseudo-random from a seed: every backend gets the same calls.

Backends, each run on a fresh directory, interleaved run by run:

- ``factlog synced``: ``FactlogSaver(durability="synced")``: every put and write on stable
  storage (``fdatasync``) before it returns.
- ``sqlite FULL``: ``SqliteSaver`` on a file, WAL (the saver's own setting),
  ``synchronous=FULL``: every commit synced. The equal-durability peer of ``factlog synced``.
- ``factlog default``: ``FactlogSaver()`` under LangGraph's default ``async`` mode: ``flushed``
  (in the kernel before it returns; survives a process crash).
- ``sqlite NORMAL``: WAL with ``synchronous=NORMAL``: commits are not synced (survive a
  process crash), the equal-durability peer of ``factlog default``. (SQLite's own default,
  and so the SQLite saver's, is FULL.)
- ``floor``: the bytes factlog would write for each call, appended to a plain file with one
  ``write`` and one ``fdatasync`` each, serialization done beforehand: what the disk costs.

Prints, per backend, the median over the runs of the session's time, milliseconds per turn,
microseconds per saver call, ns/token, and the size of the files left (factlog's segment
files grow in preallocated steps of 1 to 8 MiB, so its figure is rounded up to the step), and
the ratios of the medians: factlog synced to sqlite FULL and to the floor, factlog default to
sqlite NORMAL.

``--graph`` drives a real compiled ``StateGraph`` instead (a scripted agent node asking for
``--steps`` tool calls per turn, then answering, and a tool node), one ``invoke`` per turn:
the synced pair in LangGraph's ``"sync"`` durability mode, the other pair in its default
``"async"`` one, which FactlogSaver() maps to ``flushed``. This includes LangGraph's own
per-step cost and the checkpoints it writes for itself; the floor is not run.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any, Callable, Dict, List, Tuple

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import Annotated, TypedDict

from factlog._langgraph_values import stored as stored_value
from factlog.langgraph import FactlogSaver

WORDS = (
    "the agent reads file and then calls tool with query result token stream model plan step "
    "user asks for report data rows table search found three matches in log segment write sync"
).split()


class Text:
    """Deterministic pseudo-random words (xorshift64*)."""

    def __init__(self, seed: int) -> None:
        self.state = (seed * 0x9E3779B97F4A7C15 | 1) & 0xFFFFFFFFFFFFFFFF

    def words(self, size: int) -> str:
        out: List[str] = []
        length = 0
        while length < size:
            self.state ^= self.state >> 12
            self.state ^= (self.state << 25) & 0xFFFFFFFFFFFFFFFF
            self.state ^= self.state >> 27
            word = WORDS[((self.state * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF) >> 59]
            out.append(word)
            length += len(word) + 1
        return " ".join(out)[:size]


Op = Tuple[str, Any]
Backend = Callable[[str, Any], Tuple[float, int]]


def session_calls(turns: int, steps: int, seed: int) -> List[Op]:
    """The saver calls of one session: ("writes", (channel, value, task_id)) against the
    latest checkpoint, and ("put", (checkpoint, metadata, new_versions))."""
    text = Text(seed)
    messages: List[Dict[str, Any]] = []
    ops: List[Op] = []
    step_no = 0
    version = 0

    def checkpoint(source: str) -> None:
        nonlocal step_no, version
        version += 1
        cp = empty_checkpoint()
        cp["id"] = str(uuid.UUID(int=(seed << 64) + step_no + 1))  # increasing, like uuid6
        cp["channel_values"] = {"messages": list(messages)}
        cp["channel_versions"] = {"messages": version}
        cp["versions_seen"] = {"agent": {"messages": version - 1}}
        ops.append(("put", (cp, {"source": source, "step": step_no}, {"messages": version})))
        step_no += 1

    for turn in range(turns):
        user = {"role": "user", "content": text.words(360)}
        ops.append(("writes", ("messages", [user], f"input-{turn}")))
        messages.append(user)
        checkpoint("input")
        for step in range(steps):
            call = {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": f"call-{turn}-{step}",
                        "name": "search",
                        "args": {"query": text.words(24)},
                    }
                ],
            }
            ops.append(("writes", ("messages", [call], f"agent-{turn}-{step}")))
            messages.append(call)
            checkpoint("loop")
            result = {
                "role": "tool",
                "tool_call_id": f"call-{turn}-{step}",
                "content": text.words(960),
            }
            ops.append(("writes", ("messages", [result], f"tools-{turn}-{step}")))
            messages.append(result)
            checkpoint("loop")
        answer = {"role": "assistant", "content": text.words(200)}
        ops.append(("writes", ("messages", [answer], f"agent-{turn}-final")))
        messages.append(answer)
        checkpoint("loop")
    return ops


def blob(value: Any, serde: Any) -> Dict[str, Any]:
    """A serialized value as FactlogSaver stores it (structure, or base64)."""
    return stored_value(value, serde.dumps_typed(value))


def drive(saver: Any, ops: List[Op], thread_id: str) -> None:
    """Hands the calls to a saver as LangGraph's loop does."""
    config: Dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    for kind, args in ops:
        if kind == "put":
            cp, metadata, versions = args
            config = saver.put(config, cp, metadata, versions)
        else:
            channel, values, task_id = args
            if "checkpoint_id" not in config["configurable"]:
                # The input's writes before the first checkpoint go with the next one.
                continue
            saver.put_writes(config, [(channel, v) for v in values], task_id)


def disk_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(root, name))
    return total


Workload = Callable[[Any, str], None]  # (saver, LangGraph durability mode) -> None


def direct(ops: List[Op]) -> Workload:
    """The precomputed call stream, handed to the saver directly."""
    return lambda saver, mode: drive(saver, ops, "session-1")


class Scripted:
    """The nodes of a scripted agent: the model asks for `steps` tool calls, then answers."""

    def __init__(self, steps: int, seed: int) -> None:
        self.steps = steps
        self.text = Text(seed)
        self.calls = 0

    def agent(self, state: Dict[str, Any]) -> Dict[str, Any]:
        done = 0
        for message in reversed(state["messages"]):
            if message["role"] == "user":
                break
            done += message["role"] == "tool"
        if done < self.steps:
            self.calls += 1
            call = {
                "id": f"call-{self.calls}",
                "name": "search",
                "args": {"query": self.text.words(24)},
            }
            return {"messages": [{"role": "assistant", "content": "", "tool_calls": [call]}]}
        return {"messages": [{"role": "assistant", "content": self.text.words(200)}]}

    def tools(self, state: Dict[str, Any]) -> Dict[str, Any]:
        call = state["messages"][-1]["tool_calls"][0]
        return {
            "messages": [
                {"role": "tool", "tool_call_id": call["id"], "content": self.text.words(960)}
            ]
        }


def graph_workload(turns: int, steps: int, seed: int) -> Workload:
    """A real StateGraph (agent and tool nodes, scripted) run for `turns` invocations."""

    class State(TypedDict):
        messages: Annotated[List[Dict[str, Any]], operator.add]

    def run(saver: Any, mode: str) -> None:
        nodes = Scripted(steps, seed)
        builder = StateGraph(State)
        builder.add_node("agent", nodes.agent)
        builder.add_node("tools", nodes.tools)
        builder.add_edge(START, "agent")
        builder.add_conditional_edges(
            "agent", lambda s: "tools" if s["messages"][-1].get("tool_calls") else END
        )
        builder.add_edge("tools", "agent")
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "session-1"}}
        text = Text(seed + 1)
        for _ in range(turns):
            user = {"role": "user", "content": text.words(360)}
            graph.invoke({"messages": [user]}, config, durability=mode)

    return run


def timed(workload: Workload, saver: Any, mode: str) -> float:
    """Seconds the workload takes on the saver."""
    start = time.perf_counter()
    workload(saver, mode)
    return time.perf_counter() - start


def run_factlog(durability: Any, mode: str) -> Backend:
    def run(scratch: str, workload: Workload) -> Tuple[float, int]:
        path = os.path.join(scratch, "store")
        saver = FactlogSaver(path, durability=durability)
        elapsed = timed(workload, saver, mode)
        saver.close()
        return elapsed, disk_bytes(path)

    return run


def run_sqlite(synchronous: str, mode: str) -> Backend:
    def run(scratch: str, workload: Workload) -> Tuple[float, int]:
        path = os.path.join(scratch, "checkpoints.sqlite")
        conn = sqlite3.connect(path, check_same_thread=False)
        conn.execute(f"PRAGMA synchronous={synchronous}")
        saver = SqliteSaver(conn)
        saver.setup()
        elapsed = timed(workload, saver, mode)
        conn.close()
        return elapsed, disk_bytes(scratch)

    return run


def run_floor(scratch: str, ops: List[Op]) -> Tuple[float, int]:
    """The bytes of factlog's records, written and fdatasync'ed one call at a time."""
    serde = JsonPlusSerializer()  # the savers' default serializer
    records: List[bytes] = []
    for kind, args in ops:
        if kind == "put":
            cp, metadata, _ = args
            body = {
                "checkpoint": blob(cp, serde),
                "metadata": blob(metadata, serde),
            }
        else:
            channel, values, task_id = args
            body = {
                "task_id": task_id,
                "writes": [{"channel": channel, **blob(v, serde)} for v in values],
            }
        records.append(json.dumps(body).encode() + b"\n")
    path = os.path.join(scratch, "floor.jsonl")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        start = time.perf_counter()
        for record in records:
            os.write(fd, record)
            os.fdatasync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
    return elapsed, os.path.getsize(path)


BACKENDS: Dict[str, Backend] = {
    # In --graph runs the synced pair runs LangGraph's "sync" mode, the other pair its
    # default "async" one; FactlogSaver() follows the mode (sync -> synced, async -> flushed).
    "factlog synced": run_factlog("synced", "sync"),
    "sqlite FULL": run_sqlite("FULL", "sync"),
    "factlog default": run_factlog(None, "async"),
    "sqlite NORMAL": run_sqlite("NORMAL", "async"),
    "floor": run_floor,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=200, help="tokens per step (for ns/token)")
    parser.add_argument(
        "--graph", action="store_true", help="drive a real scripted StateGraph (no floor)"
    )
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    args = parser.parse_args()

    ops = session_calls(args.turns, args.steps, seed=7)
    calls = sum(1 for kind, _ in ops) - 1  # the first input write has no checkpoint yet
    workload = graph_workload(args.turns, args.steps, 7) if args.graph else direct(ops)
    backends = {n: b for n, b in BACKENDS.items() if not (args.graph and n == "floor")}
    tokens = args.turns * args.steps * args.tokens
    times: Dict[str, List[float]] = {name: [] for name in backends}
    sizes: Dict[str, int] = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        for run in range(args.runs):
            # Interleaved: each run measures every backend, in a rotated order.
            names = list(backends)
            names = names[run % len(names) :] + names[: run % len(names)]
            for name in names:
                where = os.path.join(scratch, f"{run}-{name.replace(' ', '-')}")
                os.mkdir(where)
                elapsed, size = backends[name](where, ops if name == "floor" else workload)
                times[name].append(elapsed)
                sizes[name] = size
            print(
                f"run {run + 1}/{args.runs}: "
                + ", ".join(f"{n} {times[n][-1] * 1e3:.0f} ms" for n in backends),
                file=sys.stderr,
            )

    median = {name: statistics.median(values) for name, values in times.items()}
    if args.graph:
        print(
            f"A scripted LangGraph agent (StateGraph, agent and tool nodes) on the agent-session "
            f"workload: {args.turns} turns x {args.steps} steps; synced pair in LangGraph's "
            f"'sync' mode, the others in its default 'async' one; {args.runs} interleaved runs, "
            f"medians"
        )
    else:
        print(
            f"LangGraph checkpoint stream of the agent-session workload: {args.turns} turns x "
            f"{args.steps} steps, {calls} saver calls per session "
            f"({sum(1 for k, _ in ops if k == 'put')} puts), {args.runs} interleaved runs, medians"
        )
    print(
        f"{'backend':<16} {'session ms':>11} {'ms/turn':>8} {'us/call':>9} {'ns/token':>9} "
        f"{'bytes on disk':>14}"
    )
    for name in backends:
        per_call = "-" if args.graph else f"{median[name] / calls * 1e6:.1f}"
        print(
            f"{name:<16} {median[name] * 1e3:>11.1f} {median[name] / args.turns * 1e3:>8.2f} "
            f"{per_call:>9} {median[name] / tokens * 1e9:>9.0f} {sizes[name]:>14,}"
        )
    ratios = [
        ("factlog synced / sqlite FULL", median["factlog synced"] / median["sqlite FULL"]),
        ("factlog default / sqlite NORMAL", median["factlog default"] / median["sqlite NORMAL"]),
    ]
    if not args.graph:
        ratios += [
            ("factlog synced / floor", median["factlog synced"] / median["floor"]),
            ("sqlite FULL / floor", median["sqlite FULL"] / median["floor"]),
        ]
    for name, ratio in ratios:
        print(f"ratio {name + ':':<33} {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
