"""`factlog.langgraph.FactlogSaver` as LangGraph uses it: put/get/list round trips, how values
are kept in its records (structure or base64) and come back, real
`StateGraph`s (sync and async) that resume from their checkpoints after the store is reopened,
an interrupt resumed in a new process's saver, deletions and prunes that survive a reopen, a
child killed with SIGKILL that keeps every acknowledged checkpoint, savers sharing a store,
and the README's LangGraph example. Every test that takes `path` runs twice: on a store this
process opens, and on a client of a store another process holds and shares (`store_path` in
conftest.py), where also savers of three processes put on one thread at once and a
checkpoint over the socket's line limit is refused without ending the connection. Skipped
when LangGraph is not installed (`.ci/python-langgraph` installs it at pinned versions)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import math
import multiprocessing
import operator
import os
import json
import re
import shutil
import signal
import subprocess
import sys
from typing import Annotated, Any, Dict, List

import pytest

pytest.importorskip("langgraph.checkpoint.base")
pytest.importorskip("langgraph.graph")
ormsgpack = pytest.importorskip("ormsgpack")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langgraph.checkpoint.base import empty_checkpoint  # noqa: E402
from langgraph.checkpoint.serde.types import INTERRUPT  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Command, interrupt  # noqa: E402
from typing_extensions import TypedDict  # noqa: E402

import factlog  # noqa: E402
from factlog import _langgraph_values as values  # noqa: E402
from factlog.langgraph import (  # noqa: E402
    CHECKPOINT_KIND,
    TASK_DIGEST_PREFIX,
    TASK_PREFIX,
    WRITES_KIND,
    FactlogSaver,
    task_id_for,
)

README = os.path.join(os.path.dirname(__file__), "..", "README.md")

HANG_GUARD_SECONDS = 120
"""How long a wait on another process may take before the test calls it a hang."""


@pytest.fixture
def path(store_path):
    """A new store's directory, embedded then served by another process (conftest.py)."""
    return store_path


def config(thread_id: str, ns: str = "", checkpoint_id: str | None = None) -> Dict[str, Any]:
    configurable: Dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def put_chain(saver: FactlogSaver, thread_id: str, count: int, ns: str = "") -> List[str]:
    """Puts `count` checkpoints on one thread, each the child of the one before; returns ids."""
    ids: List[str] = []
    parent = config(thread_id, ns)
    for step in range(count):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"step": step}
        checkpoint["channel_versions"] = {"step": step + 1}
        saved = saver.put(parent, checkpoint, {"source": "loop", "step": step}, {"step": step + 1})
        ids.append(checkpoint["id"])
        parent = saved
    return ids


class State(TypedDict):
    items: Annotated[List[Any], operator.add]


def counting_graph():
    """A one-node graph whose node appends how many items it saw."""
    builder = StateGraph(State)
    builder.add_node("count", lambda state: {"items": [len(state["items"])]})
    builder.add_edge(START, "count")
    builder.add_edge("count", END)
    return builder


def approval_graph():
    """A graph that stops for a human answer (`interrupt`) and then records it."""

    def ask(state: State) -> Dict[str, Any]:
        answer = interrupt("approve the payment?")
        return {"items": [f"answer: {answer}"]}

    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder


def test_put_get_list_round_trip(path):
    with FactlogSaver(path) as saver:
        ids = put_chain(saver, "t1", 4)
        saver.put_writes(
            config("t1", checkpoint_id=ids[-1]), [("a", {"x": 1}), ("b", [2])], "task-1"
        )

        newest = saver.get_tuple(config("t1"))
        assert newest.checkpoint["id"] == ids[-1]
        assert newest.checkpoint["channel_values"] == {"step": 3}
        assert newest.metadata["step"] == 3
        assert newest.parent_config["configurable"]["checkpoint_id"] == ids[-2]
        assert newest.pending_writes == [("task-1", "a", {"x": 1}), ("task-1", "b", [2])]

        oldest = saver.get_tuple(config("t1", checkpoint_id=ids[0]))
        assert oldest.checkpoint["channel_values"] == {"step": 0}
        assert oldest.parent_config is None and oldest.pending_writes == []

        listed = [t.checkpoint["id"] for t in saver.list(config("t1"))]
        assert listed == ids[::-1]
        assert [t.metadata["step"] for t in saver.list(config("t1"), filter={"step": 1})] == [1]
        before = config("t1", checkpoint_id=ids[2])
        assert [t.checkpoint["id"] for t in saver.list(config("t1"), before=before, limit=1)] == [
            ids[1]
        ]
        assert saver.get_tuple(config("missing")) is None
        assert list(saver.list(config("missing"))) == []

    # Reopened: the same answers, folded from the log.
    with FactlogSaver(path) as saver:
        assert [t.checkpoint["id"] for t in saver.list(config("t1"))] == ids[::-1]
        newest = saver.get_tuple(config("t1"))
        assert newest.pending_writes == [("task-1", "a", {"x": 1}), ("task-1", "b", [2])]


