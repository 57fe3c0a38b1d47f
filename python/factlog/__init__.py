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
"""

from __future__ import annotations

from . import aio, errors
from ._native import ERROR_CODES, PROTOCOL_VERSION, Events, Store, Task, request_key
from ._native import __version__ as __version__
from .errors import (
    ApprovalRefused,
    CallIdReused,
    CannotUpcast,
    Corrupt,
    CorruptEvent,
    Corruption,
    CorruptSnapshot,
    DiskFull,
    FactlogError,
    InvalidEvent,
    InvalidOptions,
    Io,
    LimitExceeded,
    Locked,
    NeedsConfirmation,
    NeedsRecovery,
    NotALog,
    Poisoned,
    ReadOnly,
    StaleRevision,
    TornTail,
    UnmarkedSecret,
    UnsupportedVersion,
)

__all__ = [
    "Store",
    "Task",
    "Events",
    "request_key",
    "PROTOCOL_VERSION",
    "ERROR_CODES",
    "aio",
    "errors",
    *errors.__all__,
]
