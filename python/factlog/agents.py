"""A session store for the OpenAI Agents SDK: :class:`FactlogSession`.

``FactlogSession`` implements the SDK's ``Session`` protocol (``session_id``,
``session_settings``, ``get_items``, ``add_items``, ``pop_item``, ``clear_session``) on a
factlog store, so a run's conversation history lives in the same crash-safe log as the rest of
the harness's facts. Install the SDK with ``pip install "./python[agents]"``.

    import asyncio
    from agents import Agent, Runner
    from factlog.agents import FactlogSession

    async def main():
        with FactlogSession("user-42", "history.factlog") as session:
            result = await Runner.run(Agent(name="helper"), "Hello", session=session)

How items are stored. One session is one factlog task (:func:`task_id_for` says which). Each
item is one event, and every event keeps the item whole, so ``get_items`` returns exactly the
items that were added (equal dicts, as the SDK's JSON round trip gives them):

- a user message (``role: "user"``) is a ``user/message`` whose ``text`` is the message's
  text and whose field ``item`` is the item;
- an assistant output message (``role: "assistant"``) is an ``assistant/message`` (``text``,
  ``item``);
- a ``function_call`` item (a call the model *asked for*) is an ``assistant/message`` whose
  ``tool_calls`` names it (never a ``tool/call``, which records a dispatch and would bring the
  store's holder rules to bear on it);
- every other item (tool outputs, reasoning, handoffs, approvals, system messages, items of
  types this module does not know) is a ``record/put`` of kind ``agents/item`` whose ``value``
  is the item. So is a message or call the store would refuse in its typed form (a call id the
  task already knows, for instance after ``pop_item`` removed the call and the runner adds it
  again), so that ``add_items`` does not fail on valid SDK input.

The log stays append-only: ``pop_item`` and ``clear_session`` append a ``record/removed`` of
kind ``agents/item`` naming the removed events (``seqs``, or ``through_seq`` for a clear), and
the session's items are the fold of its task's events with those removals applied. The removed
items stay in the log, readable with ``factlog dump``.

With ``OpenAIResponsesCompactionSession`` the session offers the SDK's atomic snapshot hook
(``_get_compaction_snapshot``, as the SDK's SQL sessions do): a compaction replaces the
compacted items with its output in one batch, checked against the task's revision.

Limits, from the store's: an item's JSON must fit in one event body (4 MiB; a larger one is
refused with :class:`factlog.LimitExceeded` and nothing of that ``add_items`` call's batch is
written); ``add_items`` is atomic for up to 1024 items (and 12 MiB of JSON): a longer list is
written as several atomic batches in order, so a crash in the middle can keep a prefix of it.
An item holding a secret marked ``{"$secret": ...}`` comes back with the store's reference
``{"$secret_ref": ...}`` in its place: the store never writes a marked secret.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, TypeVar, Union

from . import _native
from .errors import CallIdReused, InvalidEvent, StaleRevision

try:
    from agents.memory import SessionSettings
except ImportError as _error:  # pragma: no cover - exercised only without the SDK
    raise ImportError(
        "factlog.agents needs the OpenAI Agents SDK: install it with "
        "pip install \"./python[agents]\" (or pip install openai-agents)"
    ) from _error

try:
    from agents.memory.session_settings import coerce_session_settings as _coerce_settings
except ImportError:  # pragma: no cover - older SDKs have no coercion helper
    _coerce_settings = None

try:  # the SDK's internal snapshot type of its compaction hook (see _get_compaction_snapshot)
    from agents.memory.session import _CompactionSnapshot
except ImportError:  # pragma: no cover - SDKs without the hook
    _CompactionSnapshot = None

__all__ = [
    "FactlogSession",
    "ITEM_KIND",
    "DURABILITIES",
    "BATCH_ITEMS_MAX",
    "task_id_for",
]

ITEM_KIND = "agents/item"
"""The ``kind`` of the ``record/put`` and ``record/removed`` events this module writes."""

DURABILITIES = ("buffered", "flushed", "synced")
"""The durabilities a session accepts: ``"flushed"`` (the default: written to the operating
system before ``add_items`` returns, so it survives a crash of the process), ``"synced"``
(``fdatasync``: it also survives a power loss) or ``"buffered"`` (written within milliseconds
by the store's flusher; a crash of the process may lose the last ones)."""

BATCH_ITEMS_MAX = 1024
"""The most items one atomic batch holds (the store's batch limit); ``add_items`` splits a
longer list into several batches."""

REMOVED_SEQS_MAX = 4096
"""The most seqs one ``record/removed`` names (the store's limit)."""

TASK_ID_BYTES_MAX = 128
"""The longest task id the store takes, in UTF-8 bytes."""

DIGEST_PREFIX = "sha256:"
"""The prefix of a task id derived by digest (:func:`task_id_for`)."""

# A batch is one frame of at most 16 MiB; this leaves room for the envelopes and for the
# typed events' text, which repeats the message's text beside the item.
_BATCH_JSON_BYTES_MAX = 12 * 1024 * 1024
# A typed event carries the item and its text; when that may not fit in one 4 MiB body, the
# item goes into a record/put instead, which carries only the item.
_TYPED_JSON_BYTES_MAX = 2 * 1024 * 1024
# The readable head of a long session id kept in its digest form: 72 bytes of prefix and
# digest plus ":" leave 56.
_DIGEST_HEAD_BYTES = TASK_ID_BYTES_MAX - len(DIGEST_PREFIX) - 64 - 1

T = TypeVar("T")


def task_id_for(session_id: str) -> str:
    """The factlog task id that holds session ``session_id``.

    A session id of 1 to 128 UTF-8 bytes is its own task id, unless it starts with
    ``"sha256:"``. Any other (longer, starting with that prefix, or not encodable as UTF-8)
    is digested: ``"sha256:" + hex(SHA-256(UTF-8 of the id)) + ":" + head``, where ``head``
    is the id's first characters that fit in 56 bytes, for people reading ``factlog dump``.
    Two different session ids never share a task (short of a SHA-256 collision). An empty
    session id is refused with ``ValueError``.
    """
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be a str, not {type(session_id).__name__}")
    if not session_id:
        raise ValueError(
            "session_id is empty: give the session an id of at least one character "
            "(it names the factlog task that holds the session)"
        )
    try:
        encoded = session_id.encode("utf-8")
    except UnicodeEncodeError:
        encoded = b""
    if encoded and len(encoded) <= TASK_ID_BYTES_MAX and not session_id.startswith(DIGEST_PREFIX):
        return session_id
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    head = session_id.encode("utf-8", "replace")[:_DIGEST_HEAD_BYTES].decode("utf-8", "ignore")
    return f"{DIGEST_PREFIX}{digest}:{head}"


def _message_text(content: Any, part_type: str) -> Optional[str]:
    """The text of a message's ``content``: the string itself, or the joined ``text`` of its
    parts of type ``part_type``; ``None`` when the content has neither shape."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = []
    for part in content:
        if not isinstance(part, dict):
            return None
        if part.get("type") == part_type:
            text = part.get("text")
            if not isinstance(text, str):
                return None
            texts.append(text)
    return "".join(texts)


def _typed_event(item: Dict[str, Any], known_call_ids: set) -> Optional[Dict[str, Any]]:
    """The typed factlog event that holds ``item``, or ``None`` when it takes a
    ``record/put``. Adds the call id of a function call it maps to ``known_call_ids``."""
    kind = item.get("type")
    role = item.get("role")
    if role in ("user", "assistant") and kind in (None, "message"):
        text = _message_text(item.get("content"), "input_text" if role == "user" else "output_text")
        if text is None:
            return None
        event_type = "user/message" if role == "user" else "assistant/message"
        return {"type": event_type, "text": text, "item": item}
    if kind == "function_call":
        call_id = item.get("call_id")
        name = item.get("name")
        if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
            return None
        if call_id in known_call_ids:
            return None
        known_call_ids.add(call_id)
        call: Dict[str, Any] = {"call_id": call_id, "tool": name}
        if "arguments" in item:
            call["args"] = item["arguments"]
        return {"type": "assistant/message", "text": "", "tool_calls": [call], "item": item}
    return None


def _record_put(item: Any) -> Dict[str, Any]:
    return {"type": "record/put", "kind": ITEM_KIND, "value": item}


async def _in_thread(call: Callable[[], T]) -> T:
    """Runs ``call`` in the event loop's default executor."""
    return await asyncio.get_running_loop().run_in_executor(None, call)


async def _finish_despite_cancel(call: Callable[[], T]) -> T:
    """Runs ``call`` in a worker thread and waits for it to end even when the caller is
    cancelled meanwhile: a write that started cannot be taken back, so a cancelled caller
    learns of its cancellation only once the write's outcome is settled (and the session's
    items show it)."""
    work = asyncio.get_running_loop().run_in_executor(None, call)
    cancelled: Optional[asyncio.CancelledError] = None
    while not work.done():
        try:
            await asyncio.shield(work)
        except asyncio.CancelledError as error:
            if work.cancelled():  # the executor itself shut down
                raise
            cancelled = cancelled or error
        except BaseException:
            if cancelled is None:
                raise
    if cancelled is not None:
        if not work.cancelled():
            work.exception()  # retrieved, so that the loop does not report it as lost
        raise cancelled
    return work.result()


class FactlogSession:
    """An OpenAI Agents SDK session kept in a factlog store.

    ``FactlogSession(session_id, path)`` opens (or creates) the store in directory ``path``
    and closes it in :meth:`close`; ``FactlogSession(session_id, store=store)`` uses an open
    :class:`factlog.Store` that the caller shares between sessions (and with its own tasks)
    and closes itself. A store directory is open in at most one ``factlog.Store`` at a time,
    so sessions of one process that share a directory share its store.

    ``session_settings`` is the SDK's ``SessionSettings`` (or a dict of its fields);
    ``settings.limit`` is the default ``limit`` of :meth:`get_items`. ``durability`` is what
    ``add_items``, ``pop_item`` and ``clear_session`` wait for: one of :data:`DURABILITIES`,
    default ``"flushed"``.

    Every call runs its store work in a worker thread (the store releases the GIL while it
    waits for the disk), so the event loop keeps running. The session keeps its items in
    memory, folded from its task's events, and reads only the events that were appended since
    it last looked (the task's revision tells it whether any were). Opening the store (with
    ``path``) happens in the constructor and replays the log; construct the session with
    ``await asyncio.to_thread(FactlogSession, ...)`` to keep that off the event loop.
    """

    session_id: str
    """The SDK's session id."""

    session_settings: Optional[SessionSettings]
    """The session's settings (the SDK's ``SessionSettings``); never ``None`` once built."""

    def __init__(
        self,
        session_id: str,
        path: Union[str, "os.PathLike[str]", None] = None,
        *,
        store: Optional[_native.Store] = None,
        session_settings: Union[SessionSettings, Dict[str, Any], None] = None,
        durability: str = "flushed",
    ) -> None:
        """Builds a session on ``path`` (a store directory, opened here) or on ``store`` (an
        open store, shared). Raises ``ValueError`` for an empty ``session_id``, for both or
        neither of ``path`` and ``store``, and for an unknown ``durability``; ``TypeError``
        for unknown settings."""
        self.task_id = task_id_for(session_id)
        """The factlog task that holds the session (:func:`task_id_for`)."""
        if durability not in DURABILITIES:
            raise ValueError(
                f"durability must be one of {', '.join(DURABILITIES)}, not {durability!r}"
            )
        if (path is None) == (store is None):
            raise ValueError(
                "give FactlogSession either path (a store directory it opens and closes) "
                "or store= (an open factlog.Store it shares), not both or neither"
            )
        self.session_id = session_id
        self.session_settings = _settings(session_settings)
        self.durability = durability
        """What the session's writes wait for (:data:`DURABILITIES`)."""
        self._owns_store = store is None
        self.store: _native.Store = _native.Store(path) if store is None else store
        """The store holding the session (its own, or the shared one)."""
        self._lock = threading.Lock()
        self._task: Optional[_native.Task] = None
        self._closed = False
        # The fold: the live items by the seq of their event, in seq order, as JSON text (so
        # every get_items hands out fresh objects), and how far the fold has read.
        self._items: Dict[int, str] = {}
        self._revision = 0
        self._next_seq = 1
        self._known_call_ids: set = set()

    # -- the Session protocol ---------------------------------------------------------------

    async def get_items(self, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """The session's items in the order they were added; with ``limit`` (or, when it is
        ``None``, ``session_settings.limit``) a positive N, the latest N of them, still in
        chronological order. A limit of 0 gives ``[]``; a negative one, every item."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        return await _in_thread(lambda: self._get_items_sync(limit))

    async def add_items(self, items: List[Dict[str, Any]]) -> None:
        """Appends ``items`` to the session, as one atomic batch per 1024 items, and waits
        for the session's durability. An item that is not JSON (``json.dumps`` refuses it)
        raises ``TypeError`` or ``ValueError`` before anything is written."""
        self._check_open()
        if not items:
            return
        texts = [json.dumps(item) for item in items]
        await _finish_despite_cancel(lambda: self._add_items_sync(texts))

    async def pop_item(self) -> Optional[Dict[str, Any]]:
        """Removes the latest item and returns it; ``None`` when the session has none. The
        removal is a ``record/removed`` event; the item stays in the log. It is a
        compare-and-set on the task's revision, so that the item it removes is the latest
        when the removal is written: while other writers (other handles, or other processes
        through a served store) keep adding to the same session, it refolds and retries until
        no add comes between its read and its removal."""
        return await _finish_despite_cancel(self._pop_item_sync)

    async def clear_session(self) -> None:
        """Removes every item of the session with one ``record/removed`` event (nothing is
        written when the session has no items)."""
        await _finish_despite_cancel(self._clear_session_sync)

    async def _get_compaction_snapshot(
        self, limit: int, *, prune_prefix: Optional[Callable[[Any], bool]] = None
    ) -> Any:
        """The SDK's optional hook for ``OpenAIResponsesCompactionSession`` (an internal
        contract of the SDK that its own SQL sessions implement; ``None`` when the installed
        SDK has no such contract): the latest ``limit`` items, whether they are all of the
        session's, and ``replace_suffix(start, output)``, which replaces the snapshot's items
        from ``start`` on by ``output`` in one atomic batch (a ``record/removed`` and the new
        items) if the task did not change since the snapshot, and says whether it did. With
        ``prune_prefix``, the leading items before that suffix for which it is true are
        removed in the same batch."""
        if _CompactionSnapshot is None:
            return None
        seqs, texts, complete, revision = await _in_thread(lambda: self._snapshot_sync(limit))

        async def replace_suffix(start: int, output: List[Any]) -> bool:
            replaced = seqs[start:]
            if not replaced:
                return False
            out = [json.dumps(item) for item in output]
            return await _finish_despite_cancel(
                lambda: self._replace_suffix_sync(replaced, out, revision, prune_prefix)
            )

        return _CompactionSnapshot([json.loads(t) for t in texts], complete, replace_suffix)

    def _snapshot_sync(self, limit: int) -> Any:
        with self._lock:
            self._check_open()
            self._refresh()
            seqs = list(self._items.keys())
            if limit > 0:
                seqs = seqs[-limit:]
            complete = len(seqs) == len(self._items)
            return seqs, [self._items[seq] for seq in seqs], complete, self._revision

    def _replace_suffix_sync(
        self,
        replaced: List[int],
        texts: List[str],
        revision: int,
        prune_prefix: Optional[Callable[[Any], bool]],
    ) -> bool:
        with self._lock:
            self._check_open()
            self._refresh()
            if self._revision != revision:
                return False
            live = list(self._items.keys())
            pruned: List[int] = []
            if prune_prefix is not None:
                for seq in live[: len(live) - len(replaced)]:
                    if not prune_prefix(json.loads(self._items[seq])):
                        break
                    pruned.append(seq)
            if len(texts) + len(_removals(pruned + replaced)) > BATCH_ITEMS_MAX:
                return False  # not one atomic batch
            try:
                self._append_items(texts, pruned + replaced, expected_revision=revision)
            except StaleRevision:
                return False
            return True

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the session, and the store if the session opened it (``path``); a shared
        store stays open. Later calls raise ``RuntimeError``. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._task = None
            self._items = {}
            if self._owns_store:
                self.store.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> "FactlogSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FactlogSession({self.session_id!r}, task={self.task_id!r})"

    # -- the synchronous work, run in worker threads ----------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(
                f"FactlogSession {self.session_id!r} is closed: build a new session to use it"
            )

    def _get_items_sync(self, limit: Optional[int]) -> List[Dict[str, Any]]:
        with self._lock:
            self._check_open()
            self._refresh()
            if limit is None or limit < 0:
                window = list(self._items.values())
            elif limit == 0:
                window = []
            else:
                window = list(itertools.islice(reversed(self._items.values()), limit))
                window.reverse()
        # One decode of the whole window: fresh objects, without a call per item.
        return json.loads("[" + ",".join(window) + "]")

    def _add_items_sync(self, texts: List[str]) -> None:
        with self._lock:
            self._check_open()
            self._refresh()
            for batch in _batches(texts):
                self._append_items(batch)

    def _append_items(
        self,
        texts: List[str],
        removed_seqs: Optional[List[int]] = None,
        expected_revision: Optional[int] = None,
    ) -> None:
        """Appends one atomic batch: a removal of ``removed_seqs`` (if any), then the items.
        On a refusal of a typed event (a call id another writer made known meanwhile) it
        writes every item as ``record/put`` instead. ``expected_revision`` is a
        compare-and-set over the whole batch (``StaleRevision``)."""
        task = self._handle()
        items = [json.loads(text) for text in texts]
        head = _removals(removed_seqs or [])
        events = head + self._events_for(items, texts)
        try:
            reply = task.append_batch(
                events, expected_revision=expected_revision, durability=self.durability
            )
        except (CallIdReused, InvalidEvent):
            if all(event["type"].startswith("record/") for event in events):
                raise
            if expected_revision is None:
                self._refresh()
            events = head + [_record_put(item) for item in items]
            reply = task.append_batch(
                events, expected_revision=expected_revision, durability=self.durability
            )
        for seq in removed_seqs or ():
            self._items.pop(seq, None)
        if any('"$secret"' in text for text in texts):
            return  # the store wrote references in place of the secrets: the next read folds them
        first_item_seq = int(reply["seq"]) + len(head)
        if self._caught_up_by(reply, len(events)):
            for offset, text in enumerate(texts):
                self._items[first_item_seq + offset] = text

    def _events_for(self, items: List[Any], texts: List[str]) -> List[Dict[str, Any]]:
        known = set(self._known_call_ids)
        events = []
        for item, text in zip(items, texts):
            event = None
            if isinstance(item, dict) and len(text) <= _TYPED_JSON_BYTES_MAX:
                event = _typed_event(item, known)
            events.append(event if event is not None else _record_put(item))
        self._known_call_ids = known
        return events

    def _pop_item_sync(self) -> Optional[Dict[str, Any]]:
        with self._lock:
            self._check_open()
            task = self._handle()
            while True:
                self._refresh()
                if not self._items:
                    return None
                seq = next(reversed(self._items.keys()))
                removal = {"type": "record/removed", "kind": ITEM_KIND, "seqs": [seq]}
                try:
                    # The compare-and-set makes "the latest item" hold at the moment of the
                    # removal even when another handle on the task adds items meanwhile.
                    reply = task.append(
                        removal, expected_revision=self._revision, durability=self.durability
                    )
                except StaleRevision:
                    continue
                text = self._items.pop(seq)
                self._caught_up_by(reply, 1)
                return json.loads(text)

    def _clear_session_sync(self) -> None:
        with self._lock:
            self._check_open()
            task = self._handle()
            self._refresh()
            if not self._items:
                return
            through_seq = next(reversed(self._items.keys()))
            removal = {"type": "record/removed", "kind": ITEM_KIND, "through_seq": through_seq}
            reply = task.append(removal, durability=self.durability)
            self._items.clear()
            self._caught_up_by(reply, 1)

    # -- the fold ---------------------------------------------------------------------------

    def _handle(self) -> _native.Task:
        """The task handle, taken on first use (a takeover of an earlier holder's task syncs,
        so it happens in a worker thread, never in the constructor)."""
        if self._task is None:
            self._task = self.store.task(self.task_id)
        return self._task

    def _caught_up_by(self, reply: Dict[str, Any], count: int) -> bool:
        """After an append of ``count`` events: whether they directly follow what the fold
        has read (no other handle wrote to the task in between), in which case the fold now
        covers them; otherwise the next read catches up from the store."""
        revision = int(reply["revision"])
        if revision != self._revision + count:
            return False
        self._revision = revision
        self._next_seq = int(reply["seq"]) + count
        return True

    def _refresh(self) -> None:
        """Folds the task's events appended since the last read, if its revision moved."""
        task = self._handle()
        if task.revision == self._revision:
            return
        for event in task.events(from_seq=self._next_seq):
            self._apply(event)
            self._next_seq = int(event["seq"]) + 1
            self._revision = int(event["revision"])

    def _apply(self, event: Dict[str, Any]) -> None:
        """Applies one event of the task to the fold."""
        seq = int(event["seq"])
        event_type = event.get("type")
        if event_type == "record/put":
            if event.get("kind") == ITEM_KIND:
                self._items[seq] = json.dumps(event.get("value"))
        elif event_type in ("user/message", "assistant/message"):
            for call in event.get("tool_calls") or ():
                if isinstance(call, dict) and isinstance(call.get("call_id"), str):
                    self._known_call_ids.add(call["call_id"])
            if "item" in event:
                self._items[seq] = json.dumps(event["item"])
        elif event_type == "tool/call":
            if isinstance(event.get("call_id"), str):
                self._known_call_ids.add(event["call_id"])
        elif event_type == "record/removed" and event.get("kind") == ITEM_KIND:
            for removed in event.get("seqs") or ():
                self._items.pop(int(removed), None)
            through_seq = event.get("through_seq")
            if through_seq is not None:
                through_seq = int(through_seq)
                if self._items and next(reversed(self._items.keys())) <= through_seq:
                    self._items.clear()
                else:
                    self._items = {s: t for s, t in self._items.items() if s > through_seq}


def _removals(seqs: List[int]) -> List[Dict[str, Any]]:
    """``record/removed`` events naming ``seqs``, at most :data:`REMOVED_SEQS_MAX` each."""
    return [
        {"type": "record/removed", "kind": ITEM_KIND, "seqs": seqs[at : at + REMOVED_SEQS_MAX]}
        for at in range(0, len(seqs), REMOVED_SEQS_MAX)
    ]


def _batches(texts: List[str]) -> Iterator[List[str]]:
    """Splits items into batches the store takes in one frame: at most
    :data:`BATCH_ITEMS_MAX` items and about 12 MiB of JSON each."""
    batch: List[str] = []
    size = 0
    for text in texts:
        cost = 2 * len(text) + 256
        if batch and (len(batch) == BATCH_ITEMS_MAX or size + cost > _BATCH_JSON_BYTES_MAX):
            yield batch
            batch, size = [], 0
        batch.append(text)
        size += cost
    if batch:
        yield batch


def _settings(value: Union[SessionSettings, Dict[str, Any], None]) -> SessionSettings:
    """The SDK's settings object for ``value`` (a dict is checked for unknown fields)."""
    if value is None:
        return SessionSettings()
    if _coerce_settings is not None:
        return _coerce_settings(value)
    if isinstance(value, dict):
        return SessionSettings(**value)
    return value
