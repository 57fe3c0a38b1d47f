//! Snapshot files: the byte format of one file, its atomic write, the listing of a store's
//! snapshots, loading the newest valid one and pruning old ones (`format-spec/snapshot.md`).
//!
//! The body is opaque bytes: this module knows nothing of the state it holds. It owns the
//! header, the zstd compression, both checksums, the names in `DIR/snapshots/` and the order
//! of the file-system calls.
//!
//! Invariants:
//! - A name `{covered_seq:020}.snap` only ever points at a complete file: the bytes are written
//!   and synced under a `*.tmp` name first, and only then renamed (`format-spec/snapshot.md`,
//!   "Writing a snapshot").
//! - Bytes read from disk are untrusted: [`decode`] checks every validity rule, in the order the
//!   spec gives, before it trusts a length, and never allocates more than the header's
//!   `body_bytes`, itself at most [`SNAPSHOT_BODY_BYTES_MAX`].
//! - A snapshot is only an accelerator: a damaged or refused file is skipped with its reason,
//!   never repaired, and [`load_newest`] falls back to an older file or to none (full replay).

use std::io;
use std::path::{Path, PathBuf};

use crate::error::{CorruptionReason, Error, ErrorKind, Result, SnapshotFault};
use crate::fs::{Fs, OpenMode};
use crate::harness::state::{STATE_SCHEMA, STATE_SCHEMA_OLDEST, State};
use crate::limits::{SNAPSHOT_BODY_BYTES_MAX, SNAPSHOT_HEADER_BYTES};
use crate::types::Seq;

/// The directory, inside a store directory, that holds the snapshot files.
pub const SNAPSHOT_DIR_NAME: &str = "snapshots";
/// The snapshot format version this build writes and reads.
pub const SNAPSHOT_FORMAT_VERSION: u16 = 1;
/// The magic bytes at offset 0 of every snapshot file.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"FACTLSNP";
/// The `compression` value of a body compressed as one zstd frame.
pub const COMPRESSION_ZSTD: u16 = 1;
/// File-name suffix of snapshot files.
pub const SNAPSHOT_SUFFIX: &str = ".snap";
/// File-name suffix of a snapshot being written; such a file is never loaded.
pub const TEMP_SUFFIX: &str = ".tmp";

/// The zstd level the writer uses: fast, and a good ratio on serialised state.
const ZSTD_LEVEL: i32 = 3;
/// The four bytes every zstd frame starts with (RFC 8878, `Magic_Number` 0xFD2FB528).
const ZSTD_FRAME_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
/// Digits of the number in a snapshot file name: enough for every `u64`.
const NAME_DIGITS: usize = 20;

// Field offsets of the header (`format-spec/snapshot.md`, "Header").
const VERSION_AT: usize = 8;
const SCHEMA_AT: usize = 10;
const FLAGS_AT: usize = 12;
const COVERED_SEQ_AT: usize = 16;
const BODY_BYTES_AT: usize = 24;
const COMPRESSED_BYTES_AT: usize = 32;
const BODY_CRC_AT: usize = 40;
const COMPRESSION_AT: usize = 44;
const RESERVED_AT: usize = 46;
const HEADER_CRC_AT: usize = 60;

const _: () = assert!(HEADER_CRC_AT + 4 == SNAPSHOT_HEADER_BYTES);
const _: () = assert!(SNAPSHOT_BODY_BYTES_MAX <= usize::MAX as u64);

/// A snapshot file on disk whose header has been read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotMeta {
    /// The file.
    pub path: PathBuf,
    /// The last log sequence number whose event the state includes (`Seq(0)`: none).
    pub covered_seq: Seq,
    /// The version of the body's encoding, as the writer's caller chose it.
    pub state_schema: u16,
    /// The length of the file.
    pub file_bytes: u64,
}

/// A snapshot file found by name, not yet read: what [`list`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotFile {
    /// The file.
    pub path: PathBuf,
    /// The sequence number in its name.
    pub covered_seq: Seq,
    /// The length of the file.
    pub file_bytes: u64,
}

/// A decoded snapshot file: its header fields and its decompressed body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The last log sequence number whose event the state includes (`Seq(0)`: none).
    pub covered_seq: Seq,
    /// The version of the body's encoding.
    pub state_schema: u16,
    /// The decompressed body.
    pub body: Vec<u8>,
}

/// What [`load_newest`] found.
#[derive(Debug)]
pub struct Loaded {
    /// The newest snapshot that decoded and that the caller accepted, with its body; `None`
    /// when there is none, and the state must be rebuilt by replaying the whole log.
    pub loaded: Option<(SnapshotMeta, Vec<u8>)>,
    /// The newer snapshots that were passed over, newest first, each with its reason.
    pub skipped: Vec<SkippedSnapshot>,
}