def test_list_decodes_each_checkpoint_as_it_is_handed_out(path):
    """A long listing holds one decoded checkpoint at a time, not a page of them."""
    with FactlogSaver(path) as saver:
        ids = put_chain(saver, "t1", 5)
    # Reopened, so that every checkpoint is read back from the log.
    with FactlogSaver(path) as saver:
        made = []
        make = saver._make_tuple

        def counting(*args, **kwargs):
            made.append(args[2])
            return make(*args, **kwargs)

        saver._make_tuple = counting
        listing = saver.list(config("t1"))
        first = next(listing)
        assert first.checkpoint["id"] == ids[-1]
        assert made == [ids[-1]], "only the checkpoint handed out was decoded"
        rest = [t.checkpoint["channel_values"]["step"] for t in listing]
        assert rest == [3, 2, 1, 0]
        assert made == ids[::-1]


def test_a_listing_survives_removals_and_puts_while_it_is_read(path):
    """A listing hands out the page it read, whole, while the caller removes threads and puts
    new checkpoints between its items (each checkpoint is decoded as it is handed out, from
    what the index said when the page was read)."""
    with FactlogSaver(path) as saver:
        put_chain(saver, "a", 3)
        put_chain(saver, "b", 3)
        put_chain(saver, "c", 2, ns="sub")
        put_chain(saver, "c", 2)
        seen = []
        for tup in saver.list(None):
            thread_id = tup.config["configurable"]["thread_id"]
            seen.append((thread_id, tup.checkpoint["channel_values"]["step"]))
            if thread_id in ("a", "b"):
                saver.delete_thread(thread_id)
            else:
                # A new newest checkpoint forgets the bytes the index kept of the old one.
                ns = tup.config["configurable"]["checkpoint_ns"]
                saver.put(config("c", ns), empty_checkpoint(), {"step": 9}, {})
        assert len(seen) == 10, seen
        assert sorted(set(t for t, _ in seen)) == ["a", "b", "c"]
        assert list(saver.list(config("a"))) == [] and list(saver.list(config("b"))) == []


def test_the_events_are_a_record_blob_and_a_record_put_of_the_documented_shape(path):
    with FactlogSaver(path) as saver:
        [checkpoint_id] = put_chain(saver, "t1", 1)
        saver.put_writes(config("t1", checkpoint_id=checkpoint_id), [("ch", "v")], "task-1", "p:1")
        events = list(saver.store.events())
    assert [(e["task"], e["type"], e["kind"]) for e in events] == [
        ("langgraph:t1", "record/blob", CHECKPOINT_KIND),
        ("langgraph:t1", "record/put", WRITES_KIND),
    ]
    value = events[0]["value"]
    assert events[0]["key"] == checkpoint_id
    assert list(value) == [
        "thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "parent_checkpoint_id",
        "checkpoint",
        "metadata",
    ]
    # The checkpoint is its serializer's msgpack, raw (a bytes object, embedded or served);
    # the metadata, plain data, is kept as structure.
    assert value["checkpoint"] == {"type": "msgpack"}
    raw = events[0]["bytes"]
    assert isinstance(raw, bytes)
    unpacked = ormsgpack.unpackb(raw)
    assert unpacked["id"] == checkpoint_id
    assert unpacked["channel_values"] == {"step": 0}
    assert value["metadata"]["value"] == {"source": "loop", "step": 0}
    writes = events[1]["value"]
    assert (writes["task_id"], writes["task_path"]) == ("task-1", "p:1")
    assert writes["writes"] == [{"idx": 0, "channel": "ch", "type": "msgpack", "value": "v"}]


def test_a_record_of_another_languages_saver_is_refused_not_guessed(path):
    # The shape LangGraph.js's factlog saver writes: serialized values kept as structure.
    node_value = {"type": "json", "value": {"v": 4, "id": "c1", "channel_values": {}}}
    with factlog.Store(path) as store:
        store.task(task_id_for("t1")).append(
            {
                "type": "record/put",
                "kind": CHECKPOINT_KIND,
                "key": "c1",
                "value": {
                    "thread_id": "t1",
                    "checkpoint_ns": "",
                    "checkpoint_id": "c1",
                    "parent_checkpoint_id": None,
                    "checkpoint": node_value,
                    "metadata": {"type": "json", "value": {"step": 0}},
                },
            }
        )
    with FactlogSaver(path) as saver:
        with pytest.raises(factlog.CorruptEvent, match="Node package's FactlogSaver"):
            saver.get_tuple(config("t1"))


