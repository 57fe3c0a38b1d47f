//! [`salvage`]: copy every intact record of a damaged log, before and after each damaged range,
//! into a new log with the same sequence numbers, declare each lost range in the new log's gap
//! file, then open the new log as a store and run the harness recovery on it
//! (`format-spec/salvage.md`).
//!
//! The damaged log is only read, through the [`Fs`] seam: listed, mapped and its small files
//! read; nothing is created, locked, preallocated or changed in its directory. Its bytes are
//! untrusted: every frame is checked by [`frame::decode`] with its segment's salt, and a range
//! that does not decode is reported, never copied.
//!
//! Invariants:
//! - The kept records of the new log are exactly the records of valid frames of the old one,
//!   with the same seqs, in the same order, each seq at most once; frames are copied byte for
//!   byte under their segment's salt.
//! - Every jump in the new log's sequence is declared in its `GAPS` file, and every declared
//!   gap lies at a segment boundary of the new log ([`crate::engine::gaps`]).

use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::engine::frame::{self, Decoded};
use crate::engine::gaps::{self, Gap, Gaps};
use crate::engine::recovery::last_nonzero;
use crate::engine::segment::{self, FORMAT_VERSION, SegmentHeader};
use crate::engine::segments;
use crate::error::{CorruptionReason, Error, ErrorKind, FrameFault, Result};
use crate::fs::{Fs, OpenMode};
use crate::harness::codec;
use crate::harness::snapshot::{self, SnapshotFile};
use crate::harness::{Store, StoreOptions};
use crate::limits::{FRAME_ALIGN_BYTES, SEGMENT_BYTES_MIN, SEGMENT_HEADER_BYTES};
use crate::types::{SegmentId, Seq};

/// How to salvage. A builder: `SalvageOptions::new().dry_run(true)`.
#[derive(Debug, Clone)]
pub struct SalvageOptions {
    store: StoreOptions,
    dry_run: bool,
}

impl SalvageOptions {
    /// The defaults: write the new store, then open it with `StoreOptions::new()`.
    #[must_use]
    pub fn new() -> SalvageOptions {
        SalvageOptions { store: StoreOptions::new(), dry_run: false }
    }

    /// Only scan and report what would be kept and lost: nothing is written anywhere, and the
    /// target directory is not created. Default: `false`.
    #[must_use]
    pub fn dry_run(mut self, dry_run: bool) -> SalvageOptions {
        self.dry_run = dry_run;
        self
    }

    /// The options the new store is opened with after the copy; their file system
    /// ([`crate::Options::fs`]) is also the one both logs are read and written through.
    /// Default: `StoreOptions::new()`.
    #[must_use]
    pub fn store(mut self, store: StoreOptions) -> SalvageOptions {
        self.store = store;
        self
    }
}

impl Default for SalvageOptions {
    fn default() -> Self {
        SalvageOptions::new()
    }
}

/// What [`salvage`] found and did.
#[derive(Debug, Clone)]
pub struct SalvageReport {
    /// The damaged log, read only.
    pub source: PathBuf,
    /// The new log.
    pub target: PathBuf,
    /// Whether this was a dry run (nothing written).
    pub dry_run: bool,
    /// The segment format version of the new log: that of the old one.
    pub format_version: u16,
    /// The kept records, one range per segment of the new log, in order.
    pub kept: Vec<KeptRange>,
    /// Records kept in all.
    pub records_kept: u64,
    /// Every damaged range found, in log order; empty for an intact log.
    pub damage: Vec<Damage>,
    /// The gaps the new log declares: every jump in its sequence, including gaps the old log
    /// already declared.
    pub gaps: Vec<Gap>,
    /// The last kept record.
    pub last_seq: Option<Seq>,
    /// Whether the kept records are events of a store (judged by the first one).
    pub store: bool,
    /// The harness recovery run on the new store; `None` in a dry run and for a log whose
    /// records are not events.
    pub recovery: Option<crate::harness::HarnessRecoveryReport>,
    /// The valid snapshots of the old store copied (or, in a dry run, to be copied) into the
    /// new one, by the seq they cover: those covering at most the new log's last seq. They
    /// keep a store whose early segments were reclaimed openable.
    pub snapshots: Vec<Seq>,
    /// The torn tails an open of the old log kept aside before cutting them
    /// (`format-spec/mark.md`, "Kept tails"), and whether their frames were read back.
    pub kept_tails: Vec<KeptTailUse>,
}