/// A snapshot file [`load_newest`] passed over.
#[derive(Debug)]
pub struct SkippedSnapshot {
    /// The file.
    pub path: PathBuf,
    /// Why: a [`ErrorKind::CorruptSnapshot`] or [`ErrorKind::UnsupportedVersion`] from
    /// [`decode`], an I/O error reading it, or the error the caller's `accept` returned (a
    /// store's open refuses an unknown state schema with
    /// [`ErrorKind::UnsupportedStateSchema`]).
    pub error: Error,
}

/// The header fields of a snapshot file, after the header checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    state_schema: u16,
    covered_seq: Seq,
    body_bytes: u64,
    compressed_bytes: u64,
    body_crc: u32,
}

impl Header {
    fn encode(&self) -> [u8; SNAPSHOT_HEADER_BYTES] {
        let mut out = [0u8; SNAPSHOT_HEADER_BYTES];
        out[0..VERSION_AT].copy_from_slice(&SNAPSHOT_MAGIC);
        out[VERSION_AT..SCHEMA_AT].copy_from_slice(&SNAPSHOT_FORMAT_VERSION.to_le_bytes());
        out[SCHEMA_AT..FLAGS_AT].copy_from_slice(&self.state_schema.to_le_bytes());
        out[COVERED_SEQ_AT..BODY_BYTES_AT].copy_from_slice(&self.covered_seq.0.to_le_bytes());
        out[BODY_BYTES_AT..COMPRESSED_BYTES_AT].copy_from_slice(&self.body_bytes.to_le_bytes());
        out[COMPRESSED_BYTES_AT..BODY_CRC_AT].copy_from_slice(&self.compressed_bytes.to_le_bytes());
        out[BODY_CRC_AT..COMPRESSION_AT].copy_from_slice(&self.body_crc.to_le_bytes());
        out[COMPRESSION_AT..RESERVED_AT].copy_from_slice(&COMPRESSION_ZSTD.to_le_bytes());
        let crc = crc32fast::hash(&out[..HEADER_CRC_AT]);
        out[HEADER_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
        out
    }
}

fn fault(path: &Path, reason: SnapshotFault) -> Error {
    ErrorKind::CorruptSnapshot { path: path.to_path_buf(), reason }.into()
}

/// The largest output zstd can produce for an input of `bytes` bytes in one pass
/// (`ZSTD_COMPRESSBOUND` of `zstd.h`, restated in `format-spec/snapshot.md`).
#[must_use]
pub fn compressed_bytes_bound(bytes: u64) -> u64 {
    const SMALL: u64 = 128 * 1024;
    let margin = if bytes < SMALL { (SMALL - bytes) >> 11 } else { 0 };
    bytes.saturating_add(bytes >> 8).saturating_add(margin)
}

/// Encodes a whole snapshot file. `covered_seq`: the last log sequence number whose event the
/// state includes (`Seq(0)`: none). `state_schema`: the version of the body's encoding,
/// chosen by the caller and handed back by [`decode`] and [`load_newest`].
///
/// Fails with [`ErrorKind::LimitExceeded`] if `body` is longer than
/// [`SNAPSHOT_BODY_BYTES_MAX`], and with [`ErrorKind::Io`] (op `"zstd compress"`, empty path)
/// if zstd cannot compress it, which happens only when it cannot allocate.
pub fn encode(covered_seq: Seq, state_schema: u16, body: &[u8]) -> Result<Vec<u8>> {
    let body_bytes = body.len() as u64;
    check_body_bytes(body_bytes)?;
    let compressed = zstd::bulk::compress(body, ZSTD_LEVEL)
        .map_err(|e| Error::io("zstd compress", Path::new(""), e))?;
    let compressed_bytes = compressed.len() as u64;
    assert!(compressed_bytes <= compressed_bytes_bound(body_bytes), "zstd keeps its bound");
    assert!(compressed.starts_with(&ZSTD_FRAME_MAGIC), "zstd writes one frame");
    let header = Header {
        state_schema,
        covered_seq,
        body_bytes,
        compressed_bytes,
        body_crc: crc32fast::hash(&compressed),
    };
    let mut out = Vec::with_capacity(SNAPSHOT_HEADER_BYTES + compressed.len());
    out.extend_from_slice(&header.encode());
    out.extend_from_slice(&compressed);
    Ok(out)
}

fn check_body_bytes(body_bytes: u64) -> Result<()> {
    if body_bytes > SNAPSHOT_BODY_BYTES_MAX {
        return Err(ErrorKind::LimitExceeded {
            what: "snapshot body bytes",
            value: body_bytes,
            limit: SNAPSHOT_BODY_BYTES_MAX,
        }
        .into());
    }
    Ok(())
}

/// The folded state a snapshot's body holds: [`ErrorKind::UnsupportedStateSchema`] for a
/// state schema this build does not fold (the file is well formed but unusable here),
/// [`ErrorKind::CorruptSnapshot`] for a body that is not a state of the events through the
/// `covered_seq` of its header.
pub fn decode_state(meta: &SnapshotMeta, body: &[u8]) -> Result<State> {
    if !(STATE_SCHEMA_OLDEST..=STATE_SCHEMA).contains(&meta.state_schema) {
        return Err(ErrorKind::UnsupportedStateSchema {
            path: meta.path.clone(),
            found: meta.state_schema,
            supported: STATE_SCHEMA,
        }
        .into());
    }
    let bad = |what: String| fault(&meta.path, SnapshotFault::BadBody(what));
    let state: State = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
    if state.last_seq != meta.covered_seq.0 {
        return Err(bad(format!(
            "state folds events through {} but the header says {}",
            state.last_seq, meta.covered_seq.0
        )));
    }
    Ok(state)
}

/// Loads one snapshot file as an open would use it: read, decoded, named for the seq it
/// covers, and holding a state this build folds. The one definition of a *usable* snapshot,
/// shared by open, [`crate::Store::reclaim`] (which relies only on one) and
/// [`crate::Store::verify_deep`].
pub fn load(fs: &dyn Fs, file: &SnapshotFile) -> Result<(SnapshotMeta, State)> {
    let (meta, body) = read_snapshot(fs, &file.path, file.covered_seq)?;
    let state = decode_state(&meta, &body)?;
    Ok((meta, state))
}

/// Decodes a whole snapshot file, checking every validity rule of `format-spec/snapshot.md`
/// in its order and stopping at the first failure: [`ErrorKind::UnsupportedVersion`] for a
/// version other than [`SNAPSHOT_FORMAT_VERSION`], [`ErrorKind::CorruptSnapshot`] with its
/// [`SnapshotFault`] for anything else. `path` is only used in errors.
pub fn decode(path: &Path, bytes: &[u8]) -> Result<Decoded> {
    let header = decode_header(path, bytes, bytes.len() as u64)?;
    let compressed = bytes.get(SNAPSHOT_HEADER_BYTES..).unwrap_or_default();
    let body = decode_body(path, &header, compressed)?;
    Ok(Decoded { covered_seq: header.covered_seq, state_schema: header.state_schema, body })
}

/// Checks the header at the start of `bytes` for a file of `file_bytes` bytes: steps 1 to 10
/// of `format-spec/snapshot.md`, "Reading a snapshot".
fn decode_header(path: &Path, bytes: &[u8], file_bytes: u64) -> Result<Header> {
    let Some(raw) = bytes.first_chunk::<SNAPSHOT_HEADER_BYTES>() else {
        return Err(fault(path, SnapshotFault::ShortHeader));
    };
    let u16_at = |at: usize| u16::from_le_bytes([raw[at], raw[at + 1]]);
    let u32_at = |at: usize| u32::from_le_bytes([raw[at], raw[at + 1], raw[at + 2], raw[at + 3]]);
    let u64_at = |at: usize| u64::from(u32_at(at)) | u64::from(u32_at(at + 4)) << 32;
    if raw[..VERSION_AT] != SNAPSHOT_MAGIC {
        return Err(fault(path, SnapshotFault::BadMagic));
    }
    let version = u16_at(VERSION_AT);
    if version != SNAPSHOT_FORMAT_VERSION {
        return Err(ErrorKind::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
            supported: SNAPSHOT_FORMAT_VERSION,
        }
        .into());
    }
    if crc32fast::hash(&raw[..HEADER_CRC_AT]) != u32_at(HEADER_CRC_AT) {
        return Err(fault(path, SnapshotFault::BadHeaderChecksum));
    }
    let field = |name| Err(fault(path, SnapshotFault::BadHeaderField(name)));
    if u32_at(FLAGS_AT) != 0 {
        return field("flags");
    }
    if u16_at(COMPRESSION_AT) != COMPRESSION_ZSTD {
        return field("compression");
    }
    if raw[RESERVED_AT..HEADER_CRC_AT].iter().any(|&b| b != 0) {
        return field("reserved");
    }
    let header = Header {
        state_schema: u16_at(SCHEMA_AT),
        covered_seq: Seq(u64_at(COVERED_SEQ_AT)),
        body_bytes: u64_at(BODY_BYTES_AT),
        compressed_bytes: u64_at(COMPRESSED_BYTES_AT),
        body_crc: u32_at(BODY_CRC_AT),
    };
    if header.body_bytes > SNAPSHOT_BODY_BYTES_MAX {
        return field("body_bytes");
    }
    if header.compressed_bytes > compressed_bytes_bound(header.body_bytes) {
        return field("compressed_bytes");
    }
    if file_bytes.checked_sub(SNAPSHOT_HEADER_BYTES as u64) != Some(header.compressed_bytes) {
        return Err(fault(path, SnapshotFault::LengthMismatch));
    }
    debug_assert_eq!(&header.encode(), raw, "an accepted header re-encodes to its bytes");
    Ok(header)
}

