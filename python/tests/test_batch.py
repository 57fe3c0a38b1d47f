"""`task.append_batch`: one atomic frame through the protocol's `execute_batch`: all events
or none, one compare-and-set for the whole batch, the strongest durability of its events."""

from __future__ import annotations

import pytest

import factlog


def test_a_batch_is_written_whole_with_one_reply(path):
    with factlog.Store(path) as store:
        task = store.task("t1")
        reply = task.append_batch([
            {"type": "turn/start"},
            {"type": "user/message", "text": "hi"},
            {"type": "tool/call", "call_id": "c1", "tool": "t", "effect": "read_only"},
        ])
        assert reply == {"seq": 1, "task": "t1", "revision": 3, "durability": "synced",
                         "count": 3}
        reply = task.append_batch([{"type": "assistant/delta", "text": "a"}],
                                  expected_revision=3, durability="flushed")
        assert (reply["revision"], reply["durability"]) == (4, "flushed")


def test_a_refused_event_refuses_the_whole_batch(path):
    with factlog.Store(path) as store:
        task = store.task("t1")
        with pytest.raises(factlog.InvalidEvent):
            task.append_batch([{"type": "turn/start"}, {"type": "turn/start"}])
        with pytest.raises(factlog.InvalidEvent):
            task.append_batch([{"type": "turn/start"}, {"type": "no/such"}])
        with pytest.raises(factlog.InvalidEvent, match="once for a whole batch"):
            task.append_batch([{"type": "turn/start", "durability": "synced"}])
        with pytest.raises(factlog.InvalidEvent, match="durability"):
            task.append_batch([{"type": "turn/start"}], durability="eventually")
        with pytest.raises(factlog.InvalidEvent, match="at least one"):
            task.append_batch([])
        with pytest.raises(factlog.StaleRevision):
            task.append_batch([{"type": "turn/start"}], expected_revision=5)
        assert task.revision == 0
        assert list(store.events()) == []