/// What [`salvage`] did with one kept tail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptTailUse {
    /// The kept file.
    pub path: PathBuf,
    /// Whether its bytes were put back where they were cut, so that the valid frames after
    /// the hole are kept like any others (the lost ones are declared as a gap).
    pub restored: bool,
    /// Why not, when it was not.
    pub note: Option<String>,
}

impl SalvageReport {
    /// Sequence numbers known to be lost: the sum of the [`Lost::Seqs`] ranges.
    #[must_use]
    pub fn seqs_lost(&self) -> u64 {
        self.damage
            .iter()
            .map(|d| match d.lost {
                Lost::Seqs { first, last } => last.0 - first.0 + 1,
                Lost::Nothing | Lost::From(_) | Lost::Unknown => 0,
            })
            .sum()
    }
}

/// Records kept from one stretch of valid frames: one segment of the new log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptRange {
    /// The old segment file they come from.
    pub source: PathBuf,
    /// The segment of the new log that holds them.
    pub segment: SegmentId,
    /// The first seq of that segment.
    pub first_seq: Seq,
    /// The last kept record (`None`: an empty segment, kept to continue the sequence).
    pub last_seq: Option<Seq>,
    /// Records kept.
    pub records: u64,
}

/// One damaged range of the old log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The damaged file.
    pub path: PathBuf,
    /// Its segment id, when its header could be read.
    pub segment: Option<SegmentId>,
    /// Where the damage starts.
    pub offset: u64,
    /// Bytes from there to the next valid frame, or to the last non-zero byte of the file
    /// (0 for records missing where the file holds only zeros).
    pub bytes: u64,
    /// What is wrong at `offset`.
    pub reason: CorruptionReason,
    /// The sequence numbers lost with it.
    pub lost: Lost,
}

/// The sequence numbers lost with one damaged range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// None: the range held no record the sequence misses.
    Nothing,
    /// Exactly these, inclusive: the records on both sides are known.
    Seqs {
        /// The first lost seq.
        first: Seq,
        /// The last lost seq.
        last: Seq,
    },
    /// Every record from this seq on, if there were any: the damage is at the end of the log,
    /// so nothing after it tells how many records it held.
    From(Seq),
    /// Not known: a `.seg` file whose name is not a segment name.
    Unknown,
}

