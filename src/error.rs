//! The one error type of the crate: [`Error`] wraps a boxed [`ErrorKind`] whose variants carry
//! the structure a caller needs to decide what to do (which segment, which offset, which
//! version).

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::types::SegmentId;

/// `n` and `noun`, plural unless `n` is 1 ("1 byte", "3 bytes"; regular nouns only): the
/// counts of every message of the library and of its commands.
pub fn counted(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

/// A specialised `Result` for factlog operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error of a factlog operation. Cheap to move: the kind is boxed.
pub struct Error {
    kind: Box<ErrorKind>,
}

/// What went wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A file-system call failed.
    Io {
        /// The operation, e.g. `"write"`, `"fdatasync"`, `"rename"`.
        op: &'static str,
        /// The file or directory it was applied to.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// The disk is full (`ENOSPC`): the operation could not be made durable.
    DiskFull {
        /// The operation that ran out of space.
        op: &'static str,
        /// The file it was applied to.
        path: PathBuf,
    },
    /// Bytes on disk are damaged in a place where a crash cannot explain it.
    Corruption {
        /// The segment, when the damage is inside one.
        segment: Option<SegmentId>,
        /// The damaged file.
        path: PathBuf,
        /// The byte offset in that file where the damage starts.
        offset: u64,
        /// What is wrong there.
        reason: CorruptionReason,
    },
    /// `RecoveryMode::Strict` found a torn tail and refused to cut it.
    TornTail {
        /// The active segment holding the tail.
        segment: SegmentId,
        /// Its file.
        path: PathBuf,
        /// Where the torn tail starts.
        offset: u64,
        /// How many bytes (up to the last non-zero one) would be cut.
        bytes: u64,
    },
    /// A file has a format version this build does not understand.
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version found in it.
        found: u16,
        /// The newest version this build reads.
        supported: u16,
    },
    /// Another writer (in this or another process) holds the directory lock.
    Locked {
        /// The log directory.
        dir: PathBuf,
    },
    /// An earlier `write` or `fsync` failed; the handle refuses all appends until reopened.
    Poisoned {
        /// The first failure.
        cause: String,
    },
    /// An argument exceeds one of the bounds in [`crate::limits`].
    LimitExceeded {
        /// What was too large.
        what: &'static str,
        /// Its value.
        value: u64,
        /// The largest accepted value.
        limit: u64,
    },
    /// An option is out of range or inconsistent with another.
    InvalidOptions {
        /// Which and why.
        reason: String,
    },
    /// The log was opened read-only.
    ReadOnly,
    /// A rewrite of the log's segments (`factlog migrate`) was committed but not completed,
    /// and a read-only open cannot complete it.
    RewritePending {
        /// The directory.
        dir: PathBuf,
    },
    /// `factlog migrate` found that the rewritten store would not mean what the store means,
    /// and changed nothing.
    MigrationRefused {
        /// What differs.
        reason: String,
    },
    /// `factlog migrate` committed the switch to the new version but could not finish it; the
    /// next writable open of the store (or running the migration again) completes it.
    MigrationIncomplete {
        /// What failed after the commit.
        reason: String,
    },
    /// A snapshot holds folded state of a schema this build does not know. It is only an
    /// accelerator: open skips it and rebuilds the state by replaying the log.
    UnsupportedStateSchema {
        /// The snapshot file.
        path: PathBuf,
        /// The state schema found in it.
        found: u16,
        /// The state schema this build folds.
        supported: u16,
    },
    /// `factlog salvage` or `factlog restore` was asked to write into a directory that exists
    /// and is not empty; nothing was written.
    TargetNotEmpty {
        /// The directory named as the new store.
        dir: PathBuf,
    },
    /// `factlog salvage` was asked to write the new store inside the damaged one, which it
    /// never writes to; nothing was written.
    TargetInsideSource {
        /// The damaged log's directory.
        log_dir: PathBuf,
        /// The directory named as the new store.
        target: PathBuf,
    },
    /// `factlog salvage` failed while writing, opening or recovering the new store;
    /// everything it wrote there was removed (the damaged log is never written to).
    SalvageFailed {
        /// The directory named as the new store.
        target: PathBuf,
        /// What failed.
        source: Box<Error>,
    },
    /// The directory holds no log.
    NotALog {
        /// The directory.
        dir: PathBuf,
    },
    /// Records before `first_available` were reclaimed by an explicit
    /// [`crate::Log::reclaim_before`]; reading from `requested` would skip them.
    Reclaimed {
        /// The first sequence number asked for.
        requested: u64,
        /// The first sequence number the log still holds.
        first_available: u64,
    },
    /// A replica location (`factlog replicate --to`, `factlog restore`) this build cannot use.
    UnsupportedUrl {
        /// The location as given.
        url: String,
        /// Why, and what would work.
        reason: String,
    },
    /// A request to a replica's object store failed; what was shipped before stays valid.
    Remote {
        /// The replica's location.
        location: String,
        /// The request, e.g. `"put"`, `"get"`, `"list"`.
        op: &'static str,
        /// The object's name (empty for a listing of the whole replica).
        object: String,
        /// What the object store said.
        reason: String,
    },
    /// The location holds no replica (`factlog-replica.json` is missing).
    NotAReplica {
        /// The location.
        location: String,
    },
    /// An object of a replica is damaged or is not what its name says; nothing was restored.
    ReplicaDamaged {
        /// The object's name.
        object: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A replica of an older format (version 1), whose objects do not name the replica they
    /// belong to: it is not read; a store re-seeds a replica at a new location.
    ReplicaOutdated {
        /// The replica's location.
        location: String,
        /// The version it has.
        found: u16,
        /// The version this build reads.
        supported: u16,
    },
    /// Another `factlog restore` is writing the same target now; nothing was written.
    RestoreInProgress {
        /// The target directory.
        target: PathBuf,
        /// The other restore's process id, as its staging directory records it.
        pid: u32,
        /// Its staging directory.
        staging: PathBuf,
    },
    /// A replica misses objects between others; nothing was restored.
    ReplicaGap {
        /// What is missing, and where.
        missing: String,
    },
    /// A store and its replica hold different bytes where both have some: the store was
    /// rebuilt or restored elsewhere, or lost unsynced writes the replica has.
    ReplicaDiverged {
        /// The segment (its first seq).
        segment: u64,
        /// The offset in the segment file where they differ.
        offset: u64,
        /// What differs.
        reason: String,
    },
    /// A `Replicated` append was written and synced in the store, but the replica does not
    /// hold it (yet): the replication ended, is not running, or did not take it in time.
    NotReplicated {
        /// The (last) seq of the append (0 when nothing was written).
        seq: u64,
        /// Why.
        reason: String,
    },
    /// Another run holds the replica's lease.
    LeaseHeld {
        /// The replica's location.
        location: String,
        /// The holder: its epoch, device, pid, store and since when.
        holder: String,
    },
    /// This run's lease was taken over by another (`--takeover`); it shipped nothing after.
    LeaseLost {
        /// The replica's location.
        location: String,
        /// The epoch this run held.
        epoch: u64,
    },
    /// A compare-and-set append was based on a revision of the task that is no longer
    /// current; nothing was written.
    StaleRevision {
        /// The task.
        task: String,
        /// The revision the caller based its update on.
        expected: u64,
        /// The task's current revision.
        actual: u64,
    },
    /// An event given by the caller is not valid (a missing or mistyped field, an unknown
    /// effect class, a body too large); nothing was written.
    InvalidEvent {
        /// The event type, as given.
        event_type: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A stored record is not a valid event: its envelope or body cannot be decoded.
    CorruptEvent {
        /// The record's sequence number.
        seq: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A stored event is valid in its body schema but cannot be read as the schema this build
    /// uses without guessing (`format-spec/events.md`, "Schema changes"): opening the store
    /// stops instead of folding a wrong state.
    CannotUpcast {
        /// The record's sequence number.
        seq: u64,
        /// The event type.
        event_type: String,
        /// The body schema it is stored in.
        from: u16,
        /// The schema this build reads the type as.
        to: u16,
        /// What in the body cannot be mapped.
        reason: String,
    },
    /// A snapshot file is damaged or truncated. Open falls back to an older snapshot or to
    /// full replay; this error surfaces only where a caller asked for that one file.
    CorruptSnapshot {
        /// The snapshot file.
        path: PathBuf,
        /// What is wrong with it.
        reason: SnapshotFault,
    },
    /// The task was restored after a restart with a high-risk contract: a side-effecting call
    /// needs a recorded resume confirmation (`control/resume`) first.
    NeedsConfirmation {
        /// The task.
        task: String,
    },
    /// A tool call named an approval that does not authorise it (unknown, denied, consumed,
    /// expired by a restart, or past its expiry); nothing was written.
    ApprovalRefused {
        /// The task.
        task: String,
        /// The approval named by the call.
        approval_id: String,
        /// Why it does not authorise the call.
        reason: &'static str,
    },
    /// A tool call that is not read-only was refused because calls of the task dispatched
    /// before a restart (or a change of holder) still have an unknown outcome that nobody
    /// resolved; nothing was written (`format-spec/harness-recovery.md`, "Holders").
    NeedsRecovery {
        /// The task.
        task: String,
        /// The calls to resolve first, in call-id order.
        calls: Vec<UnresolvedCall>,
    },
    /// A `tool/call` or `assistant/message` used a call id that already names another request
    /// of the task; nothing was written. Call ids are unique within a task.
    CallIdReused {
        /// The task.
        task: String,
        /// The reused call id.
        call_id: String,
        /// The sequence number of the earlier call's dispatch (or of the message that asked for
        /// it, if it was never dispatched).
        earlier_seq: u64,
        /// The earlier call's tool.
        tool: String,
        /// The earlier call's argument digest, if it was dispatched with arguments.
        args_digest: Option<String>,
    },
    /// A body holds a value with the shape of a well-known credential that is not marked
    /// `{"$secret": ...}`, and the store refuses such bodies
    /// ([`crate::harness::StoreOptions::refuse_unmarked_secrets`]); nothing was written.
    UnmarkedSecret {
        /// The task.
        task: String,
        /// The event type.
        event_type: String,
        /// Where the value is, as a JSON path from the body's top (`$.args.api_key`).
        path: String,
        /// The name of the shape it matched
        /// ([`crate::harness::secret_shapes::SHAPES`]).
        shape: &'static str,
    },
}

/// A call whose outcome is unknown and unresolved ([`ErrorKind::NeedsRecovery`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnresolvedCall {
    /// The call.
    pub call_id: String,
    /// Its tool.
    pub tool: String,
    /// What recovery planned for it (`retry_same_key`, `verify`, `ask_user`; `open` when its
    /// outcome was not recorded yet).
    pub plan: String,
}

/// What is wrong with a snapshot file (`format-spec/snapshot.md`, validity rules).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SnapshotFault {
    /// The file is shorter than the snapshot header.
    ShortHeader,
    /// The file does not start with the snapshot magic.
    BadMagic,
    /// The header checksum does not match.
    BadHeaderChecksum,
    /// A header field is out of range (named).
    BadHeaderField(&'static str),
    /// The file is shorter or longer than its header says.
    LengthMismatch,
    /// The checksum over the compressed body does not match.
    BadBodyChecksum,
    /// The body does not decompress, or decompresses to another length than recorded.
    BadCompression,
    /// The decompressed body is not a valid state (what is wrong).
    BadBody(String),
}

impl fmt::Display for SnapshotFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotFault::ShortHeader => f.write_str("file is shorter than a snapshot header"),
            SnapshotFault::BadMagic => f.write_str("not a factlog snapshot (bad magic)"),
            SnapshotFault::BadHeaderChecksum => f.write_str("snapshot header checksum mismatch"),
            SnapshotFault::BadHeaderField(name) => write!(f, "bad snapshot header field {name}"),
            SnapshotFault::LengthMismatch => {
                f.write_str("file length differs from the length in its header")
            }
            SnapshotFault::BadBodyChecksum => f.write_str("snapshot body checksum mismatch"),
            SnapshotFault::BadCompression => {
                f.write_str("snapshot body does not decompress to its recorded length")
            }
            SnapshotFault::BadBody(what) => write!(f, "snapshot body is not a valid state: {what}"),
        }
    }
}

