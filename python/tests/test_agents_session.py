"""factlog.agents.FactlogSession, the OpenAI Agents SDK session on a factlog task: every item
kind comes back equal and lands in the expected event type; the limit semantics; pop and clear
are events the log keeps and a reopened store folds the same way; shared stores; long and
unicode session ids; a child process killed with SIGKILL loses no acknowledged item; a
cancelled write still settles; the README's example runs. Every test that takes ``path`` runs
twice: on a store this process opens, and on a client of a store another process holds and
shares (``store_path`` in conftest.py), where also sessions of one id in three processes add
and pop at once and an item over the socket's line limit is refused without ending the
connection. Skipped without the SDK."""

from __future__ import annotations

import asyncio
import contextlib
import io
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading

import pytest

agents = pytest.importorskip("agents")

import factlog  # noqa: E402
from factlog.agents import (  # noqa: E402
    BATCH_ITEMS_MAX,
    ITEM_KIND,
    FactlogSession,
    task_id_for,
)

README = os.path.join(os.path.dirname(__file__), "..", "README.md")

HANG_GUARD_SECONDS = 120
"""How long a wait on another process may take before the test calls it a hang."""


@pytest.fixture
def path(store_path):
    """A new store's directory, embedded then served by another process (conftest.py)."""
    return store_path

USER_TEXT = {"role": "user", "content": "What is the weather in Paris?"}
USER_PARTS = {
    "type": "message",
    "role": "user",
    "content": [
        {"type": "input_text", "text": "Look at "},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"},
        {"type": "input_text", "text": "this"},
    ],
}
SYSTEM = {"role": "system", "content": "Be brief."}
DEVELOPER = {"role": "developer", "content": [{"type": "input_text", "text": "No tools."}]}
ASSISTANT_EASY = {"role": "assistant", "content": "Sunny."}
ASSISTANT_OUTPUT = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [
        {"type": "output_text", "text": "It is ", "annotations": [], "logprobs": []},
        {"type": "output_text", "text": "sunny.", "annotations": []},
    ],
}
REFUSAL = {
    "id": "msg_2",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "refusal", "refusal": "I cannot help with that."}],
}
FUNCTION_CALL = {
    "id": "fc_1",
    "type": "function_call",
    "call_id": "call_1",
    "name": "get_weather",
    "arguments": '{"city":"Paris"}',
    "status": "completed",
}
FUNCTION_OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "18 C, sunny"}
REASONING = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "The user wants weather."}],
    "encrypted_content": None,
}
HANDOFF_CALL = {
    "id": "fc_2",
    "type": "function_call",
    "call_id": "call_2",
    "name": "transfer_to_billing",
    "arguments": "{}",
    "status": "completed",
}
HANDOFF_OUTPUT = {
    "type": "function_call_output",
    "call_id": "call_2",
    "output": '{"assistant": "Billing"}',
}
APPROVAL_REQUEST = {
    "id": "mcpr_1",
    "type": "mcp_approval_request",
    "name": "delete_file",
    "arguments": '{"path": "/tmp/x"}',
    "server_label": "files",
}
APPROVAL_RESPONSE = {
    "type": "mcp_approval_response",
    "approval_request_id": "mcpr_1",
    "approve": False,
    "reason": "not now",
}
UNKNOWN = {"type": "x_future_item", "payload": {"nested": [1, 2.5, None, True, "ü"]}}

ALL_ITEMS = [
    USER_TEXT,
    USER_PARTS,
    SYSTEM,
    DEVELOPER,
    ASSISTANT_EASY,
    ASSISTANT_OUTPUT,
    REFUSAL,
    FUNCTION_CALL,
    FUNCTION_OUTPUT,
    REASONING,
    HANDOFF_CALL,
    HANDOFF_OUTPUT,
    APPROVAL_REQUEST,
    APPROVAL_RESPONSE,
    UNKNOWN,
]


def run(coroutine):
    return asyncio.run(coroutine)


def task_events(store: factlog.Store, task_id: str):
    return list(store.events(task=task_id))


def user(n: int) -> dict:
    return {"role": "user", "content": f"message {n}"}


