//! The log mark `MARK` (`format-spec/mark.md`): a small file beside the segments that records
//! which segments the log has and a lower bound of its durable end, so that damage at the end
//! of the log, where no later frame can witness it, is told apart from a torn write.
//!
//! The file holds two slots; each update writes the slot the newest one is not in and syncs it,
//! so a torn update leaves the previous mark readable. The file itself is created whole (temp
//! file, sync, rename, directory sync), so a crash never leaves a `MARK` without a valid slot.
//!
//! [`check`] is the one classification every door uses: a writer open, a read-only open,
//! `verify`, `salvage` and `restore` all call it with what they found on disk.
//!
//! Invariants: a mark's `durable_seq` is at most the last record the writer had synced when it
//! wrote the mark; its `last_segment` is the active segment at that moment, and no frame is
//! written into a new segment before a mark naming it is durable.

use std::io;
use std::path::{Path, PathBuf};

use crate::engine::recovery::{TailAnalysis, TailState};
use crate::engine::segment;
use crate::engine::segments::SegmentMeta;
use crate::error::{CorruptionReason, Error, ErrorKind, Result};
use crate::fs::{Fs, FsFile, OpenMode};
use crate::limits::SEGMENT_HEADER_BYTES;
use crate::types::{SegmentId, Seq};

/// Name of the mark file in a log directory.
pub const MARK_FILE_NAME: &str = "MARK";
/// Name the mark file is created under before its rename.
pub const MARK_TMP_FILE_NAME: &str = "MARK.tmp";
/// Magic bytes at offset 0 of each slot.
pub const MARK_MAGIC: [u8; 8] = *b"FACTLMRK";
/// The mark version this build reads and writes.
pub const MARK_VERSION: u16 = 1;
/// Bytes of one slot.
pub const MARK_SLOT_BYTES: usize = 128;
/// Offset of slot 1 (slot 0 is at 0): the slots sit in different 512-byte sectors.
pub const MARK_SLOT_STRIDE: u64 = 512;
/// Bytes of the whole file.
pub const MARK_FILE_BYTES: u64 = 2 * MARK_SLOT_STRIDE;

const FLAG_CLEAN: u16 = 1;
const CRC_AT: usize = MARK_SLOT_BYTES - 4;

/// One mark: what the writer knew to be on stable storage when it wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// Counts the updates; the valid slot with the higher generation is the mark.
    pub generation: u64,
    /// Written by a clean close: every byte of the log is accounted for, and the log ends
    /// exactly at `durable_seq` and `durable_offset`.
    pub clean: bool,
    /// The first segment the log holds.
    pub first_segment: SegmentId,
    /// That segment's first sequence number.
    pub first_seq: Seq,
    /// The active segment when the mark was written.
    pub last_segment: SegmentId,
    /// Its first sequence number.
    pub last_first_seq: Seq,
    /// Its salt: ties the mark to that very file.
    pub last_salt: u64,
    /// Every record up to this seq was on stable storage (0: none).
    pub durable_seq: u64,
    /// The offset in the last segment where the frames through `durable_seq` end (the header's
    /// end when none of them is in it).
    pub durable_offset: u64,
}

impl Mark {
    /// The mark of a log whose segments are `segments` and whose active segment's valid frames
    /// end at `end_offset` before seq `next_seq`, all of it durable.
    #[must_use]
    pub fn at(
        generation: u64,
        clean: bool,
        segments: &[SegmentMeta],
        next_seq: u64,
        end_offset: u64,
    ) -> Mark {
        let first = &segments.first().expect("a log has a segment").header;
        let last = &segments.last().expect("a log has a segment").header;
        Mark {
            generation,
            clean,
            first_segment: first.id,
            first_seq: first.first_seq,
            last_segment: last.id,
            last_first_seq: last.first_seq,
            last_salt: last.salt,
            durable_seq: next_seq - 1,
            durable_offset: end_offset,
        }
    }

