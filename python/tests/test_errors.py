"""Every exception class of the protocol's error codes is raised with its fields, through
the same protocol code as `factlog emit` (codes, messages, extra keys)."""

from __future__ import annotations

import os

import pytest

import factlog
from factlog import errors

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


def call(call_id: str, tool: str = "publish", effect: str = "unsafe", **fields):
    return {"type": "tool/call", "call_id": call_id, "tool": tool, "effect": effect, **fields}


def test_invalid_event_unknown_type_missing_field_and_bad_envelope(path):
    with factlog.Store(path) as store:
        task = store.task("t1")
        with pytest.raises(factlog.InvalidEvent) as info:
            task.append({"type": "no/such"})
        assert info.value.code == "INVALID_EVENT"
        assert "unknown event type" in info.value.message
        assert info.value.reply["error"] == "INVALID_EVENT"
        assert not info.value.ends_stream
        with pytest.raises(factlog.InvalidEvent, match="call_id"):
            task.append({"type": "tool/call", "tool": "x", "effect": "unsafe"})
        with pytest.raises(factlog.InvalidEvent, match="durability"):
            task.append({"type": "turn/start"}, durability="sometimes")
        with pytest.raises(factlog.InvalidEvent, match="high-risk"):
            task.append(call("c1"), durability="buffered")
        with pytest.raises(factlog.InvalidEvent, match="given twice"):
            task.append({"type": "turn/start", "task": "t2"})
        # The protocol's `id` is echoed in the error reply, as emit does.
        with pytest.raises(factlog.InvalidEvent) as info:
            task.append({"type": "no/such", "id": "r1"})
        assert list(info.value.reply)[:2] == ["id", "error"]
        assert task.revision == 0


def test_a_value_without_json_form_is_an_invalid_event(path):
    with factlog.Store(path) as store:
        task = store.task("t1")
        with pytest.raises(factlog.InvalidEvent, match="JSON"):
            task.append({"type": "user/message", "text": object()})
        with pytest.raises(factlog.InvalidEvent, match="finite"):
            task.append({"type": "tool/call", "call_id": "c", "tool": "t", "effect": "read_only",
                         "args": {"x": float("nan")}})
        with pytest.raises(TypeError):
            task.append(["not", "a", "dict"])  # type: ignore[arg-type]


def test_stale_revision_carries_expected_and_actual(path):
    with factlog.Store(path) as store:
        task = store.task("t1")
        task.append({"type": "turn/start"})
        with pytest.raises(factlog.StaleRevision) as info:
            task.append({"type": "user/message", "text": "hi"}, expected_revision=0)
        assert (info.value.expected, info.value.actual) == (0, 1)
        assert info.value.reply["expected"] == 0
        reply = task.append({"type": "user/message", "text": "hi"}, expected_revision=1)
        assert reply["revision"] == 2


def test_needs_confirmation_after_a_restart_of_a_high_risk_task(path):
    with factlog.Store(path) as store:
        store.task("t1").append({"type": "task/contract", "goal": "pay", "risk": "high"})
    with factlog.Store(path) as store:
        task = store.task("t1")
        with pytest.raises(factlog.NeedsConfirmation) as info:
            task.append(call("c1", "pay"))
        assert info.value.code == "NEEDS_CONFIRMATION"
        task.append({"type": "control/resume", "reason": "operator"})
        assert task.append(call("c1", "pay"))["durability"] == "synced"


def test_approval_refused(path):
    with factlog.Store(path) as store:
        task = store.task("t1")
        with pytest.raises(factlog.ApprovalRefused):
            task.append(call("c1", approval_id="a-unknown"))


def test_needs_recovery_carries_task_and_calls(path):
    with factlog.Store(path) as store:
        store.task("t1").append(call("p1", "pay"))
    with factlog.Store(path) as store:
        task = store.task("t1")  # takes the task over: p1 is an unknown outcome
        with pytest.raises(factlog.NeedsRecovery) as info:
            task.append(call("p2", "pay"))
        assert info.value.task == "t1"
        assert [c["call_id"] for c in info.value.calls] == ["p1"]
        assert set(info.value.calls[0]) == {"call_id", "tool", "plan"}


def test_call_id_reused_carries_the_earlier_call(path):
    with factlog.Store(path) as store:
        task = store.task("t1")
        task.append(call("c1", "search", "read_only", args={"q": 1}))
        task.append({"type": "tool/result", "call_id": "c1", "outcome": "ok"})
        with pytest.raises(factlog.CallIdReused) as info:
            task.append(call("c1", "publish", "read_only"))
        assert (info.value.task, info.value.call_id) == ("t1", "c1")
        assert info.value.earlier["tool"] == "search"
        assert info.value.earlier["seq"] == 1


def test_unmarked_secret_is_refused_when_asked_and_warned_otherwise(path):
    with factlog.Store(path, refuse_unmarked_secrets=True) as store:
        task = store.task("t1")
        with pytest.raises(factlog.UnmarkedSecret) as info:
            task.append(call("c1", "aws", "read_only", args={"key": AWS_KEY}))
        assert (info.value.task, info.value.path) == ("t1", "$.args.key")
        assert info.value.shape
        assert AWS_KEY not in info.value.message
        reply = task.append(call("c1", "aws", "read_only", args={"key": {"$secret": "aws"}}))
        assert "warnings" not in reply
    with factlog.Store(path) as store:
        reply = store.task("t2").append(call("c1", "aws", "read_only", args={"key": AWS_KEY}))
        assert [w["path"] for w in reply["warnings"]] == ["$.args.key"]