def test_every_item_kind_round_trips_into_the_expected_event_type(path):
    with FactlogSession("s1", path) as session:
        run(session.add_items(ALL_ITEMS))
        assert run(session.get_items()) == ALL_ITEMS
        events = task_events(session.store, "s1")
    assert [(event["type"], event.get("kind")) for event in events] == [
        ("user/message", None),
        ("user/message", None),
        ("record/put", ITEM_KIND),  # system
        ("record/put", ITEM_KIND),  # developer
        ("assistant/message", None),
        ("assistant/message", None),
        ("assistant/message", None),  # a refusal: no output_text, empty text
        ("assistant/message", None),  # the function call the model asked for
        ("record/put", ITEM_KIND),
        ("record/put", ITEM_KIND),
        ("assistant/message", None),
        ("record/put", ITEM_KIND),
        ("record/put", ITEM_KIND),
        ("record/put", ITEM_KIND),
        ("record/put", ITEM_KIND),
    ]
    assert events[0]["text"] == USER_TEXT["content"]
    assert events[1]["text"] == "Look at this"
    assert events[5]["text"] == "It is sunny."
    assert events[6]["text"] == ""
    assert events[7]["tool_calls"] == [
        {"call_id": "call_1", "tool": "get_weather", "args": '{"city":"Paris"}'}
    ]
    assert events[0]["item"] == USER_TEXT and events[8]["value"] == FUNCTION_OUTPUT
    # One add_items is one atomic batch: consecutive seqs, one revision step per item.
    assert [event["revision"] for event in events] == list(range(1, len(ALL_ITEMS) + 1))
    # The store's own view: a call asked for, not dispatched, so no holder rules apply.
    with factlog.Store(path) as store:
        assert store.task("s1").state()["session"]["calls"]["call_1"]["status"] == "not_started"


