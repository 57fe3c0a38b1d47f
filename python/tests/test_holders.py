"""The holder rules across a process kill: a `multiprocessing` child dispatches a tool call
and is killed with SIGKILL before its result; the parent's `store.task` takes the task over,
the call comes back `outcome_unknown`, and a side-effecting call is refused with
`NeedsRecovery` until the unknown outcome is resolved."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys

import pytest

import factlog

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")


def child(path: str, dispatched) -> None:
    store = factlog.Store(path)
    task = store.task("t1")
    task.append({"type": "turn/start"})
    task.delta("paying now")
    task.append({"type": "tool/call", "call_id": "p1", "tool": "pay", "effect": "unsafe",
                 "args": {"amount": 10}})  # synced before the tool runs
    dispatched.set()
    signal.pause()  # the tool runs; the process is killed here


def test_a_killed_holders_call_comes_back_unknown_and_blocks_side_effects(path):
    context = multiprocessing.get_context("spawn")
    dispatched = context.Event()
    process = context.Process(target=child, args=(path, dispatched))
    process.start()
    try:
        assert dispatched.wait(timeout=120), "the child never dispatched its call"
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.join()
    assert process.exitcode == -signal.SIGKILL

    with factlog.Store(path) as store:
        task = store.task("t1")  # the takeover: unknown outcome recorded, turn closed
        call = task.state()["session"]["calls"]["p1"]
        assert call["status"] == "outcome_unknown"
        assert call["unknown_plan"] == "ask_user"
        assert [e["outcome"] for e in task.history() if e["role"] == "tool"] == ["outcome_unknown"]

        with pytest.raises(factlog.NeedsRecovery) as info:
            task.append({"type": "tool/call", "call_id": "p2", "tool": "pay", "effect": "unsafe"})
        assert info.value.calls == [{"call_id": "p1", "tool": "pay", "plan": "ask_user"}]
        # A read-only call is still allowed; resolving p1 lifts the refusal.
        task.append({"type": "tool/call", "call_id": "r1", "tool": "look", "effect": "read_only"})
        task.append({"type": "tool/result", "call_id": "p1", "outcome": "ok",
                     "receipt": {"payment": "checked by hand"}})
        reply = task.append({"type": "tool/call", "call_id": "p2", "tool": "pay",
                             "effect": "unsafe"})
        assert reply["durability"] == "synced"
        # The delta written before the kill was buffered, then made durable by the synced call.
        texts = [e.get("text") for e in store.events() if e["type"] == "assistant/delta"]
        assert texts == ["paying now"]