    /// What the mark vouches for, as JSON: the one shape of `verify --json`'s `mark` and of
    /// the open report's (`RecoveryReport::to_json`).
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "generation": self.generation,
            "clean": self.clean,
            "first_segment": self.first_segment.0,
            "last_segment": self.last_segment.0,
            "durable_seq": self.durable_seq,
            "durable_offset": self.durable_offset,
        })
    }

    /// The 128 bytes of one slot (`format-spec/mark.md`, "Slot").
    #[must_use]
    pub fn encode(&self) -> [u8; MARK_SLOT_BYTES] {
        let mut out = [0u8; MARK_SLOT_BYTES];
        out[0..8].copy_from_slice(&MARK_MAGIC);
        out[8..10].copy_from_slice(&MARK_VERSION.to_le_bytes());
        let flags = if self.clean { FLAG_CLEAN } else { 0 };
        out[10..12].copy_from_slice(&flags.to_le_bytes());
        let fields = [
            self.generation,
            self.first_segment.0,
            self.first_seq.0,
            self.last_segment.0,
            self.last_first_seq.0,
            self.last_salt,
            self.durable_seq,
            self.durable_offset,
        ];
        for (i, value) in fields.iter().enumerate() {
            out[16 + 8 * i..24 + 8 * i].copy_from_slice(&value.to_le_bytes());
        }
        let crc = crc32fast::hash(&out[..CRC_AT]);
        out[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes one slot. `Ok(None)` for a slot that holds no mark (zeros, a torn or damaged
    /// update: the checks of `format-spec/mark.md`, "Reading"); a whole slot of another
    /// version is refused.
    ///
    /// # Errors
    /// [`ErrorKind::UnsupportedVersion`] for a slot with the magic and another version.
    pub fn decode(bytes: &[u8], path: &Path) -> Result<Option<Mark>> {
        let Some(slot) = bytes.get(..MARK_SLOT_BYTES) else { return Ok(None) };
        if slot[0..8] != MARK_MAGIC {
            return Ok(None);
        }
        let u16_at = |at: usize| u16::from_le_bytes([slot[at], slot[at + 1]]);
        let u64_at = |at: usize| {
            u64::from_le_bytes(slot[at..at + 8].try_into().expect("eight bytes of a slot"))
        };
        // The checksum first: its place and range are frozen for every version, so a flipped
        // bit in the version field reads as a damaged slot, never as a newer build's mark.
        let crc = u32::from_le_bytes(slot[CRC_AT..].try_into().expect("four bytes"));
        if crc != crc32fast::hash(&slot[..CRC_AT]) {
            return Ok(None);
        }
        let version = u16_at(8);
        if version != MARK_VERSION {
            return Err(ErrorKind::UnsupportedVersion {
                path: path.to_path_buf(),
                found: version,
                supported: MARK_VERSION,
            }
            .into());
        }
        let flags = u16_at(10);
        let reserved_zero = slot[12..16] == [0; 4] && slot[80..CRC_AT].iter().all(|&b| b == 0);
        let mark = Mark {
            generation: u64_at(16),
            clean: flags & FLAG_CLEAN != 0,
            first_segment: SegmentId(u64_at(24)),
            first_seq: Seq(u64_at(32)),
            last_segment: SegmentId(u64_at(40)),
            last_first_seq: Seq(u64_at(48)),
            last_salt: u64_at(56),
            durable_seq: u64_at(64),
            durable_offset: u64_at(72),
        };
        // A slot that passed its checksum but breaks a field rule was written by something
        // else than this format's writer: it is damage, not a torn update.
        let sane = flags & !FLAG_CLEAN == 0
            && reserved_zero
            && mark.first_segment.0 >= 1
            && mark.first_seq.0 >= 1
            && mark.last_segment >= mark.first_segment
            && mark.last_first_seq >= mark.first_seq
            && mark.durable_seq.checked_add(1).is_some_and(|n| n >= mark.last_first_seq.0)
            && mark.durable_offset >= SEGMENT_HEADER_BYTES as u64;
        if !sane {
            return Err(Error::corruption(None, path, 0, CorruptionReason::BadMark("field rule")));
        }
        Ok(Some(mark))
    }
}

/// What a directory says about its mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkState {
    /// No `MARK`: a log written before marks existed (or by a writer that never opened it
    /// since); its tail is classified by the rule of `format-spec/recovery.md` alone.
    Absent,
    /// The newest valid slot.
    Found(Mark),
    /// The only valid slot, beside one that holds damaged bytes (neither zeros nor a mark):
    /// the newest update may be the damaged one, so a disagreement with the segments is laid
    /// at `MARK`'s door ([`check_state`]).
    FoundBesideDamagedSlot(Mark),
}

impl MarkState {
    /// The mark, if there is one.
    #[must_use]
    pub fn mark(&self) -> Option<&Mark> {
        match self {
            MarkState::Absent => None,
            MarkState::Found(mark) | MarkState::FoundBesideDamagedSlot(mark) => Some(mark),
        }
    }
}

/// Reads the mark of `dir`.
///
/// # Errors
/// [`ErrorKind::Corruption`] with reason [`CorruptionReason::BadMark`] when `MARK` exists and
/// neither slot holds a valid mark; [`ErrorKind::UnsupportedVersion`] for a newer mark; I/O
/// errors.
pub fn read(fs: &dyn Fs, dir: &Path) -> Result<MarkState> {
    let path = dir.join(MARK_FILE_NAME);
    let file = match fs.open(&path, OpenMode::Read) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(MarkState::Absent),
        Err(e) => return Err(Error::io("open", &path, e)),
    };
    let len = file.len().map_err(|e| Error::io("stat", &path, e))?;
    let mut bytes = vec![0u8; usize::try_from(len.min(MARK_FILE_BYTES)).unwrap_or(0)];
    file.read_exact_at(&mut bytes, 0).map_err(|e| Error::io("read", &path, e))?;
    let slot = |at: u64| bytes.get(at as usize..).unwrap_or_default();
    let a = Mark::decode(slot(0), &path)?;
    let b = Mark::decode(slot(MARK_SLOT_STRIDE), &path)?;
    // `MARK` is created whole: a shorter (or longer) file lost or gained bytes, and the slot
    // it cut may have been the newer one.
    let whole = len == MARK_FILE_BYTES;
    let holds_bytes = |at: u64| {
        let end = (at as usize + MARK_SLOT_BYTES).min(bytes.len());
        !whole || bytes.get(at as usize..end).is_some_and(|slot| slot.iter().any(|&b| b != 0))
    };
    if !whole {
        // `MARK` is created whole and never resized: no crash leaves it another length.
        let reason = CorruptionReason::BadMark("the file is not 1024 bytes long");
        return Err(Error::corruption(None, &path, 0, reason));
    }
    match (a, b) {
        (Some(a), Some(b)) => {
            let newest = if b.generation > a.generation { b } else { a };
            Ok(if whole {
                MarkState::Found(newest)
            } else {
                MarkState::FoundBesideDamagedSlot(newest)
            })
        }
        (Some(mark), None) if holds_bytes(MARK_SLOT_STRIDE) => {
            Ok(MarkState::FoundBesideDamagedSlot(mark))
        }
        (None, Some(mark)) if holds_bytes(0) => Ok(MarkState::FoundBesideDamagedSlot(mark)),
        (Some(mark), None) | (None, Some(mark)) => Ok(MarkState::Found(mark)),
        (None, None) => {
            Err(Error::corruption(None, &path, 0, CorruptionReason::BadMark("no valid slot")))
        }
    }
}