/// Why bytes on disk were judged corrupt.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CorruptionReason {
    /// The file is shorter than a segment header.
    ShortHeader,
    /// The file does not start with the segment magic.
    BadMagic,
    /// The header checksum does not match.
    BadHeaderChecksum,
    /// The header says it holds something other than event-log records.
    UnknownContent(u16),
    /// A header field is out of range (named).
    BadHeaderField(&'static str),
    /// The file name does not match the header's first sequence number.
    NameMismatch,
    /// Segment identifiers or first sequence numbers do not follow each other.
    SegmentOrder,
    /// The commit marker of a segment rewrite is damaged (what is wrong).
    BadRewriteMarker(&'static str),
    /// The gap file of a salvaged log (`GAPS`) is damaged (what is wrong).
    BadGapFile(&'static str),
    /// Segments of one log are written in different format versions.
    MixedFormatVersions {
        /// The version of the segments before it.
        expected: u16,
        /// The version of this one.
        found: u16,
    },
    /// A frame is invalid where every frame must be valid.
    BadFrame(FrameFault),
    /// A valid frame carries a sequence number other than the expected one.
    SequenceMismatch {
        /// The sequence number that had to come next.
        expected: u64,
        /// The one found.
        found: u64,
    },
    /// A segment ends before the sequence number at which the next one starts.
    SequenceGap {
        /// The sequence number that had to come next.
        expected: u64,
        /// The first sequence number of the next segment.
        found: u64,
    },
    /// A sealed segment holds records at or beyond the first sequence number of the next
    /// segment.
    SegmentOverlap {
        /// The next segment's first sequence number.
        next_first_seq: u64,
        /// The first sequence number of the overlapping frame.
        found: u64,
    },
    /// A frame that a later frame proves was on stable storage is damaged.
    DurableRecordDamaged(FrameFault),
    /// A record's sequence number was promised but the log ends before it.
    MissingRecords {
        /// The first missing sequence number.
        expected: u64,
    },
    /// The log ends before the durable end its mark records (`format-spec/mark.md`): records
    /// that were on stable storage are damaged or gone.
    BelowDurableMark {
        /// The last seq the mark says was on stable storage.
        marked: u64,
        /// The last valid seq found (0: none).
        found: u64,
        /// What was found where the valid frames end, if a frame was damaged there.
        fault: Option<FrameFault>,
    },
    /// A segment the mark records is missing.
    SegmentMissing {
        /// Its segment id.
        id: u64,
        /// The last seq the mark says was on stable storage.
        durable_seq: u64,
    },
    /// A segment after the last one the mark records, which no roll explains.
    SegmentUnmarked {
        /// The last segment id the mark records.
        marked_last: u64,
    },
    /// The mark and the segments disagree (what disagrees).
    MarkMismatch(&'static str),
    /// Non-zero bytes after the end of a cleanly closed log, where only zeros can be.
    DamagedAfterClose {
        /// Bytes from the end of the log up to the last non-zero one.
        bytes: u64,
    },
    /// The mark file `MARK` is damaged (what is wrong).
    BadMark(&'static str),
    /// A torn tail kept aside by an open is damaged (what is wrong).
    BadKeptTail(&'static str),
    /// A valid snapshot covers events after the end of the log: they were on stable storage
    /// when it was written.
    SnapshotBeyondLog {
        /// The last seq the snapshot covers.
        covered: u64,
        /// The last seq the log holds (0: none).
        last: u64,
    },
    /// The segments before `first_seq` were reclaimed, and no valid snapshot covers the
    /// events they held (why the snapshots that could have fail, or that there is none).
    BaseSnapshotLost {
        /// The first seq the log holds.
        first_seq: u64,
        /// What is wrong with the snapshots that could cover the reclaimed events.
        why: String,
    },
}

/// What is wrong with one frame (`format-spec/record.md`, decode outcomes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameFault {
    /// The length field exceeds the payload limit.
    OversizedLength,
    /// The frame runs past the end of the file.
    Truncated,
    /// The checksum does not match.
    BadChecksum,
    /// The kind byte is unknown.
    UnknownKind,
    /// The flags byte is not zero.
    BadFlags,
    /// The count field is zero, or not 1 for a single record.
    BadCount,
    /// The sequence number is zero, or the frame's records would run past `u64::MAX`.
    BadSeq,
    /// The durable lag is zero or larger than the sequence number.
    BadDurableLag,
    /// The batch entries do not fill the payload exactly.
    BadBatch,
}

impl fmt::Display for FrameFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FrameFault::OversizedLength => "length field exceeds the 16 MiB payload limit",
            FrameFault::Truncated => "frame runs past the end of the file",
            FrameFault::BadChecksum => "checksum mismatch",
            FrameFault::UnknownKind => "unknown frame kind",
            FrameFault::BadFlags => "non-zero flags",
            FrameFault::BadCount => "bad record count",
            FrameFault::BadSeq => "sequence number zero or overflowing",
            FrameFault::BadDurableLag => "durable lag of zero or beyond the sequence number",
            FrameFault::BadBatch => "batch entries do not fill the payload",
        })
    }
}

