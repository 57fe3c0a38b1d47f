"""Several processes, one store, from Python (`format-spec/server.md`): a store shared with
`factlog.Store(path, share=True)` (or by `factlog serve DIR`) is written by other processes
whose `factlog.Store(path)` connects through the socket. Real `spawn` children and
subprocesses throughout; every wait on another process has a generous timeout that only
guards against a hang (no assertion on durations)."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

import factlog

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="Unix domain sockets, SIGKILL")

HANG_GUARD_SECONDS = 120
"""How long a wait on another process may take before the test calls it a hang."""

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

SPAWN = multiprocessing.get_context("spawn")


def message(text: str) -> dict:
    return {"type": "user/message", "text": text}


SERVING_CHILD = """
import sys
import factlog
with factlog.Store(sys.argv[1], share=True) as store:
    assert store.sharing
    print("serving", flush=True)
    sys.stdin.read()  # until the parent closes its end (or kills this process)
"""


class ServingChild:
    """A child process that shares a store (`share=True`) until its standard input closes.
    A subprocess with pipes rather than `multiprocessing` primitives, which a SIGKILL of the
    child can leave waited on for ever."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.process = None

    def __enter__(self) -> "ServingChild":
        self.process = subprocess.Popen([sys.executable, "-c", SERVING_CHILD, self.path],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout.readline() == "serving\n", "the child never served"
        return self

    def __exit__(self, *exc) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(HANG_GUARD_SECONDS)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self.process.stdout.close()


def writer_child(path: str, name: str, count: int, results) -> None:
    """Connects (the store is held and shared by the parent) and appends to its own task."""
    with factlog.Store(path) as store:
        task = store.task(name)
        seqs = []
        for i in range(count):
            task.delta(f"{name}-{i} ")
            seqs.append(task.append(message(f"{name} {i}"), durability="synced")["seq"])
        results.put((name, store.served_by, seqs, task.revision))


def test_child_processes_write_a_store_shared_by_python(path):
    with factlog.Store(path, share=True) as store:
        assert store.sharing and store.served_by is None
        assert os.path.exists(os.path.join(path, "factlog.sock"))
        results = SPAWN.Queue()
        names = [f"agent-{n}" for n in range(4)]
        children = [SPAWN.Process(target=writer_child, args=(path, name, 25, results))
                    for name in names]
        for child in children:
            child.start()
        got = {}
        for _ in children:
            name, server, seqs, revision = results.get(timeout=HANG_GUARD_SECONDS)
            got[name] = (server, seqs, revision)
        for child in children:
            child.join(HANG_GUARD_SECONDS)
            assert child.exitcode == 0
        for name in names:
            server, seqs, revision = got[name]
            assert server == os.getpid()
            assert revision == 50  # 25 deltas, 25 messages
            events = list(store.events(task=name))
            assert [e["seq"] for e in events if e["type"] == "user/message"] == seqs
            assert [e["text"] for e in events if e["type"] == "user/message"] == [
                f"{name} {i}" for i in range(25)]
            assert store.task(name).revision == 50
    # Closing stopped serving: the socket is gone, and the store reopens with every event.
    assert not os.path.exists(os.path.join(path, "factlog.sock"))
    with factlog.Store(path) as store:
        assert store.task_ids() == names


def racer(path: str, barrier, results) -> None:
    with factlog.Store(path) as store:
        task = store.task("shared")
        revision = task.revision
        barrier.wait(HANG_GUARD_SECONDS)
        try:
            task.append(message(f"won by {os.getpid()}"), expected_revision=revision)
            results.put(("won", revision, os.getpid()))
        except factlog.StaleRevision as error:
            results.put(("stale", error.expected, error.actual))


def test_compare_and_set_across_processes_has_exactly_one_winner(path):
    racers = 6
    with factlog.Store(path, share=True) as store:
        # No open turn: a task that clients touch is handed over when the last of them
        # leaves, which would close a turn the sharing process opened (server.md, "Holders").
        store.task("shared").append(message("setup"))
        for round_ in range(3):
            barrier, results = SPAWN.Barrier(racers), SPAWN.Queue()
            children = [SPAWN.Process(target=racer, args=(path, barrier, results))
                        for _ in range(racers)]
            for child in children:
                child.start()
            outcomes = [results.get(timeout=HANG_GUARD_SECONDS) for _ in children]
            for child in children:
                child.join(HANG_GUARD_SECONDS)
            base = round_ + 1
            winners = [o for o in outcomes if o[0] == "won"]
            assert len(winners) == 1, outcomes
            assert winners[0][1] == base
            # Every loser read the same revision and was told the task moved on by one.
            assert sorted(o for o in outcomes if o[0] == "stale") == [
                ("stale", base, base + 1)] * (racers - 1)
            # Nothing was written for the losers.
            assert store.task("shared").revision == base + 1
            texts = [e["text"] for e in store.events(task="shared") if e["type"] == "user/message"]
            assert texts[-1] == f"won by {winners[0][2]}" and len(texts) == round_ + 2


def outcome(call):
    """The reply of `call()`, or the class and reply of what it raised."""
    try:
        return ("ok", call())
    except factlog.FactlogError as error:
        return (type(error), error.code, error.reply)


def error_cases(store):
    """The same refusals, raised by `store` (embedded or a client)."""
    task = store.task("t1")
    high = store.task("high")
    yield outcome(lambda: task.append({"type": "turn/start"}))
    yield outcome(lambda: task.append({"type": "no/such"}))
    yield outcome(lambda: task.append({"type": "no/such", "id": "r1"}))
    yield outcome(lambda: task.append({"type": "turn/start"}, durability="sometimes"))
    yield outcome(lambda: task.append({"type": "turn/start", "task": "t2"}))
    yield outcome(lambda: task.append({"type": "tool/call", "call_id": "c1", "tool": "pay",
                                       "effect": "unsafe"}, durability="buffered"))
    yield outcome(lambda: task.append(message("late"), expected_revision=0))
    yield outcome(lambda: task.append({"type": "user/message", "text": object()}))
    yield outcome(lambda: task.append({"type": "tool/call", "call_id": "c1", "tool": "read",
                                       "effect": "read_only", "args": {"q": 1}}))
    yield outcome(lambda: task.append({"type": "tool/call", "call_id": "c1", "tool": "write",
                                       "effect": "read_only", "args": {"q": 2}}))
    yield outcome(lambda: task.append({"type": "user/message", "text": "x" * (5 << 20)}))
    yield outcome(lambda: task.append_batch([message("a"), {"type": "no/such"}]))
    yield outcome(lambda: task.append_batch([message("a"), message("b")], expected_revision=9))
    yield outcome(lambda: task.append_batch([message("a")], durability="never"))
    yield outcome(lambda: task.append_batch([message("a"), message("b")], expected_revision=2))
    yield outcome(lambda: high.append({"type": "task/contract", "goal": "pay", "risk": "high"}))
    yield outcome(lambda: high.append({"type": "tool/call", "call_id": "p1", "tool": "pay",
                                       "effect": "unsafe", "approval_id": "a-unknown"}))
    # An object the socket would read as another request is refused as an event, never run.
    for op in ("purge", "checkpoint", "recover", "revision"):
        yield outcome(lambda: task.append({"op": op}))
    yield outcome(lambda: task.delta("fine"))
    yield outcome(lambda: task.delta("y" * 70_000))  # over the delta text limit
    yield ("revision", task.revision)


def test_errors_and_replies_are_those_of_the_embedded_store(tmp_path):
    embedded_dir, served_dir = str(tmp_path / "embedded"), str(tmp_path / "served")
    with factlog.Store(embedded_dir) as store:
        expected = list(error_cases(store))
    with ServingChild(served_dir):
        with factlog.Store(served_dir) as client:
            assert client.served_by is not None and not client.sharing
            got = list(error_cases(client))
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected):
        if mine[0] == "ok":
            # A delta's seq is not returned through the socket; every reply dict is equal.
            assert theirs[0] == "ok", (mine, theirs)
            assert mine[1] == theirs[1] or (mine[1] is None and isinstance(theirs[1], int))
        else:
            assert mine == theirs, (mine, theirs)
    classes = {entry[0] for entry in got if entry[0] not in ("ok", "revision")}
    assert {factlog.InvalidEvent, factlog.StaleRevision, factlog.CallIdReused,
            factlog.LimitExceeded, factlog.ApprovalRefused} <= classes