/// [`check`] against what [`read`] found (`Absent`: nothing to check). When the mark came from
/// beside a damaged slot and disagrees with the segments, the damaged slot is the likelier
/// culprit (its update may be the newest): the error names `MARK`.
///
/// # Errors
/// As [`check`], or a `Corruption` of `MARK` with reason [`CorruptionReason::BadMark`].
pub fn check_state(
    state: &MarkState,
    dir: &Path,
    segments: &[SegmentMeta],
    analysis: &TailAnalysis,
) -> Result<()> {
    match state {
        MarkState::Absent => Ok(()),
        MarkState::Found(mark) => check(mark, dir, segments, analysis),
        MarkState::FoundBesideDamagedSlot(mark) => {
            let bad = |what| Error::corruption(None, &dir.join(MARK_FILE_NAME), 0, what);
            check(mark, dir, segments, analysis).map_err(|_| {
                bad(CorruptionReason::BadMark(
                    "a slot is damaged, and the other one disagrees with the segments",
                ))
            })?;
            // A slot fits in one sector, which storage writes whole: a damaged slot is damage,
            // not a torn update, and what it vouched for is unknown, so a tail after the other
            // slot's bound cannot be judged a tear.
            if matches!(analysis.state, TailState::Torn { .. }) {
                return Err(bad(CorruptionReason::BadMark(
                    "a slot is damaged, so the tail after the other slot's bound cannot be told \
                     from a tear",
                )));
            }
            Ok(())
        }
    }
}

/// The open mark file of a writer.
pub(crate) struct MarkFile {
    path: PathBuf,
    file: Box<dyn FsFile>,
    /// The mark last written.
    pub(crate) current: Mark,
}

impl std::fmt::Debug for MarkFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MarkFile").field("current", &self.current).finish_non_exhaustive()
    }
}