impl fmt::Display for CorruptionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CorruptionReason::ShortHeader => f.write_str("file is shorter than a segment header"),
            CorruptionReason::BadMagic => f.write_str("not a factlog segment (bad magic)"),
            CorruptionReason::BadHeaderChecksum => f.write_str("segment header checksum mismatch"),
            CorruptionReason::UnknownContent(c) => write!(f, "unknown segment content kind {c}"),
            CorruptionReason::BadHeaderField(name) => write!(f, "bad segment header field {name}"),
            CorruptionReason::NameMismatch => {
                f.write_str("file name does not match the header's first sequence number")
            }
            CorruptionReason::SegmentOrder => {
                f.write_str("segment ids or first sequence numbers are out of order")
            }
            CorruptionReason::BadRewriteMarker(what) => {
                write!(f, "the rewrite marker is damaged ({what})")
            }
            CorruptionReason::BadGapFile(what) => {
                write!(f, "the gap file of a salvaged log is damaged ({what})")
            }
            CorruptionReason::MixedFormatVersions { expected, found } => write!(
                f,
                "segment format version {found} follows segments of version {expected}; \
                 a log is written in one version"
            ),
            CorruptionReason::BadFrame(fault) => write!(f, "invalid frame: {fault}"),
            CorruptionReason::SequenceMismatch { expected, found } => {
                write!(f, "expected sequence number {expected}, found {found}")
            }
            CorruptionReason::SequenceGap { expected, found } => write!(
                f,
                "segment ends before sequence number {expected}, but the next segment starts at {found}"
            ),
            CorruptionReason::SegmentOverlap { next_first_seq, found } => write!(
                f,
                "a frame starting at sequence number {found} reaches the next segment, which \
                 starts at {next_first_seq}"
            ),
            CorruptionReason::DurableRecordDamaged(fault) => write!(
                f,
                "a frame that was on stable storage is damaged ({fault}); a later frame proves it was synced"
            ),
            CorruptionReason::MissingRecords { expected } => {
                write!(f, "log ends before sequence number {expected}")
            }
            CorruptionReason::BelowDurableMark { marked, found, fault } => {
                if *found == 0 {
                    f.write_str("the log holds no valid record")?;
                } else {
                    write!(f, "the log ends at sequence number {found}")?;
                }
                write!(
                    f,
                    ", but its mark records every record through {marked} as on stable \
                     storage: records {} to {marked} are damaged or missing",
                    found + 1
                )?;
                match fault {
                    Some(fault) => write!(f, " ({fault} where the valid records end)"),
                    None => Ok(()),
                }
            }
            CorruptionReason::SegmentMissing { id, durable_seq } => write!(
                f,
                "segment {id} is missing, but the log's mark records it (records through \
                 {durable_seq} were on stable storage)"
            ),
            CorruptionReason::SegmentUnmarked { marked_last } => write!(
                f,
                "a segment after segment {marked_last}, the last one the log's mark records, \
                 which no roll explains"
            ),
            CorruptionReason::MarkMismatch(what) => {
                write!(f, "the log's mark and its segments disagree: {what}")
            }
            CorruptionReason::DamagedAfterClose { bytes } => write!(
                f,
                "{} after the end of a cleanly closed log, where only zeros can be",
                counted(*bytes, "non-zero byte")
            ),
            CorruptionReason::BadMark(what) => {
                write!(f, "the log's mark (MARK) is damaged ({what})")
            }
            CorruptionReason::BadKeptTail(what) => {
                write!(f, "a torn tail kept aside is damaged ({what})")
            }
            CorruptionReason::SnapshotBeyondLog { covered, last } => write!(
                f,
                "this snapshot covers events through seq {covered}, but the log ends at seq \
                 {last}: records {} to {covered} were on stable storage when it was written and \
                 are damaged or missing",
                last + 1
            ),
            CorruptionReason::BaseSnapshotLost { first_seq, why } => write!(
                f,
                "the segments before seq {first_seq} were reclaimed and no valid snapshot covers \
                 the events they held ({why}): those events survive only in a backup or a \
                 replica"
            ),
        }
    }
}

