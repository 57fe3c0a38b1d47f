"""Threads appending concurrently to one store: no append is lost, revisions are
consistent, and each task's events are in order."""

from __future__ import annotations

import threading

import factlog

THREADS = 8
EVENTS = 200


def test_threads_on_separate_tasks_and_on_one_shared_task(path):
    with factlog.Store(path) as store:
        shared = store.task("shared")
        errors = []

        def work(n: int) -> None:
            try:
                own = store.task(f"t{n}")
                for i in range(EVENTS):
                    own.delta(f"{n}:{i}")
                    shared.delta(f"{n}:{i}")
                    if i % 50 == 0:
                        own.append({"type": "user/message", "text": str(i)})
            except Exception as error:  # noqa: BLE001 - reported below
                errors.append(error)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert shared.revision == THREADS * EVENTS
        for n in range(THREADS):
            assert store.task(f"t{n}").revision == EVENTS + EVENTS // 50

    with factlog.Store(path) as store:
        events = list(store.events())
        assert len(events) == THREADS * EVENTS * 2 + THREADS * (EVENTS // 50)
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        by_task = {}
        for event in events:
            by_task.setdefault(event["task"], []).append(event["revision"])
        for revisions in by_task.values():
            assert revisions == list(range(1, len(revisions) + 1))
        # Each thread's deltas on the shared task are in its own order.
        for n in range(THREADS):
            mine = [e["text"] for e in events
                    if e["task"] == "shared" and e["text"].startswith(f"{n}:")]
            assert mine == [f"{n}:{i}" for i in range(EVENTS)]


def test_compare_and_set_lets_exactly_one_writer_win(path):
    with factlog.Store(path) as store:
        task = store.task("t1")
        task.append({"type": "user/message", "text": "base"})
        base = task.revision
        outcomes = []
        barrier = threading.Barrier(THREADS)

        def writer(n: int) -> None:
            barrier.wait()
            try:
                task.append({"type": "user/message", "text": str(n)}, expected_revision=base)
                outcomes.append("won")
            except factlog.StaleRevision as error:
                assert error.expected == base and error.actual == base + 1
                outcomes.append("stale")

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["stale"] * (THREADS - 1) + ["won"]
        assert task.revision == base + 1


def test_delta_replies_carry_exact_revisions_under_concurrency(path):
    with factlog.Store(path) as store:
        shared = store.task("shared")
        replies = []

        def work(n: int) -> None:
            for i in range(100):
                replies.append(shared.append({"type": "assistant/delta", "text": f"{n}:{i}"}))

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stored = {e["seq"]: e["revision"] for e in store.events()}
        assert sorted(r["revision"] for r in replies) == list(range(1, 401))
        assert all(stored[r["seq"]] == r["revision"] for r in replies)
