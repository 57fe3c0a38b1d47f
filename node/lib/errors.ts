/**
 * The errors of factlog, one class per error code of the protocol
 * (`format-spec/protocol.md`, "Replies"), as the Python package has them.
 *
 * Every failure of the native half (the embedded store, a served store's refusal, the
 * client's own failure) crosses the boundary as the protocol's error reply; {@link fromNative}
 * turns it into the `FactlogError` subclass of its code, so `err instanceof StaleRevision`
 * and `err.code === "STALE_REVISION"` both work, and `err.reply` keeps every field.
 *
 * @module
 */

/** An error reply of the protocol: `{"error": CODE, "message": ..., ...}`. */
export interface ErrorReply {
  /** The stable upper-snake code. */
  error: string;
  /** One sentence: what happened and what to do. Never quotes a body value. */
  message: string;
  [key: string]: unknown;
}

/** The base class of every factlog error. */
export class FactlogError extends Error {
  /** The code a reply without one of the known codes carries. */
  static readonly code: string = "ERROR";
  /** Whether the store can take no more events after this error (reopen it). */
  static readonly endsStream: boolean = true;
  /** The protocol's stable code, such as `"STALE_REVISION"`. */
  readonly code: string;
  /** The whole error reply, with the extra fields of its code. */
  readonly reply: ErrorReply;

  constructor(message: string, reply?: ErrorReply) {
    super(message);
    const own = this.constructor as typeof FactlogError;
    this.reply = reply ?? { error: own.code, message };
    this.code = this.reply.error ?? own.code;
    this.name = own.name;
  }

  /** Whether the store can take no more events after this error (reopen it). */
  get endsStream(): boolean {
    return (this.constructor as typeof FactlogError).endsStream;
  }
}

/** A refusal that leaves the stream usable: nothing was written, the store goes on. */
class Refusal extends FactlogError {
  static override readonly endsStream: boolean = false;
}

/** The event is not valid (a missing or mistyped field, an unknown type, a weaker durability
 * for a high-risk type, an event the task's state forbids). Nothing was written. */
export class InvalidEvent extends Refusal {
  static override readonly code = "INVALID_EVENT";
}

/** `expectedRevision` is not the task's revision: re-read the task and decide. */
export class StaleRevision extends Refusal {
  static override readonly code = "STALE_REVISION";
  /** The revision the update was based on. */
  get expected(): number {
    return Number(this.reply.expected);
  }
  /** The task's current revision. */
  get actual(): number {
    return Number(this.reply.actual);
  }
}

/** A side-effecting call on a task that needs a `control/resume` first. */
export class NeedsConfirmation extends Refusal {
  static override readonly code = "NEEDS_CONFIRMATION";
}

/** A call whose approval was not granted, was denied, expired or was used. */
export class ApprovalRefused extends Refusal {
  static override readonly code = "APPROVAL_REFUSED";
}

/** A call that is not read-only while an unknown outcome that is not read-only is
 * unresolved: resolve it first. `calls` names them with their plans. */
export class NeedsRecovery extends Refusal {
  static override readonly code = "NEEDS_RECOVERY";
  /** The task that needs recovery. */
  get task(): string {
    return String(this.reply.task);
  }
  /** The unresolved calls: `{call_id, tool, plan}`. */
  get calls(): Array<{ call_id: string; tool: string; plan: string }> {
    return (this.reply.calls as Array<{ call_id: string; tool: string; plan: string }>) ?? [];
  }
}

/** A `tool/call` whose `call_id` was used before with another tool or arguments. */
export class CallIdReused extends Refusal {
  static override readonly code = "CALL_ID_REUSED";
}

/** A body holds a credential-shaped value not marked `{"$secret": ...}` (with
 * `refuseUnmarkedSecrets`). */
export class UnmarkedSecret extends Refusal {
  static override readonly code = "UNMARKED_SECRET";
}

/** A bound of `limits.rs` was exceeded (an event, a batch, a line). */
export class LimitExceeded extends Refusal {
  static override readonly code = "LIMIT_EXCEEDED";
}

/** The events asked for were removed by a purge or reclaim (`first_available` says where
 * the log starts). */
export class Reclaimed extends Refusal {
  static override readonly code = "RECLAIMED";
}

/** A `replicated` append is written and synced but its replica did not confirm in time. */
export class NotReplicated extends Refusal {
  static override readonly code = "NOT_REPLICATED";
}

/** The operating system failed an I/O operation. */
export class Io extends FactlogError {
  static override readonly code = "IO";
}

/** The disk is full: nothing was lost; free space and reopen. */
export class DiskFull extends FactlogError {
  static override readonly code = "DISK_FULL";
}

/** A failed sync poisoned the writer: reopen the store. */
export class Poisoned extends FactlogError {
  static override readonly code = "POISONED";
}

/** The store was opened read-only. */
export class ReadOnly extends FactlogError {
  static override readonly code = "READ_ONLY";
}

/** Another process holds the store and does not share it: the message says how to share it. */
export class Locked extends FactlogError {
  static override readonly code = "LOCKED";
}