/// Checks the compressed bytes against a checked header and decompresses them: steps 11 and 12
/// of `format-spec/snapshot.md`, "Reading a snapshot".
fn decode_body(path: &Path, header: &Header, compressed: &[u8]) -> Result<Vec<u8>> {
    debug_assert_eq!(compressed.len() as u64, header.compressed_bytes);
    if crc32fast::hash(compressed) != header.body_crc {
        return Err(fault(path, SnapshotFault::BadBodyChecksum));
    }
    let bad = || fault(path, SnapshotFault::BadCompression);
    let one_frame = compressed.starts_with(&ZSTD_FRAME_MAGIC)
        && zstd::zstd_safe::find_frame_compressed_size(compressed) == Ok(compressed.len());
    if !one_frame {
        return Err(bad());
    }
    // The capacity is the header's `body_bytes` (checked against the limit above), further
    // lowered by zstd to the frame's own content size when the frame states one.
    let capacity = usize::try_from(header.body_bytes).map_err(|_| bad())?;
    let body = zstd::bulk::decompress(compressed, capacity).map_err(|_| bad())?;
    if body.len() as u64 != header.body_bytes {
        return Err(bad());
    }
    Ok(body)
}

/// `store_dir/snapshots`.
#[must_use]
pub fn snapshot_dir(store_dir: &Path) -> PathBuf {
    store_dir.join(SNAPSHOT_DIR_NAME)
}