def test_task_ids_for_long_thread_ids_are_digests():
    assert task_id_for("t1") == TASK_PREFIX + "t1"
    fits = "x" * (128 - len(TASK_PREFIX))
    assert task_id_for(fits) == TASK_PREFIX + fits
    long = "é" * 100  # 200 bytes of UTF-8
    digest = task_id_for(long)
    assert (
        digest.startswith(TASK_DIGEST_PREFIX)
        and len(digest.encode()) == len(TASK_DIGEST_PREFIX) + 64
    )
    assert task_id_for(long + "!") != digest


def test_a_long_thread_id_round_trips_and_is_listed(path):
    long = "thread-" + "λ" * 80
    with FactlogSaver(path) as saver:
        ids = put_chain(saver, long, 2)
        put_chain(saver, "short", 1)
    with FactlogSaver(path) as saver:
        assert saver.get_tuple(config(long)).checkpoint["id"] == ids[-1]
        threads = {t.config["configurable"]["thread_id"] for t in saver.list(None)}
        assert threads == {long, "short"}


def test_writes_are_idempotent_and_special_writes_replace(path):
    with FactlogSaver(path) as saver:
        [checkpoint_id] = put_chain(saver, "t1", 1)
        at = config("t1", checkpoint_id=checkpoint_id)
        saver.put_writes(at, [("ch", "first")], "task-1")
        saver.put_writes(at, [("ch", "again")], "task-1")  # same task and index: ignored
        saver.put_writes(at, [(INTERRUPT, "one")], "task-1")
        saver.put_writes(at, [(INTERRUPT, "two")], "task-1")  # special: replaces
        writes = saver.get_tuple(at).pending_writes
        assert sorted(writes, key=str) == sorted(
            [("task-1", "ch", "first"), ("task-1", INTERRUPT, "two")], key=str
        )
        events = len(list(saver.store.events()))
    assert events == 4  # the ignored write appended nothing


def test_a_graph_resumes_from_its_checkpoint_after_reopening(path):
    thread = config("chat")
    with FactlogSaver(path) as saver:
        graph = counting_graph().compile(checkpointer=saver)
        assert graph.invoke({"items": ["a"]}, thread)["items"] == ["a", 1]
        assert graph.invoke({"items": ["b"]}, thread)["items"] == ["a", 1, "b", 3]
    with FactlogSaver(path) as saver:
        graph = counting_graph().compile(checkpointer=saver)
        assert graph.get_state(thread).values["items"] == ["a", 1, "b", 3]
        assert graph.invoke({"items": ["c"]}, thread)["items"] == ["a", 1, "b", 3, "c", 5]
        history = list(graph.get_state_history(thread))
        assert len(history) == len(list(saver.list(thread)))
        # Time travel: the state as it was after the first run, read back from the log.
        first_run = next(s for s in history if s.values.get("items") == ["a", 1])
        assert graph.get_state(first_run.config).values["items"] == ["a", 1]


def test_an_async_graph_resumes_from_its_checkpoint_after_reopening(path):
    thread = config("chat")

    async def run(items: List[str]) -> List[Any]:
        async with FactlogSaver(path) as saver:
            graph = counting_graph().compile(checkpointer=saver)
            return (await graph.ainvoke({"items": items}, thread))["items"]

    assert asyncio.run(run(["a"])) == ["a", 1]
    assert asyncio.run(run(["b"])) == ["a", 1, "b", 3]


def fan_out_graph():
    """Three nodes run in parallel in one superstep (their writes are put concurrently),
    then a join."""
    builder = StateGraph(State)
    for name in ("a", "b", "c"):
        builder.add_node(name, lambda state, name=name: {"items": [name]})
        builder.add_edge(START, name)
        builder.add_edge(name, "join")
    builder.add_node("join", lambda state: {"items": [len(state["items"])]})
    builder.add_edge("join", END)
    return builder


