"""factlog: an embedded, crash-safe store for the facts of AI-agent harnesses.

The engine runs inside this process (a native extension, ``factlog._native``); every event
goes through the same protocol code as ``factlog emit`` (``format-spec/protocol.md``): the
same JSON shapes, replies, error codes and holder rules.

    import factlog

    with factlog.Store("agent.factlog") as store:
        task = store.task("session-1")              # takes the task over from an earlier holder
        task.append({"type": "turn/start"})
        for token in ["Hel", "lo"]:
            task.delta(token)                       # buffered, the hot path
        reply = task.append({"type": "tool/call", "call_id": "c1", "tool": "search",
                             "effect": "read_only"})  # synced before the tool runs

Errors are :class:`FactlogError` subclasses, one per protocol code (``factlog.errors``);
``factlog.aio`` has awaitable variants of the calls that wait for the disk.

Several processes, one store: ``factlog.Store(path, share=True)`` shares the store it opens
over ``DIR/factlog.sock`` (``format-spec/server.md``) until it is closed; in another process
``factlog.Store(path)`` finds the store held and served and connects to it (or
``factlog.connect(path)`` says so explicitly). The client has the same API and raises the same
exceptions; compare-and-set holds across processes.
"""

from __future__ import annotations

import os
from typing import Optional, Union

from . import aio, errors
from ._native import ERROR_CODES, PROTOCOL_VERSION, Events, Store, Task, request_key
from ._native import __version__ as __version__
from .errors import (
    ApprovalRefused,
    BadReply,
    CallIdReused,
    CannotUpcast,
    Corrupt,
    CorruptEvent,
    Corruption,
    CorruptSnapshot,
    Disconnected,
    DiskFull,
    FactlogError,
    HelloRequired,
    InvalidEvent,
    InvalidOptions,
    Io,
    LimitExceeded,
    Locked,
    NeedsConfirmation,
    NeedsRecovery,
    NotALog,
    NotReplicated,
    NotServed,
    PermissionDenied,
    PipelinedRefused,
    Poisoned,
    ReadOnly,
    Reclaimed,
    ServerBusy,
    TimedOut,
    StaleRevision,
    TornTail,
    UnmarkedSecret,
    Unsupported,
    UnsupportedVersion,
)

def connect(path: "Union[str, os.PathLike[str]]", *, timeout: Optional[float] = None) -> Store:
    """Connects to the store another process serves from ``path`` (``Store.connect``): a
    ``Store`` with the same API whose calls go through ``DIR/factlog.sock``. Raises
    :class:`NotServed` when nothing is served there. With ``timeout`` (seconds) a reply that
    does not come in time raises :class:`TimedOut` and abandons the handle."""
    return Store.connect(path, timeout=timeout)


__all__ = [
    "Store",
    "connect",
    "Task",
    "Events",
    "request_key",
    "PROTOCOL_VERSION",
    "ERROR_CODES",
    "aio",
    "errors",
    *errors.__all__,
]