/// Copies every intact record of the log in `dir` into a new log in `target` (a directory that
/// does not exist or is empty, outside `dir`) with the same seqs, declares the lost ranges,
/// and, when the records are events, opens the new store and runs [`Store::recover`] on it.
/// Nothing is ever written to `dir`; with [`SalvageOptions::dry_run`] nothing is written at
/// all.
///
/// # Errors
/// [`ErrorKind::NotALog`] for a `dir` without segments, [`ErrorKind::RewritePending`] for a
/// log in the middle of a migration, [`ErrorKind::UnsupportedVersion`] for a segment of a
/// newer format, [`ErrorKind::TargetNotEmpty`] and [`ErrorKind::TargetInsideSource`] for a bad
/// `target` (nothing written), I/O errors, and the errors of opening and recovering the new
/// store (its files are then written).
pub fn salvage(
    dir: impl AsRef<Path>,
    target: impl AsRef<Path>,
    options: SalvageOptions,
) -> Result<SalvageReport> {
    let (dir, target) = (dir.as_ref(), target.as_ref());
    let fs = Arc::clone(&options.store.log.fs);
    check_target(&*fs, dir, target)?;
    if crate::engine::rewrite::pending(&*fs, dir)?.is_some() {
        return Err(ErrorKind::RewritePending { dir: dir.to_path_buf() }.into());
    }
    let plan = scan(&*fs, dir)?;
    let kept_tails = plan.kept_tails.clone();
    let kept = plan.kept_ranges();
    let store = plan.first_record_is_event();
    let mut report = SalvageReport {
        source: dir.to_path_buf(),
        target: target.to_path_buf(),
        dry_run: options.dry_run,
        format_version: plan.format_version,
        records_kept: kept.iter().map(|k| k.records).sum(),
        last_seq: kept.iter().filter_map(|k| k.last_seq).next_back(),
        kept,
        gaps: plan.gaps.ranges().to_vec(),
        damage: plan.damage.clone(),
        store,
        recovery: None,
        snapshots: Vec::new(),
        kept_tails,
    };
    let through = report.last_seq.map_or(0, |s| s.0);
    let snapshots: Vec<SnapshotFile> = if store {
        snapshot::list(&*fs, dir)?
            .into_iter()
            .filter(|f| f.covered_seq.0 <= through && snapshot::load(&*fs, f).is_ok())
            .collect()
    } else {
        Vec::new()
    };
    report.snapshots = snapshots.iter().map(|f| f.covered_seq).collect();
    if options.dry_run {
        return Ok(report);
    }
    let created = matches!(fs.list_dir(target), Err(e) if e.kind() == io::ErrorKind::NotFound);
    // Anything lost may have been the task's contract, its risk or a call's dispatch: every
    // task of a salvaged store with a gap asks for a confirmation before a side effect.
    let after_loss = !report.damage.is_empty() || !report.gaps.is_empty();
    let written = plan.write(&*fs, target).and_then(|()| {
        // The new log was written whole and synced: its mark vouches for every byte.
        crate::engine::mark::write_clean(&*fs, target)?;
        let copied = copy_snapshots(&*fs, target, &snapshots)?;
        report.snapshots = copied;
        if !store {
            return Ok(None);
        }
        let store = Store::open(target, options.store)?;
        let recovery = store.recover_after(after_loss)?;
        store.close()?;
        Ok(Some(recovery))
    });
    match written {
        Ok(recovery) => {
            report.recovery = recovery;
            Ok(report)
        }
        Err(source) => {
            discard(&*fs, target, created);
            Err(ErrorKind::SalvageFailed { target: target.to_path_buf(), source: Box::new(source) }
                .into())
        }
    }
}

/// Copies the snapshot `files` (each checked valid) into `target/snapshots/`, byte for byte,
/// each through a synced temporary file renamed into place, then syncs the directory; returns
/// the covered seqs of those copied. A snapshot removed since it was listed (a live writer
/// pruned it: salvage takes no lock) is left out, not an error.
fn copy_snapshots(fs: &dyn Fs, target: &Path, files: &[SnapshotFile]) -> Result<Vec<Seq>> {
    let mut copied = Vec::with_capacity(files.len());
    if files.is_empty() {
        return Ok(copied);
    }
    let dir = snapshot::snapshot_dir(target);
    fs.create_dir_all(&dir).map_err(|e| Error::io("create directory", &dir, e))?;
    fs.sync_dir(target).map_err(|e| Error::io("fsync directory", target, e))?;
    for file in files {
        let bytes = match fs.map(&file.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("read", &file.path, e)),
        };
        let name = snapshot::file_name(file.covered_seq);
        let (temp, path) = (dir.join(format!("{name}.tmp")), dir.join(name));
        let copy =
            fs.open(&temp, OpenMode::CreateNew).map_err(|e| Error::io("create", &temp, e))?;
        copy.write_all_at(&bytes, 0).map_err(|e| Error::io("write", &temp, e))?;
        copy.sync_data().map_err(|e| Error::io("fdatasync", &temp, e))?;
        fs.rename(&temp, &path).map_err(|e| Error::io("rename", &temp, e))?;
        copied.push(file.covered_seq);
    }
    fs.sync_dir(&dir).map_err(|e| Error::io("fsync directory", &dir, e))?;
    Ok(copied)
}