def test_reads_through_the_socket_equal_the_embedded_reads(path):
    with factlog.Store(path, share=True) as store:
        own = store.task("t1")
        own.append({"type": "turn/start"})
        for i in range(2500):  # more than one page of events
            own.delta(f"{i} ")
        own.append({"type": "tool/call", "call_id": "c1", "tool": "look", "effect": "read_only"})
        own.append({"type": "tool/result", "call_id": "c1", "outcome": "ok", "receipt": {"n": 1}})
        store.task("t2").append(message("other"))
        with factlog.connect(path) as client:
            theirs = client.task("t1")
            assert theirs.revision == own.revision
            assert theirs.state() == own.state()
            assert theirs.history() == own.history()
            assert list(client.events()) == list(store.events())
            assert list(client.events(2000, task="t2")) == list(store.events(2000, task="t2"))
            assert list(theirs.events(17)) == list(own.events(17))
            assert client.task("never").state() == store.task("never").state()
            assert client.recover()["tasks"] == store.recover()["tasks"]


def test_the_sharing_process_options_apply_to_its_clients(path):
    with factlog.Store(path, share=True, refuse_unmarked_secrets=True):
        with factlog.connect(path) as client:
            with pytest.raises(factlog.UnmarkedSecret) as info:
                client.task("t1").append(message("key AKIAIOSFODNN7EXAMPLE"))
            assert (info.value.path, info.value.task) == ("$.text", "t1")
            assert client.task("t1").revision == 0