/// The file name of the snapshot covering the log up to `covered_seq`.
#[must_use]
pub fn file_name(covered_seq: Seq) -> String {
    format!("{:020}{SNAPSHOT_SUFFIX}", covered_seq.0)
}

/// The sequence number a snapshot file name stands for, or `None` if it is not one.
#[must_use]
pub fn parse_file_name(name: &str) -> Option<Seq> {
    let digits = name.strip_suffix(SNAPSHOT_SUFFIX)?;
    if digits.len() != NAME_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(Seq)
}

/// Writes a snapshot atomically into `store_dir/snapshots/`, creating the directory if it is
/// missing, and returns once the file and its name are on stable storage: encode, create the
/// directory and sync `store_dir`, remove leftover `*.tmp` files, write `{name}.tmp`,
/// `fdatasync` it, rename it to `{covered_seq:020}.snap` (replacing a snapshot of the same
/// `covered_seq`) and `fsync` the directory (`format-spec/snapshot.md`, "Writing a snapshot").
///
/// On failure the temporary file is removed if it can be; whatever a failure or a crash at any
/// step leaves behind, every `.snap` name points at a complete file. A full disk is
/// [`ErrorKind::DiskFull`]; other file-system failures are [`ErrorKind::Io`].
pub fn write(
    fs: &dyn Fs,
    store_dir: &Path,
    covered_seq: Seq,
    state_schema: u16,
    body: &[u8],
) -> Result<SnapshotMeta> {
    let bytes = encode(covered_seq, state_schema, body)?;
    let dir = snapshot_dir(store_dir);
    fs.create_dir_all(&dir).map_err(|e| Error::io("create directory", &dir, e))?;
    fs.sync_dir(store_dir).map_err(|e| Error::io("fsync directory", store_dir, e))?;
    remove_temp_files(fs, &dir)?;
    let path = dir.join(file_name(covered_seq));
    let temp = dir.join(format!("{}{TEMP_SUFFIX}", file_name(covered_seq)));
    let written = write_temp(fs, &temp, &bytes)
        .and_then(|()| fs.rename(&temp, &path).map_err(|e| Error::io("rename", &temp, e)));
    if let Err(error) = written {
        // Best effort: the file is ignored anyway, and the next write or prune removes it.
        let _ = fs.remove_file(&temp);
        return Err(error);
    }
    fs.sync_dir(&dir).map_err(|e| Error::io("fsync directory", &dir, e))?;
    Ok(SnapshotMeta { path, covered_seq, state_schema, file_bytes: bytes.len() as u64 })
}

fn write_temp(fs: &dyn Fs, temp: &Path, bytes: &[u8]) -> Result<()> {
    let file = fs.open(temp, OpenMode::CreateNew).map_err(|e| Error::io("create", temp, e))?;
    file.write_all_at(bytes, 0).map_err(|e| Error::io("write", temp, e))?;
    file.sync_data().map_err(|e| Error::io("fdatasync", temp, e))
}

/// The entry names of `dir`; a missing directory has none.
fn names_in(fs: &dyn Fs, dir: &Path) -> Result<Vec<String>> {
    match fs.list_dir(dir) {
        Ok(names) => Ok(names),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::io("list directory", dir, e)),
    }
}

/// Removes every `*.tmp` file of `dir`; returns how many. The caller syncs the directory.
fn remove_temp_files(fs: &dyn Fs, dir: &Path) -> Result<usize> {
    let mut removed = 0;
    for name in names_in(fs, dir)?.iter().filter(|n| n.ends_with(TEMP_SUFFIX)) {
        let path = dir.join(name);
        // Removed meanwhile (another process cleaned up): what was wanted.
        match fs.remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io("remove", &path, e));
            }
            _ => {}
        }
        removed += 1;
    }
    Ok(removed)
}