/// Removes everything under `target` (which was empty or missing before the salvage), and
/// `target` itself when the salvage created it. Best effort: the salvage already failed.
pub(crate) fn discard(fs: &dyn Fs, target: &Path, created: bool) {
    if created {
        crate::fs::remove_tree(fs, target);
    } else {
        for name in fs.list_dir(target).unwrap_or_default() {
            let path = target.join(name);
            if fs.list_dir(&path).is_ok() {
                crate::fs::remove_tree(fs, &path);
            } else {
                let _ = fs.remove_file(&path);
            }
        }
    }
}

/// Refuses a target inside the source, or one that holds anything; writes nothing.
fn check_target(fs: &dyn Fs, dir: &Path, target: &Path) -> Result<()> {
    let (source_abs, target_abs) = (absolute(dir), absolute(target));
    let real = |p: &Path| std::fs::canonicalize(p).ok();
    let inside = target_abs.starts_with(&source_abs)
        || real(dir).zip(nearest_existing(target)).is_some_and(|(s, t)| t.starts_with(s));
    if inside {
        return Err(ErrorKind::TargetInsideSource {
            log_dir: dir.to_path_buf(),
            target: target.to_path_buf(),
        }
        .into());
    }
    match fs.list_dir(target) {
        Ok(names) if names.is_empty() => Ok(()),
        Ok(_) => Err(ErrorKind::TargetNotEmpty { dir: target.to_path_buf() }.into()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("list directory", target, e)),
    }
}

/// `path` made absolute and cleaned of `.` and `..` without touching the file system.
fn absolute(path: &Path) -> PathBuf {
    let joined = std::env::current_dir().map_or_else(|_| path.to_path_buf(), |cwd| cwd.join(path));
    let mut out = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The canonical form of `path`'s nearest existing ancestor (itself included), with the
/// missing rest appended: where `path` will really be once created.
fn nearest_existing(path: &Path) -> Option<PathBuf> {
    let path = absolute(path);
    let mut rest = Vec::new();
    let mut at = path.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            return Some(rest.iter().rev().fold(real, |acc: PathBuf, p| acc.join(p)));
        }
        rest.push(at.file_name()?.to_os_string());
        at = at.parent()?;
    }
}

/// One segment of the new log: a header and a stretch of the old log's frames.
#[derive(Debug)]
struct Run {
    source: PathBuf,
    map: Bytes,
    start: usize,
    end: usize,
    first: u64,
    next: u64,
    salt: u64,
    capacity: u64,
}

impl Run {
    fn records(&self) -> u64 {
        self.next - self.first
    }
}

/// What the scan of the old log decided.
#[derive(Debug)]
struct Plan {
    format_version: u16,
    runs: Vec<Run>,
    damage: Vec<Damage>,
    gaps: Gaps,
    kept_tails: Vec<KeptTailUse>,
}

impl Plan {
    fn kept_ranges(&self) -> Vec<KeptRange> {
        self.runs
            .iter()
            .enumerate()
            .map(|(i, run)| KeptRange {
                source: run.source.clone(),
                segment: SegmentId(i as u64 + 1),
                first_seq: Seq(run.first),
                last_seq: (run.next > run.first).then(|| Seq(run.next - 1)),
                records: run.records(),
            })
            .collect()
    }

    fn first_record_is_event(&self) -> bool {
        let Some(run) = self.runs.iter().find(|r| r.records() > 0) else { return false };
        let salt_crc = frame::salt_crc(run.salt);
        match frame::decode(&run.map[..run.end], run.start, salt_crc) {
            Decoded::Frame(f) => {
                f.records().next().is_some_and(|r| codec::peek(Seq(run.first), r).is_ok())
            }
            Decoded::End | Decoded::Invalid(_) => false,
        }
    }