def test_parallel_nodes_and_threads_of_langgraph_share_one_saver(path):
    import threading

    with FactlogSaver(path, threads_cached=4) as saver:
        graph = fan_out_graph().compile(checkpointer=saver)
        failures: List[BaseException] = []

        def run(thread_id: str) -> None:
            try:
                for _ in range(3):
                    graph.invoke({"items": []}, config(thread_id), durability="sync")
            except BaseException as error:  # handed to the main thread
                failures.append(error)

        workers = [threading.Thread(target=run, args=(f"t{i}",)) for i in range(8)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert failures == []
    with FactlogSaver(path) as saver:
        graph = fan_out_graph().compile(checkpointer=saver)
        for i in range(8):
            items = graph.get_state(config(f"t{i}")).values["items"]
            assert len(items) == 12  # three runs of a, b, c and a count
            assert sorted(items[:3]) == ["a", "b", "c"] and items[3] == 3
            assert items[-1] == 11


def test_an_interrupt_is_resumed_by_a_reopened_saver(path):
    thread = config("approval")
    with FactlogSaver(path) as saver:
        graph = approval_graph().compile(checkpointer=saver)
        result = graph.invoke({"items": ["pay 10"]}, thread, durability="sync")
        assert [i.value for i in result["__interrupt__"]] == ["approve the payment?"]
    with FactlogSaver(path) as saver:
        graph = approval_graph().compile(checkpointer=saver)
        assert graph.get_state(thread).next == ("ask",)
        result = graph.invoke(Command(resume="yes"), thread)
        assert result["items"] == ["pay 10", "answer: yes"]
        assert graph.get_state(thread).next == ()


def test_delete_thread_and_prune_survive_a_reopen(path):
    with FactlogSaver(path) as saver:
        gone = put_chain(saver, "gone", 3)
        saver.put_writes(config("gone", checkpoint_id=gone[-1]), [("ch", "v")], "task-1")
        kept = put_chain(saver, "kept", 3)
        put_chain(saver, "kept", 2, ns="child:1")
        saver.delete_thread("gone")
        saver.prune(["kept"], strategy="keep_latest")
        assert saver.get_tuple(config("gone")) is None
        assert [t.checkpoint["id"] for t in saver.list(config("kept", ns=""))] == [kept[-1]]
        # A thread written after its deletion starts afresh.
        again = put_chain(saver, "gone", 1)
    with FactlogSaver(path) as saver:
        assert [t.checkpoint["id"] for t in saver.list(config("gone"))] == again
        assert saver.get_tuple(config("gone")).pending_writes == []
        assert (
            len(list(saver.list({"configurable": {"thread_id": "kept"}}))) == 2
        )  # one per namespace
        removals = [e for e in saver.store.events() if e["type"] == "record/removed"]
        assert {e["kind"] for e in removals} == {CHECKPOINT_KIND, WRITES_KIND}


def test_a_prune_past_the_seqs_one_removal_may_name_is_split(path):
    # A record/removed names at most 4096 seqs: 4100 checkpoints need two.
    with FactlogSaver(path, durability="buffered") as saver:
        ids = put_chain(saver, "long", 4100)
        saver.prune(["long"])
    with FactlogSaver(path) as saver:
        assert [t.checkpoint["id"] for t in saver.list(config("long"))] == [ids[-1]]
        removals = [e for e in saver.store.events() if e["type"] == "record/removed"]
        assert [len(e["seqs"]) for e in removals] == [4096, 3]


# 4 MiB: over the body limit of an event, as structure and in base64. 13 MiB: refused as
# structure, and in base64 (the saver's second try) it makes the request line of a client
# longer than a served store reads (16 MiB), which the client refuses before sending, so the
# connection goes on as an embedded store does.
@pytest.mark.parametrize("mib", [4, 13])
def test_a_checkpoint_over_the_body_limit_is_refused_and_nothing_changes(path, mib):
    with FactlogSaver(path) as saver:
        [kept] = put_chain(saver, "t1", 1)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"blob": "x" * (mib * 1024 * 1024)}
        with pytest.raises(factlog.LimitExceeded):
            saver.put(config("t1", checkpoint_id=kept), checkpoint, {"step": 1}, {})
        assert saver.get_tuple(config("t1")).checkpoint["id"] == kept
        assert len(list(saver.store.events())) == 1
        [after] = put_chain(saver, "t1", 1)
        assert saver.get_tuple(config("t1")).checkpoint["id"] == after


def test_copy_thread_and_delete_for_runs(path):
    with FactlogSaver(path) as saver:
        parent = config("src")
        for run in ("run-1", "run-2"):
            checkpoint = empty_checkpoint()
            parent = saver.put(parent, checkpoint, {"source": "loop", "step": 0, "run_id": run}, {})
        saver.copy_thread("src", "dst")
        assert [t.metadata["run_id"] for t in saver.list(config("dst"))] == ["run-2", "run-1"]
        saver.delete_for_runs(["run-1"])
        assert [t.metadata["run_id"] for t in saver.list(config("src"))] == ["run-2"]
        assert [t.metadata["run_id"] for t in saver.list(config("dst"))] == ["run-2"]


def test_savers_share_one_store_and_see_each_others_appends(path):
    with factlog.Store(path) as store:
        first = FactlogSaver(store=store)
        second = FactlogSaver(store=store, threads_cached=1)
        ids = put_chain(first, "t1", 2)
        assert second.get_tuple(config("t1")).checkpoint["id"] == ids[-1]
        # The second saver appends to the same thread; the first refolds what it missed.
        more = put_chain(second, "t1", 1)
        assert first.get_tuple(config("t1")).checkpoint["id"] == more[-1]
        # Threads pushed out of the small cache are refolded on their next use.
        put_chain(second, "t2", 1)
        assert second.get_tuple(config("t1")).checkpoint["id"] == more[-1]
        # The store's own tasks live beside the saver's.
        store.task("session").append({"type": "user/message", "text": "hi"})
        first.close()  # a shared store stays open
        assert store.task_ids() == ["langgraph:t1", "langgraph:t2", "session"]
        assert not store.closed