impl MarkFile {
    /// Writes `mark` (generation one more than the current one) into its slot and syncs it.
    pub(crate) fn write(&mut self, mut mark: Mark) -> Result<()> {
        mark.generation = self.current.generation + 1;
        let at = (mark.generation % 2) * MARK_SLOT_STRIDE;
        self.file
            .write_all_at(&mark.encode(), at)
            .map_err(|e| Error::io("write", &self.path, e))?;
        self.file.sync_data().map_err(|e| Error::io("fdatasync", &self.path, e))?;
        self.current = mark;
        Ok(())
    }
}

/// The writer's side of the mark: the file (once there is one), the mark in force, and whether
/// that mark still waits to be written. An open does not write the mark: the one it found stays
/// a true lower bound (a cut only zeroes bytes after it), and a clean one stays true until the
/// first byte is written. So the open's mark is written before the writer's first write to a
/// segment ([`MarkKeeper::write_pending`]), and a store opened and closed without a write, or
/// refused by a layer above, keeps its `MARK` byte for byte (and a log without one stays so).
pub(crate) struct MarkKeeper {
    fs: std::sync::Arc<dyn Fs>,
    dir: PathBuf,
    file: Option<MarkFile>,
    /// The mark in force: the last one written, or the open's while it waits.
    current: Mark,
    pending: bool,
    written_at: std::time::Instant,
}

impl MarkKeeper {
    /// The keeper of a log whose directory held `found` and which open found at `open_mark`.
    pub(crate) fn new(
        fs: std::sync::Arc<dyn Fs>,
        dir: &Path,
        found: &MarkState,
        open_mark: Mark,
    ) -> Result<MarkKeeper> {
        let file = match found {
            MarkState::Absent => None,
            MarkState::Found(mark) | MarkState::FoundBesideDamagedSlot(mark) => {
                let path = dir.join(MARK_FILE_NAME);
                let file =
                    fs.open(&path, OpenMode::ReadWrite).map_err(|e| Error::io("open", &path, e))?;
                Some(MarkFile { path, file, current: *mark })
            }
        };
        Ok(MarkKeeper {
            fs,
            dir: dir.to_path_buf(),
            file,
            current: open_mark,
            pending: true,
            written_at: std::time::Instant::now(),
        })
    }

    /// The mark in force.
    pub(crate) fn current(&self) -> Mark {
        self.current
    }

    /// Whether the open's mark still waits to be written.
    pub(crate) fn is_pending(&self) -> bool {
        self.pending
    }

    /// Whether the log has a `MARK` file (a log written before marks has none until its first
    /// write).
    pub(crate) fn has_file(&self) -> bool {
        self.file.is_some()
    }

    /// Time since the last write.
    pub(crate) fn since_written(&self) -> std::time::Duration {
        self.written_at.elapsed()
    }

    /// Writes `next` as the mark (creating `MARK` whole if the log has none yet).
    pub(crate) fn write(&mut self, next: Mark) -> Result<()> {
        match &mut self.file {
            Some(file) => file.write(next)?,
            None => {
                let mut first = next;
                first.generation = 1;
                let file = create(&*self.fs, &self.dir, &first)?;
                let path = self.dir.join(MARK_FILE_NAME);
                self.file = Some(MarkFile { path, file, current: first });
            }
        }
        self.current = self.file.as_ref().map_or(next, |f| f.current);
        self.pending = false;
        self.written_at = std::time::Instant::now();
        Ok(())
    }

    /// Writes the open's mark if it still waits: called before the writer's first write.
    pub(crate) fn write_pending(&mut self) -> Result<()> {
        if self.pending { self.write(self.current) } else { Ok(()) }
    }
}