def test_what_the_socket_cannot_do_raises_and_options_are_checked(path, tmp_path):
    with pytest.raises(ValueError, match="share=True"):
        factlog.Store(path, clients_max=2)
    with factlog.Store(path, share=True, clients_max=1) as store:
        client = factlog.Store(path)
        store.task("b").append({"type": "turn/start"})
        client.task("a").append({"type": "turn/start"})
        assert client.task_ids() == store.task_ids() == ["a", "b"]  # through the socket
        client.task("a").delta("x")
        client.flush()  # the socket's sync request: the fragment goes first
        assert client.task("a").revision == 2
        assert not factlog.Unsupported("x").ends_stream
        with pytest.raises(factlog.ServerBusy, match="clients-max"):
            factlog.connect(path)  # the one client slot is taken
        with pytest.raises(factlog.InvalidOptions, match="snapshot_every_events"):
            factlog.Store(path, snapshot_every_events=10)
        with pytest.raises(factlog.Locked, match="already"):
            factlog.Store(path, share=True)
        assert "client of the store served by process" in repr(client)
        assert "shared" in repr(store)
        client.close()
        client.close()
        with pytest.raises(ValueError, match="closed"):
            client.task("t1")
        # Closing the sharing store disconnects its clients.
        other = factlog.Store(path)
        task = other.task("t1")
    with pytest.raises(factlog.Disconnected, match="may or may not have been written"):
        task.append(message("after the close"))
    other.close()
    # Held by a handle that does not share: Locked says how to share.
    with factlog.Store(path):
        with pytest.raises(factlog.Locked, match="does not share it.*factlog.Store connects"):
            factlog.Store(path)
    with pytest.raises(factlog.NotServed, match="factlog serve"):
        factlog.connect(path)
    # A directory writable by others cannot be shared.
    open_dir = str(tmp_path / "open")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777)
    with pytest.raises(factlog.InvalidOptions, match="chmod go-w"):
        factlog.Store(open_dir, share=True)
    os.chmod(open_dir, 0o755)
    with factlog.Store(open_dir, share=True) as store:
        assert store.sharing