def test_async_calls_leave_the_event_loop_running(path):
    async def main() -> int:
        ticks = 0
        done = False

        async def ticker() -> None:
            nonlocal ticks
            while not done:
                ticks += 1
                await asyncio.sleep(0)

        ticking = asyncio.ensure_future(ticker())
        async with FactlogSaver(path, durability="synced") as saver:
            parent = config("t1")
            for step in range(10):
                checkpoint = empty_checkpoint()
                parent = await saver.aput(parent, checkpoint, {"step": step}, {})
                await saver.aput_writes(parent, [("ch", step)], "task-1")
            listed = [t async for t in saver.alist(config("t1"))]
            assert len(listed) == 10
            assert (await saver.aget_tuple(config("t1"))).pending_writes == [("task-1", "ch", 9)]
        done = True
        await ticking
        return ticks

    assert asyncio.run(main()) > 0


def test_durability_follows_langgraphs_mode_unless_fixed(path):
    with FactlogSaver(path) as saver:
        tiers = {
            mode: saver._tier({"configurable": {"__pregel_durability": mode}})
            for mode in ("sync", "async", "exit")
        }
        assert tiers == {"sync": "synced", "async": "flushed", "exit": "synced"}
        assert saver._tier({"configurable": {}}) == "flushed"  # LangGraph's default: async
    with FactlogSaver(path, durability="buffered") as saver:
        assert saver._tier({"configurable": {"__pregel_durability": "sync"}}) == "buffered"


def test_every_public_name_of_the_module_has_a_docstring():
    import factlog.langgraph as module

    assert module.__doc__
    for name in module.__all__:
        value = getattr(module, name)
        if not isinstance(value, str):
            assert value.__doc__, name
    for name, value in vars(FactlogSaver).items():
        if not name.startswith("_") and callable(value):
            assert value.__doc__, f"FactlogSaver.{name}"


def test_constructor_refuses_bad_arguments(path):
    with pytest.raises(TypeError):
        FactlogSaver()
    with factlog.Store(path) as store:
        with pytest.raises(TypeError):
            FactlogSaver(path, store=store)
        with pytest.raises(ValueError, match="not a factlog tier"):
            FactlogSaver(store=store, durability="sync")
        with pytest.raises(ValueError):
            FactlogSaver(store=store).prune(["t"], strategy="everything")
        with pytest.raises(ValueError, match="value_cache_bytes"):
            FactlogSaver(store=store, value_cache_bytes=-1)


def child_puts(path: str, durability: Any, acks) -> None:
    saver = FactlogSaver(path, durability=durability)
    parent = config("t1")
    for step in range(100_000):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"step": step}
        checkpoint["channel_versions"] = {"step": step + 1}
        parent = saver.put(parent, checkpoint, {"source": "loop", "step": step}, {"step": step + 1})
        saver.put_writes(parent, [("ch", step)], "task-1")
        acks.send((checkpoint["id"], step))  # acknowledged: put and put_writes returned


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
@pytest.mark.parametrize("durability", [None, "synced"])
def test_a_killed_child_keeps_every_acknowledged_checkpoint(path, durability):
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=child_puts, args=(path, durability, sender))
    process.start()
    acked = []
    try:
        while len(acked) < 25:
            assert receiver.poll(120), "the child stopped acknowledging checkpoints"
            acked.append(receiver.recv())
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.join()
    assert process.exitcode == -signal.SIGKILL
    while receiver.poll():
        acked.append(receiver.recv())

    with FactlogSaver(path) as saver:
        for checkpoint_id, step in acked:
            found = saver.get_tuple(config("t1", checkpoint_id=checkpoint_id))
            assert found is not None, f"acknowledged checkpoint {step} was lost"
            assert found.checkpoint["channel_values"] == {"step": step}
            assert found.pending_writes == [("task-1", "ch", step)]
        # The newest checkpoint kept is at least the last acknowledged one, and the saver
        # continues the chain.
        newest = saver.get_tuple(config("t1"))
        assert newest.metadata["step"] >= acked[-1][1]
        assert put_chain(saver, "t1", 1)


