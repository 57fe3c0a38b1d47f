"""``asyncio`` variants of the calls that may wait for the disk.

Each runs the blocking call in a worker thread (``loop.run_in_executor``, the loop's default
executor): the native call releases the GIL while it waits for its durability, so the event
loop keeps running. On an embedded store ``AsyncTask.delta`` and ``AsyncTask.revision`` never
wait and stay synchronous. Through a served store they can wait for the connection (another
coroutine's synced append holds it, a full buffer of fragments is sent and answered, the
revision is asked of the server): there use ``await task.delta_async(text)`` and
``await task.fetch_revision()``, which never block the event loop.

``open`` connects to a store another process serves, as ``factlog.Store`` does; ``connect``
only connects. The client's calls wait for the socket in the worker thread.

    async with await factlog.aio.open(path) as store:
        task = await store.task("t1")
        reply = await task.append({"type": "turn/start"})
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Callable, Dict, Iterable, List, Optional, TypeVar

from . import _native

__all__ = [
    "AsyncStore",
    "AsyncTask",
    "open",
    "connect",
    "append",
    "append_batch",
    "recover",
    "revision",
]

T = TypeVar("T")


async def _run(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(call, *args, **kwargs))


async def append(
    task: _native.Task,
    event: Dict[str, Any],
    *,
    expected_revision: Optional[int] = None,
    durability: Optional[str] = None,
    warnings: bool = True,
) -> Dict[str, Any]:
    """``task.append(...)`` without blocking the event loop."""
    return await _run(
        task.append,
        event,
        expected_revision=expected_revision,
        durability=durability,
        warnings=warnings,
    )


async def append_batch(
    task: _native.Task,
    events: List[Dict[str, Any]],
    *,
    expected_revision: Optional[int] = None,
    durability: Optional[str] = None,
    warnings: bool = True,
) -> Dict[str, Any]:
    """``task.append_batch(...)`` without blocking the event loop."""
    return await _run(
        task.append_batch,
        events,
        expected_revision=expected_revision,
        durability=durability,
        warnings=warnings,
    )


async def revision(task: _native.Task) -> int:
    """``task.revision`` without blocking the event loop (through a served store it is asked
    of the server)."""
    return await _run(lambda: task.revision)


async def recover(store: _native.Store) -> Dict[str, Any]:
    """``store.recover()`` without blocking the event loop."""
    return await _run(store.recover)


class AsyncTask:
    """A task handle whose waiting calls are awaitable; ``delta`` and ``revision`` are the
    synchronous ones (they never wait on an embedded store; through a served store use
    ``delta_async`` and ``fetch_revision``)."""

    def __init__(self, task: _native.Task) -> None:
        self.sync = task
        """The synchronous handle."""

    @property
    def id(self) -> str:
        """The task's id."""
        return self.sync.id

    @property
    def revision(self) -> int:
        """The task's current revision."""
        return self.sync.revision

    def delta(self, text: str) -> Optional[int]:
        """Appends a streamed fragment, buffered; returns its seq (``None`` through a served
        store, where it may wait for the connection: see ``delta_async``)."""
        return self.sync.delta(text)

    async def delta_async(self, text: str) -> Optional[int]:
        """``delta`` in a worker thread: never blocks the event loop, also through a served
        store (at the cost of a thread hand-off per fragment)."""
        return await _run(self.sync.delta, text)

    def deltas(self, texts: Iterable[str]) -> Optional[int]:
        """Appends streamed fragments in order in one call (``Task.deltas``); returns the
        seq of the last (``None`` through a served store: see ``deltas_async``)."""
        return self.sync.deltas(texts)

    async def deltas_async(self, texts: Iterable[str]) -> Optional[int]:
        """``deltas`` in a worker thread: never blocks the event loop, also through a served
        store (one thread hand-off for all the fragments)."""
        return await _run(self.sync.deltas, texts)

    async def fetch_revision(self) -> int:
        """The task's current revision without blocking the event loop (through a served
        store it is asked of the server)."""
        return await revision(self.sync)

    async def append(
        self,
        event: Dict[str, Any],
        *,
        expected_revision: Optional[int] = None,
        durability: Optional[str] = None,
        warnings: bool = True,
    ) -> Dict[str, Any]:
        """Awaitable ``Task.append``."""
        return await append(
            self.sync,
            event,
            expected_revision=expected_revision,
            durability=durability,
            warnings=warnings,
        )

    async def append_batch(
        self,
        events: List[Dict[str, Any]],
        *,
        expected_revision: Optional[int] = None,
        durability: Optional[str] = None,
        warnings: bool = True,
    ) -> Dict[str, Any]:
        """Awaitable ``Task.append_batch``."""
        return await append_batch(
            self.sync,
            events,
            expected_revision=expected_revision,
            durability=durability,
            warnings=warnings,
        )

    async def state(self) -> Dict[str, Any]:
        """Awaitable ``Task.state``."""
        return await _run(self.sync.state)

    async def history(self) -> List[Dict[str, Any]]:
        """Awaitable ``Task.history``."""
        return await _run(self.sync.history)


class AsyncStore:
    """A store whose waiting calls (task takeover, recover, flush, close) are awaitable."""

    def __init__(self, store: _native.Store) -> None:
        self.sync = store
        """The synchronous store."""

    async def task(self, id: str) -> AsyncTask:
        """Awaitable ``Store.task`` (a takeover syncs)."""
        return AsyncTask(await _run(self.sync.task, id))

    async def recover(self) -> Dict[str, Any]:
        """Awaitable ``Store.recover``."""
        return await recover(self.sync)

    async def flush(self, durability: str = "synced") -> None:
        """Awaitable ``Store.flush``."""
        await _run(self.sync.flush, durability)

    async def close(self) -> None:
        """Awaitable ``Store.close``."""
        await _run(self.sync.close)

    async def __aenter__(self) -> "AsyncStore":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


async def open(path: Any, **options: Any) -> AsyncStore:  # noqa: A001 - mirrors builtins.open
    """Opens a store in a worker thread (opening replays the log) and wraps it."""
    return AsyncStore(await _run(_native.Store, path, **options))


async def connect(path: Any) -> AsyncStore:
    """Connects to the store another process serves from ``path`` (``Store.connect``) in a
    worker thread and wraps it."""
    return AsyncStore(await _run(_native.Store.connect, path))
