"""A LangGraph checkpointer on a factlog store: :class:`FactlogSaver`.

Install the extra (``pip install "./python[langgraph]"``), then give the saver to a graph::

    from factlog.langgraph import FactlogSaver

    with FactlogSaver("agent.factlog") as saver:
        graph = builder.compile(checkpointer=saver)
        graph.invoke(inputs, {"configurable": {"thread_id": "t1"}})

Storage mapping
---------------
Each LangGraph thread is one factlog task, whose id is :func:`task_id_for`\\ ``(thread_id)``:
``"langgraph:" + thread_id`` when that fits the 128-byte task-id limit, otherwise
``"langgraph#" + sha256(thread_id as UTF-8).hexdigest()`` (the two prefixes cannot collide,
and every event also names its ``thread_id``, which reads check).

- A checkpoint is one ``record/blob`` event of kind ``langgraph/checkpoint`` whose ``key`` is
  the checkpoint id, whose ``value`` is ``{"thread_id", "checkpoint_ns", "checkpoint_id",
  "parent_checkpoint_id", "checkpoint": {"type": T}, "metadata": VALUE}`` and whose ``bytes``
  are what ``serde.dumps_typed`` returned for the checkpoint, raw: no base64 and no conversion
  on the way in or out (``format-spec/events.md``, ``record/blob``). In a log of segment format
  1, which cannot hold a ``record/blob``, for a checkpoint holding a ``{"$secret": ...}`` mark
  (which counts for nothing in raw bytes), and in stores written by earlier releases, it is a
  ``record/put`` with ``"checkpoint": VALUE``; the saver reads both.
- One ``put_writes`` call is one ``record/put`` event of kind ``langgraph/writes`` (``key``:
  the checkpoint id) whose ``value`` is ``{"thread_id", "checkpoint_ns", "checkpoint_id",
  "task_id", "task_path", "writes": [{"idx", "channel", ...VALUE}]}``.
- A VALUE is what ``serde.dumps_typed`` returned, as structure when its bytes come back from it
  byte for byte: ``{"type": "msgpack", "value": V}`` (the bytes are the msgpack of the JSON
  value ``V``, so plain data is stored, and shown by ``factlog dump``, as itself), with
  ``"ext": true`` when msgpack extension values (LangChain messages, ...) sit in ``V`` as
  ``{"$msgpack_ext": [code, payload]}`` objects; otherwise ``{"type": T, "base64":
  B}``, the bytes in base64 (other types, binary strings, non-string keys, non-finite floats, a
  value holding ``"$secret"``). The rules are in ``factlog/_langgraph_values.py``; the Node
  package's saver uses the same two forms with its own serializer's ``"json"`` type, and this
  saver refuses its threads (``CorruptEvent``) rather than guess at them (the Node saver
  refuses this one's in turn). Values kept as structure are bodies like any other,
  and a ``record/blob``'s bytes are scanned too: with ``refuse_unmarked_secrets`` a
  credential-shaped string in a checkpoint is refused (``UnmarkedSecret``), as it would be in a
  message.
- ``delete_thread``, ``prune`` and ``delete_for_runs`` append ``record/removed`` events (one
  per kind, in one atomic batch) naming the events that no longer count; the log stays
  append-only and reads fold a thread's events applying them.

Reading and memory
------------------
The saver keeps, per thread it has used, an index built from one fold of the thread's events and
kept current by its own appends (refolded from where it stopped when the task's revision moved
behind it: another saver on the same store appended, in this process or, through a served store,
in another): for each live checkpoint its seq, parent id and decoded metadata; for each pending
write its seq, task id, index, channel and task path. It keeps the serialized bytes only of the
newest checkpoint of each namespace and of that checkpoint's pending writes; older checkpoints
and their writes are read back from the log when asked for, through a cache of the serialized
values it read or that stopped being the newest, least recently used out, bounded by
``value_cache_bytes`` (default 32 MiB; the Node saver's ``valueCacheBytes`` is the same). At
most ``threads_cached`` threads (default 256) are indexed at once, least recently used first
out; an evicted thread is refolded on its next use. So the memory is bounded by those threads'
live checkpoints (about the size of their metadata each) plus one checkpoint per namespace plus
the value cache, not by the store. The first use of a thread in a process scans the log from its
start (the store skips other tasks' events by their envelope, but has no per-task position to
start from). ``list(None)`` (every thread) and ``delete_for_runs`` visit every LangGraph thread
of the store, and ``list`` sorts the ids of every checkpoint it matches before reading them back
a page at a time.

Limits
------
A serialized checkpoint must fit one event body (4 MiB: its bytes raw in a ``record/blob``;
about 3 MiB in base64 in a log of segment format 1), and so must one ``put_writes`` call (4 MiB
of JSON: about 4 MiB of msgpack kept as structure, 3 MiB in base64); a bigger one raises
``LimitExceeded`` and is not stored. Writes are not also mapped onto typed factlog events
(``user/message``, ``assistant/message``, ...): a forked or replayed LangGraph thread may
legitimately carry the same tool-call ids again, which the typed events refuse.

Durability
----------
LangGraph tells the saver its durability mode (``graph.invoke(..., durability=...)``, in
``config["configurable"]["__pregel_durability"]``, absent meaning LangGraph's default
``"async"``). With ``durability=None`` (the default) the saver maps it onto factlog's tiers:

=========  =========  ==================================================================
LangGraph  factlog    meaning
=========  =========  ==================================================================
``sync``   synced     the checkpoint is on stable storage (``fdatasync``) before the next
                      step starts; it survives a power loss
``async``  flushed    LangGraph runs the next step while the save is in flight; the save
                      returns once the record is in the kernel (survives a process crash;
                      the group commit makes it power-loss safe within milliseconds)
``exit``   synced     LangGraph saves only when the run ends; that one save is synced
=========  =========  ==================================================================

``durability="synced"``, ``"flushed"`` or ``"buffered"`` uses that tier for every checkpoint
and write whatever the mode. Deletions, prunes and copies are always synced.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import threading
from collections import OrderedDict
from typing import (
    Any,
    AsyncIterator,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Set,
    Tuple,
)

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        SerializerProtocol,
        get_checkpoint_id,
        get_checkpoint_metadata,
        writes_sort_key,
    )
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"factlog.langgraph needs LangGraph's checkpoint package ({error}): install the extra, "
        "pip install 'factlog[langgraph]' (from a clone: pip install './python[langgraph]')"
    ) from error

from . import _langgraph_values as _values
from . import _native
from .errors import CorruptEvent, InvalidEvent, LimitExceeded

__all__ = [
    "FactlogSaver",
    "task_id_for",
    "CHECKPOINT_KIND",
    "WRITES_KIND",
    "TASK_PREFIX",
    "TASK_DIGEST_PREFIX",
]

CHECKPOINT_KIND = "langgraph/checkpoint"
"""The ``kind`` of the ``record/blob`` (or ``record/put``) events that hold checkpoints."""

WRITES_KIND = "langgraph/writes"
"""The ``kind`` of the ``record/put`` events that hold one ``put_writes`` call."""

TASK_PREFIX = "langgraph:"
"""Task ids of threads whose id fits: this prefix, then the thread id."""

TASK_DIGEST_PREFIX = "langgraph#"
"""Task ids of threads whose id is too long: this prefix, then the SHA-256 hex digest of the
thread id's UTF-8 bytes."""

