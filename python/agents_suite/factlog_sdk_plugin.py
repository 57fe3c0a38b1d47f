"""A pytest plugin that runs the OpenAI Agents SDK's own session tests on ``FactlogSession``.

Loaded by ``.ci/python-agents`` with ``-p factlog_sdk_plugin`` into a run of the SDK's test
suite (from its source distribution, at the pinned version). For every test it replaces, in
the test's module, the SDK's ``SQLiteSession`` and the suite's in-memory ``SimpleListSession``
by stand-ins built on :class:`factlog.agents.FactlogSession` with the same constructors:

- ``SQLiteSession(session_id, db_path=":memory:", ..., session_settings=None)``: one factlog
  store per ``db_path`` (a directory beside it, shared by the sessions of that path, closed
  when the last of them closes), or a fresh store for ``":memory:"``;
- ``SimpleListSession(session_id="test", history=None)``: a fresh store holding ``history``.

With ``FACTLOG_SDK_SERVED=1`` in the environment every stand-in is built on a **client** of a
store served by another process: a holder process (``python/tests/served_holder.py``, started
once for the run) opens each store with ``share=True`` and closes it after the test; a
``SimpleListSession`` stand-in (and a ``":memory:"`` one) connects to a fresh served store with
``factlog.connect(path)``, and each ``SQLiteSession`` stand-in of a ``db_path`` opens its own
``factlog.Store(path)``, which finds the store served and connects (so two sessions of one
``db_path`` are two connections, as two processes would be). A stand-in that does not end up
on a client fails its test.

Tests that look into SQLite itself (its connections, locks, rows written behind the
session's back, rollbacks) are deselected by name in :data:`DESELECTED`, each with its reason;
the plugin fails the run if a name there matches no collected test (a stale list). In the two
big runner files (:data:`SESSION_NAMED_ONLY`) only the tests whose names mention sessions run.
At the end it prints, per file, how many passing tests built at least one factlog session, so
those can be told from the passes that used sessions of their own or none.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from typing import Any, Dict, List, Optional, Tuple

import pytest

import factlog
from factlog.agents import FactlogSession

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from served_holder import StoreHolder  # noqa: E402

SERVED = os.environ.get("FACTLOG_SDK_SERVED", "") not in ("", "0")
"""Whether the stand-ins are clients of stores served by another process."""

_SQLITE = "the test reads SQLite's own state"
DESELECTED: Dict[str, str] = {
    "tests/memory/test_session.py::test_sqlite_session_close_closes_worker_thread_connections":
        f"{_SQLITE}: the per-thread sqlite3 connections (session._connections)",
    "tests/memory/test_session.py::"
    "test_sqlite_session_reaps_connections_from_exited_worker_threads":
        f"{_SQLITE}: the per-thread sqlite3 connections (session._connections)",
    "tests/memory/test_session.py::"
    "test_sqlite_session_closes_retired_connections_before_the_next_allocation":
        f"{_SQLITE}: it counts sqlite3.connect calls and session._connections",
    "tests/memory/test_session.py::test_sqlite_session_keeps_connections_of_live_worker_threads":
        f"{_SQLITE}: the per-thread sqlite3 connections (session._connections)",
    "tests/memory/test_session.py::test_sqlite_session_closed_rejects_empty_add_items":
        "matches the class name in the message ('SQLiteSession is closed'); FactlogSession "
        "raises RuntimeError('FactlogSession ... is closed'), tested in test_agents_session.py",
    "tests/memory/test_session.py::test_sqlite_session_pop_item_skips_corrupt_most_recent":
        f"{_SQLITE}: it inserts a row of invalid JSON with session._locked_connection()",
    "tests/memory/test_session.py::"
    "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows":
        f"{_SQLITE}: it inserts a row of invalid JSON with session._locked_connection()",
    "tests/memory/test_session.py::test_sqlite_session_get_items_limit_skips_corrupt_newest_rows":
        f"{_SQLITE}: it inserts a row of invalid JSON with session._locked_connection()",
    "tests/memory/test_session.py::"
    "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows":
        f"{_SQLITE}: it inserts a row of invalid JSON with session._locked_connection()",
    "tests/memory/test_session.py::test_sqlite_session_file_lock_is_shared_across_instances":
        f"{_SQLITE}: the class-level lock registry (SQLiteSession._file_lock_counts)",
    "tests/memory/test_session.py::test_sqlite_session_failed_add_items_releases_write_lock":
        f"{_SQLITE}: it probes the SQLite write lock and table agent_sessions in db_path",
    "tests/memory/test_session.py::test_sqlite_session_failed_clear_session_rolls_back":
        f"{_SQLITE}: it drops a table of db_path and checks the rollback",
    "tests/memory/test_session.py::test_sqlite_session_failed_pop_item_releases_write_lock":
        f"{_SQLITE}: it drops a table of db_path and checks the rollback",
    "tests/memory/test_session.py::test_sqlite_session_rollback_failure_evicts_connection":
        f"{_SQLITE}: it injects a sqlite3.Connection whose rollback fails",
    "tests/memory/test_session.py::test_sqlite_session_close_retries_quarantined_connection":
        f"{_SQLITE}: it injects a sqlite3.Connection whose close fails",
    "tests/memory/test_session.py::"
    "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome":
        f"{_SQLITE}: it pauses a sqlite3 commit through an injected connection (the same "
        "cancellation contract is tested on FactlogSession in test_agents_session.py)",
}

# The runner test files hold hundreds of tests that never touch a session; of these files only
# the tests whose names mention sessions run (the other files listed by .ci/python-agents run
# whole: their sessions are what they test).
SESSION_NAMED_ONLY = {"tests/test_agent_runner.py", "tests/test_agent_runner_streamed.py"}


class _Stores:
    """The factlog stores of one test: one per SQLite ``db_path`` (shared by its sessions,
    closed when the last one closes), and a fresh one per in-memory session. With a
    ``holder`` (served mode) each store is opened and shared by the holder process instead,
    and every session gets a client connection of its own."""

    def __init__(self, scratch: str, holder: Optional[StoreHolder] = None) -> None:
        self.scratch = scratch
        self.holder = holder
        self.lock = threading.Lock()
        self.by_path: Dict[str, Tuple[factlog.Store, int]] = {}
        self.others: List[factlog.Store] = []
        self.shared: List[str] = []  # the paths the holder serves for this test
        self.sessions_built = 0

    def _serve(self, path: str) -> None:
        """Has the holder share ``path`` (once per test); the caller holds ``self.lock``."""
        assert self.holder is not None
        if path not in self.shared:
            self.holder.share(path)
            self.shared.append(path)

    def _client(self, store: factlog.Store) -> factlog.Store:
        assert self.holder is not None
        if store.served_by != self.holder.pid:
            store.close()
            raise AssertionError(f"{store!r} is not a client of the holder process")
        return store

    def fresh(self) -> factlog.Store:
        with self.lock:
            self.sessions_built += 1
            path = tempfile.mkdtemp(dir=self.scratch)
            if self.holder is not None:
                path = os.path.join(path, "store")
                self._serve(path)
                store = self._client(factlog.connect(path))
            else:
                store = factlog.Store(path)
            self.others.append(store)
            return store

    def acquire(self, db_path: Any) -> Tuple[factlog.Store, Optional[str]]:
        if str(db_path) == ":memory:":
            return self.fresh(), None
        key = os.path.realpath(os.fspath(db_path)) + ".factlog"
        with self.lock:
            self.sessions_built += 1
            if self.holder is not None:
                # A connection per session: factlog.Store finds the store served.
                self._serve(key)
                store = self._client(factlog.Store(key))
                self.others.append(store)
                return store, None
            store, count = self.by_path.get(key, (None, 0))
            if store is None:
                store = factlog.Store(key)
            self.by_path[key] = (store, count + 1)
            return store, key

    def release(self, key: Optional[str], store: factlog.Store) -> None:
        with self.lock:
            if key is None:
                store.close()
                return
            shared, count = self.by_path[key]
            if count <= 1:
                del self.by_path[key]
                shared.close()
            else:
                self.by_path[key] = (shared, count - 1)

    def close_all(self) -> None:
        with self.lock:
            for store, _ in self.by_path.values():
                store.close()
            for store in self.others:
                store.close()
            self.by_path.clear()
            self.others.clear()
            if self.holder is not None:
                for path in self.shared:
                    self.holder.release(path)
            self.shared.clear()


# The stores of the running test (a test may build sessions in threads of its own).
_current: Dict[str, Optional[_Stores]] = {"stores": None}


def _stores() -> _Stores:
    stores = _current["stores"]
    if stores is None:
        raise RuntimeError("a factlog stand-in session was built outside a test")
    return stores


class FactlogSQLiteSession(FactlogSession):
    """``SQLiteSession``'s constructor on a :class:`FactlogSession`."""

    def __init__(
        self,
        session_id: str,
        db_path: Any = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
    ) -> None:
        stores = _stores()
        store, key = stores.acquire(db_path)
        self._release = lambda: stores.release(key, store)
        try:
            super().__init__(session_id, store=store, session_settings=session_settings)
        except BaseException:
            self._release()
            raise
        self.db_path = db_path

    def close(self) -> None:
        if not self.closed:
            super().close()
            self._release()


