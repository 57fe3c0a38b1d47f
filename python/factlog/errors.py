"""The exceptions of factlog: one class per error code of the protocol.

Every failure, whether a refused event or a failure of the store, is raised as the class of
its code (``format-spec/protocol.md``, "Replies", the table of codes), under one base class
:class:`FactlogError`. Each carries ``.code`` and ``.message`` and the extra keys of its code
as attributes (``StaleRevision.expected``, ``NeedsRecovery.calls``, ...); ``.reply`` is the
whole error reply, exactly as ``factlog emit`` would print it.

A ``Store`` that is a client of a store another process serves (``format-spec/server.md``)
raises the same classes for the same codes. The codes only a server sends at the start of a
connection have classes too (:class:`PermissionDenied`, :class:`ServerBusy`,
:class:`HelloRequired`), and a client's own failures have codes of their own that no reply
carries: :class:`Disconnected` (``DISCONNECTED``), :class:`NotServed` (``NOT_SERVED``),
:class:`BadReply` (``BAD_REPLY``) and :class:`Unsupported` (``UNSUPPORTED``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

__all__ = [
    "FactlogError",
    "InvalidEvent",
    "StaleRevision",
    "NeedsConfirmation",
    "ApprovalRefused",
    "NeedsRecovery",
    "CallIdReused",
    "UnmarkedSecret",
    "LimitExceeded",
    "Reclaimed",
    "NotReplicated",
    "Io",
    "DiskFull",
    "Poisoned",
    "ReadOnly",
    "Locked",
    "Corruption",
    "Corrupt",
    "TornTail",
    "UnsupportedVersion",
    "NotALog",
    "InvalidOptions",
    "CorruptEvent",
    "CannotUpcast",
    "CorruptSnapshot",
    "PermissionDenied",
    "ServerBusy",
    "HelloRequired",
    "Disconnected",
    "PipelinedRefused",
    "TimedOut",
    "NotServed",
    "BadReply",
    "Unsupported",
]


class FactlogError(Exception):
    """Base class of every factlog error.

    ``code`` is the protocol's stable upper-snake code, ``message`` one sentence saying what
    happened and what to do (it never quotes a body value), ``reply`` the error reply dict.
    ``ends_stream`` tells whether the store can take no more events (reopen it).
    """

    code: str = "ERROR"
    ends_stream: bool = True

    def __init__(self, message: str, reply: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.message: str = message
        self.reply: Dict[str, Any] = dict(reply) if reply else {"error": self.code, "message": message}
        self.code = self.reply.get("error", type(self).code)


class InvalidEvent(FactlogError):
    """The event is not valid: a missing or mistyped field, an unknown type, a weaker
    durability for a high-risk type, or an event the task's state forbids. Nothing was
    written."""

    code = "INVALID_EVENT"
    ends_stream = False


class StaleRevision(FactlogError):
    """``expected_revision`` is not the task's revision: re-read the task and decide.

    ``expected`` is the revision the update was based on, ``actual`` the task's."""

    code = "STALE_REVISION"
    ends_stream = False

    @property
    def expected(self) -> int:
        """The revision the update was based on."""
        return int(self.reply["expected"])

    @property
    def actual(self) -> int:
        """The task's current revision."""
        return int(self.reply["actual"])


class NeedsConfirmation(FactlogError):
    """A side-effecting call on a task that needs a ``control/resume`` first."""

    code = "NEEDS_CONFIRMATION"
    ends_stream = False


class ApprovalRefused(FactlogError):
    """A call whose approval was not granted, was denied, expired or was used."""

    code = "APPROVAL_REFUSED"
    ends_stream = False


class NeedsRecovery(FactlogError):
    """A call that is not read-only while an unknown outcome that is not read-only is
    unresolved. ``task`` is the task, ``calls`` the calls to resolve first, each a dict
    ``{"call_id", "tool", "plan"}``."""

    code = "NEEDS_RECOVERY"
    ends_stream = False

    @property
    def task(self) -> str:
        """The task."""
        return str(self.reply["task"])

    @property
    def calls(self) -> List[Dict[str, Any]]:
        """The calls to resolve first: ``[{"call_id", "tool", "plan"}]``."""
        return list(self.reply["calls"])