_TASK_ID_BYTES_MAX = 128
_DURABILITY_TIERS = ("synced", "flushed", "buffered")
_MODE_TIERS = {"sync": "synced", "async": "flushed", "exit": "synced"}
_DURABILITY_CONFIG_KEY = "__pregel_durability"
# The store's limits on a record/removed event's seqs and on the events of one batch.
_REMOVED_SEQS_MAX = 4096
_BATCH_EVENTS_MAX = 1024
# A batch of copied events stops at this many events or body bytes, well inside the
# store's per-batch limits (1024 events, 16 MiB frames).
_COPY_BATCH_EVENTS_MAX = 512
_COPY_BATCH_BYTES_MAX = 8 * 1024 * 1024
# list reads the bytes of this many checkpoints at a time.
_LIST_PAGE = 64
# alist hands items from the worker thread to the event loop this many at a time.
_ALIST_CHUNK = 16


class _Snapshot(NamedTuple):
    """What a listed checkpoint's tuple is built from, taken from the index under its
    thread's lock."""

    seq: int
    typed: Optional[Tuple[str, bytes]]
    metadata: Any
    parent_id: Optional[str]


# The serialized parts of an event this saver just appended: the checkpoint, or each write's
# value (so that folding it need not decode its base64 again).
_Typed = Optional[List[Tuple[str, bytes]]]
# A checkpoint's place in its thread: (checkpoint namespace, checkpoint id).
_Key = Tuple[str, str]


def task_id_for(thread_id: str) -> str:
    """The factlog task id that holds LangGraph thread ``thread_id``: ``"langgraph:" +
    thread_id`` when that is at most 128 bytes of UTF-8, otherwise ``"langgraph#"`` followed by
    the SHA-256 hex digest of the thread id's UTF-8 bytes."""
    plain = TASK_PREFIX + thread_id
    if len(plain.encode("utf-8")) <= _TASK_ID_BYTES_MAX:
        return plain
    return TASK_DIGEST_PREFIX + hashlib.sha256(thread_id.encode("utf-8")).hexdigest()


# Encodes a value (the object and what the serializer made of it) as a record holds it.
_Encode = Callable[[Any, Tuple[str, bytes]], Dict[str, Any]]


def _in_base64(obj: Any, typed: Tuple[str, bytes]) -> Dict[str, Any]:
    return _values.in_base64(typed)


def _refuses_blobs(error: Exception) -> bool:
    """Whether ``error`` is a store's refusal of every record/blob: a log of segment format 1
    (``format-spec/events.md``, ``record/blob``)."""
    return isinstance(error, InvalidEvent) and "record/blob" in str(error) and (
        "segment format" in str(error)
    )


def _blob_as_put(event: Dict[str, Any]) -> Dict[str, Any]:
    """A ``record/blob`` of a checkpoint as the ``record/put`` it stands for: its value with
    ``checkpoint`` ``{"type": T, "bytes": B}``, ``B`` the blob's raw bytes. Any other event as
    it is."""
    if event.get("type") != "record/blob" or event.get("kind") != CHECKPOINT_KIND:
        return event
    value = event.get("value")
    raw = event.get(_values.RAW)
    checkpoint = value.get("checkpoint") if isinstance(value, dict) else None
    if not isinstance(checkpoint, dict) or not isinstance(raw, bytes):
        return event  # not of this saver's shape: never folded, as a foreign record/put
    put = {key: item for key, item in event.items() if key != _values.RAW}
    put["type"] = "record/put"
    put["value"] = dict(value, checkpoint={"type": checkpoint.get("type"), _values.RAW: raw})
    return put