impl Error {
    /// What went wrong.
    #[must_use]
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// Consumes the error, returning its kind.
    #[must_use]
    pub fn into_kind(self) -> ErrorKind {
        *self.kind
    }

    /// Wraps an I/O error of `op` on `path`, turning `ENOSPC` into [`ErrorKind::DiskFull`].
    pub(crate) fn io(op: &'static str, path: &Path, source: io::Error) -> Error {
        if source.raw_os_error() == Some(28) || source.kind() == io::ErrorKind::StorageFull {
            return ErrorKind::DiskFull { op, path: path.to_path_buf() }.into();
        }
        ErrorKind::Io { op, path: path.to_path_buf(), source }.into()
    }

    pub(crate) fn corruption(
        segment: Option<SegmentId>,
        path: &Path,
        offset: u64,
        reason: CorruptionReason,
    ) -> Error {
        ErrorKind::Corruption { segment, path: path.to_path_buf(), offset, reason }.into()
    }

    pub(crate) fn invalid_options(reason: impl Into<String>) -> Error {
        ErrorKind::InvalidOptions { reason: reason.into() }.into()
    }

    /// True for an I/O error that says a file or directory is not there: a file removed
    /// between a directory listing and its open (a snapshot pruned, a segment reclaimed) is
    /// the normal outcome of that race, not a failure.
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        matches!(&*self.kind, ErrorKind::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }

    /// True for corruption and unsupported-version errors: the bytes on disk are not what
    /// this build can trust, as opposed to an operating failure.
    #[must_use]
    pub fn is_corruption(&self) -> bool {
        matches!(
            *self.kind,
            ErrorKind::Corruption { .. }
                | ErrorKind::UnsupportedVersion { .. }
                | ErrorKind::CorruptEvent { .. }
                | ErrorKind::CorruptSnapshot { .. }
        )
    }

    /// Whether the data itself is the problem: damage ([`Error::is_corruption`]), an event
    /// this build cannot read as its current schema ([`ErrorKind::CannotUpcast`]), a
    /// migration the data refuses ([`ErrorKind::MigrationRefused`]), or a replica that is
    /// damaged, has a gap or differs from its store ([`ErrorKind::ReplicaDamaged`],
    /// [`ErrorKind::ReplicaGap`], [`ErrorKind::ReplicaDiverged`]). The command line exits 3
    /// for these, 1 for every other failure.
    #[must_use]
    pub fn is_damaged_or_refused_data(&self) -> bool {
        self.is_corruption()
            || matches!(
                *self.kind,
                ErrorKind::CannotUpcast { .. }
                    | ErrorKind::MigrationRefused { .. }
                    | ErrorKind::ReplicaDamaged { .. }
                    | ErrorKind::ReplicaGap { .. }
                    | ErrorKind::ReplicaDiverged { .. }
                    | ErrorKind::ReplicaOutdated { .. }
            )
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Error {
        Error { kind: Box::new(kind) }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.kind, f)
    }
}

impl fmt::Display for Error {
    /// Each kind's message says what happened and what to do; the kinds are routed to one
    /// function per concern, which writes the message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = &*self.kind;
        match kind {
            ErrorKind::Io { .. }
            | ErrorKind::DiskFull { .. }
            | ErrorKind::Locked { .. }
            | ErrorKind::Poisoned { .. }
            | ErrorKind::ReadOnly
            | ErrorKind::InvalidOptions { .. }
            | ErrorKind::LimitExceeded { .. }
            | ErrorKind::NotALog { .. }
            | ErrorKind::Reclaimed { .. } => handle_message(kind, f),
            ErrorKind::Corruption { .. }
            | ErrorKind::TornTail { .. }
            | ErrorKind::UnsupportedVersion { .. }
            | ErrorKind::UnsupportedStateSchema { .. }
            | ErrorKind::CorruptEvent { .. }
            | ErrorKind::CannotUpcast { .. }
            | ErrorKind::CorruptSnapshot { .. } => damage_message(kind, f),
            ErrorKind::RewritePending { .. }
            | ErrorKind::MigrationRefused { .. }
            | ErrorKind::MigrationIncomplete { .. }
            | ErrorKind::SalvageFailed { .. }
            | ErrorKind::TargetNotEmpty { .. }
            | ErrorKind::TargetInsideSource { .. } => rewrite_message(kind, f),
            ErrorKind::UnsupportedUrl { .. }
            | ErrorKind::Remote { .. }
            | ErrorKind::NotAReplica { .. }
            | ErrorKind::ReplicaDamaged { .. }
            | ErrorKind::ReplicaOutdated { .. }
            | ErrorKind::RestoreInProgress { .. }
            | ErrorKind::ReplicaGap { .. } => replica_message(kind, f),
            ErrorKind::ReplicaDiverged { .. }
            | ErrorKind::NotReplicated { .. }
            | ErrorKind::LeaseHeld { .. }
            | ErrorKind::LeaseLost { .. } => shipping_message(kind, f),
            ErrorKind::StaleRevision { .. }
            | ErrorKind::InvalidEvent { .. }
            | ErrorKind::NeedsConfirmation { .. }
            | ErrorKind::ApprovalRefused { .. }
            | ErrorKind::NeedsRecovery { .. }
            | ErrorKind::CallIdReused { .. }
            | ErrorKind::UnmarkedSecret { .. } => refusal_message(kind, f),
        }
    }
}

