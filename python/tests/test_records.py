"""Adapter records through the binding: `record/put` keeps its value whole, `record/removed`
names only earlier events (a bad one raises `InvalidEvent` and writes nothing), and
`task.events()` / `store.events(task=...)` give exactly one task's events, in order."""

from __future__ import annotations

import pytest

import factlog


def test_a_put_round_trips_whole_and_a_removal_is_checked(path):
    value = {"type": "reasoning", "summary": [{"text": "é ✓"}], "n": [1, 2.5, None]}
    with factlog.Store(path) as store:
        task = store.task("s")
        put = task.append({"type": "record/put", "kind": "agents/item", "key": "rs_1", "value": value})
        assert put["durability"] == "flushed"
        task.append({"type": "record/removed", "kind": "agents/item", "seqs": [put["seq"]]})
        for bad in (
            {"type": "record/removed", "kind": "agents/item"},
            {"type": "record/removed", "kind": "agents/item", "seqs": [0]},
            {"type": "record/removed", "kind": "agents/item", "through_seq": 99},
            {"type": "record/put", "kind": ""},
        ):
            with pytest.raises(factlog.InvalidEvent):
                task.append(bad)
        assert task.revision == 2
    with factlog.Store(path) as store:
        events = list(store.task("s").events())
        assert [e["type"] for e in events] == ["record/put", "record/removed"]
        assert events[0]["value"] == value and events[0]["key"] == "rs_1"
        assert events[1]["seqs"] == [put["seq"]]


def test_task_events_skip_other_tasks_and_start_at_from_seq(path):
    with factlog.Store(path) as store:
        a, b = store.task("a"), store.task("b")
        seqs = []
        for i in range(5):
            seqs.append(a.append({"type": "user/message", "text": f"a{i}"})["seq"])
            b.append({"type": "user/message", "text": f"b{i}"})
        assert [e["text"] for e in a.events()] == [f"a{i}" for i in range(5)]
        assert [e["text"] for e in a.events(seqs[3])] == ["a3", "a4"]
        assert [e["task"] for e in store.events(1, task="b")] == ["b"] * 5
        assert len(list(store.events())) == 10
        assert list(store.events(task="nobody")) == []


def test_a_blob_keeps_its_bytes_raw_embedded_and_served(store_path):
    # `record/blob`: the bytes go in and come out as a bytes object (base64 only on the socket
    # of a served store); a bytes object anywhere else is refused, on both paths.
    raw = bytes(range(256)) * 3
    with factlog.Store(store_path) as store:
        task = store.task("b")
        put = task.append(
            {"type": "record/blob", "kind": "app/state", "key": "k1", "value": {"n": 1}, "bytes": raw}
        )
        assert put["durability"] == "flushed"
        batch = task.append_batch(
            [{"type": "record/blob", "kind": "app/state", "bytes": b""},
             {"type": "record/put", "kind": "app/state", "value": {"n": 2}}]
        )
        assert batch["revision"] == 3
        for bad in (
            {"type": "record/put", "kind": "app/state", "bytes": b"x"},
            {"type": "user/message", "text": "hi", "bytes": b"x"},
        ):
            with pytest.raises(factlog.InvalidEvent):
                task.append(bad)
        events = list(task.events())
        assert [e["type"] for e in events] == ["record/blob", "record/blob", "record/put"]
        assert events[0]["bytes"] == raw and isinstance(events[0]["bytes"], bytes)
        assert (events[0]["key"], events[0]["value"]) == ("k1", {"n": 1})
        assert events[1]["bytes"] == b""
        assert task.revision == 3