def _put_event(kind: str, key: Optional[str], value: Dict[str, Any]) -> Dict[str, Any]:
    """The event that stores ``value`` (a record/put's): a ``record/blob`` when its checkpoint
    is raw bytes (:func:`_blob_as_put` reversed), a ``record/put`` otherwise."""
    checkpoint = value.get("checkpoint")
    if isinstance(checkpoint, dict) and isinstance(checkpoint.get(_values.RAW), bytes):
        head = dict(value, checkpoint={"type": checkpoint["type"]})
        return {
            "type": "record/blob",
            "kind": kind,
            "key": key,
            "value": head,
            _values.RAW: checkpoint[_values.RAW],
        }
    return {"type": "record/put", "kind": kind, "key": key, "value": value}


class _Checkpoint:
    """One live checkpoint of a thread's index."""

    __slots__ = ("versions", "typed")

    def __init__(self) -> None:
        # Every live put event that wrote this key, oldest first, as (seq, parent id,
        # metadata): the last one counts. Usually one; a re-put adds one.
        self.versions: List[Tuple[int, Optional[str], Dict[str, Any]]] = []
        # The serialized checkpoint of the last version, kept only for the newest checkpoint
        # of its namespace; otherwise read back from the log at the last version's seq.
        self.typed: Optional[Tuple[str, bytes]] = None

    @property
    def seq(self) -> int:
        """The seq of the put event that counts."""
        return self.versions[-1][0]

    @property
    def parent_id(self) -> Optional[str]:
        """The parent checkpoint's id, if any."""
        return self.versions[-1][1]

    @property
    def metadata(self) -> Dict[str, Any]:
        """The checkpoint's metadata, decoded."""
        return self.versions[-1][2]


class _Write:
    """One pending write of a thread's index."""

    __slots__ = ("seq", "channel", "task_path", "typed")

    def __init__(
        self, seq: int, channel: str, task_path: str, typed: Optional[Tuple[str, bytes]]
    ) -> None:
        self.seq = seq  # the writes event it came in
        self.channel = channel
        self.task_path = task_path
        self.typed = typed  # the serialized value, kept only for the newest checkpoint


class _Thread:
    """The index of one thread: its task handle and its live checkpoints and writes."""

    def __init__(self, thread_id: str, task: _native.Task) -> None:
        self.thread_id = thread_id
        self.task = task
        self.lock = threading.RLock()
        self.revision = 0  # the task's revision through the last event folded
        self.last_seq = 0  # the seq of the last event folded (0: none yet)
        # checkpoint_ns -> checkpoint_id -> entry
        self.checkpoints: Dict[str, Dict[str, _Checkpoint]] = {}
        # checkpoint_ns -> the greatest checkpoint id (the newest)
        self.newest: Dict[str, str] = {}
        # (checkpoint_ns, checkpoint_id) -> (task_id, idx) -> write
        self.writes: Dict[Tuple[str, str], Dict[Tuple[str, int], _Write]] = {}