    /// Writes the new log: each segment synced, then the gap file, then the directory.
    fn write(&self, fs: &dyn Fs, target: &Path) -> Result<()> {
        if matches!(fs.list_dir(target), Err(e) if e.kind() == io::ErrorKind::NotFound) {
            fs.create_dir_all(target).map_err(|e| Error::io("create directory", target, e))?;
            if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs.sync_dir(parent).map_err(|e| Error::io("fsync directory", parent, e))?;
            }
        }
        for (i, run) in self.runs.iter().enumerate() {
            let header = SegmentHeader {
                format_version: self.format_version,
                id: SegmentId(i as u64 + 1),
                first_seq: Seq(run.first),
                salt: run.salt,
            };
            let path = target.join(segment::file_name(header.first_seq));
            let file =
                fs.open(&path, OpenMode::CreateNew).map_err(|e| Error::io("create", &path, e))?;
            let mut bytes = header.encode().to_vec();
            bytes.extend_from_slice(&run.map[run.start..run.end]);
            file.write_all_at(&bytes, 0).map_err(|e| Error::io("write", &path, e))?;
            let used = bytes.len() as u64;
            segments::write_zeros(&*file, &path, used, run.capacity.saturating_sub(used))?;
            file.sync_data().map_err(|e| Error::io("fdatasync", &path, e))?;
        }
        if !self.gaps.is_empty() {
            gaps::write(fs, target, &self.gaps)?;
        }
        fs.sync_dir(target).map_err(|e| Error::io("fsync directory", target, e))
    }
}

/// Where the sequential scan of one stretch of frames stopped.
enum Stop {
    /// Zeros or the end of the file.
    End,
    /// Something that is not the next valid frame, and why.
    Bad(CorruptionReason),
}

/// Scans every segment file of `dir` and decides what is kept and what is lost.
fn scan(fs: &dyn Fs, dir: &Path) -> Result<Plan> {
    let names = match fs.list_dir(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(ErrorKind::NotALog { dir: dir.to_path_buf() }.into());
        }
        Err(e) => return Err(Error::io("list directory", dir, e)),
    };
    let mut damage = Vec::new();
    let mut files: Vec<(u64, PathBuf)> = Vec::new();
    for name in names {
        let path = dir.join(&name);
        match segment::parse_file_name(&name) {
            Some(seq) => files.push((seq.0, path)),
            None if name.ends_with(segment::SEGMENT_SUFFIX) => damage.push(Damage {
                segment: None,
                offset: 0,
                bytes: fs.map(&path).map_or(0, |m| m.len() as u64),
                reason: CorruptionReason::NameMismatch,
                lost: Lost::Unknown,
                path,
            }),
            None => {}
        }
    }
    if files.is_empty() {
        return Err(ErrorKind::NotALog { dir: dir.to_path_buf() }.into());
    }
    files.sort();
    let old_gaps = gaps::read(fs, dir)?;
    let mut scanner = Scanner {
        runs: Vec::new(),
        damage,
        cursor: None,
        format_version: None,
        old_gaps: &old_gaps,
        last_end: None,
    };
    let mut kept_tails: Vec<KeptTailUse> = Vec::new();
    let kept_paths = crate::engine::torn::list(fs, dir)?;
    for (i, (name_seq, path)) in files.iter().enumerate() {
        let bound = files.get(i + 1).map(|(seq, _)| *seq);
        let mut map = fs.map(path).map_err(|e| Error::io("map", path, e))?;
        if bound.is_none() {
            map = put_back_kept(fs, path, map, &kept_paths, &mut kept_tails)?;
        }
        scanner.segment(*name_seq, path, map, bound)?;
    }
    // The log mark vouches for records the segments may no longer hold (a truncation, a lost
    // page, a deleted last segment): they are declared lost, and the new log continues after
    // them, so that no seq it recorded is given again (`format-spec/mark.md`).
    if let Ok(state) = crate::engine::mark::read(fs, dir)
        && let Some(mark) = state.mark()
    {
        let cursor = scanner.cursor.unwrap_or(1);
        if mark.durable_seq >= cursor {
            let (path, segment, offset) = scanner.last_end.clone().unwrap_or_else(|| {
                let (_, path) = files.last().expect("at least one segment file");
                (path.clone(), None, 0)
            });
            let reason = CorruptionReason::BelowDurableMark {
                marked: mark.durable_seq,
                found: cursor - 1,
                fault: None,
            };
            let lost = lost(cursor, mark.durable_seq + 1);
            scanner.damage.push(Damage { path, segment, offset, bytes: 0, reason, lost });
            scanner.cursor = Some(mark.durable_seq + 1);
        }
    }
    let mut plan = scanner.finish(fs, &files)?;
    plan.kept_tails = kept_tails;
    Ok(plan)
}