/// The snapshot files of `dir` by name, oldest first, without opening them.
fn snapshots_by_name(fs: &dyn Fs, dir: &Path) -> Result<Vec<(Seq, PathBuf)>> {
    let mut found: Vec<(Seq, PathBuf)> = names_in(fs, dir)?
        .iter()
        .filter_map(|name| parse_file_name(name).map(|seq| (seq, dir.join(name))))
        .collect();
    found.sort();
    Ok(found)
}

/// The snapshot files of `store_dir/snapshots/` by name, oldest first, with their lengths; the
/// files are not read. `*.tmp` files and names that are not snapshot names are left out; a
/// missing directory gives an empty list.
pub fn list(fs: &dyn Fs, store_dir: &Path) -> Result<Vec<SnapshotFile>> {
    let dir = snapshot_dir(store_dir);
    let mut files = Vec::new();
    for (covered_seq, path) in snapshots_by_name(fs, &dir)? {
        let file = match fs.open(&path, OpenMode::Read) {
            Ok(file) => file,
            // Pruned (or purged) since the listing: a race with a writer, not a failure.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("open", &path, e)),
        };
        let file_bytes = file.len().map_err(|e| Error::io("stat", &path, e))?;
        files.push(SnapshotFile { path, covered_seq, file_bytes });
    }
    Ok(files)
}

/// What [`check_all`] found: every snapshot with the error that makes it unusable, if any.
#[derive(Debug)]
pub struct SnapshotsChecked {
    /// Each snapshot file, oldest first, with why it cannot be used (`None`: it loads).
    pub files: Vec<(SnapshotFile, Option<Error>)>,
    /// The damage that matters: the first unusable snapshot, or, for a log whose first seq is
    /// above 1, the lack of a valid snapshot covering the reclaimed events (a `Corruption` with
    /// reason [`CorruptionReason::BaseSnapshotLost`], naming the snapshot that should have).
    pub problem: Option<Error>,
}

/// Loads every snapshot of the store in `store_dir` (`factlog verify` checks them all): a
/// damaged one is named, and a log whose first seq is `log_first_seq > 1` must have a valid
/// snapshot covering every event before it (`format-spec/snapshot.md`, "Reclaiming space").
///
/// # Errors
/// I/O errors listing the snapshots.
pub fn check_all(fs: &dyn Fs, store_dir: &Path, log_first_seq: u64) -> Result<SnapshotsChecked> {
    let mut files = Vec::new();
    for file in list(fs, store_dir)? {
        match load(fs, &file) {
            // Pruned since the listing: it is no longer one of the store's snapshots.
            Err(error) if error.is_not_found() => {}
            outcome => files.push((file, outcome.err())),
        }
    }
    let base = base_lost(store_dir, log_first_seq, &files);
    let problem = match base {
        Some(lost) => Some(lost),
        None => files.iter().find_map(|(file, error)| {
            let error = error.as_ref()?;
            let reason = match error.kind() {
                ErrorKind::CorruptSnapshot { reason, .. } => reason.clone(),
                _ => SnapshotFault::BadBody(error.to_string()),
            };
            Some(ErrorKind::CorruptSnapshot { path: file.path.clone(), reason }.into())
        }),
    };
    Ok(SnapshotsChecked { problem, files })
}

/// The error of a log whose first seq is `first_seq` when no snapshot of `files` (each with
/// why it cannot be loaded) covers the events before it; `None` when one does or none is
/// needed.
pub(crate) fn base_lost(
    store_dir: &Path,
    first_seq: u64,
    files: &[(SnapshotFile, Option<Error>)],
) -> Option<Error> {
    if first_seq <= 1 {
        return None;
    }
    let covers = |file: &SnapshotFile| file.covered_seq.0 + 1 >= first_seq;
    if files.iter().any(|(file, error)| covers(file) && error.is_none()) {
        return None;
    }
    let unusable = files.iter().rev().find(|(file, _)| covers(file));
    let (path, why) = match unusable {
        Some((file, error)) => {
            let why = match error {
                Some(e) => match e.kind() {
                    ErrorKind::CorruptSnapshot { reason, .. } => reason.to_string(),
                    _ => e.to_string(),
                },
                None => String::new(),
            };
            (file.path.clone(), format!("snapshot {} is damaged: {why}", file.path.display()))
        }
        None => (snapshot_dir(store_dir), "there is no snapshot".to_owned()),
    };
    let reason = CorruptionReason::BaseSnapshotLost { first_seq, why };
    Some(ErrorKind::Corruption { segment: None, path, offset: 0, reason }.into())
}