class CallIdReused(FactlogError):
    """A call id that already names another request of the task. ``earlier`` is
    ``{"seq", "tool", "args_digest"}`` of the earlier call."""

    code = "CALL_ID_REUSED"
    ends_stream = False

    @property
    def task(self) -> str:
        """The task."""
        return str(self.reply["task"])

    @property
    def call_id(self) -> str:
        """The reused call id."""
        return str(self.reply["call_id"])

    @property
    def earlier(self) -> Dict[str, Any]:
        """The earlier call: ``{"seq", "tool", "args_digest"}``."""
        return dict(self.reply["earlier"])


class UnmarkedSecret(FactlogError):
    """With ``refuse_unmarked_secrets``: a body value shaped like a credential that is not
    marked ``{"$secret": ...}``. ``path`` is its JSON path, ``shape`` the shape's name."""

    code = "UNMARKED_SECRET"
    ends_stream = False

    @property
    def task(self) -> str:
        """The task."""
        return str(self.reply["task"])

    @property
    def path(self) -> str:
        """The JSON path of the value (``$.args.api_key``)."""
        return str(self.reply["path"])

    @property
    def shape(self) -> str:
        """The name of the credential shape it matched."""
        return str(self.reply["shape"])


class LimitExceeded(FactlogError):
    """A bound of the store's limits (task id, body, delta text, batch size, ...), or a served
    store's memory for long requests, in use by other clients now (send the request again
    later) or less than the request needs."""

    code = "LIMIT_EXCEEDED"
    ends_stream = False


class Reclaimed(FactlogError):
    """A read asked for records that ``purge`` removed (before or while it read them; a
    snapshot covers them): read again from ``first_available``."""

    code = "RECLAIMED"
    ends_stream = False

    @property
    def requested(self) -> int:
        """The first sequence number asked for."""
        return int(self.reply["requested"])

    @property
    def first_available(self) -> int:
        """The first sequence number the store still holds."""
        return int(self.reply["first_available"])


class NotReplicated(FactlogError):
    """A ``"replicated"`` append: with ``seq`` 0 the store is not replicating and nothing was
    written; otherwise the event is written and synced at ``seq`` but its replica does not
    hold it (the replication ended or did not take it in time). Do not report it as
    replicated; it is shipped when replication runs again."""

    code = "NOT_REPLICATED"
    ends_stream = False

    @property
    def seq(self) -> int:
        """The (last) seq written and synced, or 0 when nothing was written."""
        return int(self.reply.get("seq", 0))


class Io(FactlogError):
    """A read, write or sync of the store failed."""

    code = "IO"


class DiskFull(FactlogError):
    """The file system is full."""

    code = "DISK_FULL"


class Poisoned(FactlogError):
    """An earlier sync failed; the store takes nothing until reopened."""

    code = "POISONED"


class ReadOnly(FactlogError):
    """The store was opened read-only."""

    code = "READ_ONLY"


class Locked(FactlogError):
    """Another handle (in this or another process) holds the store's directory."""

    code = "LOCKED"


class Corrupt(FactlogError):
    """Base class of the errors that say stored bytes are damaged or unreadable."""


class Corruption(Corrupt):
    """Bytes on disk are damaged where a crash cannot explain it."""

    code = "CORRUPTION"


class TornTail(Corrupt):
    """Strict recovery found a torn tail and refused to cut it."""

    code = "TORN_TAIL"


class UnsupportedVersion(Corrupt):
    """A file has a format version this build does not read."""

    code = "UNSUPPORTED_VERSION"


class NotALog(FactlogError):
    """The directory holds no factlog store."""

    code = "NOT_A_LOG"


class InvalidOptions(FactlogError):
    """An option is out of range or inconsistent with another."""

    code = "INVALID_OPTIONS"


class CorruptEvent(Corrupt):
    """A stored record is not a valid event."""

    code = "CORRUPT_EVENT"


