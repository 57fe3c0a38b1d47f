"""Type stubs of the native module ``factlog._native`` (re-exported by ``factlog``)."""

from __future__ import annotations

import os
import pathlib
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

PROTOCOL_VERSION: int
"""The protocol version the binding speaks (``format-spec/protocol.md``)."""

ERROR_CODES: List[str]
"""Every error code the protocol can raise, in the order of the spec's table."""

__version__: str
"""The package version."""

class Store:
    """An open store: one directory, many tasks, one log and one group commit.

    Opening recovers the log's tail and replays it (the GIL is released meanwhile). The
    handle is a new *holder* of every task: the first ``task(id)`` on a task written by an
    earlier holder takes it over. Use it as a context manager, or call ``close()``.
    Only one open handle per directory at a time (``Locked`` otherwise).
    """

    def __init__(
        self,
        path: Union[str, os.PathLike[str]],
        *,
        refuse_unmarked_secrets: bool = False,
        snapshot_every_events: Optional[int] = None,
        snapshot_every_bytes: Optional[int] = None,
        snapshot_at_turn_end: bool = False,
    ) -> None:
        """Opens (or creates) the store in ``path``.

        ``refuse_unmarked_secrets``: refuse (``UnmarkedSecret``) a body holding a value
        shaped like a credential not marked ``{"$secret": ...}``; off, the reply warns.
        ``snapshot_every_events`` / ``snapshot_every_bytes``: the snapshot policy (defaults
        1,000,000 events / 64 MiB; 0 turns a trigger off). ``snapshot_at_turn_end``: also a
        snapshot at every ``turn/end``.
        """
    @property
    def path(self) -> pathlib.Path:
        """The store's directory."""
    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
    def task(self, id: str) -> Task:
        """A handle on task ``id`` (its first event creates it). Takes the task over from an
        earlier holder first: its unfinished calls become ``outcome_unknown``, one-time
        approvals and pending cancels expire, a high-risk task needs ``control/resume``."""
    def recover(self) -> Dict[str, Any]:
        """Takes every task over and returns what recovery decided: the dict of
        ``factlog recover --json``."""
    def task_ids(self) -> List[str]:
        """The ids of the tasks that have events, sorted."""
    def events(self, from_seq: int = 1, task: Optional[str] = None) -> Events:
        """The events from ``from_seq`` on, each a dict of the ``factlog dump --json`` shape
        (``seq``, ``task``, ``revision``, ``timestamp_us``, ``time``, ``type``, body fields).
        With ``task``, only that task's events: the others are skipped by their envelope
        (their bodies are never decoded), with the GIL released while skipping. Either way the
        log is read from ``from_seq``: keep the seq to resume from rather than rescanning."""
    def flush(self, durability: str = "synced") -> None:
        """Makes every event appended so far meet ``durability``."""
    def close(self) -> None:
        """Syncs and closes the store; its tasks stop working (``ValueError``). Idempotent."""
    def __enter__(self) -> Store: ...
    def __exit__(self, *args: Any) -> bool: ...

class Task:
    """A handle on one task of a store."""

    @property
    def id(self) -> str:
        """The task's id."""
    @property
    def revision(self) -> int:
        """The task's current revision: the count of its events."""
    def delta(self, text: str) -> int:
        """Appends one streamed ``assistant/delta`` fragment, buffered (in memory; the
        background flusher makes it durable within milliseconds, and so does any later
        flushed or synced append); returns its seq. The hot path: no JSON."""
    def append(
        self,
        event: Dict[str, Any],
        *,
        expected_revision: Optional[int] = None,
        durability: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Appends one event given as a protocol request without ``task``: ``{"type":
        "tool/call", "call_id": ..., ...}`` (``format-spec/events.md``). Waits for its
        durability (the type's default, or ``durability``: ``"buffered"``, ``"flushed"``,
        ``"synced"``) with the GIL released. ``expected_revision`` is a compare-and-set.

        Returns the protocol's reply: ``{"seq", "task", "revision", "durability"}`` (plus
        ``"warnings"``), or for a repeated call that already has a result ``{..., "duplicate":
        True, "call_id", "receipt"}``: do not run the tool again. Raises the
        ``FactlogError`` subclass of the error code otherwise."""
    def append_batch(
        self,
        events: List[Dict[str, Any]],
        *,
        expected_revision: Optional[int] = None,
        durability: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Appends events as one atomic batch (all or none after a crash). Returns
        ``{"seq": first, "task", "revision": last, "durability", "count"}``."""
    def events(self, from_seq: int = 1) -> Events:
        """This task's events from ``from_seq`` on (``store.events(from_seq, task=id)``)."""
    def state(self) -> Dict[str, Any]:
        """The task's folded state: the dict under ``tasks[ID]`` of ``factlog state --task ID --json``."""
    def history(self) -> List[Dict[str, Any]]:
        """The model-visible history: the entries of ``factlog history --json``."""

class Events(Iterator[Dict[str, Any]]):
    """An iterator over stored events, as dicts."""

    def __iter__(self) -> Events: ...
    def __next__(self) -> Dict[str, Any]: ...

def request_key(task: str, operation: str, revision: int) -> str:
    """The documented request key of ``operation`` on ``task`` at ``revision`` (as
    ``factlog request-key``)."""