/// The message of an error of the handle, its files and its arguments: I/O, the lock, a
/// poisoned writer, a bound.
fn handle_message(kind: &ErrorKind, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match kind {
        ErrorKind::Io { op, path, source } => {
            write!(f, "{op} failed on {}: {source}", path.display())
        }
        ErrorKind::DiskFull { op, path } => write!(
            f,
            "disk full during {op} on {}: free space and reopen; nothing acknowledged was lost",
            path.display()
        ),
        ErrorKind::Locked { dir } => write!(
            f,
            "log directory {} is locked by another writer: close it first, or open read-only",
            dir.display()
        ),
        ErrorKind::Poisoned { cause } => write!(
            f,
            "log handle is poisoned by an earlier I/O failure ({cause}): reopen the log to \
             recover its durable prefix"
        ),
        ErrorKind::ReadOnly => {
            f.write_str("log is open read-only: open it with Log::open to append")
        }
        ErrorKind::InvalidOptions { reason } => write!(f, "invalid options: {reason}"),
        ErrorKind::LimitExceeded { what, value, limit } => {
            write!(
                f,
                "{what} is {value}, above the limit of {limit}; make it smaller (split the \
                 text or the batch, or keep a large value outside the log and store a \
                 reference to it)"
            )
        }
        ErrorKind::NotALog { dir } => write!(
            f,
            "{} holds no factlog segments (and a new log is only created in an empty or \
             missing directory): check the path",
            dir.display()
        ),
        ErrorKind::Reclaimed { requested, first_available } => write!(
            f,
            "records before {first_available} were reclaimed, so reading from {requested} \
             would skip them: read from {first_available}, or (for a store) restore a \
             snapshot that covers them"
        ),
        other => unreachable!("Error::fmt routes {other:?} elsewhere"),
    }
}

/// The message of damaged or unreadable bytes: in the log, its events or its snapshots.
fn damage_message(kind: &ErrorKind, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match kind {
        ErrorKind::Corruption { segment, path, offset, reason } => {
            corruption_message(f, *segment, path, *offset, reason)
        }
        ErrorKind::TornTail { segment, path, offset, bytes } => write!(
            f,
            "torn tail of {} at offset {offset} of {} (segment {segment}); strict recovery \
             refuses to cut it: open with RecoveryMode::TolerateTornTail to cut it",
            counted(*bytes, "byte"),
            path.display()
        ),
        ErrorKind::UnsupportedVersion { path, found, supported } => write!(
            f,
            "{} has format version {found}, this build reads up to version {supported}: \
             open it with a newer factlog",
            path.display()
        ),
        ErrorKind::UnsupportedStateSchema { path, found, supported } => write!(
            f,
            "snapshot {} holds state schema {found}, this build folds schema {supported}: \
             skipped, the state is rebuilt by replaying the log (a newer factlog can use it)",
            path.display()
        ),
        ErrorKind::CorruptEvent { seq, reason } => write!(
            f,
            "record {seq} is not a valid event: {reason}; the store refuses to guess: inspect \
             it with `factlog dump --raw` and `factlog verify`"
        ),
        ErrorKind::CannotUpcast { seq, event_type, from, to, reason } => write!(
            f,
            "event {seq} ({event_type}, body schema {from}) cannot be read as schema {to}: \
             {reason}; this build refuses to guess, so the store does not open: open it with \
             the factlog release that wrote it, or inspect the event with `factlog dump DIR \
             --raw --from {seq}`"
        ),
        ErrorKind::CorruptSnapshot { path, reason } => write!(
            f,
            "snapshot {} is damaged: {reason}; it is only an accelerator: remove it and the \
             state is rebuilt from the events",
            path.display()
        ),
        other => unreachable!("Error::fmt routes {other:?} elsewhere"),
    }
}