class FactlogListSession(FactlogSession):
    """The suite's ``SimpleListSession`` constructor on a :class:`FactlogSession` in a fresh
    store, ``history`` added at construction."""

    def __init__(self, session_id: str = "test", history: Optional[List[Any]] = None) -> None:
        super().__init__(session_id, store=_stores().fresh())
        self._ignore_ids_for_matching = False
        if history:
            self._add_items_sync([json.dumps(item) for item in history])

    @property
    def saved_items(self) -> List[Any]:
        """The session's items (the suite's list sessions expose theirs under this name)."""
        return self._get_items_sync(None)


@pytest.fixture(autouse=True)
def _factlog_session_stand_ins(request, monkeypatch, tmp_path_factory):
    """Puts the stand-ins in place of the session classes in the test's module."""
    scratch = str(tmp_path_factory.mktemp("factlog-sessions"))
    stores = _Stores(scratch, request.config._factlog_holder)
    _current["stores"] = stores
    module = request.module
    if hasattr(module, "SQLiteSession"):
        monkeypatch.setattr(module, "SQLiteSession", FactlogSQLiteSession)
    if hasattr(module, "SimpleListSession"):
        monkeypatch.setattr(module, "SimpleListSession", FactlogListSession)
    try:
        yield
    finally:
        stores.close_all()
        _current["stores"] = None
        if stores.sessions_built:
            request.config._factlog_exercised.add(request.node.nodeid)