def test_a_server_killed_with_sigkill_raises_disconnected_at_once(path):
    server = ServingChild(path)
    with server:
        client = factlog.Store(path)
        task = client.task("t1")
        acknowledged = [task.append(message(str(i)), durability="synced")["seq"]
                        for i in range(10)]
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(HANG_GUARD_SECONDS)
        raised = []

        def call_after_the_kill() -> None:
            for call in (lambda: task.append(message("after")), lambda: task.revision,
                         lambda: list(client.events())):
                try:
                    call()
                    raised.append(None)
                except factlog.FactlogError as error:
                    raised.append(error)

        caller = threading.Thread(target=call_after_the_kill)
        caller.start()
        caller.join(HANG_GUARD_SECONDS)
        assert not caller.is_alive(), "a call on a killed server hung"
        assert all(isinstance(error, factlog.Disconnected) for error in raised), raised
        assert "went away" in str(raised[0]) and raised[0].code == "DISCONNECTED"
        client.close()
    # The killed server left its socket file; the next holder removes it when it opens the
    # store, so a holder that does not share it is named (with how to share), never taken
    # for a server.
    assert os.path.exists(os.path.join(path, "factlog.sock"))
    with factlog.Store(path):
        assert not os.path.exists(os.path.join(path, "factlog.sock"))
        with pytest.raises(factlog.Locked, match="does not share it"):
            factlog.Store(path)
    # Nothing acknowledged is lost; the stale socket file is replaced by a new server.
    with factlog.Store(path, share=True) as store:
        seqs = [e["seq"] for e in store.events(task="t1")]
        assert acknowledged == seqs[:10]
        with factlog.Store(path) as client:
            assert client.task("t1").revision == store.task("t1").revision