/// The message of an error of `factlog migrate` or `factlog salvage`, which write a store anew.
fn rewrite_message(kind: &ErrorKind, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match kind {
        ErrorKind::RewritePending { dir } => write!(
            f,
            "{} holds a committed migration that is not yet switched in: open it for writing \
             once (any factlog command that writes, or `factlog migrate` again) to finish it",
            dir.display()
        ),
        ErrorKind::MigrationRefused { reason } => write!(
            f,
            "migration refused, nothing was switched: {reason}; the store is unchanged and \
             still opens with this build (report this as a bug with `factlog dump --raw`)"
        ),
        ErrorKind::MigrationIncomplete { reason } => write!(
            f,
            "the migration was committed but not finished: {reason}; the store opens as the \
             new version once a writable open (or `factlog migrate` run again) completes the \
             switch, and the backup holds the old store"
        ),
        ErrorKind::SalvageFailed { target, source } => write!(
            f,
            "salvage into {} failed: {source}; everything it wrote there was removed and \
             the damaged log is unchanged: fix the cause (free space, permissions) and run \
             factlog salvage again",
            target.display()
        ),
        ErrorKind::TargetNotEmpty { dir } => write!(
            f,
            "{} exists and is not empty: name a new or empty directory for the new store; \
             nothing was written",
            dir.display()
        ),
        ErrorKind::TargetInsideSource { log_dir, target } => write!(
            f,
            "{} is inside the damaged log {}, which salvage never writes to: name a \
             directory outside it; nothing was written",
            target.display(),
            log_dir.display()
        ),
        other => unreachable!("Error::fmt routes {other:?} elsewhere"),
    }
}

/// The message of an error of a replica location or of a restore from it.
fn replica_message(kind: &ErrorKind, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match kind {
        ErrorKind::UnsupportedUrl { url, reason } => {
            write!(f, "cannot use {url:?} as a replica location: {reason}")
        }
        ErrorKind::Remote { location, op, object, reason } => write!(
            f,
            "the object store of replica {location} failed a {op} of {object:?}: {reason}; \
             what the replica held before is intact: check the location, the credentials and \
             the network, then run the command again (a running `factlog replicate` retries \
             at its next round by itself)"
        ),
        ErrorKind::NotAReplica { location } => write!(
            f,
            "{location} holds no factlog replica (no factlog-replica.json): check the \
             location, or replicate a store there first"
        ),
        ErrorKind::ReplicaDamaged { object, reason } => write!(
            f,
            "replica object {object:?} is damaged: {reason}; it was not used, nothing was \
             restored from it or shipped after it: a restore can end before it (--seq below \
             its records) or use another replica, `factlog replicas verify` names every \
             damaged object, and replicating the store to a new location makes a new replica"
        ),
        ErrorKind::ReplicaOutdated { location, found, supported } => write!(
            f,
            "replica {location} has format version {found}, whose objects do not name the \
             replica they belong to; this build reads version {supported} only: re-seed it \
             (factlog replicate DIR --to A_NEW_LOCATION from the store, or restore it with \
             the factlog that wrote it and replicate the result to a new location); nothing \
             was read or written"
        ),
        ErrorKind::RestoreInProgress { target, pid, staging } => write!(
            f,
            "another factlog restore (pid {pid}) is writing {} now, staged in {}; nothing \
             was written: wait for it to finish, or restore into another directory",
            target.display(),
            staging.display()
        ),
        ErrorKind::ReplicaGap { missing } => write!(
            f,
            "the replica is missing {missing}; nothing was restored or shipped past the \
             gap: a restore can end before it (--seq below the gap) or use another replica, \
             and replicating the store to a new location makes a new replica"
        ),
        other => unreachable!("Error::fmt routes {other:?} elsewhere"),
    }
}

/// The message of an error of shipping to a replica: the lease, divergence, replicated
/// appends.
fn shipping_message(kind: &ErrorKind, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match kind {
        ErrorKind::ReplicaDiverged { segment, offset, reason } => write!(
            f,
            "the store and its replica differ in segment {segment} at offset {offset}: \
             {reason}; nothing was shipped: the store was rebuilt or restored since, so \
             replicate it to a new location"
        ),
        ErrorKind::NotReplicated { seq: 0, reason } => write!(
            f,
            "a Replicated append needs a replica: {reason}; nothing was written (replicate \
             the store from the process that holds it: `factlog serve --replicate-to URL`, \
             `factlog emit --replicate-to URL`, `replicate_to=` in Python, `replicateTo` in \
             Node, Store::replicate in Rust; or append with synced durability)"
        ),
        ErrorKind::NotReplicated { seq, reason } => write!(
            f,
            "the append at seq {seq} is written and synced in the store, but the replica \
             does not hold it: {reason}; it stays in the store and is shipped when \
             replication runs again: do not report it as replicated"
        ),
        ErrorKind::LeaseHeld { location, holder } => write!(
            f,
            "replica {location} is being written by another run ({holder}): one store \
             replicates to a replica at a time; if that run is gone for good, start this \
             one with --takeover, which ends its lease and is recorded"
        ),
        ErrorKind::LeaseLost { location, epoch } => write!(
            f,
            "this run's lease (epoch {epoch}) on replica {location} was taken over by \
             another run; it stopped shipping: run it again only once the other has \
             stopped, with --takeover"
        ),
        other => unreachable!("Error::fmt routes {other:?} elsewhere"),
    }
}