def pytest_configure(config):
    config._factlog_holder = StoreHolder() if SERVED else None
    config._factlog_exercised = set()
    config._factlog_deselected = []
    config._factlog_unrelated = []


def pytest_unconfigure(config):
    holder = getattr(config, "_factlog_holder", None)
    if holder is not None:
        holder.close()


def pytest_collection_modifyitems(config, items):
    keep, deselected, matched, unrelated = [], [], set(), []
    for item in items:
        name = item.nodeid.split("[", 1)[0]
        if name in DESELECTED:
            deselected.append(item)
            matched.add(name)
        elif (
            name.split("::", 1)[0] in SESSION_NAMED_ONLY
            and "session" not in item.nodeid.split("::", 1)[1].lower()
        ):
            unrelated.append(item)
        else:
            keep.append(item)
    stale = sorted(set(DESELECTED) - matched)
    selected_files = {str(arg).split("::", 1)[0] for arg in config.args}
    stale = [name for name in stale if name.split("::", 1)[0] in selected_files]
    if stale:
        raise pytest.UsageError(
            "factlog_sdk_plugin: these deselected tests were not collected (renamed or "
            "removed in this SDK version; update DESELECTED): " + ", ".join(stale)
        )
    if deselected or unrelated:
        config.hook.pytest_deselected(items=deselected + unrelated)
        items[:] = keep
    config._factlog_deselected = deselected
    config._factlog_unrelated = unrelated


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    reporter = terminalreporter
    passed = [r.nodeid for r in reporter.stats.get("passed", []) if r.when == "call"]
    exercised = [nodeid for nodeid in passed if nodeid in config._factlog_exercised]
    where = (
        "clients of stores served by another process"
        if config._factlog_holder is not None
        else "stores open in this process"
    )
    reporter.section(f"factlog: the SDK's session tests on FactlogSession ({where})")
    reporter.write_line(
        f"passed: {len(passed)} ({len(exercised)} of them built a FactlogSession); "
        f"skipped: {len(reporter.stats.get('skipped', []))}; "
        f"failed: {len(reporter.stats.get('failed', []))}; "
        f"deselected by name: {len(config._factlog_deselected)}; "
        f"runner tests not about sessions, left out: {len(config._factlog_unrelated)}"
    )
    by_file: Dict[str, List[int]] = {}
    for nodeid in passed:
        counts = by_file.setdefault(nodeid.split("::", 1)[0], [0, 0])
        counts[0] += 1
        counts[1] += nodeid in config._factlog_exercised
    for path, (count, built) in sorted(by_file.items()):
        reporter.write_line(f"  {path}: passed {count}, {built} of them with a FactlogSession")
    for name, reason in DESELECTED.items():
        reporter.write_line(f"  deselected {name}: {reason}")