/// Creates `MARK` in `dir` holding `mark` in its slot: written and synced under a temporary
/// name, renamed, directory synced. Returns the open file.
fn create(fs: &dyn Fs, dir: &Path, mark: &Mark) -> Result<Box<dyn FsFile>> {
    let tmp = dir.join(MARK_TMP_FILE_NAME);
    match fs.remove_file(&tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            return Err(Error::io("remove", &tmp, e));
        }
        _ => {}
    }
    let written = (|| {
        let file = fs.open(&tmp, OpenMode::CreateNew).map_err(|e| Error::io("create", &tmp, e))?;
        let mut bytes = vec![0u8; MARK_FILE_BYTES as usize];
        let at = ((mark.generation % 2) * MARK_SLOT_STRIDE) as usize;
        bytes[at..at + MARK_SLOT_BYTES].copy_from_slice(&mark.encode());
        file.write_all_at(&bytes, 0).map_err(|e| Error::io("write", &tmp, e))?;
        file.sync_data().map_err(|e| Error::io("fdatasync", &tmp, e))?;
        Ok(file)
    })();
    let file = match written {
        Ok(file) => file,
        Err(error) => {
            // Nothing refers to the temporary file: a full disk must not leave it behind.
            let _ = fs.remove_file(&tmp);
            return Err(error);
        }
    };
    let path = dir.join(MARK_FILE_NAME);
    if let Err(e) = fs.rename(&tmp, &path) {
        let _ = fs.remove_file(&tmp);
        return Err(Error::io("rename", &path, e));
    }
    fs.sync_dir(dir).map_err(|e| Error::io("fsync directory", dir, e))?;
    Ok(file)
}

/// Writes a clean mark for the log in `dir`, which a tool (salvage, restore) wrote whole and
/// synced itself: its segments are listed and its active segment's end found, which must be
/// clean (only zeros after the last frame). Replaces any mark `dir` has.
///
/// # Errors
/// The corruption of a log that does not end cleanly; I/O errors.
pub fn write_clean(fs: &dyn Fs, dir: &Path) -> Result<()> {
    let listing = crate::engine::segments::list(fs, dir)?;
    let Some(active) = listing.segments.last() else {
        return Err(ErrorKind::NotALog { dir: dir.to_path_buf() }.into());
    };
    let map = fs.map(&active.path).map_err(|e| Error::io("map", &active.path, e))?;
    let analysis = crate::engine::recovery::analyze_tail(&map, &active.header);
    if analysis.state != TailState::Clean {
        let reason = CorruptionReason::MarkMismatch("the log written does not end cleanly");
        return Err(Error::corruption(Some(active.header.id), &active.path, 0, reason));
    }
    let mark = Mark::at(1, true, &listing.segments, analysis.next_seq.0, analysis.end_offset);
    remove(fs, dir)?;
    create(fs, dir, &mark).map(|_| ())
}

/// Removes the mark of `dir` (a rewrite gave every segment a new salt; the next writer open
/// writes a new one).
pub(crate) fn remove(fs: &dyn Fs, dir: &Path) -> Result<()> {
    let path = dir.join(MARK_FILE_NAME);
    match fs.remove_file(&path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(Error::io("remove", &path, e)),
        _ => Ok(()),
    }
}

/// Checks what was found on disk against the mark (`format-spec/mark.md`, "The decision"):
/// `segments` is the listing of the directory (non-empty), `analysis` the recovery analysis of
/// its last segment. `Ok` when the log holds at least everything the mark vouches for and no
/// segment the mark does not account for; the corruption otherwise, naming the damage.
///
/// # Errors
/// [`ErrorKind::Corruption`]: a missing, extra or replaced segment, a log that ends before
/// the marked durable end, or bytes after the end of a cleanly closed log.
pub fn check(
    mark: &Mark,
    dir: &Path,
    segments: &[SegmentMeta],
    analysis: &TailAnalysis,
) -> Result<()> {
    let (Some(first), Some(active)) = (segments.first(), segments.last()) else {
        let path = dir.join(segment::file_name(mark.first_seq));
        return Err(missing(mark.first_segment, &path, mark));
    };
    if first.header.id > mark.first_segment {
        let path = dir.join(segment::file_name(mark.first_seq));
        return Err(missing(mark.first_segment, &path, mark));
    }
    let last = &active.header;
    if last.id < mark.last_segment {
        let path = dir.join(segment::file_name(mark.last_first_seq));
        return Err(missing(mark.last_segment, &path, mark));
    }
    let found_last = analysis.next_seq.0 - 1;
    if last.id.0 == mark.last_segment.0 + 1 && !mark.clean {
        // A roll renamed the new segment and stopped before its mark: the segment holds
        // nothing, and the one before it was synced whole before the rename.
        let follows = last.first_seq.0 > mark.durable_seq;
        if analysis.records == 0 && follows && !matches!(analysis.state, TailState::Torn { .. }) {
            return sealed_matches(mark, dir, segments);
        }
    }
    if last.id > mark.last_segment {
        return Err(Error::corruption(
            Some(last.id),
            &active.path,
            0,
            CorruptionReason::SegmentUnmarked { marked_last: mark.last_segment.0 },
        ));
    }
    if last.first_seq != mark.last_first_seq || last.salt != mark.last_salt {
        return Err(Error::corruption(
            Some(last.id),
            &active.path,
            0,
            CorruptionReason::MarkMismatch("the active segment is not the file the mark names"),
        ));
    }
    if matches!(analysis.state, TailState::Corrupt { .. }) {
        // A later frame's own evidence names the damage more precisely: recovery reports it.
        return Ok(());
    }
    let short = found_last < mark.durable_seq || analysis.end_offset < mark.durable_offset;
    if short {
        return Err(Error::corruption(
            Some(last.id),
            &active.path,
            analysis.end_offset,
            CorruptionReason::BelowDurableMark {
                marked: mark.durable_seq,
                found: found_last,
                fault: tail_fault(analysis),
            },
        ));
    }
    if mark.clean {
        if found_last > mark.durable_seq {
            return Err(Error::corruption(
                Some(last.id),
                &active.path,
                mark.durable_offset,
                CorruptionReason::MarkMismatch("records after the end of a cleanly closed log"),
            ));
        }
        if let TailState::Torn { bytes, .. } = analysis.state {
            return Err(Error::corruption(
                Some(last.id),
                &active.path,
                analysis.end_offset,
                CorruptionReason::DamagedAfterClose { bytes },
            ));
        }
    }
    Ok(())
}