def factlog_binary():
    candidates = [os.environ.get("FACTLOG_BIN")]
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
    candidates += [os.path.join(target, "debug", "factlog"),
                   os.path.join(target, "release", "factlog"), shutil.which("factlog")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def test_a_python_client_of_factlog_serve(path):
    binary = factlog_binary()
    if binary is None:
        pytest.skip("no factlog binary: build it with `cargo build` or set FACTLOG_BIN")
    with factlog.Store(path) as store:  # created here, so that serve finds a store
        store.task("t0").append(message("before"))
    server = subprocess.Popen([binary, "serve", path], stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()  # "serving DIR at DIR/factlog.sock"
        assert "serving" in line, line
        with factlog.Store(path) as client:
            assert client.served_by == server.pid
            task = client.task("t1")
            task.append({"type": "turn/start"})
            task.delta("hello")
            reply = task.append_batch([message("a"), {"type": "turn/end"}],
                                      expected_revision=2)
            assert reply["count"] == 2 and reply["revision"] == 4
            with pytest.raises(factlog.StaleRevision) as info:
                task.append(message("late"), expected_revision=2)
            assert (info.value.expected, info.value.actual) == (2, 4)
            assert [e["type"] for e in task.events()] == [
                "turn/start", "assistant/delta", "user/message", "turn/end"]
            assert client.task("t0").history()[0]["text"] == "before"
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(HANG_GUARD_SECONDS)
    assert server.returncode == 0
    with factlog.Store(path) as store:
        assert store.task("t1").state()["execution"]["deltas"] == 1


def test_asyncio_through_a_served_store(path):
    async def main(store_path):
        async with await factlog.aio.open(store_path) as store:
            assert store.sync.served_by == os.getpid()
            task = await store.task("t1")
            first = await task.append(message("first"))
            batch = await task.append_batch([message("a"), message("b")],
                                            expected_revision=first["revision"])
            state = await task.state()
            assert await task.delta_async("a fragment") is None
            assert await task.fetch_revision() == 4
            assert await factlog.aio.revision(task.sync) == 4
            return batch["revision"], state["revision"], len(await task.history())

    with factlog.Store(path, share=True) as store:
        assert asyncio.run(main(path)) == (3, 3, 4)  # the fragment is a history entry
        assert store.task("t1").revision == 4

        async def connected(store_path):
            async with await factlog.aio.connect(store_path) as client:
                return (await client.task("t1")).revision

        assert asyncio.run(connected(path)) == 4


def test_threads_of_one_client_share_its_connection(path):
    with factlog.Store(path, share=True) as store:
        with factlog.connect(path) as client:
            def write(name: str) -> None:
                task = client.task(name)
                for i in range(50):
                    task.delta(f"{i} ")
                    task.append(message(f"{name} {i}"), durability="flushed")

            threads = [threading.Thread(target=write, args=(f"t{n}",)) for n in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(HANG_GUARD_SECONDS)
                assert not thread.is_alive()
            for n in range(4):
                assert client.task(f"t{n}").revision == 100
                texts = [e["text"] for e in store.events(task=f"t{n}")
                         if e["type"] == "user/message"]
                assert texts == [f"t{n} {i}" for i in range(50)]


def test_pipelined_deltas_arrive_in_order_and_close_sends_the_rest(path):
    """Over a socket `task.delta` is pipelined (it returns None, its reply is read later):
    thousands of fragments arrive in order, a request after them sees them all, and the
    fragments still buffered at `close()` are sent and answered before it returns."""
    with factlog.Store(path, share=True) as store:
        client = factlog.connect(path)
        task = client.task("t1")
        texts = [f"fragment {i} \"é\"\n" for i in range(3000)]
        for text in texts[:2000]:
            assert task.delta(text) is None
        assert task.revision == 2000
        for text in texts[2000:]:
            task.delta(text)
        client.close()
        assert store.task("t1").revision == 3000
        got = [e["text"] for e in store.events(task="t1")]
        assert got == texts
        with pytest.raises(factlog.LimitExceeded):
            factlog.connect(path).task("t1").delta("x" * (64 * 1024 + 1))


def test_events_through_a_socket_end_where_the_log_ended(path):
    """As the embedded iterator, a served store's ends at the last event the log held when
    it began, also while events are appended during the iteration (across pages)."""
    with factlog.Store(path, share=True) as store:
        own = store.task("t1")
        for i in range(1500):
            own.append(message(str(i)))
        with factlog.connect(path) as client:
            task = client.task("t1")
            seen = 0
            for _ in client.events():
                seen += 1
                if seen % 100 == 0:
                    task.append(message("appended while iterating"))
                assert seen <= 1500
            assert seen == 1500
            assert sum(1 for _ in store.events()) == 1515


def test_the_gil_is_released_while_a_client_waits(path, appends_another_thread_ran_during):
    with factlog.Store(path, share=True):
        with factlog.connect(path) as client:
            task = client.task("t1")

            def append(i: int) -> None:
                task.append(message(str(i)), durability="synced")

            progressed, appends = appends_another_thread_ran_during(append, 10)
            assert progressed >= 10, f"the other thread ran during {progressed} of {appends}"


def test_the_docs_sharing_example_runs(tmp_path, readme_python_block):
    """The Python example of docs/python.md, "Sharing a store between processes", runs as
    written, twice in one directory with the same output (it starts a new store each time)."""
    script = tmp_path / "example.py"
    docs_python = os.path.join(REPO, "docs", "python.md")
    block = readme_python_block("Sharing a store between processes", docs_python)
    script.write_text(block, encoding="utf-8")
    for _ in range(2):
        run = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path),
                             capture_output=True, text=True, timeout=HANG_GUARD_SECONDS)
        assert run.returncode == 0, run.stderr
        assert run.stdout == "STALE_REVISION 0 1\n1 1\n"


def test_a_pipelined_refusal_is_its_own_class_and_keeps_both_replies():
    """The mapping of the client's `PipelinedRefused`: not the fragment's class (the call's own
    request ran), with the fragment's reply and the request's."""
    refused = {"error": "LIMIT_EXCEEDED", "message": "too many tasks"}
    written = {"seq": 7, "task": "t1", "revision": 3, "durability": "synced"}
    error = factlog.errors._from_reply({"error": "PIPELINED_REFUSED", "message": "m",
                                        "refused": refused, "request_reply": written})
    assert type(error) is factlog.PipelinedRefused
    assert not isinstance(error, factlog.LimitExceeded)
    assert error.refused == refused and error.request_reply == written
    assert error.code == "PIPELINED_REFUSED" and not error.ends_stream


def test_a_timeout_ends_the_wait_for_a_server_that_does_not_answer(tmp_path):
    """A socket that accepts and never answers (a server alive but stopped): with a timeout
    the hello raises TimedOut instead of waiting forever."""
    import socket as socketlib

    store_dir = tmp_path / "store"
    store_dir.mkdir(mode=0o700)
    listener = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
    listener.bind(str(store_dir / "factlog.sock"))
    listener.listen(1)
    try:
        started = time.monotonic()
        with pytest.raises(factlog.TimedOut, match="did not answer"):
            factlog.connect(str(store_dir), timeout=0.2)
        assert time.monotonic() - started < HANG_GUARD_SECONDS
        with pytest.raises(ValueError):
            factlog.connect(str(store_dir), timeout=0)
    finally:
        listener.close()