class FactlogSaver(BaseCheckpointSaver):
    """A LangGraph checkpointer storing every thread in a factlog store (sync and async).

    ``FactlogSaver(path)`` opens (or creates) the store in directory ``path`` and closes it in
    :meth:`close` (also a context manager, ``with`` and ``async with``);
    ``FactlogSaver(store=s)`` shares an open :class:`factlog.Store` and leaves closing it to the
    caller. ``serde`` is LangGraph's serializer (default: LangGraph's JSON-plus one).
    ``durability``: ``None`` (default) follows LangGraph's durability mode (``sync`` and
    ``exit`` -> ``synced``, ``async`` -> ``flushed``); ``"synced"``, ``"flushed"`` or
    ``"buffered"`` fixes the tier. ``threads_cached`` bounds how many threads' indexes stay in
    memory; ``value_cache_bytes`` (default 32 MiB, 0 for none) the serialized checkpoints and
    writes kept from the log besides the newest of each namespace. The storage mapping, memory
    bound and durability table are in the module's documentation (``help(factlog.langgraph)``).

    Implements ``put``, ``put_writes``, ``get_tuple``, ``list``, ``delete_thread``,
    ``delete_for_runs``, ``copy_thread``, ``prune`` and their ``a``-prefixed coroutines,
    which run the same code in a worker thread so the event loop never waits for the disk.
    """

    def __init__(
        self,
        path: Any = None,
        *,
        store: Optional[_native.Store] = None,
        serde: Optional[SerializerProtocol] = None,
        durability: Optional[str] = None,
        threads_cached: int = 256,
        value_cache_bytes: int = 32 * 1024 * 1024,
    ) -> None:
        super().__init__(serde=serde)
        if (path is None) == (store is None):
            raise TypeError("FactlogSaver takes a store path or store=, exactly one of them")
        if durability is not None and durability not in _DURABILITY_TIERS:
            raise ValueError(
                f"durability {durability!r} is not a factlog tier: give one of "
                f"{', '.join(map(repr, _DURABILITY_TIERS))}, or None to follow LangGraph's mode"
            )
        if threads_cached < 1:
            raise ValueError(f"threads_cached must be at least 1, not {threads_cached}")
        if value_cache_bytes < 0:
            raise ValueError(f"value_cache_bytes must be 0 or more, not {value_cache_bytes}")
        self._owns_store = store is None
        self.store: _native.Store = _native.Store(path) if store is None else store
        """The factlog store the saver writes to."""
        self.durability: Optional[str] = durability
        """The fixed factlog tier, or ``None`` to follow LangGraph's durability mode."""
        self._threads_cached = threads_cached
        self._threads: "OrderedDict[str, _Thread]" = OrderedDict()
        self._threads_lock = threading.Lock()
        self._cache = _values.ValueCache(value_cache_bytes)
        # Checkpoints go into record/blob events until the store refuses one (a log of segment
        # format 1 cannot hold them): record/put from then on.
        self._blobs = True
        # LangGraph's own serializer reads a JSON value kept as structure as itself.
        self._direct = type(self.serde) is JsonPlusSerializer

    # ----------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Closes the store if the saver opened it (a shared store stays open); forgets the
        indexes. Idempotent."""
        with self._threads_lock:
            self._threads.clear()
        self._cache.clear()
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> "FactlogSaver":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> "FactlogSaver":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await asyncio.to_thread(self.close)

    # ----------------------------------------------------------------- the index

    def _thread(self, thread_id: str) -> _Thread:
        """The thread's index, caught up with its task's events."""
        with self._threads_lock:
            thread = self._threads.get(thread_id)
            if thread is not None:
                self._threads.move_to_end(thread_id)
        if thread is None:
            thread = _Thread(thread_id, self.store.task(task_id_for(thread_id)))
            with self._threads_lock:
                existing = self._threads.get(thread_id)
                if existing is not None:
                    thread = existing
                else:
                    self._threads[thread_id] = thread
                    while len(self._threads) > self._threads_cached:
                        self._threads.popitem(last=False)
        with thread.lock:
            self._catch_up(thread)
        return thread

    @staticmethod
    def _task_events(thread: _Thread, from_seq: int) -> Iterator[Dict[str, Any]]:
        """The thread's task's events from ``from_seq`` on (the store skips other tasks'
        events by their envelope), each ``record/blob`` of a checkpoint as the ``record/put``
        it stands for (:func:`_blob_as_put`)."""
        return map(_blob_as_put, thread.task.events(from_seq))

    def _catch_up(self, thread: _Thread) -> None:
        """Folds the task's events the index has not seen (none if the revision is known)."""
        if thread.task.revision == thread.revision:
            return
        for event in self._task_events(thread, thread.last_seq + 1):
            self._apply(thread, event["seq"], event)
            thread.revision = event["revision"]

    def _apply(
        self, thread: _Thread, seq: int, event: Dict[str, Any], typed: _Typed = None
    ) -> None:
        """Folds one event of the thread's task into its index. ``typed``: the serialized
        checkpoint, or the writes' values, of an event this saver just appended (so that
        its base64 need not be decoded again)."""
        thread.last_seq = max(thread.last_seq, seq)
        event = _blob_as_put(event)
        kind = event.get("kind")
        if event["type"] == "record/put":
            value = event.get("value")
            if not isinstance(value, dict) or value.get("thread_id") != thread.thread_id:
                return
            where = (value["checkpoint_ns"], value["checkpoint_id"])
            if kind == CHECKPOINT_KIND:
                self._apply_checkpoint(thread, seq, where, value, typed)
            elif kind == WRITES_KIND:
                self._apply_writes(thread, seq, where, value, typed)
        elif event["type"] == "record/removed" and kind in (CHECKPOINT_KIND, WRITES_KIND):
            through = event.get("through_seq")
            seqs = set(event.get("seqs") or ())
            if kind == CHECKPOINT_KIND:
                self._remove_checkpoints(thread, through, seqs)
            else:
                self._remove_writes(thread, through, seqs)

    def _apply_checkpoint(
        self, thread: _Thread, seq: int, where: _Key, value: Dict[str, Any], typed: _Typed
    ) -> None:
        ns, checkpoint_id = where
        entry = thread.checkpoints.setdefault(ns, {}).setdefault(checkpoint_id, _Checkpoint())
        if "channel_values" in value:
            # The Node package's record: the checkpoint without its channel values, which are
            # beside it. Never read as a checkpoint of this saver's shape.
            raise CorruptEvent(_values.FOREIGN)
        if typed:
            # This saver's own append: the value may be the caller's object; decode a copy.
            metadata = self.serde.loads_typed(_values.typed_of(value["metadata"]))
        else:
            metadata, _ = _values.load(self.serde, value["metadata"], self._direct)
        entry.versions.append((seq, value.get("parent_checkpoint_id"), metadata))
        entry.typed = typed[0] if typed else _values.typed_of(value["checkpoint"])
        newest = thread.newest.get(ns)
        if newest is None or checkpoint_id >= newest:
            if newest is not None and newest != checkpoint_id:
                self._forget_bytes(thread, ns, newest)
            thread.newest[ns] = checkpoint_id
        else:
            self._forget_bytes(thread, ns, checkpoint_id)

    def _apply_writes(
        self, thread: _Thread, seq: int, where: _Key, value: Dict[str, Any], typed: _Typed
    ) -> None:
        ns, checkpoint_id = where
        keep_bytes = thread.newest.get(ns) == checkpoint_id
        stored = thread.writes.setdefault((ns, checkpoint_id), {})
        for position, write in enumerate(value["writes"]):
            key = (value["task_id"], write["idx"])
            # A regular write (idx >= 0) is written once: a repeated one is ignored. A special
            # one (an error, an interrupt, ...: negative idx) replaces the earlier one.
            if key[1] >= 0 and key in stored:
                continue
            stored[key] = _Write(
                seq,
                write["channel"],
                value.get("task_path", ""),
                (typed[position] if typed else _values.typed_of(write)) if keep_bytes else None,
            )

    def _forget_bytes(self, thread: _Thread, ns: str, checkpoint_id: str) -> None:
        """Moves the bytes the index keeps of a checkpoint and its writes (once the newest of
        its namespace) to the value cache."""
        entry = thread.checkpoints.get(ns, {}).get(checkpoint_id)
        if entry is not None and entry.typed is not None:
            self._cache.put((entry.seq,), entry.typed)
            entry.typed = None
        for (task_id, idx), write in thread.writes.get((ns, checkpoint_id), {}).items():
            if write.typed is not None:
                self._cache.put((write.seq, task_id, idx), write.typed)
                write.typed = None

    def _remove_checkpoints(self, thread: _Thread, through: Optional[int], seqs: Set[int]) -> None:
        for ns in list(thread.checkpoints):
            entries = thread.checkpoints[ns]
            for checkpoint_id in list(entries):
                entry = entries[checkpoint_id]
                counted = entry.seq
                entry.versions = [
                    v
                    for v in entry.versions
                    if v[0] not in seqs and (through is None or v[0] > through)
                ]
                if not entry.versions:
                    del entries[checkpoint_id]
                elif entry.seq != counted:
                    entry.typed = None  # an earlier version counts again: read back on demand
            if not entries:
                del thread.checkpoints[ns]
        # The newest checkpoint may have gone; its successor's bytes are read back on demand.
        thread.newest = {ns: max(entries) for ns, entries in thread.checkpoints.items()}

    def _remove_writes(self, thread: _Thread, through: Optional[int], seqs: Set[int]) -> None:
        for key in list(thread.writes):
            stored = thread.writes[key]
            for write_key in list(stored):
                seq = stored[write_key].seq
                if seq in seqs or (through is not None and seq <= through):
                    del stored[write_key]
            if not stored:
                del thread.writes[key]

    # ----------------------------------------------------------------- appends

    def _tier(self, config: Optional[RunnableConfig]) -> str:
        if self.durability is not None:
            return self.durability
        mode = "async"
        if config is not None:
            mode = config.get("configurable", {}).get(_DURABILITY_CONFIG_KEY) or "async"
        return _MODE_TIERS.get(mode, "synced")

    def _append(
        self,
        thread: _Thread,
        events: List[Dict[str, Any]],
        durability: str,
        typed: _Typed = None,
    ) -> None:
        """Appends ``events`` to the thread's task as one atomic batch and folds them (a
        single event may come with its ``typed`` serialized parts); the caller holds
        ``thread.lock``. Other savers (of this process or of others, through a served store)
        may append to the same task meanwhile: when the reply's revision shows that events
        came between what the index folded and this batch, the index folds the log from where
        it stopped instead, this batch included, so it stays in the log's order. No
        compare-and-set: it would make a busy thread's appenders retry, and a writer could
        lose every round."""
        # Nobody reads a warning here: no search for unmarked credential shapes (a pass over
        # every checkpoint's bytes); a store that refuses them still does.
        if len(events) == 1:
            reply = thread.task.append(events[0], durability=durability, warnings=False)
        else:
            reply = thread.task.append_batch(events, durability=durability, warnings=False)
        if reply["revision"] != thread.revision + len(events):
            self._catch_up(thread)
            return
        first = reply["seq"]
        for offset, event in enumerate(events):
            self._apply(thread, first + offset, event, typed)
        thread.revision = reply["revision"]

    def _append_values(
        self,
        thread: _Thread,
        event: Callable[[_Encode], Dict[str, Any]],
        durability: str,
        typed: List[Tuple[str, bytes]],
    ) -> None:
        """Appends the event ``event(encode)`` builds, its serialized values kept as
        structure where they come back byte for byte (``_langgraph_values``), as
        :meth:`_append` does; the caller holds ``thread.lock``. When the store refuses that
        event (a structure it has no JSON form for, such as a non-finite float or a depth
        past its limit, a body that outgrew its limit as structure, or a ``record/blob`` in a
        log of segment format 1), it appends the event with every value in base64 instead, the
        form it takes whatever the value."""
        structured = False

        def encode(obj: Any, serialized: Tuple[str, bytes]) -> Dict[str, Any]:
            nonlocal structured
            value = _values.stored(obj, serialized)
            structured = structured or _values.is_structure(value)
            return value

        first = event(encode)
        try:
            self._append(thread, [first], durability, typed)
        except (InvalidEvent, LimitExceeded) as error:
            # A log that holds no record/blob: the caller writes a record/put instead.
            if not structured or _refuses_blobs(error):
                raise
            self._append(thread, [event(_in_base64)], durability, typed)

    # ----------------------------------------------------------------- reads

    def _read_values(self, thread: _Thread, seqs: Iterable[int]) -> Dict[int, Dict[str, Any]]:
        """The ``value`` of each of the thread's events at ``seqs``, read back from the log
        in one pass."""
        wanted = set(seqs)
        found: Dict[int, Dict[str, Any]] = {}
        if not wanted:
            return found
        last = max(wanted)
        for event in self._task_events(thread, min(wanted)):
            seq = event["seq"]
            if seq in wanted:
                found[seq] = event["value"]
            if seq >= last:
                break
        return found

    def _tuples(
        self, thread: _Thread, keys: List[Tuple[str, str]], config: Optional[RunnableConfig]
    ) -> List[Callable[[], CheckpointTuple]]:
        """For each of ``keys`` (namespace, id) of a caught-up thread, in order, a function
        that builds its checkpoint tuple. What neither the index nor the value cache holds is
        read from the log now, in one pass, under the thread's lock; the objects are decoded
        only when a function is called, so that a long listing holds one decoded checkpoint at
        a time, not a page of them (whose objects the garbage collector would walk again and
        again)."""
        # What the value cache holds, taken out once (another thread may evict it meanwhile).
        cached: Dict[Tuple[Any, ...], Tuple[str, bytes]] = {}
        missing: Set[int] = set()

        def look_up(typed: Optional[Tuple[str, bytes]], key: Tuple[Any, ...]) -> None:
            if typed is None:
                typed = self._cache.get(key)
                if typed is None:
                    missing.add(key[0])
                else:
                    cached[key] = typed

        for ns, checkpoint_id in keys:
            entry = thread.checkpoints[ns][checkpoint_id]
            look_up(entry.typed, (entry.seq,))
            for (task_id, idx), write in thread.writes.get((ns, checkpoint_id), {}).items():
                look_up(write.typed, (write.seq, task_id, idx))
        values = self._read_values(thread, missing)
        makers = []
        for ns, checkpoint_id in keys:
            entry = thread.checkpoints[ns][checkpoint_id]
            stored = thread.writes.get((ns, checkpoint_id), {})
            ordered = sorted(
                stored.items(), key=lambda kv: writes_sort_key(kv[1].task_path, *kv[0])
            )
            # Plain values taken under the lock: the index's objects change after it (a put
            # forgets their bytes, a removal their versions), the tuple is the page's.
            checkpoint = _Snapshot(entry.seq, entry.typed, entry.metadata, entry.parent_id)
            writes = [
                (task_id, idx, write.seq, write.channel, write.typed)
                for (task_id, idx), write in ordered
            ]
            makers.append(
                functools.partial(
                    self._make_tuple,
                    thread.thread_id,
                    ns,
                    checkpoint_id,
                    checkpoint,
                    writes,
                    config,
                    cached,
                    values,
                )
            )
        return makers

    def _make_tuple(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        entry: _Snapshot,
        writes: List[Tuple[str, int, int, str, Optional[Tuple[str, bytes]]]],
        config: Optional[RunnableConfig],
        cached: Dict[Tuple[Any, ...], Tuple[str, bytes]],
        values: Dict[int, Dict[str, Any]],
    ) -> CheckpointTuple:
        """The checkpoint tuple of one checkpoint, its objects decoded now (``_tuples``)."""
        checkpoint = self._value(entry.typed, (entry.seq,), cached, values, None)
        pending = []
        for task_id, idx, seq, channel, typed in writes:
            value = self._value(typed, (seq, task_id, idx), cached, values, seq)
            pending.append((task_id, channel, value))
        return CheckpointTuple(
            config=config
            if config is not None
            else {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                }
            },
            checkpoint=checkpoint,
            metadata=entry.metadata,
            parent_config=(
                {
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": ns,
                        "checkpoint_id": entry.parent_id,
                    }
                }
                if entry.parent_id
                else None
            ),
            pending_writes=pending,
        )

    def _value(
        self,
        typed: Optional[Tuple[str, bytes]],
        key: Tuple[Any, ...],
        cached: Dict[Tuple[Any, ...], Tuple[str, bytes]],
        values: Dict[int, Dict[str, Any]],
        writes_seq: Optional[int],
    ) -> Any:
        """The object of a checkpoint (``writes_seq`` ``None``) or of a write at ``key``: from
        the bytes the index keeps, else those taken from the value cache, else the record just
        read from the log (whose bytes then go to the cache)."""
        if typed is None:
            typed = cached.get(key)
        if typed is not None:
            return self.serde.loads_typed(typed)
        if writes_seq is None:
            stored = values[key[0]]["checkpoint"]
        else:
            stored = self._write_from(values[writes_seq], key[1], key[2])
        value, typed = _values.load(self.serde, stored, self._direct)
        self._cache.put(key, typed)
        return value

    @staticmethod
    def _write_from(value: Dict[str, Any], task_id: str, idx: int) -> Dict[str, Any]:
        if value["task_id"] == task_id:
            for write in value["writes"]:
                if write["idx"] == idx:
                    return write
        raise LookupError(f"write ({task_id!r}, {idx}) is not in its event")

    def get_tuple(self, config: RunnableConfig) -> Optional[CheckpointTuple]:
        """The checkpoint of ``config`` (its ``checkpoint_id``, or the newest of its thread and
        namespace without one) with its pending writes, or ``None``."""
        configurable = config["configurable"]
        thread = self._thread(str(configurable["thread_id"]))
        ns = configurable.get("checkpoint_ns", "")
        with thread.lock:
            checkpoint_id = get_checkpoint_id(config)
            entries = thread.checkpoints.get(ns, {})
            if checkpoint_id:
                if checkpoint_id not in entries:
                    return None
                return self._tuples(thread, [(ns, checkpoint_id)], config)[0]()
            newest = thread.newest.get(ns)
            if newest is None:
                return None
            return self._tuples(thread, [(ns, newest)], None)[0]()

    def _thread_ids(self) -> List[str]:
        """Every thread the store holds, read from its tasks' events where the task id is a
        digest."""
        thread_ids = []
        for task_id in self.store.task_ids():
            if task_id.startswith(TASK_PREFIX):
                thread_ids.append(task_id[len(TASK_PREFIX) :])
            elif task_id.startswith(TASK_DIGEST_PREFIX):
                task = self.store.task(task_id)
                for event in self._task_events(_Thread("", task), 1):
                    value = event.get("value")
                    if event["type"] == "record/put" and isinstance(value, dict):
                        thread_ids.append(value["thread_id"])
                        break
        return thread_ids

    def list(
        self,
        config: Optional[RunnableConfig],
        *,
        filter: Optional[Dict[str, Any]] = None,
        before: Optional[RunnableConfig] = None,
        limit: Optional[int] = None,
    ) -> Iterator[CheckpointTuple]:
        """The checkpoints matching the criteria, newest (greatest checkpoint id) first:
        ``config`` picks the thread (all threads if ``None``), its ``checkpoint_ns`` the
        namespace (all if absent) and its ``checkpoint_id`` one checkpoint; ``filter`` keeps
        those whose metadata has every given key equal to the given value; ``before`` keeps
        those with a smaller checkpoint id than its ``checkpoint_id``; ``limit`` caps the
        count."""
        if limit is not None and limit <= 0:
            return
        if config is not None:
            thread_ids = [str(config["configurable"]["thread_id"])]
            ns_wanted = config["configurable"].get("checkpoint_ns")
            id_wanted = get_checkpoint_id(config)
        else:
            thread_ids = self._thread_ids()
            ns_wanted = None
            id_wanted = None
        before_id = get_checkpoint_id(before) if before is not None else None
        matches: List[Tuple[str, str, str]] = []  # (checkpoint id, thread id, namespace)
        for thread_id in thread_ids:
            thread = self._thread(thread_id)
            with thread.lock:
                for ns, entries in thread.checkpoints.items():
                    if ns_wanted is not None and ns != ns_wanted:
                        continue
                    for checkpoint_id, entry in entries.items():
                        if id_wanted and checkpoint_id != id_wanted:
                            continue
                        if before_id and checkpoint_id >= before_id:
                            continue
                        if filter and not all(
                            entry.metadata.get(k) == v for k, v in filter.items()
                        ):
                            continue
                        matches.append((checkpoint_id, thread_id, ns))
        matches.sort(reverse=True)
        if limit is not None:
            del matches[limit:]
        # Read back a page at a time, each thread's part of a page in one pass over its events.
        for start in range(0, len(matches), _LIST_PAGE):
            page = matches[start : start + _LIST_PAGE]
            by_thread: Dict[str, List[Tuple[str, str]]] = {}
            for checkpoint_id, thread_id, ns in page:
                by_thread.setdefault(thread_id, []).append((ns, checkpoint_id))
            found: Dict[Tuple[str, str, str], Callable[[], CheckpointTuple]] = {}
            for thread_id, keys in by_thread.items():
                thread = self._thread(thread_id)
                with thread.lock:
                    # Skip what was removed since the listing began.
                    keys = [k for k in keys if k[1] in thread.checkpoints.get(k[0], {})]
                    for (ns, checkpoint_id), make in zip(keys, self._tuples(thread, keys, None)):
                        found[(checkpoint_id, thread_id, ns)] = make
            for match in page:
                make = found.pop(match, None)
                if make is not None:
                    # Decoded as it is handed out: one checkpoint's objects at a time.
                    yield make()

    # ----------------------------------------------------------------- writes

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Stores ``checkpoint`` (whole, channel values included) with its metadata under
        the thread and namespace of ``config``, whose ``checkpoint_id`` is its parent;
        returns the config that points at it. Returns once the durability tier is met."""
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        typed = self.serde.dumps_typed(checkpoint)
        full_metadata = get_checkpoint_metadata(config, metadata)
        metadata_typed = self.serde.dumps_typed(full_metadata)

        # The checkpoint's bytes raw, in a record/blob; as structure or in base64 in a record/put
        # in a log of segment format 1, or when they hold a `$secret` mark.
        raw = self._blobs and not _values.marks_a_secret(typed[1])

        def event(encode: _Encode, raw: bool = raw) -> Dict[str, Any]:
            if raw:
                stored = {"type": typed[0], _values.RAW: typed[1]}
            else:
                stored = encode(checkpoint, typed)
            value = {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
                "parent_checkpoint_id": configurable.get("checkpoint_id"),
                "checkpoint": stored,
                "metadata": encode(full_metadata, metadata_typed),
            }
            return _put_event(CHECKPOINT_KIND, checkpoint["id"], value)

        thread = self._thread(thread_id)
        with thread.lock:
            try:
                self._append_values(thread, event, self._tier(config), [typed])
            except InvalidEvent as error:
                if not raw or not _refuses_blobs(error):
                    raise
                self._blobs = False
                self._append_values(
                    thread, lambda encode: event(encode, False), self._tier(config), [typed]
                )
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[Tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Stores the pending writes of task ``task_id`` against the checkpoint of
        ``config``. A regular write already stored under the same task and index is not
        stored again; a special one (error, interrupt, ...) replaces the earlier one."""
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        checkpoint_id = configurable["checkpoint_id"]
        indexed = [
            (WRITES_IDX_MAP.get(channel, idx), channel, v)
            for idx, (channel, v) in enumerate(writes)
        ]
        thread = self._thread(thread_id)
        with thread.lock:
            stored = thread.writes.get((ns, checkpoint_id), {})
            fresh = [w for w in indexed if w[0] < 0 or (task_id, w[0]) not in stored]
            if not fresh:
                return
            typed = [self.serde.dumps_typed(v) for _, _, v in fresh]

            def event(encode: _Encode) -> Dict[str, Any]:
                return {
                    "type": "record/put",
                    "kind": WRITES_KIND,
                    "key": checkpoint_id,
                    "value": {
                        "thread_id": thread_id,
                        "checkpoint_ns": ns,
                        "checkpoint_id": checkpoint_id,
                        "task_id": task_id,
                        "task_path": task_path,
                        "writes": [
                            {"idx": idx, "channel": channel, **encode(v, t)}
                            for (idx, channel, v), t in zip(fresh, typed)
                        ],
                    },
                }

            self._append_values(thread, event, self._tier(config), typed)

    def _remove(
        self,
        thread: _Thread,
        checkpoint_seqs: Iterable[int] = (),
        writes_seqs: Iterable[int] = (),
        through_seq: Optional[int] = None,
    ) -> None:
        """Appends the removal events (synced); the caller holds ``thread.lock``. Each
        event names at most 4096 seqs (the store's limit) and a batch holds at most 1024
        events, so a removal of more than about four million events is several batches."""
        events = []
        for kind, seqs in (
            (CHECKPOINT_KIND, sorted(set(checkpoint_seqs))),
            (WRITES_KIND, sorted(set(writes_seqs))),
        ):
            if through_seq is not None:
                events.append({"type": "record/removed", "kind": kind, "through_seq": through_seq})
            for start in range(0, len(seqs), _REMOVED_SEQS_MAX):
                chunk = seqs[start : start + _REMOVED_SEQS_MAX]
                events.append({"type": "record/removed", "kind": kind, "seqs": chunk})
        for start in range(0, len(events), _BATCH_EVENTS_MAX):
            self._append(thread, events[start : start + _BATCH_EVENTS_MAX], "synced")

    def delete_thread(self, thread_id: str) -> None:
        """Removes every checkpoint and write of the thread (by appending removal events
        covering everything the thread holds so far). A thread without any is left alone."""
        thread = self._thread(str(thread_id))
        with thread.lock:
            if thread.checkpoints or thread.writes:
                self._remove(thread, through_seq=thread.last_seq)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """For each thread: ``strategy="keep_latest"`` keeps only the newest checkpoint of
        each namespace (with its writes); ``"delete"`` removes everything, as
        :meth:`delete_thread`."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: give 'keep_latest' or 'delete'")
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
                continue
            thread = self._thread(str(thread_id))
            with thread.lock:
                keep = set(thread.newest.items())
                checkpoint_seqs = []
                for ns, entries in thread.checkpoints.items():
                    for checkpoint_id, entry in entries.items():
                        versions = entry.versions
                        if (ns, checkpoint_id) in keep:
                            versions = versions[:-1]  # superseded re-puts of the kept one
                        checkpoint_seqs.extend(v[0] for v in versions)
                writes_seqs = [
                    write.seq
                    for key, stored in thread.writes.items()
                    if key not in keep
                    for write in stored.values()
                ]
                self._remove(thread, checkpoint_seqs, writes_seqs)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Removes, in every thread of the store, the checkpoints whose metadata
        ``run_id`` is one of ``run_ids``, with their writes."""
        runs = set(run_ids)
        if not runs:
            return
        for thread_id in self._thread_ids():
            thread = self._thread(thread_id)
            with thread.lock:
                doomed = [
                    (ns, checkpoint_id, entry)
                    for ns, entries in thread.checkpoints.items()
                    for checkpoint_id, entry in entries.items()
                    if entry.metadata.get("run_id") in runs
                ]
                if not doomed:
                    continue
                checkpoint_seqs = [v[0] for _, _, entry in doomed for v in entry.versions]
                writes_seqs = [
                    write.seq
                    for ns, checkpoint_id, _ in doomed
                    for write in thread.writes.get((ns, checkpoint_id), {}).values()
                ]
                self._remove(thread, checkpoint_seqs, writes_seqs)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Appends a copy of every live checkpoint and write of the source thread to the
        target thread, in their order, in atomic batches of at most 512 events or 8 MiB
        (read from the log as they are copied, so memory holds one batch). The source is
        unchanged; a source without checkpoints copies nothing."""
        source = self._thread(str(source_thread_id))
        target_id = str(target_thread_id)
        with source.lock:
            kinds = {
                entry.seq: CHECKPOINT_KIND
                for entries in source.checkpoints.values()
                for entry in entries.values()
            }
            for stored in source.writes.values():
                kinds.update((write.seq, WRITES_KIND) for write in stored.values())
        if not kinds:
            return
        # The log is append-only, so the wanted events can be read without the source's lock;
        # the reader sees the log as it was when it started, even when source is target.
        last = max(kinds)
        batch: List[Dict[str, Any]] = []
        batch_bytes = 0
        for event in self._task_events(source, min(kinds)):
            seq = event["seq"]
            if seq in kinds:
                value = dict(event["value"], thread_id=target_id)
                size = _values.size_of(value.get("checkpoint"))
                size += sum(_values.size_of(w) for w in value.get("writes", ()))
                if batch and (
                    len(batch) >= _COPY_BATCH_EVENTS_MAX
                    or batch_bytes + size > _COPY_BATCH_BYTES_MAX
                ):
                    self._append_to(target_id, batch)
                    batch, batch_bytes = [], 0
                batch.append(_put_event(kinds[seq], event["key"], value))
                batch_bytes += size
            if seq >= last:
                break
        if batch:
            self._append_to(target_id, batch)

    def _append_to(self, thread_id: str, events: List[Dict[str, Any]]) -> None:
        """Appends ``events`` (synced) to a thread, taking its lock."""
        thread = self._thread(thread_id)
        with thread.lock:
            self._append(thread, events, "synced")

    # ----------------------------------------------------------------- async forms

    async def aget_tuple(self, config: RunnableConfig) -> Optional[CheckpointTuple]:
        """:meth:`get_tuple` in a worker thread."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: Optional[RunnableConfig],
        *,
        filter: Optional[Dict[str, Any]] = None,
        before: Optional[RunnableConfig] = None,
        limit: Optional[int] = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """:meth:`list`, its items produced in a worker thread a few at a time."""
        items = self.list(config, filter=filter, before=before, limit=limit)

        def chunk() -> List[CheckpointTuple]:
            out = []
            for item in items:
                out.append(item)
                if len(out) >= _ALIST_CHUNK:
                    break
            return out

        while True:
            got = await asyncio.to_thread(chunk)
            for item in got:
                yield item
            if len(got) < _ALIST_CHUNK:
                return

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """:meth:`put` in a worker thread."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[Tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """:meth:`put_writes` in a worker thread."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """:meth:`delete_thread` in a worker thread."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """:meth:`delete_for_runs` in a worker thread."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """:meth:`copy_thread` in a worker thread."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """:meth:`prune` in a worker thread."""
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)