def test_warnings_false_skips_the_search_but_not_the_refusal(store_path):
    with factlog.Store(store_path) as store:
        task = store.task("t1")
        put = {"type": "record/put", "kind": "k", "key": "a", "value": AWS_KEY}
        assert [w["path"] for w in task.append(put)["warnings"]] == ["$.value"]
        assert "warnings" not in task.append(dict(put, key="b"), warnings=False)
        batch = [dict(put, key="c"), dict(put, key="d")]
        assert task.append_batch(batch)["warnings"]
        reply = task.append_batch([dict(put, key="e"), dict(put, key="f")], warnings=False)
        assert "warnings" not in reply and reply["count"] == 2


def test_warnings_false_still_refuses_when_the_store_refuses_unmarked_secrets(path):
    with factlog.Store(path, refuse_unmarked_secrets=True) as store:
        task = store.task("t1")
        put = {"type": "record/put", "kind": "k", "key": "a", "value": AWS_KEY}
        with pytest.raises(factlog.UnmarkedSecret):
            task.append(put, warnings=False)
        with pytest.raises(factlog.UnmarkedSecret):
            task.append_batch([put], warnings=False)
        assert task.revision == 0


def test_limit_exceeded(path):
    with factlog.Store(path) as store:
        task = store.task("t1")
        with pytest.raises(factlog.LimitExceeded):
            task.delta("x" * (64 * 1024 + 1))
        with pytest.raises(factlog.LimitExceeded):
            store.task("t" * 129)
        assert task.revision == 0


def test_locked_by_a_second_handle(path):
    with factlog.Store(path):
        with pytest.raises(factlog.Locked) as info:
            factlog.Store(path)
        assert info.value.ends_stream


def test_io_when_the_directory_cannot_be_made(tmp_path):
    blocker = os.path.join(str(tmp_path), "file")
    with open(blocker, "w") as f:
        f.write("not a directory")
    with pytest.raises(factlog.FactlogError) as info:
        factlog.Store(os.path.join(blocker, "store"))
    assert isinstance(info.value, (factlog.Io, factlog.NotALog))


def test_corruption_of_a_synced_record_is_refused_at_open(path):
    with factlog.Store(path) as store:
        task = store.task("t1")
        task.append({"type": "user/message", "text": "A" * 200})
        task.append({"type": "user/message", "text": "B" * 200}, durability="synced")
        # A frame written after the sync proves the ones before it durable: damage there is
        # corruption, not a torn tail.
        task.append({"type": "user/message", "text": "C" * 200}, durability="synced")
    segment = sorted(f for f in os.listdir(path) if f.endswith(".seg"))[0]
    with open(os.path.join(path, segment), "r+b") as f:
        data = f.read()
        at = data.index(b"A" * 200) + 10
        f.seek(at)
        f.write(b"Z")
    with pytest.raises(factlog.Corrupt) as info:
        factlog.Store(path)
    assert info.value.code == "CORRUPTION"


@pytest.mark.parametrize("code", factlog.ERROR_CODES)
def test_every_protocol_code_has_its_class(code):
    cls = errors.exception_class(code)
    assert issubclass(cls, factlog.FactlogError)
    if code != "ERROR":
        assert cls.code == code
    error = errors._from_reply({"error": code, "message": "m", "task": "t"})
    assert isinstance(error, cls)
    assert (error.code, error.message, str(error)) == (code, "m", "m")


def test_store_failures_that_a_test_cannot_cause_map_to_their_classes():
    # DISK_FULL, IO and POISONED come from the disk; their mapping is what can be checked.
    for code, cls in [("DISK_FULL", factlog.DiskFull), ("IO", factlog.Io),
                      ("POISONED", factlog.Poisoned)]:
        error = errors._from_reply({"error": code, "message": "m"})
        assert type(error) is cls and error.ends_stream


def test_closed_store_and_task_raise_value_error(path):
    store = factlog.Store(path)
    task = store.task("t1")
    store.close()
    store.close()
    assert store.closed
    for action in (lambda: task.delta("x"), lambda: task.append({"type": "turn/start"}),
                   lambda: store.task("t2"), lambda: task.revision):
        with pytest.raises(ValueError, match="closed"):
            action()
    # The directory is free again.
    factlog.Store(path).close()


def test_the_warnings_example_of_docs_python_runs(tmp_path, monkeypatch, run_python_block):
    monkeypatch.chdir(tmp_path)
    assert run_python_block("The API") == "UNMARKED_SECRET $.text\n"


def test_warnings_false_still_replaces_marked_secrets(path):
    with factlog.Store(path) as store:
        task = store.task("t1")
        put = {"type": "record/put", "kind": "k", "key": "a", "value": {"$secret": "hunter2"}}
        task.append(put, warnings=False)
        task.append_batch([dict(put, key="b")], warnings=False)
        stored = [e["value"] for e in task.events()]
        assert len(stored) == 2
        assert "hunter2" not in repr(stored)