/// Refuses a store that holds a snapshot file of a format version newer than this build's
/// ([`ErrorKind::UnsupportedVersion`]): a newer build wrote to the store, and this one must not
/// guess (`format-spec/versions.md`, "The promise"). Reads only the first 10 bytes of each
/// file; a file without the snapshot magic, or too short, is left for [`load_newest`] to skip
/// as damaged. Called before a store opens its log, so a refusal writes nothing.
pub fn refuse_newer(fs: &dyn Fs, store_dir: &Path) -> Result<()> {
    let dir = snapshot_dir(store_dir);
    for (_, path) in snapshots_by_name(fs, &dir)? {
        let file = match fs.open(&path, OpenMode::Read) {
            Ok(file) => file,
            // Pruned since the listing: nothing of it to refuse.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("open", &path, e)),
        };
        let mut head = [0u8; VERSION_AT + 2];
        if file.len().map_err(|e| Error::io("stat", &path, e))? < head.len() as u64 {
            continue;
        }
        file.read_exact_at(&mut head, 0).map_err(|e| Error::io("read", &path, e))?;
        let version = u16::from_le_bytes([head[VERSION_AT], head[VERSION_AT + 1]]);
        if head[..VERSION_AT] == SNAPSHOT_MAGIC && version > SNAPSHOT_FORMAT_VERSION {
            return Err(ErrorKind::UnsupportedVersion {
                path,
                found: version,
                supported: SNAPSHOT_FORMAT_VERSION,
            }
            .into());
        }
    }
    Ok(())
}

/// Loads the newest valid snapshot of `store_dir/snapshots/`: tries the files newest first by
/// the `covered_seq` in their names and returns the first that can be read, decodes, holds the
/// `covered_seq` of its name and is accepted by `accept`. `accept` sees the checked header and
/// the body and may refuse it (the body does not deserialise, `covered_seq` lies beyond the
/// log's last record); a refused file is skipped with the caller's error. Every file passed
/// over is reported in [`Loaded::skipped`], newest first; none left means full replay.
///
/// Fails only if the directory cannot be listed.
pub fn load_newest(
    fs: &dyn Fs,
    store_dir: &Path,
    mut accept: impl FnMut(&SnapshotMeta, &[u8]) -> Result<()>,
) -> Result<Loaded> {
    let dir = snapshot_dir(store_dir);
    let mut skipped = Vec::new();
    for (covered_seq, path) in snapshots_by_name(fs, &dir)?.into_iter().rev() {
        let outcome = read_snapshot(fs, &path, covered_seq).and_then(|(meta, body)| {
            accept(&meta, &body)?;
            Ok((meta, body))
        });
        match outcome {
            Ok(found) => return Ok(Loaded { loaded: Some(found), skipped }),
            // Pruned since the listing: an older one is looked at, as for a damaged one.
            Err(error) if error.is_not_found() => {}
            Err(error) => skipped.push(SkippedSnapshot { path, error }),
        }
    }
    Ok(Loaded { loaded: None, skipped })
}

/// Reads and decodes one snapshot file named for `named_seq`. The header is checked before
/// the rest of the file is read, so a damaged length never makes it read more than the file.
fn read_snapshot(fs: &dyn Fs, path: &Path, named_seq: Seq) -> Result<(SnapshotMeta, Vec<u8>)> {
    let file = fs.open(path, OpenMode::Read).map_err(|e| Error::io("open", path, e))?;
    let file_bytes = file.len().map_err(|e| Error::io("stat", path, e))?;
    let head_bytes = file_bytes.min(SNAPSHOT_HEADER_BYTES as u64) as usize;
    let mut head = vec![0u8; head_bytes];
    file.read_exact_at(&mut head, 0).map_err(|e| Error::io("read", path, e))?;
    let header = decode_header(path, &head, file_bytes)?;
    // At most the zstd bound of SNAPSHOT_BODY_BYTES_MAX, and exactly what the file holds.
    let compressed_bytes = usize::try_from(header.compressed_bytes)
        .map_err(|_| fault(path, SnapshotFault::LengthMismatch))?;
    let mut compressed = vec![0u8; compressed_bytes];
    file.read_exact_at(&mut compressed, SNAPSHOT_HEADER_BYTES as u64)
        .map_err(|e| Error::io("read", path, e))?;
    let body = decode_body(path, &header, &compressed)?;
    if header.covered_seq != named_seq {
        return Err(fault(path, SnapshotFault::BadHeaderField("covered_seq")));
    }
    let meta = SnapshotMeta {
        path: path.to_path_buf(),
        covered_seq: header.covered_seq,
        state_schema: header.state_schema,
        file_bytes,
    };
    Ok((meta, body))
}