/// Puts the newest kept tail of the active segment `path` back where an open cut it, when
/// that place still holds only zeros (nothing was written there since): the scan then keeps
/// the valid frames after the hole like any others. Every kept tail gets a [`KeptTailUse`].
fn put_back_kept(
    fs: &dyn Fs,
    path: &Path,
    map: Bytes,
    kept: &[PathBuf],
    uses: &mut Vec<KeptTailUse>,
) -> Result<Bytes> {
    let header = segment::decode_header(&map, path).ok();
    let mut out = map;
    let mut restored = false;
    for kept_path in kept.iter().rev() {
        let bytes = fs.map(kept_path).map_err(|e| Error::io("read", kept_path, e))?;
        let verdict = match crate::engine::torn::decode(&bytes, kept_path) {
            Err(e) => Err(e.to_string()),
            Ok(tail) if Some(tail.header) != header => {
                Err("it was cut from another segment than the active one".to_owned())
            }
            Ok(_) if restored => Err("a newer kept tail of this segment was put back".to_owned()),
            Ok(tail) => {
                let start = usize::try_from(tail.offset).unwrap_or(usize::MAX);
                let end = start.saturating_add(tail.bytes.len());
                match out.get(start..end) {
                    Some(region) if last_nonzero(region).is_none() => {
                        let mut copy = out.to_vec();
                        copy[start..end].copy_from_slice(tail.bytes);
                        out = Bytes::from(copy);
                        restored = true;
                        Ok(())
                    }
                    _ => Err("records were written where it was cut: its seqs were given \
                              again, so its frames cannot be put back"
                        .to_owned()),
                }
            }
        };
        uses.push(KeptTailUse {
            path: kept_path.clone(),
            restored: verdict.is_ok(),
            note: verdict.err(),
        });
    }
    uses.reverse();
    Ok(out)
}

/// The state of the scan across segments.
struct Scanner<'a> {
    runs: Vec<Run>,
    damage: Vec<Damage>,
    /// The next seq neither kept nor reported lost.
    cursor: Option<u64>,
    format_version: Option<u16>,
    old_gaps: &'a Gaps,
    /// The path, id and end offset of the last segment scanned, to name missing records.
    last_end: Option<(PathBuf, Option<SegmentId>, u64)>,
}