CHILD_PUTS_ON_ONE_THREAD = """
import json, sys
from langgraph.checkpoint.base import empty_checkpoint
from factlog.langgraph import FactlogSaver
path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with FactlogSaver(path) as saver:
    assert saver.store.served_by is not None, "not a client"
    print("ready", flush=True)
    assert sys.stdin.readline() == "go\\n"
    parent = {"configurable": {"thread_id": "shared", "checkpoint_ns": ""}}
    ids = []
    for step in range(count):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"by": name, "step": step}
        parent = saver.put(parent, checkpoint, {"source": "loop", "step": step, "by": name}, {})
        saver.put_writes(parent, [("ch", f"{name}-{step}")], f"task-{name}")
        ids.append(checkpoint["id"])
print(json.dumps(ids))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="Unix domain sockets")
def test_savers_of_three_processes_put_on_one_thread_at_once(store_holder, tmp_path):
    # Each saver's appends land between the other processes' ones; a saver whose append did
    # not directly follow what its index folded refolds the log from there, so every index
    # stays in the log's order, and no append gives up however busy the thread is.
    path = os.path.join(str(tmp_path), "store")
    store_holder.share(path)
    count = 30
    try:
        with FactlogSaver(path) as saver:
            assert saver.store.served_by == store_holder.pid
            children = {
                name: subprocess.Popen(
                    [sys.executable, "-c", CHILD_PUTS_ON_ONE_THREAD, path, name, str(count)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                for name in ("a", "b")
            }
            for child in children.values():  # connected: all three start together
                assert child.stdout.readline() == "ready\n"
            for child in children.values():
                child.stdin.write("go\n")
                child.stdin.flush()
            ids = {"p": []}
            parent = config("shared")
            for step in range(count):  # while the children put
                checkpoint = empty_checkpoint()
                checkpoint["channel_values"] = {"by": "p", "step": step}
                metadata = {"source": "loop", "step": step, "by": "p"}
                parent = saver.put(parent, checkpoint, metadata, {})
                saver.put_writes(parent, [("ch", f"p-{step}")], "task-p")
                ids["p"].append(checkpoint["id"])
            for name, child in children.items():
                out, _ = child.communicate(timeout=HANG_GUARD_SECONDS)
                assert child.returncode == 0, f"child {name} failed"
                ids[name] = json.loads(out)
            listed = list(saver.list(config("shared")))
            with FactlogSaver(path) as fresh:  # folds the thread from the log alone
                assert [t.checkpoint["id"] for t in fresh.list(config("shared"))] == [
                    t.checkpoint["id"] for t in listed]
        assert len(listed) == 3 * count
        by_id = {t.checkpoint["id"]: t for t in listed}
        for name, chain in ids.items():
            for step, checkpoint_id in enumerate(chain):
                found = by_id[checkpoint_id]
                assert found.checkpoint["channel_values"] == {"by": name, "step": step}
                assert found.metadata["by"] == name
                parent_id = found.parent_config and found.parent_config["configurable"][
                    "checkpoint_id"]
                assert parent_id == (chain[step - 1] if step else None)
                assert found.pending_writes == [(f"task-{name}", "ch", f"{name}-{step}")]
    finally:
        store_holder.release(path)


def readme_example() -> str:
    """The first python block after python/README.md's "LangGraph" heading."""
    with open(README, encoding="utf-8") as f:
        found = re.search(r"\n## LangGraph\n.*?```python\n(.*?)```", f.read(), re.DOTALL)
    assert found, "python/README.md has no LangGraph section with a python block"
    return found.group(1)


def test_the_readme_langgraph_example_runs(tmp_path, monkeypatch):
    code = readme_example()
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(
            compile(code, "python/README.md (LangGraph)", "exec", dont_inherit=True),
            {"__name__": "readme"},
        )
    assert out.getvalue() == "['hello', 'hello, 1 so far', 'again', 'again, 3 so far']\n"


# ---------------------------------------------------------------------------------------------
# How the saver keeps serialized values in its records (factlog/_langgraph_values.py): plain
# data as JSON structure, LangChain messages as structure with their msgpack extensions, and
# everything that would not come back byte for byte (bytes, non-string keys, non-finite floats,
# `$secret`, the reserved key, nesting past the store's depth) in base64; every value comes
# back equal, from the saver's index, its value cache and the log. A record of another shape
# (the Node package's saver's, or a damaged one) is refused with `CorruptEvent`.


def deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


# (channel, value, the form the write of it takes): "value" (structure), "ext" (structure with
# extensions) or "base64". A value the store refuses as structure (a non-finite float, nesting
# past its limit, bytes inside) makes its write's event fall back to base64 whole. A checkpoint
# holding any of them is its serializer's bytes, raw, in a record/blob.
CASES = [
    ("text", "héllo 🦀 \u2028 \x00", "value"),
    ("plain", {"messages": [{"role": "user", "content": "hi"}], "n": [1, -2, 3.5, 2**64 - 1]},
     "value"),
    ("float", 1.0, "value"),
    ("none", None, "base64"),  # LangGraph's serializer gives ("null", b"")
    ("bytes", b"\x00\xff raw", "base64"),
    ("binary inside", {"blob": b"\x01\x02"}, "base64 whole"),
    ("int keys", {1: "one", 2: "two"}, "base64"),
    ("nan", float("nan"), "base64 whole"),
    ("infinity", {"x": [float("inf")]}, "base64 whole"),
    ("secret", {"key": {"$secret": "sk"}}, "base64"),
    ("reserved", {"$msgpack_ext": [1, "x"]}, "base64"),
    ("deep", deep(200), "base64 whole"),  # past the store's nesting limit
    ("messages", [HumanMessage("hi", id="h1"), AIMessage("yo", id="a1")], "ext"),
    ("tool", {"m": ToolMessage("42", tool_call_id="c1"), "tuple": (1, "a")}, "ext"),
]


