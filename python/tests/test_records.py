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