def test_returned_items_are_fresh_objects(path):
    with FactlogSession("s1", path) as session:
        item = {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        run(session.add_items([item]))
        item["content"].append("changed after the add")
        first = run(session.get_items())
        first[0]["content"] = "changed by the caller"
        assert run(session.get_items()) == [{"role": "user", "content": [
            {"type": "input_text", "text": "hi"}]}]


@pytest.mark.parametrize(
    "limit, expected",
    [(None, list(range(6))), (1, [5]), (4, [2, 3, 4, 5]), (6, list(range(6))),
     (50, list(range(6))), (0, []), (-1, list(range(6)))],
)
def test_limit_gives_the_latest_items_in_chronological_order(path, limit, expected):
    with FactlogSession("s1", path) as session:
        run(session.add_items([user(n) for n in range(6)]))
        assert run(session.get_items(limit=limit)) == [user(n) for n in expected]


def test_session_settings_limit_is_the_default_and_an_explicit_limit_wins(path):
    from agents.memory import SessionSettings

    with factlog.Store(path) as store:
        session = FactlogSession("s1", store=store, session_settings={"limit": 2})
        assert isinstance(session.session_settings, SessionSettings)
        run(session.add_items([user(n) for n in range(5)]))
        assert run(session.get_items()) == [user(3), user(4)]
        assert run(session.get_items(limit=3)) == [user(2), user(3), user(4)]
        assert FactlogSession("s2", store=store).session_settings == SessionSettings()
        with pytest.raises(TypeError):
            FactlogSession("s3", store=store, session_settings={"limitt": 1})


def test_pop_and_clear_are_events_and_a_reopened_store_folds_the_same(path):
    with FactlogSession("s1", path) as session:
        assert run(session.pop_item()) is None
        run(session.clear_session())  # nothing to clear: nothing written
        assert task_events(session.store, "s1") == []
        run(session.add_items([user(n) for n in range(4)]))
        assert run(session.pop_item()) == user(3)
        assert run(session.pop_item()) == user(2)
        run(session.add_items([user(10)]))
        assert run(session.get_items()) == [user(0), user(1), user(10)]
        events = task_events(session.store, "s1")
    removals = [e for e in events if e["type"] == "record/removed"]
    assert [(r["kind"], r["seqs"]) for r in removals] == [
        (ITEM_KIND, [events[3]["seq"]]),
        (ITEM_KIND, [events[2]["seq"]]),
    ]
    with FactlogSession("s1", path) as reopened:
        assert run(reopened.get_items()) == [user(0), user(1), user(10)]
        run(reopened.clear_session())
        assert run(reopened.get_items()) == []
        run(reopened.add_items([user(20)]))
        last_removal = [
            e for e in task_events(reopened.store, "s1") if e["type"] == "record/removed"
        ][-1]
        assert last_removal["through_seq"] == events[-1]["seq"]
    with FactlogSession("s1", path) as again:
        assert run(again.get_items()) == [user(20)]
        # The log keeps every item ever added: the removals only fold them away.
        puts = [e for e in task_events(again.store, "s1") if e["type"] == "user/message"]
        assert len(puts) == 6


def test_a_popped_function_call_added_again_falls_back_to_a_record(path):
    with FactlogSession("s1", path) as session:
        run(session.add_items([USER_TEXT, FUNCTION_CALL]))
        assert run(session.pop_item()) == FUNCTION_CALL
        # The runner re-adds the same call (same call id) after a rewind: the store would
        # refuse a second assistant/message naming call_1 (CallIdReused), so it is a record.
        run(session.add_items([FUNCTION_CALL, FUNCTION_CALL, FUNCTION_OUTPUT]))
        assert run(session.get_items()) == [USER_TEXT, FUNCTION_CALL, FUNCTION_CALL,
                                            FUNCTION_OUTPUT]
        types = [e["type"] for e in task_events(session.store, "s1")]
    assert types == ["user/message", "assistant/message", "record/removed", "record/put",
                     "record/put", "record/put"]
    with FactlogSession("s1", path) as reopened:
        assert run(reopened.get_items()) == [USER_TEXT, FUNCTION_CALL, FUNCTION_CALL,
                                             FUNCTION_OUTPUT]


def test_a_call_id_another_writer_made_known_still_adds(path):
    with factlog.Store(path) as store:
        session = FactlogSession("s1", store=store)
        run(session.get_items())
        # The harness dispatches call_1 on the same task behind the session's back.
        store.task("s1").append({"type": "tool/call", "call_id": "call_1", "tool": "get_weather",
                                 "effect": "read_only"})
        run(session.add_items([FUNCTION_CALL]))
        assert run(session.get_items()) == [FUNCTION_CALL]


def test_sessions_share_a_store_and_see_only_their_own_task(path):
    with factlog.Store(path) as store:
        store.task("harness").append({"type": "turn/start"})
        a = FactlogSession("a", store=store)
        b = FactlogSession("b", store=store)
        a_again = FactlogSession("a", store=store)
        run(a.add_items([user(1)]))
        run(b.add_items([user(2)]))
        assert run(a_again.get_items()) == [user(1)]
        run(a_again.add_items([user(3)]))
        # a's fold notices the revision a_again moved and reads only what it missed.
        assert run(a.get_items()) == [user(1), user(3)]
        assert run(a.pop_item()) == user(3)
        assert run(a_again.get_items()) == [user(1)]
        assert run(b.get_items()) == [user(2)]
        a.close()
        assert not store.closed  # a shared store stays open
        assert run(b.get_items()) == [user(2)]
        with pytest.raises(RuntimeError, match="is closed"):
            run(a.get_items())
        with pytest.raises(RuntimeError, match="is closed"):
            run(a.add_items([]))


def test_an_owned_store_closes_with_the_session(path):
    session = FactlogSession("s1", path)
    session.close()
    session.close()
    assert session.closed and session.store.closed
    with factlog.Store(path):  # not locked any more
        pass


def test_constructor_refusals(path):
    with pytest.raises(ValueError, match="session_id is empty"):
        FactlogSession("", path)
    with pytest.raises(ValueError, match="either path"):
        FactlogSession("s1")
    with pytest.raises(ValueError, match="durability"):
        FactlogSession("s1", path, durability="eventually")
    with factlog.Store(path) as store:
        with pytest.raises(ValueError, match="either path"):
            FactlogSession("s1", path, store=store)


def test_long_and_unicode_session_ids_map_to_distinct_valid_tasks(path):
    long_a = "conversation/" + "x" * 300 + "/a"
    long_b = "conversation/" + "x" * 300 + "/b"
    emoji = "会話-😊-" * 20  # 220 bytes of UTF-8
    ids = ["会話 😊", "x" * 128, long_a, long_b, emoji, "sha256:looks-like-a-digest"]
    tasks = [task_id_for(session_id) for session_id in ids]
    assert tasks[0] == "会話 😊" and tasks[1] == "x" * 128  # short ids are their own task
    assert len(set(tasks)) == len(tasks)
    for session_id, task in zip(ids[2:], tasks[2:]):
        assert re.fullmatch(r"sha256:[0-9a-f]{64}:.*", task, re.DOTALL)
        assert 1 <= len(task.encode("utf-8")) <= 128
        assert task == task_id_for(session_id)  # deterministic
        assert session_id.startswith(task.split(":", 2)[2])  # a readable head
    with factlog.Store(path) as store:
        for n, session_id in enumerate(ids):
            run(FactlogSession(session_id, store=store).add_items([user(n)]))
        for n, session_id in enumerate(ids):
            session = FactlogSession(session_id, store=store)
            assert session.task_id == tasks[n]
            assert run(session.get_items()) == [user(n)]
        assert sorted(store.task_ids()) == sorted(tasks)


def test_more_than_one_batch_of_items_round_trips(path):
    items = [user(n) for n in range(2 * BATCH_ITEMS_MAX + 100)]
    with FactlogSession("s1", path) as session:
        run(session.add_items(items))
        assert run(session.get_items()) == items
        assert run(session.get_items(limit=3)) == items[-3:]


def test_unicode_and_large_items_round_trip(path):
    big = {"role": "user", "content": "ü€😊" * 100_000}  # about 1 MiB of UTF-8
    odd = {"type": "x", "keys": {"": 0, "😊": [{"a\u0000b": "\u2028"}]}, "n": 2**62}
    with FactlogSession("s1", path, durability="synced") as session:
        run(session.add_items([big, odd]))
        assert run(session.get_items()) == [big, odd]
    with FactlogSession("s1", path) as reopened:
        assert run(reopened.get_items()) == [big, odd]


def test_an_item_over_the_body_limit_writes_nothing_of_its_batch(path):
    with FactlogSession("s1", path) as session:
        with pytest.raises(factlog.LimitExceeded):
            run(session.add_items([user(1), {"type": "x", "v": "y" * (5 * 1024 * 1024)}]))
        assert run(session.get_items()) == []


def test_an_item_over_the_request_line_limit_is_refused_and_the_session_goes_on(path):
    # Over a served store's request line limit (16 MiB) too: the client refuses the line
    # before sending it, so the connection goes on as an embedded store does.
    with FactlogSession("s1", path) as session:
        with pytest.raises(factlog.LimitExceeded):
            run(session.add_items([{"type": "x", "v": "y" * (17 * 1024 * 1024)}]))
        run(session.add_items([user(1)]))
        assert run(session.get_items()) == [user(1)]


def test_a_marked_secret_comes_back_as_the_stores_reference(path):
    with FactlogSession("s1", path) as session:
        output = {"type": "function_call_output", "call_id": "c1",
                  "output": {"$secret": "hunter2"}}
        run(session.add_items([user(1), output]))
        items = run(session.get_items())
        assert items[0] == user(1)
        assert re.fullmatch(r"sec_[0-9a-f]{32}", items[1]["output"]["$secret_ref"])
        with FactlogSession("s1", store=session.store) as other:
            assert run(other.get_items()) == items


def test_an_item_that_is_not_json_writes_nothing(path):
    with FactlogSession("s1", path) as session:
        with pytest.raises(TypeError):
            run(session.add_items([user(1), {"role": "user", "content": object()}]))
        run(session.add_items([user(2)]))
        assert run(session.get_items()) == [user(2)]


def test_a_cancelled_add_still_settles_before_the_cancellation_is_raised(path):
    async def scenario(session):
        started = threading.Event()
        release = threading.Event()
        real_append_batch = None

        def slow_append_batch(*args, **kwargs):
            started.set()
            release.wait(timeout=60)
            return real_append_batch(*args, **kwargs)

        await session.get_items()  # takes the task handle
        real_append_batch = session._task.append_batch
        session._task = _Wrapped(session._task, append_batch=slow_append_batch)
        adding = asyncio.create_task(session.add_items([user(1)]))
        await asyncio.to_thread(started.wait, 60)
        adding.cancel()
        await asyncio.sleep(0)
        adding.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await adding
        return await session.get_items()

    with FactlogSession("s1", path) as session:
        assert run(scenario(session)) == [user(1)]


class _Wrapped:
    """A task handle with some of its methods replaced."""

    def __init__(self, task, **replaced):
        self._task = task
        self._replaced = replaced

    def __getattr__(self, name):
        return self._replaced.get(name) or getattr(self._task, name)


def test_calls_from_threads_with_their_own_loops_keep_every_item(path):
    with FactlogSession("s1", path) as session:
        def add(n):
            asyncio.run(session.add_items([user(n), user(n + 1000)]))

        threads = [threading.Thread(target=add, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        items = run(session.get_items())
    assert sorted(item["content"] for item in items) == sorted(
        f"message {n}" for k in range(8) for n in (k, k + 1000)
    )
    for k in range(8):  # each add_items is one batch: its two items stay together
        at = items.index(user(k))
        assert items[at + 1] == user(k + 1000)


def test_the_compaction_hook_replaces_a_suffix_atomically(path):
    async def scenario(session):
        await session.add_items([user(n) for n in range(5)])
        snapshot = await session._get_compaction_snapshot(3)
        assert snapshot.items == [user(2), user(3), user(4)] and not snapshot.complete
        summary = summary_item()
        assert await snapshot.replace_suffix(1, [summary])
        assert await session.get_items() == [user(0), user(1), user(2), summary]
        # A snapshot taken before another change no longer applies.
        stale = await session._get_compaction_snapshot(10)
        assert stale.complete
        await session.add_items([user(9)])
        assert not await stale.replace_suffix(0, [summary])
        # Leading items the predicate calls expired go in the same batch.
        expired = await session._get_compaction_snapshot(
            2, prune_prefix=lambda item: item in (user(0), user(1)))
        assert await expired.replace_suffix(1, [user(8)])
        return await session.get_items()

    with FactlogSession("s1", path) as session:
        assert run(scenario(session)) == [user(2), summary_item(), user(8)]
        events = task_events(session.store, "s1")
    batch = events[-2:]
    assert batch[0]["type"] == "record/removed" and batch[1]["type"] == "user/message"
    assert batch[0]["revision"] + 1 == batch[1]["revision"]
    with FactlogSession("s1", path) as reopened:
        assert run(reopened.get_items()) == [user(2), summary_item(), user(8)]


def test_a_compaction_removing_more_than_4096_items_is_still_one_batch(path):
    async def scenario(session):
        await session.add_items([user(n) for n in range(5000)])
        snapshot = await session._get_compaction_snapshot(1, prune_prefix=lambda item: True)
        assert await snapshot.replace_suffix(0, [summary_item()])
        return await session.get_items()

    with FactlogSession("s1", path) as session:
        assert run(scenario(session)) == [summary_item()]
        batch = list(session.store.task("s1").events(from_seq=5001))
    assert [(e["type"], len(e.get("seqs", ()))) for e in batch] == [
        ("record/removed", 4096), ("record/removed", 904), ("assistant/message", 0)]
    assert batch[0]["revision"] + 2 == batch[2]["revision"]


def summary_item() -> dict:
    return {"role": "assistant", "content": "summary of 3 and 4"}


def _child(path: str, acknowledged) -> None:
    async def main():
        session = FactlogSession("crash", path)  # durability "flushed": survives a kill
        n = 0
        while True:
            await session.add_items([user(n), FUNCTION_OUTPUT])
            n += 1
            acknowledged.value = n

    asyncio.run(main())


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_a_killed_process_keeps_every_acknowledged_item(path):
    context = multiprocessing.get_context("spawn")
    acknowledged = context.Value("i", 0)
    process = context.Process(target=_child, args=(path, acknowledged))
    process.start()
    try:
        for _ in range(1200):
            if acknowledged.value >= 50 or not process.is_alive():
                break
            process.join(timeout=0.1)
        assert acknowledged.value >= 50, "the child did not add items"
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.join()
    assert process.exitcode == -signal.SIGKILL
    acked = acknowledged.value
    with FactlogSession("crash", path) as session:
        items = run(session.get_items())
    # Every acknowledged add is there, whole; at most the one in flight follows it.
    assert len(items) % 2 == 0 and acked <= len(items) // 2 <= acked + 1
    assert items == [x for n in range(len(items) // 2) for x in (user(n), FUNCTION_OUTPUT)]


CHILD_ADDS = """
import asyncio, sys
from factlog.agents import FactlogSession
path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
async def main():
    with FactlogSession("shared", path) as session:
        assert session.store.served_by is not None, "not a client"
        print("ready", flush=True)
        assert sys.stdin.readline() == "go\\n"
        for n in range(count):
            await session.add_items([{"role": "user", "content": f"{name} {n}"}])
asyncio.run(main())
"""


@pytest.mark.skipif(sys.platform == "win32", reason="Unix domain sockets")
def test_sessions_of_one_id_in_three_processes_add_and_pop_at_once(store_holder, tmp_path):
    # Two client processes add items while this one pops: every pop removes the item that was
    # the latest when its removal was written (a compare-and-set on the task's revision), and
    # every item is either popped or still there, once.
    path = os.path.join(str(tmp_path), "store")
    store_holder.share(path)
    count = 40
    try:
        with FactlogSession("shared", path) as session:
            assert session.store.served_by == store_holder.pid
            children = [
                subprocess.Popen([sys.executable, "-c", CHILD_ADDS, path, name, str(count)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                for name in ("a", "b")
            ]
            for child in children:  # connected: all three start together
                assert child.stdout.readline() == "ready\n"
            for child in children:
                child.stdin.write("go\n")
                child.stdin.flush()
            popped = []
            for _ in range(count):
                item = run(session.pop_item())
                if item is not None:
                    popped.append(item["content"])
            for child in children:
                child.communicate(timeout=HANG_GUARD_SECONDS)
                assert child.returncode == 0
            left = [item["content"] for item in run(session.get_items())]
            with FactlogSession("shared", path) as other:  # a new connection folds the same
                assert [item["content"] for item in run(other.get_items())] == left
            events = task_events(session.store, "shared")
    finally:
        store_holder.release(path)
    added = [f"{name} {n}" for name in ("a", "b") for n in range(count)]
    assert sorted(left + popped) == sorted(added)
    for name in ("a", "b"):
        own = [content for content in left if content.startswith(name)]
        assert own == sorted(own, key=lambda content: int(content.split()[1]))
    live = []
    for event in events:
        if event["type"] == "record/removed":
            assert event["seqs"] == [live[-1]], "a pop removed an item that was not the latest"
            live.pop()
        else:
            live.append(event["seq"])
    assert len(live) == len(left)


def readme_example() -> str:
    """The python block of python/README.md's "OpenAI Agents SDK" section."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    found = re.search(r"\n## OpenAI Agents SDK\n[^#]*?```python\n(.*?)```", text, re.DOTALL)
    assert found, "python/README.md has no python block under '## OpenAI Agents SDK'"
    return found.group(1)


def test_the_readme_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    agents.set_tracing_disabled(True)  # offline: no trace export (nothing else here traces)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(readme_example(), "README.md (OpenAI Agents SDK)", "exec"),
             {"__name__": "readme"})
    assert out.getvalue() == "About 2 million. 4\n['user', 'assistant', 'user']\n"
    assert os.listdir(tmp_path) == ["sessions.factlog"]


def test_every_public_name_has_a_docstring():
    import factlog.agents as module

    assert module.__doc__
    for name in module.__all__:
        value = getattr(module, name)
        if callable(value):
            assert value.__doc__, name
    for name in dir(FactlogSession):
        if not name.startswith("_") and callable(getattr(FactlogSession, name)):
            assert getattr(FactlogSession, name).__doc__, f"FactlogSession.{name}"
    # Attributes documented where they are set (the module docstring's table is the rest).
    source = open(module.__file__, encoding="utf-8").read()
    for constant in ("ITEM_KIND", "DURABILITIES", "BATCH_ITEMS_MAX"):
        assert re.search(rf'^{constant} = .*\n"""', source, re.MULTILINE), constant