def form(stored: Dict[str, Any]) -> str:
    if "base64" in stored:
        return "base64"
    assert stored["type"] == "msgpack"
    assert set(stored) - {"idx", "channel"} <= {"type", "value", "ext"}
    return "ext" if stored.get("ext") is True else "value"


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def expected(saver: FactlogSaver, value: Any) -> Any:
    """What the serializer gives back for `value` (tuples become lists, ...)."""
    return saver.serde.loads_typed(saver.serde.dumps_typed(value))


@pytest.mark.parametrize("channel,value,in_write", CASES, ids=[c[0] for c in CASES])
def test_each_value_is_kept_in_its_form_and_comes_back(store_path, channel, value, in_write):
    with FactlogSaver(store_path) as saver:
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {channel: value}
        saved = saver.put(config("t1"), checkpoint, {"source": "input", "step": -1}, {})
        saver.put_writes(saved, [(channel, value)], "task-1")
        # The newest checkpoint of a thread is read from the saver's index.
        got = saver.get_tuple(config("t1"))
        want = expected(saver, value)
        assert same(got.checkpoint["channel_values"][channel], want)
        assert same(got.pending_writes[0][2], want)
        events = list(saver.store.events(task=task_id_for("t1")))
    # The checkpoint: its serializer's bytes as they are, whatever they hold, but a `$secret`
    # mark (which counts for nothing in raw bytes): that one stays in base64.
    if channel == "secret":
        assert events[0]["type"] == "record/put"
        assert form(events[0]["value"]["checkpoint"]) == "base64"
    else:
        assert events[0]["type"] == "record/blob"
        assert events[0]["value"]["checkpoint"] == {"type": "msgpack"}
        assert events[0]["bytes"] == saver.serde.dumps_typed(checkpoint)[1]
    assert form(events[0]["value"]["metadata"]) == "value"
    assert form(events[1]["value"]["writes"][0]) == in_write.split()[0]
    # Reopened: folded and read back from the log.
    with FactlogSaver(store_path) as saver:
        got = saver.get_tuple(config("t1", checkpoint_id=checkpoint["id"]))
        assert same(got.checkpoint["channel_values"][channel], want)
        assert same(got.pending_writes[0][2], want)
        assert got.metadata == {"source": "input", "step": -1}


def test_a_checkpoint_stored_as_structure_by_an_earlier_release_is_read(path):
    # Before record/blob, a checkpoint was a record/put with the checkpoint as structure.
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": [{"role": "user", "content": "hi"}]}
    with factlog.Store(path) as store:
        store.task(task_id_for("t1")).append(
            record(
                {"type": "msgpack", "value": checkpoint},
                {"type": "msgpack", "value": {"source": "input", "step": -1}},
            )
        )
    with FactlogSaver(path) as saver:
        got = saver.get_tuple(config("t1"))
        assert got.checkpoint["channel_values"] == checkpoint["channel_values"]
        assert got.metadata == {"source": "input", "step": -1}


def test_a_message_is_an_extension_object_in_the_structure_of_a_write(path):
    with FactlogSaver(path) as saver:
        saved = saver.put(config("t1"), empty_checkpoint(), {}, {})
        saver.put_writes(saved, [("messages", [AIMessage("yo", id="a1")])], "task-1")
        [_, event] = list(saver.store.events())
    [stored] = event["value"]["writes"]
    assert stored["ext"] is True
    [message] = stored["value"]
    code, payload = message[values.EXT_KEY]
    assert isinstance(code, int) and "AIMessage" in payload and "yo" in str(payload)