/// The segment the mark names as last, when the listing has one more after it: its header
/// must be the one the mark recorded.
fn sealed_matches(mark: &Mark, dir: &Path, segments: &[SegmentMeta]) -> Result<()> {
    let Some(named) = segments.iter().rev().nth(1) else {
        let path = dir.join(segment::file_name(mark.last_first_seq));
        return Err(missing(mark.last_segment, &path, mark));
    };
    let header = &named.header;
    if header.id != mark.last_segment
        || header.first_seq != mark.last_first_seq
        || header.salt != mark.last_salt
    {
        return Err(Error::corruption(
            Some(header.id),
            &named.path,
            0,
            CorruptionReason::MarkMismatch("a segment is not the file the mark names"),
        ));
    }
    Ok(())
}

fn missing(id: SegmentId, path: &Path, mark: &Mark) -> Error {
    Error::corruption(
        Some(id),
        path,
        0,
        CorruptionReason::SegmentMissing { id: id.0, durable_seq: mark.durable_seq },
    )
}

/// The decode fault where the valid frames end, for the report.
fn tail_fault(analysis: &TailAnalysis) -> Option<crate::error::FrameFault> {
    match &analysis.state {
        TailState::Clean => None,
        TailState::Torn { fault, .. } => Some(*fault),
        TailState::Corrupt { reason, .. } => match reason {
            CorruptionReason::DurableRecordDamaged(fault) | CorruptionReason::BadFrame(fault) => {
                Some(*fault)
            }
            _ => None,
        },
    }
}

/// Whether `name` is one of the mark's files.
#[must_use]
pub fn is_mark_file(name: &str) -> bool {
    name == MARK_FILE_NAME || name == MARK_TMP_FILE_NAME
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Mark {
        Mark {
            generation: 7,
            clean: true,
            first_segment: SegmentId(2),
            first_seq: Seq(40),
            last_segment: SegmentId(3),
            last_first_seq: Seq(90),
            last_salt: 0x0123_4567_89AB_CDEF,
            durable_seq: 120,
            durable_offset: 4096,
        }
    }

    #[test]
    fn slot_round_trips() {
        let mark = sample();
        let bytes = mark.encode();
        assert_eq!(Mark::decode(&bytes, Path::new("MARK")).unwrap(), Some(mark));
    }

    #[test]
    fn damaged_slot_holds_no_mark_and_future_version_is_refused() {
        let mut bytes = sample().encode();
        bytes[70] ^= 1;
        assert_eq!(Mark::decode(&bytes, Path::new("MARK")).unwrap(), None);
        assert_eq!(Mark::decode(&[0; MARK_SLOT_BYTES], Path::new("MARK")).unwrap(), None);
        let mut future = sample().encode();
        future[8] = 2;
        // With its version flipped and its checksum as it was, the slot is only damaged.
        assert_eq!(Mark::decode(&future, Path::new("MARK")).unwrap(), None);
        let crc = crc32fast::hash(&future[..CRC_AT]);
        future[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
        let err = Mark::decode(&future, Path::new("MARK")).unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::UnsupportedVersion { found: 2, .. }), "{err}");
    }
}