/** The base class of damaged or unreadable data. */
export class Corrupt extends FactlogError {}

/** A frame or segment failed its checks where the log mark vouches for it. */
export class Corruption extends Corrupt {
  static override readonly code = "CORRUPTION";
}

/** A torn tail the open could not cut. */
export class TornTail extends Corrupt {
  static override readonly code = "TORN_TAIL";
}

/** Data of a format version this build does not know. */
export class UnsupportedVersion extends Corrupt {
  static override readonly code = "UNSUPPORTED_VERSION";
}

/** The directory holds something that is not a factlog store. */
export class NotALog extends FactlogError {
  static override readonly code = "NOT_A_LOG";
}

/** Options that cannot be used together, or a bad argument. */
export class InvalidOptions extends FactlogError {
  static override readonly code = "INVALID_OPTIONS";
}

/** A stored event that does not decode. */
export class CorruptEvent extends Corrupt {
  static override readonly code = "CORRUPT_EVENT";
}

/** A stored event of an older version that cannot be upcast. */
export class CannotUpcast extends Corrupt {
  static override readonly code = "CANNOT_UPCAST";
}

/** A snapshot that does not decode. */
export class CorruptSnapshot extends Corrupt {
  static override readonly code = "CORRUPT_SNAPSHOT";
}

/** A served store refused this process (its user or group). */
export class PermissionDenied extends FactlogError {
  static override readonly code = "PERMISSION_DENIED";
}

/** A served store has as many clients as it serves. */
export class ServerBusy extends FactlogError {
  static override readonly code = "SERVER_BUSY";
}

/** The server of a served store expected a hello first. */
export class HelloRequired extends FactlogError {
  static override readonly code = "HELLO_REQUIRED";
}

/** The served store went away; the request in flight may or may not have been written:
 * open the store again and re-read the task. */
export class Disconnected extends FactlogError {
  static override readonly code = "DISCONNECTED";
}

/** A delta sent before the request that raised this was refused; that request still ran
 * (`requestReply`). Re-read the task. */
export class PipelinedRefused extends FactlogError {
  static override readonly code = "PIPELINED_REFUSED";
  /** The refused fragment's error reply. */
  get refused(): ErrorReply {
    return this.reply.refused as ErrorReply;
  }
  /** The reply to the request that raised this error. */
  get requestReply(): Record<string, unknown> {
    return this.reply.request_reply as Record<string, unknown>;
  }
}

/** No reply came within `timeoutMs`: the connection is abandoned. */
export class TimedOut extends FactlogError {
  static override readonly code = "TIMED_OUT";
}

/** Nothing answers at the store's socket (`connect: true`). */
export class NotServed extends FactlogError {
  static override readonly code = "NOT_SERVED";
}

/** A reply this package cannot read (a server of another protocol version). */
export class BadReply extends FactlogError {
  static override readonly code = "BAD_REPLY";
}

/** A call a served store's socket cannot make; none in this release (`flush` through a client
 * is the socket's `sync` request). */
export class Unsupported extends FactlogError {
  static override readonly code = "UNSUPPORTED";
}

/** A call on a store that was closed (or on one of its tasks): open it again. */
export class Closed extends FactlogError {
  static override readonly code = "CLOSED";
}

const classes: ReadonlyArray<typeof FactlogError> = [
  InvalidEvent, StaleRevision, NeedsConfirmation, ApprovalRefused, NeedsRecovery,
  CallIdReused, UnmarkedSecret, LimitExceeded, Reclaimed, NotReplicated, Io, DiskFull,
  Poisoned, ReadOnly, Locked, Corruption, TornTail, UnsupportedVersion, NotALog,
  InvalidOptions, CorruptEvent, CannotUpcast, CorruptSnapshot, PermissionDenied, ServerBusy,
  HelloRequired, Disconnected, PipelinedRefused, TimedOut, NotServed, BadReply, Unsupported,
  Closed,
];

const byCode: ReadonlyMap<string, typeof FactlogError> = new Map(
  classes.map((cls) => [cls.code, cls]),
);

/** The error class of `code` (`FactlogError` for a code this version does not know). */
export function errorClass(code: string): typeof FactlogError {
  return byCode.get(code) ?? FactlogError;
}

/** The `FactlogError` subclass of an error reply. */
export function fromReply(reply: ErrorReply): FactlogError {
  const cls = errorClass(reply.error);
  return new cls(reply.message, reply);
}

/** The error a native call threw or rejected with: its error reply as a `FactlogError`,
 * or the error itself when it carries none (a wrong argument type, say). */
export function fromNative(error: unknown): unknown {
  if (error instanceof Error && error.message.startsWith("{")) {
    let reply: unknown;
    try {
      reply = JSON.parse(error.message);
    } catch {
      return error;
    }
    if (typeof reply === "object" && reply !== null && typeof (reply as ErrorReply).error === "string") {
      return fromReply(reply as ErrorReply);
    }
  }
  return error;
}