class CannotUpcast(Corrupt):
    """A stored event cannot be read as the schema this build uses without guessing."""

    code = "CANNOT_UPCAST"


class CorruptSnapshot(Corrupt):
    """A snapshot file is damaged or truncated."""

    code = "CORRUPT_SNAPSHOT"


class PermissionDenied(FactlogError):
    """The served store refused this client's process: it runs as another user, outside the
    group the store is shared with (``allow_group`` / ``--allow-group``)."""

    code = "PERMISSION_DENIED"


class ServerBusy(FactlogError):
    """The served store has as many clients as its ``clients_max``: retry once one has
    closed its connection."""

    code = "SERVER_BUSY"


class HelloRequired(FactlogError):
    """The server did not get the hello a client sends first (a client of another
    protocol)."""

    code = "HELLO_REQUIRED"


class Disconnected(FactlogError):
    """The served store went away (its process was killed or stopped, or it closed this
    connection): the request in flight may or may not have been written. Re-read the task
    once it is served again, through a new ``factlog.Store(path)``; this handle stays
    disconnected."""

    code = "DISCONNECTED"


class PipelinedRefused(FactlogError):
    """Through a served store: a fragment (``task.delta``) sent without waiting was refused,
    and this call, sent after it, is the one that read the refusal. The fragment was not
    written; this call's own request **was** run: its reply is ``request_reply`` (a written
    reply, or an error reply), so do not repeat it. ``refused`` is the fragment's error reply
    (``refused["error"]`` its code)."""

    code = "PIPELINED_REFUSED"
    ends_stream = False

    @property
    def refused(self) -> Dict[str, Any]:
        """The refused fragment's error reply."""
        return dict(self.reply["refused"])

    @property
    def request_reply(self) -> Dict[str, Any]:
        """The reply to the request of the call that raised this."""
        return dict(self.reply["request_reply"])


class TimedOut(FactlogError):
    """Through a served store connected with a ``timeout``: no reply came in time (a server
    that is alive but stopped, a stalled disk). The request may or may not have been written;
    the handle is abandoned (its later calls raise :class:`Disconnected`): connect again and
    re-read the task."""

    code = "TIMED_OUT"
    ends_stream = True


class NotServed(FactlogError):
    """No served store answers at ``DIR/factlog.sock`` (``factlog.Store.connect``): share
    the store from the process that holds it (``share=True``) or run ``factlog serve DIR``."""

    code = "NOT_SERVED"


class BadReply(FactlogError):
    """A reply of the served store that this client cannot read (a server of another
    version)."""

    code = "BAD_REPLY"


class Unsupported(FactlogError):
    """A call that a client of a served store cannot make (the socket has no request for
    it); nothing was done. No call of this release raises it: ``flush`` of a client is the
    socket's ``sync`` request."""

    code = "UNSUPPORTED"
    ends_stream = False


_BY_CODE: Dict[str, type] = {
    cls.code: cls
    for cls in [
        InvalidEvent,
        StaleRevision,
        NeedsConfirmation,
        ApprovalRefused,
        NeedsRecovery,
        CallIdReused,
        UnmarkedSecret,
        LimitExceeded,
        Reclaimed,
        NotReplicated,
        Io,
        DiskFull,
        Poisoned,
        ReadOnly,
        Locked,
        Corruption,
        TornTail,
        UnsupportedVersion,
        NotALog,
        InvalidOptions,
        CorruptEvent,
        CannotUpcast,
        CorruptSnapshot,
        PermissionDenied,
        ServerBusy,
        HelloRequired,
        Disconnected,
        PipelinedRefused,
        TimedOut,
        NotServed,
        BadReply,
        Unsupported,
    ]
}


def exception_class(code: str) -> type:
    """The exception class of a protocol error code (:class:`FactlogError` for ``ERROR`` or
    a code this version does not know)."""
    return _BY_CODE.get(code, FactlogError)


def _from_reply(reply: Dict[str, Any]) -> FactlogError:
    """The exception of an error reply dict; called by the native module."""
    cls = exception_class(str(reply.get("error", "ERROR")))
    return cls(str(reply.get("message", "")), reply)
