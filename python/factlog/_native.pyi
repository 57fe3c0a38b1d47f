"""Type stubs of the native module ``factlog._native`` (re-exported by ``factlog``)."""

from __future__ import annotations

import os
import pathlib
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

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
    Only one process holds a directory at a time.

    Several processes, one store (``format-spec/server.md``): with ``share=True`` this handle
    shares its store with the other processes of the machine over ``DIR/factlog.sock`` until
    it is closed. When another process holds the store and shares it, ``Store(path)``
    connects to it instead: a *client* handle (``served_by`` is the serving pid) with the same
    API, whose calls go through the socket (the GIL released while they wait) and raise the
    same exceptions (``flush`` is the socket's ``sync`` request, synced); a
    server that goes away raises ``Disconnected`` at the next call, and the handle stays
    disconnected (open a new one once the store is served again). When another process holds
    the store and does not share it, ``Locked`` names it (its pid where the system tells) and
    says how to share it.
    """

    def __init__(
        self,
        path: Union[str, os.PathLike[str]],
        *,
        refuse_unmarked_secrets: bool = False,
        snapshot_every_events: Optional[int] = None,
        snapshot_every_bytes: Optional[int] = None,
        snapshot_at_turn_end: bool = False,
        share: bool = False,
        allow_group: Optional[int] = None,
        clients_max: Optional[int] = None,
        replicate_to: Optional[str] = None,
    ) -> None:
        """Opens (or creates) the store in ``path``, or connects to it when another process
        holds it and shares it.

        ``refuse_unmarked_secrets``: refuse (``UnmarkedSecret``) a body holding a value
        shaped like a credential not marked ``{"$secret": ...}``; off, the reply warns.
        ``snapshot_every_events`` / ``snapshot_every_bytes``: the snapshot policy (defaults
        1,000,000 events / 64 MiB; 0 turns a trigger off). ``snapshot_at_turn_end``: also a
        snapshot at every ``turn/end``. These four are options of the process holding the
        store: given while connecting to a served store they raise ``InvalidOptions``.

        ``share``: share the store over ``DIR/factlog.sock`` until ``close()`` (the socket is
        owner-only; the directory must not be writable by group or others,
        ``InvalidOptions`` otherwise). ``allow_group``: also serve the processes whose
        primary group is this gid (socket mode 0660). ``clients_max``: the most clients
        served at once (default and maximum 64; the next gets ``ServerBusy``). The last two
        need ``share=True`` (``ValueError`` otherwise). With ``share=True`` a store another
        process already serves raises ``Locked``.

        ``replicate_to``: replicate the store to this location while it is open
        (``file:///DIR``; ``s3://``, ``gs://``, ``az://`` where the package was built with
        them), in this process, until ``close()``: an append with
        ``durability="replicated"`` (also from the clients of a shared store) returns only
        once the replica holds the event, and its reply says ``"durability": "replicated"``.
        Without it such an append raises ``NotReplicated`` and writes nothing. Given while
        connecting to a store another process serves, it raises ``Locked`` (that process
        replicates).
        """
    @staticmethod
    def connect(
        path: Union[str, os.PathLike[str]], *, timeout: Optional[float] = None
    ) -> Store:
        """Connects to the store another process serves from ``path`` (its socket
        ``DIR/factlog.sock``), without trying to open it: a client handle. Raises
        ``NotServed`` when nothing answers there, ``PermissionDenied`` / ``ServerBusy`` when
        the server refuses this process. With ``timeout`` (seconds), a call whose reply (the
        hello's included) does not come in time raises ``TimedOut`` and the handle is
        abandoned (its later calls raise ``Disconnected``): a server that is alive but stopped
        is not waited for forever."""
    @property
    def path(self) -> pathlib.Path:
        """The store's directory."""
    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
    @property
    def sharing(self) -> bool:
        """Whether this handle shares its store with other processes (``share=True``)."""
    @property
    def open_report(self) -> Optional[Dict[str, Any]]:
        """What opening the store found and did (``None`` for a client of a served store:
        the serving process opened it). Keys: ``segments``, ``records_scanned``,
        ``last_seq``, ``snapshot_seq`` (the snapshot the state was loaded from, or ``None``),
        ``replayed_events``, ``tasks``; ``mark``: what the log mark vouched for
        (``generation``, ``clean``, ``first_segment``, ``last_segment``, ``durable_seq``,
        ``durable_offset``), ``None`` for a store written before marks
        (``format-spec/mark.md``); ``tail_cut``: the torn tail the open cut, ``None`` when
        nothing was cut, else ``segment``, ``path``, ``offset``, ``bytes``,
        ``first_seq_cut``, ``frames_after_hole``, ``kept`` (the file its bytes were kept in
        for ``factlog salvage``, or ``None``) and ``message``. Damage the mark vouches for is
        never cut: the open raises ``Corruption`` naming it instead."""
    @property
    def served_by(self) -> Optional[int]:
        """The pid of the process serving the store when this handle is its client, else
        ``None``."""
    def task(self, id: str) -> Task:
        """A handle on task ``id`` (its first event creates it). Takes the task over from an
        earlier holder first: its unfinished calls become ``outcome_unknown``, one-time
        approvals and pending cancels expire, a high-risk task needs ``control/resume``.
        Through a served store the serving process does it at this connection's first
        append to the task, and hands the task over again when the connection ends."""
    def recover(self) -> Dict[str, Any]:
        """Takes every task over and returns what recovery decided: the dict of
        ``factlog recover --json``. Through a served store, recovery runs in the serving
        process and leaves the tasks its clients hold alone."""
    def task_ids(self) -> List[str]:
        """The ids of the tasks that have events, sorted (through a served store, asked of
        the server page by page)."""
    def events(self, from_seq: int = 1, task: Optional[str] = None) -> Events:
        """The events from ``from_seq`` on, each a dict of the ``factlog dump --json`` shape
        (``seq``, ``task``, ``revision``, ``timestamp_us``, ``time``, ``type``, body fields;
        a ``record/blob``'s ``bytes`` as a ``bytes`` object).
        With ``task``, only that task's events: the others are skipped by their envelope
        (their bodies are never decoded), with the GIL released while skipping. Either way the
        log is read from ``from_seq``: keep the seq to resume from rather than rescanning.
        The iterator ends at the last event the log held when it began (events appended
        while it runs are not in it). Through a served store the events come in pages of up
        to 1000 (one request each), bounded the same way."""
    def flush(self, durability: str = "synced") -> None:
        """Makes every event appended so far meet ``durability``. Through a served store:
        the socket's ``sync`` request (the fragments still buffered go first), synced, which
        meets every durability."""
    def close(self) -> None:
        """Stops sharing first when shared (the requests in progress are answered, the
        clients disconnected), then syncs and closes the store; a client handle sends the
        fragments it still buffers, reads their replies (raising a refusal among them) and
        ends its connection. Its tasks stop working (``ValueError``). Idempotent."""
    def __enter__(self) -> Store: ...
    def __exit__(self, *args: Any) -> bool: ...

class Task:
    """A handle on one task of a store."""

    @property
    def id(self) -> str:
        """The task's id."""
    @property
    def revision(self) -> int:
        """The task's current revision: the count of its events (one request through a
        served store)."""
    def delta(self, text: str) -> Optional[int]:
        """Appends one streamed ``assistant/delta`` fragment, buffered (in memory; the
        background flusher makes it durable within milliseconds, and so does any later
        flushed or synced append); returns its seq. The hot path: no JSON.

        Through a served store it returns ``None``: fragments are pipelined (buffered and
        sent with the next request or at ``close()``, without waiting for their replies), so
        the store's refusal of one is raised by a later call of the same connection: by
        ``close()``, or as :class:`factlog.PipelinedRefused` (whose ``request_reply`` is the
        reply to that call's own request, which still ran)."""
    def deltas(self, texts: Iterable[str]) -> Optional[int]:
        """Appends streamed ``assistant/delta`` fragments in order, each exactly as
        :meth:`delta` appends one, in one call from Python: for a model's output that arrives
        in bursts, it saves the cost of a call per fragment. Returns the seq of the last one
        (``None`` for no fragment, and through a served store, where they are pipelined as
        ``delta``'s are). Not atomic: a refused fragment (``LimitExceeded``, ...) raises, and
        the fragments before it stay appended. ``texts`` is a list, a tuple or another
        iterable of ``str`` (a ``str`` itself is refused with ``TypeError``)."""
    def append(
        self,
        event: Dict[str, Any],
        *,
        expected_revision: Optional[int] = None,
        durability: Optional[str] = None,
        warnings: bool = True,
    ) -> Dict[str, Any]:
        """Appends one event given as a protocol request without ``task``: ``{"type":
        "tool/call", "call_id": ..., ...}`` (``format-spec/events.md``). Waits for its
        durability (the type's default, or ``durability``: ``"buffered"``, ``"flushed"``,
        ``"synced"``, or ``"replicated"``: synced, then held by the replica of a store opened
        with ``replicate_to``) with the GIL released. ``expected_revision`` is a
        compare-and-set. A ``record/blob`` takes its raw bytes as a ``bytes`` object under
        ``"bytes"``: copied once into the record, never through base64 (through a served
        store they travel in base64 on the socket).

        Returns the protocol's reply: ``{"seq", "task", "revision", "durability"}`` (plus
        ``"warnings"`` for values shaped like credentials and not marked as secrets; with
        ``warnings=False`` the embedded store skips that search, which costs a pass over the
        event's bytes, and the reply has none; through a served store the serving process
        still searches and the warnings are dropped; a store opened with
        ``refuse_unmarked_secrets`` still refuses them), or for a repeated call that already
        has a result ``{..., "duplicate": True, "call_id", "receipt"}``: do not run the tool
        again. Raises the ``FactlogError`` subclass of the error code otherwise."""
    def append_batch(
        self,
        events: List[Dict[str, Any]],
        *,
        expected_revision: Optional[int] = None,
        durability: Optional[str] = None,
        warnings: bool = True,
    ) -> Dict[str, Any]:
        """Appends events as one atomic batch (all or none after a crash). Returns
        ``{"seq": first, "task", "revision": last, "durability", "count"}`` (plus
        ``"warnings"`` unless ``warnings=False``, as for :meth:`append`)."""
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