impl Scanner<'_> {
    /// Scans the segment file `path` named for `name_seq`; `bound` is the next file's seq.
    fn segment(
        &mut self,
        name_seq: u64,
        path: &Path,
        map: Bytes,
        bound: Option<u64>,
    ) -> Result<()> {
        let cursor =
            *self.cursor.get_or_insert(self.old_gaps.leading(name_seq).map_or(name_seq, |s| s.0));
        if cursor < name_seq {
            if !self.old_gaps.declares(cursor, name_seq) {
                let (at, segment, offset) = self.last_end.clone().unwrap_or((path.into(), None, 0));
                self.damage.push(Damage {
                    path: at,
                    segment,
                    offset,
                    bytes: 0,
                    reason: CorruptionReason::SequenceGap { expected: cursor, found: name_seq },
                    lost: lost(cursor, name_seq),
                });
            }
            self.cursor = Some(name_seq);
        }
        let header = match segment::decode_header(&map, path) {
            Ok(h) if h.first_seq.0 != name_seq => Err(CorruptionReason::NameMismatch),
            Ok(h) if self.format_version.is_some_and(|v| v != h.format_version) => {
                Err(CorruptionReason::MixedFormatVersions {
                    expected: self.format_version.unwrap_or(h.format_version),
                    found: h.format_version,
                })
            }
            Ok(h) => Ok(h),
            Err(e) => match e.into_kind() {
                ErrorKind::Corruption { reason, .. } => Err(reason),
                other => return Err(other.into()),
            },
        };
        let header = match header {
            Ok(header) => header,
            Err(reason) => {
                let end = bound.unwrap_or(name_seq);
                self.damage.push(Damage {
                    path: path.to_path_buf(),
                    segment: None,
                    offset: 0,
                    bytes: map.len() as u64,
                    reason,
                    lost: if bound.is_some() {
                        lost(name_seq, end)
                    } else {
                        Lost::From(Seq(name_seq))
                    },
                });
                self.cursor = Some(end);
                self.last_end = Some((path.to_path_buf(), None, map.len() as u64));
                return Ok(());
            }
        };
        self.format_version = Some(header.format_version);
        self.frames(path, &map, &header, bound);
        Ok(())
    }

    /// Keeps every stretch of valid frames of one segment and reports what lies between.
    fn frames(&mut self, path: &Path, map: &Bytes, header: &SegmentHeader, bound: Option<u64>) {
        let salt_crc = header.salt_crc();
        let capacity = (map.len() as u64).max(SEGMENT_BYTES_MIN);
        let mut offset = SEGMENT_HEADER_BYTES;
        let mut expected = header.first_seq.0;
        loop {
            let start = offset;
            let first = expected;
            let stop = loop {
                match frame::decode(map, offset, salt_crc) {
                    Decoded::End => break Stop::End,
                    Decoded::Invalid(fault) => break Stop::Bad(CorruptionReason::BadFrame(fault)),
                    Decoded::Frame(f) if f.seq != expected => {
                        break Stop::Bad(CorruptionReason::SequenceMismatch {
                            expected,
                            found: f.seq,
                        });
                    }
                    Decoded::Frame(f) if bound.is_some_and(|b| f.end_seq() > b) => {
                        break Stop::Bad(CorruptionReason::SegmentOverlap {
                            next_first_seq: bound.unwrap_or(0),
                            found: f.seq,
                        });
                    }
                    Decoded::Frame(f) => {
                        offset += f.frame_bytes;
                        expected = f.end_seq();
                    }
                }
            };
            // An empty stretch is kept only as the last segment (see `finish`).
            if expected > first || (bound.is_none() && start == SEGMENT_HEADER_BYTES) {
                self.runs.push(Run {
                    source: path.to_path_buf(),
                    map: map.clone(),
                    start,
                    end: offset,
                    first,
                    next: expected,
                    salt: header.salt,
                    capacity,
                });
            }
            self.cursor = Some(expected);
            self.last_end = Some((path.to_path_buf(), Some(header.id), offset as u64));
            let resync = resync(map, offset, salt_crc, expected, bound);
            let reason = match (stop, resync) {
                (Stop::End, None) => {
                    // Zeros to the end, or bytes after them that hold no frame of this log: a
                    // sealed segment ends here (verify agrees); the last one has a torn tail.
                    let rest = map.get(offset..).unwrap_or_default();
                    match last_nonzero(rest) {
                        Some(last) if bound.is_none() => {
                            self.report(
                                path,
                                header,
                                offset,
                                last as u64 + 1,
                                Self::tail(expected),
                            );
                        }
                        _ => {}
                    }
                    return;
                }
                (Stop::End, Some((_, found))) => {
                    CorruptionReason::SequenceMismatch { expected, found }
                }
                (Stop::Bad(reason), _) => reason,
            };
            let Some((next_offset, found)) = resync else {
                let rest = map.get(offset..).unwrap_or_default();
                let bytes = last_nonzero(rest).map_or(FRAME_ALIGN_BYTES as u64, |l| l as u64 + 1);
                let lost = match bound {
                    Some(b) => lost(expected, b),
                    None => Self::tail(expected),
                };
                self.damage.push(Damage {
                    path: path.to_path_buf(),
                    segment: Some(header.id),
                    offset: offset as u64,
                    bytes,
                    reason,
                    lost,
                });
                if let Some(b) = bound {
                    self.cursor = Some(b);
                }
                return;
            };
            self.damage.push(Damage {
                path: path.to_path_buf(),
                segment: Some(header.id),
                offset: offset as u64,
                bytes: (next_offset - offset) as u64,
                reason,
                lost: lost(expected, found),
            });
            offset = next_offset;
            expected = found;
        }
    }

    fn tail(expected: u64) -> Lost {
        Lost::From(Seq(expected))
    }

    fn report(
        &mut self,
        path: &Path,
        header: &SegmentHeader,
        offset: usize,
        bytes: u64,
        lost: Lost,
    ) {
        let fault = FrameFault::Truncated;
        self.damage.push(Damage {
            path: path.to_path_buf(),
            segment: Some(header.id),
            offset: offset as u64,
            bytes,
            reason: CorruptionReason::BadFrame(fault),
            lost,
        });
    }

    /// Ends the scan: the new log continues at the first seq not accounted for, and every
    /// jump between its segments is declared.
    fn finish(mut self, fs: &dyn Fs, files: &[(u64, PathBuf)]) -> Result<Plan> {
        // An empty segment between two others would put two declared gaps side by side.
        let count = self.runs.len();
        let mut index = 0;
        self.runs.retain(|run| {
            index += 1;
            run.records() > 0 || index == count
        });
        let cursor = self.cursor.unwrap_or(1);
        let last_next = self.runs.last().map(|r| r.next);
        if last_next.is_none_or(|next| next < cursor) {
            // Continue past the known lost seqs, so that a new record never takes one of them.
            let (_, path) = files.last().expect("at least one segment file");
            let capacity = fs.map(path).map_or(0, |m| m.len() as u64).max(SEGMENT_BYTES_MIN);
            self.runs.push(Run {
                source: path.clone(),
                map: Bytes::new(),
                start: 0,
                end: 0,
                first: cursor,
                next: cursor,
                salt: fs.random_u64(),
                capacity,
            });
        }
        let start =
            files.first().map_or(1, |(seq, _)| self.old_gaps.leading(*seq).map_or(*seq, |s| s.0));
        let mut ranges = Vec::new();
        let mut previous = start;
        for run in &self.runs {
            if run.first > previous {
                ranges.push(Gap { first: Seq(previous), end: Seq(run.first) });
            }
            previous = run.next;
        }
        Ok(Plan {
            format_version: self.format_version.unwrap_or(FORMAT_VERSION),
            runs: self.runs,
            damage: self.damage,
            gaps: Gaps::new(ranges)?,
            kept_tails: Vec::new(),
        })
    }
}

/// The lost seqs `[from, to)`.
fn lost(from: u64, to: u64) -> Lost {
    if to > from { Lost::Seqs { first: Seq(from), last: Seq(to - 1) } } else { Lost::Nothing }
}

/// The first valid frame after `offset` that continues the sequence at `expected` or later
/// (and ends before `bound`): its offset and seq.
fn resync(
    map: &[u8],
    offset: usize,
    salt_crc: u32,
    expected: u64,
    bound: Option<u64>,
) -> Option<(usize, u64)> {
    let rest = map.get(offset..)?;
    let last = offset + last_nonzero(rest)?;
    let mut at = offset + FRAME_ALIGN_BYTES;
    while at <= last {
        if let Decoded::Frame(f) = frame::decode(map, at, salt_crc)
            && f.seq >= expected
            && bound.is_none_or(|b| f.end_seq() <= b)
        {
            return Some((at, f.seq));
        }
        at += FRAME_ALIGN_BYTES;
    }
    None
}
