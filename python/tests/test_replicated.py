"""The `Replicated` tier from Python (`format-spec/replication.md`, "Replicated appends"): a
store opened with `replicate_to` acknowledges `durability="replicated"` appends only once its
replica holds the event, from this process and from a client process of the shared store; a
store that does not replicate raises `NotReplicated` and writes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import factlog

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="Unix domain sockets")

HANG_GUARD_SECONDS = 120
"""How long a wait on another process may take before the test calls it a hang."""


def pay(call_id: str) -> dict:
    return {"type": "tool/call", "call_id": call_id, "tool": "pay", "effect": "unsafe"}


def replica_objects(directory: str) -> list:
    """Every object file of a `file://` replica, as paths relative to it."""
    found = []
    for root, _dirs, files in os.walk(directory):
        for name in files:
            found.append(os.path.relpath(os.path.join(root, name), directory))
    return sorted(found)


def test_a_replicated_append_returns_once_the_replica_holds_it(path, tmp_path):
    replica = str(tmp_path / "replica")
    os.makedirs(replica)
    with factlog.Store(path, replicate_to=f"file://{replica}") as store:
        reply = store.task("t1").append(pay("c1"), durability="replicated")
        assert reply["durability"] == "replicated"
        # The replica holds it now, while the store is still open.
        parts = [name for name in replica_objects(replica) if name.endswith(".part")]
        assert parts, replica_objects(replica)
        batch = store.task("t1").append_batch(
            [{"type": "tool/result", "call_id": "c1", "outcome": "ok"}], durability="replicated"
        )
        assert batch["durability"] == "replicated"
    # Without a replica: refused, nothing written.
    with factlog.Store(path) as store:
        with pytest.raises(factlog.NotReplicated):
            store.task("t1").append(pay("c2"), durability="replicated")
        assert "c2" not in store.task("t1").state()["session"]["calls"]


CLIENT = """
import json, sys
import factlog
with factlog.Store(sys.argv[1]) as store:
    reply = store.task("t2").append({"type": "tool/call", "call_id": "p1", "tool": "pay",
                                     "effect": "unsafe"}, durability="replicated")
    print(json.dumps([store.served_by is not None, reply]), flush=True)
"""


def test_a_client_process_of_a_replicating_shared_store_gets_replicated_acks(path, tmp_path):
    replica = str(tmp_path / "replica")
    os.makedirs(replica)
    with factlog.Store(path, share=True, replicate_to=f"file://{replica}"):
        out = subprocess.run([sys.executable, "-c", CLIENT, path], capture_output=True,
                             text=True, timeout=HANG_GUARD_SECONDS, check=True)
        served, reply = json.loads(out.stdout)
        assert served, out.stdout
        assert reply["durability"] == "replicated", reply
        # A client cannot start the replication of a store another process serves.
        with pytest.raises(factlog.Locked):
            factlog.Store(path, replicate_to=f"file://{replica}")