/// Removes all but the newest `keep` snapshot files of `store_dir/snapshots/` (by the
/// `covered_seq` in their names, oldest first) and every leftover `*.tmp` file, then syncs the
/// directory if anything was removed. Returns how many files were removed. Other files are
/// left alone. Must not run while a [`write()`] into the same directory is in progress.
pub fn prune(fs: &dyn Fs, store_dir: &Path, keep: usize) -> Result<usize> {
    let dir = snapshot_dir(store_dir);
    let mut removed = remove_temp_files(fs, &dir)?;
    let snapshots = snapshots_by_name(fs, &dir)?;
    let excess = snapshots.len().saturating_sub(keep);
    for (_, path) in snapshots.iter().take(excess) {
        // Removed meanwhile (another process cleaned up): what was wanted.
        match fs.remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io("remove", path, e));
            }
            _ => {}
        }
        removed += 1;
    }
    if removed > 0 {
        fs.sync_dir(&dir).map_err(|e| Error::io("fsync directory", &dir, e))?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::sim::SimFs;

    const PATH: &str = "/store/snapshots/00000000000000000007.snap";

    fn body() -> Vec<u8> {
        (0..5000u32).flat_map(|i| (i % 251).to_le_bytes()).collect()
    }

    fn decode_err(bytes: &[u8]) -> ErrorKind {
        decode(Path::new(PATH), bytes).unwrap_err().into_kind()
    }

    fn snapshot_fault(bytes: &[u8]) -> SnapshotFault {
        match decode_err(bytes) {
            ErrorKind::CorruptSnapshot { path, reason } => {
                assert_eq!(path, Path::new(PATH));
                reason
            }
            other => panic!("expected CorruptSnapshot, got {other:?}"),
        }
    }

    /// Rewrites header bytes `[at, at + value.len())` and fixes the header checksum, so that a
    /// field check (not the checksum) must catch the change.
    fn with_field(mut bytes: Vec<u8>, at: usize, value: &[u8]) -> Vec<u8> {
        bytes[at..at + value.len()].copy_from_slice(value);
        let crc = crc32fast::hash(&bytes[..HEADER_CRC_AT]);
        bytes[HEADER_CRC_AT..SNAPSHOT_HEADER_BYTES].copy_from_slice(&crc.to_le_bytes());
        bytes
    }

    #[test]
    fn round_trip_keeps_every_field() {
        for body in [Vec::new(), b"x".to_vec(), body()] {
            let bytes = encode(Seq(7), 3, &body).unwrap();
            let decoded = decode(Path::new(PATH), &bytes).unwrap();
            assert_eq!(decoded, Decoded { covered_seq: Seq(7), state_schema: 3, body });
        }
    }

    #[test]
    fn compresses_a_repetitive_body() {
        let bytes = encode(Seq(1), 1, &[b'a'; 100_000]).unwrap();
        assert!(bytes.len() < 1000, "{} bytes", bytes.len());
    }

    #[test]
    fn header_checks_run_in_the_spec_order() {
        let good = encode(Seq(7), 3, &body()).unwrap();
        assert_eq!(snapshot_fault(&good[..63]), SnapshotFault::ShortHeader);
        let mut bad_magic = good.clone();
        bad_magic[0] = b'G';
        assert_eq!(snapshot_fault(&bad_magic), SnapshotFault::BadMagic);
        let mut future = good.clone();
        future[VERSION_AT] = 2;
        assert!(matches!(
            decode_err(&future),
            ErrorKind::UnsupportedVersion { found: 2, supported: 1, .. }
        ));
        let mut bad_crc = good.clone();
        bad_crc[COVERED_SEQ_AT] ^= 1;
        assert_eq!(snapshot_fault(&bad_crc), SnapshotFault::BadHeaderChecksum);
        for (at, value, name) in [
            (FLAGS_AT, &[1u8][..], "flags"),
            (COMPRESSION_AT, &[2, 0], "compression"),
            (RESERVED_AT + 13, &[1], "reserved"),
            (BODY_BYTES_AT, &(SNAPSHOT_BODY_BYTES_MAX + 1).to_le_bytes(), "body_bytes"),
            (COMPRESSED_BYTES_AT, &u64::MAX.to_le_bytes(), "compressed_bytes"),
        ] {
            let changed = with_field(good.clone(), at, value);
            assert_eq!(snapshot_fault(&changed), SnapshotFault::BadHeaderField(name), "{name}");
        }
    }

    #[test]
    fn length_checksum_and_compression_faults() {
        let good = encode(Seq(7), 3, &body()).unwrap();
        assert_eq!(snapshot_fault(&good[..good.len() - 1]), SnapshotFault::LengthMismatch);
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(snapshot_fault(&longer), SnapshotFault::LengthMismatch);
        let mut flipped = good.clone();
        flipped[SNAPSHOT_HEADER_BYTES + 10] ^= 0x10;
        assert_eq!(snapshot_fault(&flipped), SnapshotFault::BadBodyChecksum);

        // A body_bytes that lies, with every checksum right: the length check after
        // decompression catches it.
        let length = body().len() as u64;
        for claimed in [length - 1, length + 1] {
            let lying = with_field(good.clone(), BODY_BYTES_AT, &claimed.to_le_bytes());
            assert_eq!(snapshot_fault(&lying), SnapshotFault::BadCompression, "{claimed}");
        }
    }

    /// A file whose compressed bytes are `compressed` with consistent checksums and lengths.
    fn wrap(compressed: &[u8], body_bytes: u64) -> Vec<u8> {
        let header = Header {
            state_schema: 1,
            covered_seq: Seq(7),
            body_bytes,
            compressed_bytes: compressed.len() as u64,
            body_crc: crc32fast::hash(compressed),
        };
        let mut out = header.encode().to_vec();
        out.extend_from_slice(compressed);
        out
    }

    #[test]
    fn only_exactly_one_zstd_frame_is_a_body() {
        let frame = zstd::bulk::compress(b"hello", 3).unwrap();
        assert!(decode(Path::new(PATH), &wrap(&frame, 5)).is_ok());
        let mut two = frame.clone();
        two.extend_from_slice(&frame);
        assert_eq!(snapshot_fault(&wrap(&two, 10)), SnapshotFault::BadCompression);
        // A skippable frame (magic 0x184D2A50, 4-byte length, no content) holds no body.
        let skippable = [0x50, 0x2A, 0x4D, 0x18, 0, 0, 0, 0];
        assert_eq!(snapshot_fault(&wrap(&skippable, 0)), SnapshotFault::BadCompression);
        let garbage = [0x28, 0xB5, 0x2F, 0xFD, 0xFF, 0xFF, 0xFF, 0xFF];
        assert_eq!(snapshot_fault(&wrap(&garbage, 0)), SnapshotFault::BadCompression);
        let truncated = &frame[..frame.len() - 1];
        assert_eq!(snapshot_fault(&wrap(truncated, 5)), SnapshotFault::BadCompression);
    }

    #[test]
    fn compressed_bound_matches_zstd() {
        for bytes in [0, 1, 100, 128 * 1024 - 1, 128 * 1024, 1 << 20, (1 << 30) + 7] {
            let ours = compressed_bytes_bound(bytes as u64);
            assert_eq!(ours, zstd::zstd_safe::compress_bound(bytes) as u64, "{bytes}");
        }
    }

    #[test]
    fn oversized_body_is_refused_by_length() {
        assert!(check_body_bytes(SNAPSHOT_BODY_BYTES_MAX).is_ok());
        let err = check_body_bytes(SNAPSHOT_BODY_BYTES_MAX + 1).unwrap_err();
        assert!(matches!(
            err.kind(),
            ErrorKind::LimitExceeded { what: "snapshot body bytes", limit, .. }
                if *limit == SNAPSHOT_BODY_BYTES_MAX
        ));
    }

    #[test]
    fn names_round_trip_and_others_are_ignored() {
        assert_eq!(file_name(Seq(42)), "00000000000000000042.snap");
        assert_eq!(parse_file_name("00000000000000000042.snap"), Some(Seq(42)));
        assert_eq!(parse_file_name("00000000000000000000.snap"), Some(Seq(0)));
        for other in [
            "00000000000000000042.snap.tmp",
            "0000000000000000042.snap",
            "99999999999999999999.snap",
            "0000000000000000004x.snap",
            "00000000000000000042.seg",
        ] {
            assert_eq!(parse_file_name(other), None, "{other}");
        }
    }

    #[test]
    fn write_list_load_prune() {
        let fs = SimFs::new(1);
        let store = Path::new("/store");
        assert!(list(&fs, store).unwrap().is_empty());
        assert!(load_newest(&fs, store, |_, _| Ok(())).unwrap().loaded.is_none());
        for seq in [3, 9, 5] {
            write(&fs, store, Seq(seq), 2, format!("state at {seq}").as_bytes()).unwrap();
        }
        let listed: Vec<u64> = list(&fs, store).unwrap().iter().map(|f| f.covered_seq.0).collect();
        assert_eq!(listed, [3, 5, 9]);
        let loaded = load_newest(&fs, store, |_, _| Ok(())).unwrap();
        let (meta, body) = loaded.loaded.unwrap();
        assert_eq!(
            (meta.covered_seq, meta.state_schema, &body[..]),
            (Seq(9), 2, &b"state at 9"[..])
        );
        assert!(loaded.skipped.is_empty());
        assert_eq!(prune(&fs, store, 1).unwrap(), 2);
        assert_eq!(list(&fs, store).unwrap().len(), 1);
        assert_eq!(prune(&fs, store, 1).unwrap(), 0);
    }

    #[test]
    fn a_file_under_another_seq_name_is_skipped() {
        let fs = SimFs::new(2);
        let store = Path::new("/store");
        write(&fs, store, Seq(4), 1, b"four").unwrap();
        let bytes = encode(Seq(5), 1, b"five").unwrap();
        let misnamed = snapshot_dir(store).join(file_name(Seq(8)));
        fs.write_file(&misnamed, &bytes);
        let loaded = load_newest(&fs, store, |_, _| Ok(())).unwrap();
        assert_eq!(loaded.loaded.unwrap().0.covered_seq, Seq(4));
        assert_eq!(loaded.skipped.len(), 1);
        assert!(matches!(
            loaded.skipped[0].error.kind(),
            ErrorKind::CorruptSnapshot { reason: SnapshotFault::BadHeaderField("covered_seq"), .. }
        ));
    }
}