def test_the_value_cache_changes_no_answer(store_path):
    # Checkpoints and writes read from the index, the cache or the log give the same tuples:
    # no cache, one that holds a few values (evicting as it goes), and the default.
    with FactlogSaver(store_path) as saver:
        parent = config("t1")
        for step in range(12):
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"messages": [AIMessage(f"m{step}", id=f"a{step}")],
                                            "n": step}
            parent = saver.put(parent, checkpoint, {"step": step}, {})
            saver.put_writes(parent, [("n", step), ("blob", bytes([step]))], f"task-{step}")
    answers = []
    for cache_bytes in (0, 2_000, 32 * 1024 * 1024):
        with FactlogSaver(store_path, value_cache_bytes=cache_bytes) as saver:
            listed = list(saver.list(config("t1")))
            ids = [t.checkpoint["id"] for t in listed]
            by_id = [saver.get_tuple(config("t1", checkpoint_id=i)) for i in ids + ids[::-1]]
            again = list(saver.list(config("t1"), limit=5))
            answers.append(
                [(t.checkpoint, t.metadata, t.pending_writes) for t in listed + by_id + again]
            )
    assert len(answers[0]) == 12 + 24 + 5
    assert answers[0] == answers[1] == answers[2]


def test_a_store_of_segment_format_1_gets_record_puts(tmp_path):
    # A store written by 0.1.0 (segment format 1) cannot hold a record/blob: the saver stores
    # its checkpoints as record/put, as structure where it can, and reads them back.
    fixture = os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures",
        "v1-clean-multi-task", "store",
    )
    path = str(tmp_path / "v1")
    shutil.copytree(fixture, path)
    with FactlogSaver(path) as saver:
        ids = put_chain(saver, "t1", 2)
        assert saver.get_tuple(config("t1")).checkpoint["channel_values"] == {"step": 1}
        events = list(saver.store.events(task=task_id_for("t1")))
    assert [(e["type"], form(e["value"]["checkpoint"])) for e in events] == [
        ("record/put", "value"),
        ("record/put", "value"),
    ]
    with FactlogSaver(path) as saver:
        assert [t.checkpoint["id"] for t in saver.list(config("t1"))] == ids[::-1]


def test_a_marked_secret_in_a_checkpoint_is_kept_as_before(tmp_path):
    # A `{"$secret": ...}` mark counts in JSON, not in raw bytes: such a checkpoint stays in
    # base64 (not scanned), so the store's refusal of unmarked ones does not refuse it.
    store = factlog.Store(str(tmp_path / "s"), refuse_unmarked_secrets=True)
    with FactlogSaver(store=store) as saver:
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"key": {"$secret": "AKIAIOSFODNN7EXAMPLE"}}
        saver.put(config("t1"), checkpoint, {}, {})
        got = saver.get_tuple(config("t1"))
        assert got.checkpoint["channel_values"] == {"key": {"$secret": "AKIAIOSFODNN7EXAMPLE"}}
        saver.store.close()


def test_a_checkpoint_is_subject_to_the_stores_secret_rules(tmp_path):
    # Raw bytes in a record/blob, a checkpoint is still scanned for credential shapes: one in
    # it is refused when the store is told to refuse them.
    store = factlog.Store(str(tmp_path / "s"), refuse_unmarked_secrets=True)
    with FactlogSaver(store=store) as saver:
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"note": "key AKIAIOSFODNN7EXAMPLE"}
        with pytest.raises(factlog.UnmarkedSecret):
            saver.put(config("t1"), checkpoint, {}, {})
        saver.store.close()


def record(checkpoint: Dict[str, Any], metadata: Dict[str, Any], **extra: Any) -> Dict[str, Any]:
    return {
        "type": "record/put",
        "kind": CHECKPOINT_KIND,
        "key": "c1",
        "value": {
            "thread_id": "t1",
            "checkpoint_ns": "",
            "checkpoint_id": "c1",
            "parent_checkpoint_id": None,
            "checkpoint": checkpoint,
            "metadata": metadata,
            **extra,
        },
    }


NODE_METADATA = {"type": "json", "value": {"step": 0}}
METADATA = {"type": "msgpack", "value": {"step": 0}}
FOREIGN = {
    # The Node package's records: its serializer's "json" values, channel values beside.
    "node": record({"type": "json", "value": {"v": 4, "id": "c1"}}, NODE_METADATA,
                   channel_values=[]),
    "node json value": record({"type": "json", "value": {"v": 4, "id": "c1"}}, METADATA),
    "node channel values": record({"type": "msgpack", "value": {"v": 4, "id": "c1"}},
                                  METADATA, channel_values=[]),
    # Damage.
    "neither value nor base64": record({"type": "msgpack"}, METADATA),
    "bad base64": record({"type": "msgpack", "base64": "not base64!"}, METADATA),
    "bad extension": record(
        {"type": "msgpack", "value": {values.EXT_KEY: ["not a code", 1]}, "ext": True}, METADATA
    ),
}


@pytest.mark.parametrize("name", list(FOREIGN))
def test_a_record_of_another_shape_is_refused_not_guessed(path, name):
    with factlog.Store(path) as store:
        store.task(task_id_for("t1")).append(FOREIGN[name])
    with FactlogSaver(path) as saver:
        with pytest.raises(factlog.CorruptEvent):
            saver.get_tuple(config("t1"))