/// The message of a refused event: the store wrote nothing.
fn refusal_message(kind: &ErrorKind, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match kind {
        ErrorKind::StaleRevision { task, expected, actual } => write!(
            f,
            "stale revision for task {task:?}: the update was based on revision {expected} but \
             the task is at revision {actual}; nothing was written: re-read the task and decide"
        ),
        ErrorKind::InvalidEvent { event_type, reason } => write!(
            f,
            "invalid {event_type:?} event: {reason}; nothing was written (see \
             format-spec/events.md for the fields of each type)"
        ),
        ErrorKind::NeedsConfirmation { task } => write!(
            f,
            "task {task:?} was restored after a restart with a high-risk contract: record a \
             control/resume confirmation before dispatching a side-effecting call"
        ),
        ErrorKind::ApprovalRefused { task, approval_id, reason } => write!(
            f,
            "approval {approval_id:?} of task {task:?} does not authorise this call: {reason}; \
             request a new approval; nothing was written"
        ),
        ErrorKind::NeedsRecovery { task, calls } => needs_recovery_message(f, task, calls),
        ErrorKind::CallIdReused { task, call_id, earlier_seq, tool, args_digest } => write!(
            f,
            "call id {call_id:?} of task {task:?} already names another request (seq \
             {earlier_seq}, tool {tool:?}, argument digest {}): a duplicate must have the \
             same request key, or the same tool and arguments; give the new call a call id \
             of its own; nothing was written",
            args_digest.as_deref().unwrap_or("none")
        ),
        ErrorKind::UnmarkedSecret { task, event_type, path, shape } if path == BYTES_PATH => {
            write!(
                f,
                "{event_type} event of task {task:?}: its bytes hold what looks like a \
                 credential ({shape}), not marked as a secret (a mark counts only in JSON); \
                 nothing was written; leave the credential out of the serialized value, or \
                 store the value as JSON with the credential wrapped as \
                 {{\"$secret\": \"...\"}}"
            )
        }
        ErrorKind::UnmarkedSecret { task, event_type, path, shape } => write!(
            f,
            "{event_type} event of task {task:?}: the value at {path} looks like a \
             credential ({shape}) and is not marked as a secret; nothing was written; \
             where the field takes any JSON (args, output, receipt) wrap it as \
             {{\"$secret\": \"...\"}} so that only a reference is stored, and in a text \
             field leave the credential out of the text"
        ),
        other => unreachable!("Error::fmt routes {other:?} elsewhere"),
    }
}

/// Where a credential-shaped value found in the raw bytes of a `record/blob` is reported
/// (`harness::secret_shapes::BYTES_PATH`): its refusal says what fits raw bytes.
pub const BYTES_PATH: &str = "$.bytes";

/// The message of [`ErrorKind::Corruption`], which names the store's directory for `factlog
/// salvage` and `factlog verify`.
fn corruption_message(
    f: &mut fmt::Formatter<'_>,
    segment: Option<SegmentId>,
    path: &Path,
    offset: u64,
    reason: &CorruptionReason,
) -> fmt::Result {
    write!(f, "corruption in {}", path.display())?;
    if let Some(segment) = segment {
        write!(f, " (segment {segment})")?;
    }
    // A snapshot's damage is the store's: name the store's directory.
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    let dir = match parent {
        Some(p) if p.file_name().is_some_and(|n| n == "snapshots") => p.parent(),
        other => other,
    };
    let dir = dir.map_or_else(|| "DIR".to_owned(), |d| d.display().to_string());
    write!(
        f,
        " at offset {offset}: {reason}; copy every intact record into a new store \
         with `factlog salvage {dir} --to NEWDIR` (`factlog verify {dir}` shows \
         the damage)"
    )
}

/// The message of [`ErrorKind::NeedsRecovery`], which lists every unresolved call.
fn needs_recovery_message(
    f: &mut fmt::Formatter<'_>,
    task: &str,
    calls: &[UnresolvedCall],
) -> fmt::Result {
    write!(
        f,
        "task {task:?} has calls dispatched before a restart whose outcome is unknown \
         and unresolved:"
    )?;
    for call in calls {
        write!(f, " {:?} ({}, plan {})", call.call_id, call.tool, call.plan)?;
    }
    write!(
        f,
        "; resolve each before dispatching a call that is not read-only: record its \
         tool/result if it happened (verify with the service, or ask the user), or \
         dispatch it again with the same call id or request key to retry it; \
         nothing was written"
    )
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &*self.kind {
            ErrorKind::Io { source, .. } => Some(source),
            ErrorKind::SalvageFailed { source, .. } => Some(&**source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_is_singular_every_other_count_plural() {
        assert_eq!(super::counted(1u64, "part"), "1 part");
        assert_eq!(super::counted(0u64, "part"), "0 parts");
        assert_eq!(super::counted(2u64, "segment"), "2 segments");
    }

    use super::*;

    #[test]
    fn enospc_becomes_disk_full() {
        let e = Error::io("write", Path::new("/x"), io::Error::from_raw_os_error(28));
        assert!(matches!(e.kind(), ErrorKind::DiskFull { op: "write", .. }));
        assert!(e.to_string().contains("disk full"));
    }

    #[test]
    fn corruption_message_names_segment_and_offset() {
        let e = Error::corruption(
            Some(SegmentId(3)),
            Path::new("/d/1.seg"),
            128,
            CorruptionReason::BadFrame(FrameFault::BadChecksum),
        );
        let text = e.to_string();
        assert!(text.contains("segment 3") && text.contains("offset 128"), "{text}");
        assert!(text.contains("factlog salvage /d --to NEWDIR"), "{text}");
        assert!(!text.contains("backup"), "{text}");
        assert!(e.is_corruption());
    }
}
