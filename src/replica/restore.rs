//! [`restore`]: a store rebuilt in a new directory from a replica, every object it uses
//! checked first (`format-spec/replication.md`, "Restore").
//!
//! The replica's bytes are untrusted: each part is checked by [`part::decode`], each segment
//! header by [`segment::decode_header`], and every frame by [`frame::decode`] with its
//! segment's salt, the seqs following each other as the log's open requires
//! ([`segment::scan`] applies the same rules to a whole file).
//!
//! Invariants:
//! - Each restored segment file holds exactly the replica's bytes `[0, end)` of that segment,
//!   where `end` is the end of its last part, or the end of the last frame kept by
//!   [`RestoreOptions::seq`] or [`RestoreOptions::time`]; its frames are valid and their seqs
//!   follow each other, within the segment and from one segment to the next.
//! - A point in time ends the restored log: no frame after the first one left out by the
//!   point is fetched, checked or written.
//! - Every object used belongs to this replica (its `replica_id`) and holds what its name
//!   says (range, seqs, covered seq); the history begins at seq 1, or where the newest
//!   retention record says, with the snapshot it kept.
//! - A refusal leaves the target as it was found: everything is written into a staging
//!   directory of this restore's own (`staging.rs`), moved into place by one `rename`
//!   only when every check passed, and removed otherwise. No other file is ever removed.
//! - Memory is bounded by one part: each part is checked and written before the next one is
//!   fetched.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::identity::{Identity, foreign};
use super::listing::Listing;
use super::staging::Staging;
use super::{Remote, device_name, part, snapshot_object};
use crate::engine::frame::{self, Decoded, Frame};
use crate::engine::segment::{self, SegmentHeader};
use crate::error::{Error, ErrorKind, Result};
use crate::fs::{Fs, OpenMode};
use crate::harness::codec;
use crate::harness::snapshot::{self, SnapshotMeta};
use crate::harness::{Store, StoreOptions};
use crate::limits::{SEGMENT_BYTES_MAX, SEGMENT_HEADER_BYTES};
use crate::protocol::time::format_rfc3339;
use crate::types::Seq;

/// How to restore. A builder: `RestoreOptions::new().seq(Seq(120))`, or
/// `RestoreOptions::new().time(us)`; a point in time is a seq or a time, not both.
#[derive(Debug, Clone)]
pub struct RestoreOptions {
    seq: Option<Seq>,
    time_us: Option<u64>,
    dry_run: bool,
    store: StoreOptions,
}

impl RestoreOptions {
    /// The defaults: restore everything the replica holds, check the result with
    /// `StoreOptions::new()`.
    #[must_use]
    pub fn new() -> RestoreOptions {
        RestoreOptions { seq: None, time_us: None, dry_run: false, store: StoreOptions::new() }
    }

    /// Restore the log as it was at `seq`: keep the frames whose records all have seqs up to
    /// `seq`. A batch is whole or absent, so the restored log may end below `seq`
    /// ([`RestoreReport::through_seq`] says where). Default: `None`, everything. Exclusive
    /// with [`RestoreOptions::time`]: [`restore`] refuses both with
    /// [`ErrorKind::InvalidOptions`].
    #[must_use]
    pub fn seq(mut self, seq: Seq) -> RestoreOptions {
        self.seq = Some(seq);
        self
    }

    /// Restore the log as it was at `time_us` (microseconds since the Unix epoch, the unit of
    /// every event's `timestamp_us`): the restored log ends before the first frame holding a
    /// record appended after `time_us`. A clock may step back, so a later frame may hold
    /// records of earlier times: they are left out with it, and not even fetched. A batch is
    /// whole or absent, and a time before the first record restores a store without records,
    /// as `seq(Seq(0))` does. [`RestoreReport::through_seq`] says where the log ended and
    /// [`RestoreReport::first_after_time`] which record ended it. Every record kept or
    /// looked at must be an event (a log of raw records has no times). Default: `None`,
    /// everything. Exclusive with [`RestoreOptions::seq`]: [`restore`] refuses both with
    /// [`ErrorKind::InvalidOptions`].
    #[must_use]
    pub fn time(mut self, time_us: u64) -> RestoreOptions {
        self.time_us = Some(time_us);
        self
    }

    /// Check everything a restore checks (the target, the identity, every object the
    /// restore would use, fetched and checked) and report what it would produce, without
    /// writing anything. Default: `false`.
    #[must_use]
    pub fn dry_run(mut self, on: bool) -> RestoreOptions {
        self.dry_run = on;
        self
    }

    /// The options the restored store is opened with, as a check; their file system
    /// ([`crate::Options::fs`]) is the one the new store is written through, and their clock
    /// gives `restored_us`. Default: `StoreOptions::new()`.
    #[must_use]
    pub fn store(mut self, store: StoreOptions) -> RestoreOptions {
        self.store = store;
        self
    }
}

impl Default for RestoreOptions {
    fn default() -> Self {
        RestoreOptions::new()
    }
}

/// What [`restore`] found and wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreReport {
    /// The replica's location.
    pub location: String,
    /// The replica's id (32 hex digits), which every object used carried.
    pub replica_id: String,
    /// Whether this was a dry run: nothing was written.
    pub dry_run: bool,
    /// The newest retention record's `(covered_seq, first_kept_seq)`, if a retention ran.
    pub retention: Option<(Seq, Seq)>,
    /// Staging directories of earlier restores of the same target that did not finish
    /// (killed): nobody holds them, and this restore does not remove them (remove them).
    pub stale_staging: Vec<PathBuf>,
    /// The new store's directory.
    pub target: PathBuf,
    /// The seq asked for with [`RestoreOptions::seq`], if any.
    pub requested_seq: Option<Seq>,
    /// The time asked for with [`RestoreOptions::time`], if any, in µs since the Unix epoch.
    pub requested_time_us: Option<u64>,
    /// With [`RestoreOptions::time`], the first record appended after that time, whose frame
    /// ends the restored log; `None` when every record of the replica was at or before it.
    pub first_after_time: Option<RecordTime>,
    /// The first seq of the restored log: 1, or the first seq the replica still holds after
    /// retention removed older segments (a snapshot then covers the seqs before it).
    pub first_seq: Seq,
    /// The last restored seq (`Seq(0)`: none).
    pub through_seq: Seq,
    /// The restored segments, in log order.
    pub segments: Vec<RestoredSegment>,
    /// Segments of the replica after `through_seq`, not restored ([`RestoreOptions::seq`],
    /// [`RestoreOptions::time`]).
    pub segments_left_out: usize,
    /// Parts read and written, in all segments.
    pub parts: usize,
    /// Bytes of segment files written.
    pub bytes: u64,
    /// The snapshots copied, by the seq they cover: those of the replica covering at most
    /// `through_seq` that are valid.
    pub snapshots: Vec<Seq>,
    /// Snapshot objects covering at most `through_seq` that are not usable, with why; not
    /// copied. A snapshot only speeds up an open, so the log alone is restored without it,
    /// unless it was the one that covered the seqs retention removed.
    pub snapshots_skipped: Vec<SkippedObject>,
    /// Names under `segments/`, `snapshots/` and `lease/` that are not the replica's.
    pub ignored: Vec<String>,
    /// The device of the replicating run that last held the replica's lease, if known.
    pub source_device: Option<String>,
    /// This device.
    pub device: String,
    /// When the restore was written, in µs since the Unix epoch (the store options' clock).
    pub restored_us: u64,
}

/// One segment file of the restored store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoredSegment {
    /// Its first seq (and name).
    pub first_seq: Seq,
    /// Its last record (`None`: it holds none).
    pub last_seq: Option<Seq>,
    /// Parts it was assembled from.
    pub parts: usize,
    /// Bytes of the file.
    pub bytes: u64,
    /// Whether it ends before the replica's end of this segment ([`RestoreOptions::seq`],
    /// [`RestoreOptions::time`]).
    pub cut: bool,
}

/// A record and the time it was appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordTime {
    /// Its seq.
    pub seq: Seq,
    /// Its `timestamp_us`: µs since the Unix epoch.
    pub timestamp_us: u64,
}

/// An object of the replica that a restore passed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedObject {
    /// Its name.
    pub object: String,
    /// Why.
    pub reason: String,
}

/// Builds a store in `dir` (a directory that does not exist or is empty) from the replica
/// in `remote`: checks its identity, where its history begins (seq 1, or the newest
/// retention record's first kept seq with the snapshot it kept), every part of every segment
/// up to the requested seq or time (of this replica, holding the seqs its header says),
/// their frames and the continuity of their seqs; writes the segment files, the snapshots
/// covering at most the last restored seq and `RESTORED.json` into a staging directory of
/// its own, syncs them, opens the result read-only as a check, and moves it into place. With
/// [`RestoreOptions::dry_run`], checks the same and writes nothing.
///
/// # Errors
///
/// [`ErrorKind::InvalidOptions`] for both a seq and a time (nothing read or written);
/// [`ErrorKind::TargetNotEmpty`] (nothing written; also when another restore filled the
/// target meanwhile); [`ErrorKind::RestoreInProgress`] when another restore of the same
/// target runs; those of [`super::identity::check_identity`] (a replica of version 1 is
/// [`ErrorKind::ReplicaOutdated`]); [`ErrorKind::ReplicaDamaged`] naming an object that is not
/// valid, whose frames are not, that belongs to another replica, or a retention record that
/// is not one; [`ErrorKind::ReplicaGap`] naming the byte range or the seqs the replica
/// misses (also a history that does not begin where it may, and the seqs retention removed
/// when the first record the replica holds is after the requested time: the log as it was
/// then is not in the replica); [`ErrorKind::UnsupportedVersion`] for an object or segment
/// of a newer format; [`ErrorKind::Remote`]; I/O errors; the errors of opening the result.
/// On every error, the target is as it was found.
pub fn restore(remote: &dyn Remote, dir: &Path, options: RestoreOptions) -> Result<RestoreReport> {
    if let (Some(seq), Some(time_us)) = (options.seq, options.time_us) {
        return Err(Error::invalid_options(format!(
            "restore at seq {} or at time {}, not both: a point in time is one or the other",
            seq.0,
            format_rfc3339(time_us)
        )));
    }
    let fs = Arc::clone(&options.store.log.fs);
    check_target(&*fs, dir)?;
    if options.dry_run {
        return check(remote, dir, &options);
    }
    let (listing, mut report) = prepare(remote, dir, &options)?;
    let staging = Staging::create(&*fs, dir)?;
    report.stale_staging.clone_from(&staging.stale);
    let out = staging.dir().to_path_buf();
    let written =
        write_store(remote, &*fs, Some(&out), &listing, &options, &mut report).and_then(|()| {
            // Every restored byte was checked and synced: the mark vouches for all of them,
            // as after a clean close (`format-spec/mark.md`).
            crate::engine::mark::write_clean(&*fs, &out)?;
            Store::open_read_only(&out, options.store.clone())?.close()?;
            Ok(())
        });
    match written {
        Ok(()) => staging.commit().map(|()| report),
        Err(error) => {
            staging.discard();
            Err(error)
        }
    }
}

/// Checks everything a restore into `dir` with `options` checks, fetching every object it
/// would use, and reports what it would produce; writes nothing.
///
/// # Errors
///
/// Those of [`restore`] but the target's.
pub(crate) fn check(
    remote: &dyn Remote,
    dir: &Path,
    options: &RestoreOptions,
) -> Result<RestoreReport> {
    let (listing, mut report) = prepare(remote, dir, options)?;
    report.dry_run = true;
    let fs = Arc::clone(&options.store.log.fs);
    write_store(remote, &*fs, None, &listing, options, &mut report)?;
    Ok(report)
}

/// Lists the replica, checks where its history begins, and starts the report.
fn prepare(
    remote: &dyn Remote,
    dir: &Path,
    options: &RestoreOptions,
) -> Result<(Listing, RestoreReport)> {
    let listing = Listing::read(remote)?;
    let Some((&first, _)) = listing.segments.first_key_value() else {
        return Err(gap("every segment: the replica holds no parts (nothing was shipped yet)"));
    };
    check_history_start(remote, &listing, first)?;
    if let Some(seq) = options.seq
        && seq.0.saturating_add(1) < first
    {
        return Err(gap(&format!(
            "seqs 1..={}: retention removed them, the replica's log begins at seq {first}, so \
             it cannot be restored to seq {}",
            first - 1,
            seq.0
        )));
    }
    let report = RestoreReport {
        location: remote.location().to_owned(),
        replica_id: listing.identity.id_hex(),
        dry_run: options.dry_run,
        retention: listing.retention.as_ref().map(|r| (Seq(r.covered_seq), Seq(r.first_kept_seq))),
        stale_staging: Vec::new(),
        target: dir.to_path_buf(),
        requested_seq: options.seq,
        requested_time_us: options.time_us,
        first_after_time: None,
        first_seq: Seq(first),
        through_seq: Seq(first - 1),
        segments: Vec::new(),
        segments_left_out: 0,
        parts: 0,
        bytes: 0,
        snapshots: Vec::new(),
        snapshots_skipped: Vec::new(),
        ignored: listing.ignored.clone(),
        source_device: listing.source_device(remote)?,
        device: device_name(),
        restored_us: (options.store.clock)(),
    };
    Ok((listing, report))
}

/// Refuses a target that exists and holds anything; writes nothing.
fn check_target(fs: &dyn Fs, dir: &Path) -> Result<()> {
    match fs.list_dir(dir) {
        Ok(names) if names.is_empty() => Ok(()),
        Ok(_) => Err(ErrorKind::TargetNotEmpty { dir: dir.to_path_buf() }.into()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("list directory", dir, e)),
    }
}

/// Checks that the replica's history begins where it may: at seq 1 without a retention
/// record; at the newest record's first kept seq with it, the snapshot it kept present and
/// the one it names. `first` is the first seq of the replica's oldest (not retained) segment.
fn check_history_start(remote: &dyn Remote, listing: &Listing, first: u64) -> Result<()> {
    let Some(record) = &listing.retention else {
        if first > 1 {
            return Err(gap(&format!(
                "seqs 1..={}: the replica's oldest segment begins at seq {first}, and no \
                 retention record says they were removed on purpose (were objects deleted?)",
                first - 1
            )));
        }
        return Ok(());
    };
    let name = super::retain::record_name(record.covered_seq);
    if first < record.first_kept_seq {
        return Err(damaged(
            &name,
            format!(
                "it says the history begins at seq {}, but the replica holds segment {first}, \
                 which retention would have removed: the record is not this replica's history",
                record.first_kept_seq
            ),
        ));
    }
    if first > record.first_kept_seq {
        return Err(gap(&format!(
            "seqs {}..={}: the retention record {name} says the history begins at seq {}, and \
             the replica's oldest segment begins at seq {first} (were objects deleted?)",
            record.first_kept_seq,
            first - 1,
            record.first_kept_seq
        )));
    }
    if first == 1 {
        return Ok(());
    }
    let kept = match remote.get(&record.snapshot)? {
        None => Err("it is missing".to_owned()),
        Some(bytes) if crc32fast::hash(&bytes) != record.snapshot_crc => {
            Err("it is not the object the record names (another checksum)".to_owned())
        }
        Some(bytes) => check_snapshot_object(&record.snapshot, &bytes, record.covered_seq, listing)
            .map(|_| ())
            .map_err(|e| e.to_string()),
    };
    kept.map_err(|reason| {
        gap(&format!(
            "seqs 1..={}: retention removed them ({name}), and the snapshot it kept for them, \
             {}, cannot stand for them: {reason}",
            first - 1,
            record.snapshot
        ))
    })
}

fn gap(missing: &str) -> Error {
    ErrorKind::ReplicaGap { missing: missing.to_owned() }.into()
}

fn damaged(object: &str, reason: String) -> Error {
    ErrorKind::ReplicaDamaged { object: object.to_owned(), reason }.into()
}

/// Writes the segments and snapshots into `out` (nothing for a dry run, `None`) and
/// `RESTORED.json`, checking each object before its bytes are written, then syncs `out`.
fn write_store(
    remote: &dyn Remote,
    fs: &dyn Fs,
    out: Option<&Path>,
    listing: &Listing,
    options: &RestoreOptions,
    report: &mut RestoreReport,
) -> Result<()> {
    let mut before: Option<(u64, SegmentHeader)> = None;
    let mut next = report.first_seq.0;
    let mut cut = false;
    for (&first_seq, parts) in &listing.segments {
        // The first segment is always restored (a store has one); a later one only while
        // seqs up to the requested one are still wanted, and then it must continue the log.
        if cut || (before.is_some() && options.seq.is_some_and(|n| next > n.0)) {
            report.segments_left_out += 1;
            continue;
        }
        if let Some((previous, _)) = before {
            if first_seq > next {
                return Err(gap(&format!(
                    "seqs {next}..={}: the parts of segment {previous} end at seq {}, and the \
                     next segment the replica holds begins at seq {first_seq}",
                    first_seq - 1,
                    next - 1
                )));
            }
            if first_seq < next {
                return Err(damaged(
                    &parts[0].2,
                    format!(
                        "segment {first_seq} begins at a seq the segment before it holds \
                         (segment {previous} holds seqs through {})",
                        next - 1
                    ),
                ));
            }
        }
        let expected = before.map(|(_, header)| header);
        let bound = Bound { seq: options.seq, time_us: options.time_us };
        let into = SegmentInto { out, identity: &listing.identity, before: expected, bound };
        let restored = restore_segment(remote, fs, into, first_seq, parts)?;
        next = restored.next_seq;
        cut = restored.segment.cut;
        report.first_after_time = restored.first_after_time;
        report.parts += restored.segment.parts;
        report.bytes += restored.segment.bytes;
        report.segments.push(restored.segment);
        before = Some((first_seq, restored.header));
    }
    report.through_seq = Seq(next - 1);
    let first = report.first_seq.0;
    if let (Some(time_us), Some(after)) = (options.time_us, report.first_after_time)
        && first > 1
        && after.seq.0 == first
    {
        return Err(gap(&format!(
            "seqs 1..={}: retention removed them, and the first record the replica holds (seq \
             {first}) was appended at {}, after the requested time {}: the log as it was then \
             is not in the replica",
            first - 1,
            format_rfc3339(after.timestamp_us),
            format_rfc3339(time_us)
        )));
    }
    copy_snapshots(remote, fs, out, listing, report)?;
    if first > 1 && !report.snapshots.iter().any(|covered| covered.0 >= first - 1) {
        let skipped: Vec<String> = report
            .snapshots_skipped
            .iter()
            .map(|s| format!("{} ({})", s.object, s.reason))
            .collect();
        let skipped = if skipped.is_empty() {
            String::new()
        } else {
            format!("; not usable: {}", skipped.join(", "))
        };
        return Err(gap(&format!(
            "seqs 1..={}: retention removed the segments that held them, and no valid snapshot \
             of the replica covers seq {} up to the restored seq {}{skipped}",
            first - 1,
            first - 1,
            report.through_seq.0
        )));
    }
    let Some(out) = out else { return Ok(()) };
    let restored = crate::harness::restored::Restored {
        version: crate::harness::restored::RESTORED_VERSION,
        from: report.location.clone(),
        through_seq: report.through_seq.0,
        source_device: report.source_device.clone(),
        restored_us: report.restored_us,
        device: report.device.clone(),
    };
    crate::harness::restored::write(fs, out, &restored)?;
    fs.sync_dir(out).map_err(|e| Error::io("fsync directory", out, e))
}

/// A segment written into the new store.
struct Restored {
    segment: RestoredSegment,
    header: SegmentHeader,
    /// The seq after its last kept record.
    next_seq: u64,
    /// The record after the requested time that ended it, if one did.
    first_after_time: Option<RecordTime>,
}

/// The point in time a restore ends at: at most one of the two is set.
#[derive(Debug, Clone, Copy)]
struct Bound {
    seq: Option<Seq>,
    time_us: Option<u64>,
}

impl Bound {
    /// Whether seq `next` is past the requested seq: no frame from it on is wanted.
    fn past_seq(self, next: u64) -> bool {
        self.seq.is_some_and(|n| next > n.0)
    }
}

/// Why [`check_frames`] stopped before the end of a part's body.
enum Stop {
    /// The next frame holds a record after the requested seq.
    Seq,
    /// The next frame holds this record, appended after the requested time.
    Time(RecordTime),
}

/// Where and how [`restore_segment`] restores a segment.
struct SegmentInto<'a> {
    /// The directory the segment file is written into (`None`: a dry run).
    out: Option<&'a Path>,
    /// The replica's identity, which every part must carry.
    identity: &'a Identity,
    /// The header of the restored segment before it, which this one must follow.
    before: Option<SegmentHeader>,
    bound: Bound,
}

/// Checks the parts of the segment beginning at `first_seq` in order and writes their bytes
/// into its file, up to the last frame within `into.bound`.
fn restore_segment(
    remote: &dyn Remote,
    fs: &dyn Fs,
    into: SegmentInto<'_>,
    first_seq: u64,
    parts: &[(u64, u64, String)],
) -> Result<Restored> {
    let SegmentInto { out, identity, before, bound } = into;
    let path = out.map(|dir| dir.join(segment::file_name(Seq(first_seq))));
    let file = match &path {
        Some(path) => {
            Some(fs.open(path, OpenMode::CreateNew).map_err(|e| Error::io("create", path, e))?)
        }
        None => None,
    };
    let mut header: Option<SegmentHeader> = None;
    let (mut end, mut next, mut used, mut cut) = (0_u64, first_seq, 0_usize, false);
    let mut first_after_time = None;
    for (start, part_end, name) in parts {
        let (start, part_end) = (*start, *part_end);
        if header.is_some() && bound.past_seq(next) {
            // The parts after the requested seq are neither fetched nor checked.
            cut = true;
            break;
        }
        if start > end {
            return Err(gap(&format!(
                "bytes [{end}, {start}) of segment {first_seq} (the part before {name})"
            )));
        }
        if start < end {
            return Err(damaged(
                name,
                format!(
                    "it begins at byte {start}, inside the part before it, which ends at {end}"
                ),
            ));
        }
        if part_end > SEGMENT_BYTES_MAX {
            return Err(damaged(
                name,
                format!(
                    "its range ends at byte {part_end}, past the largest segment file \
                     ({SEGMENT_BYTES_MAX} bytes)"
                ),
            ));
        }
        let bytes = remote.get(name)?.ok_or_else(|| {
            gap(&format!("object {name}: it was listed, then not found (was it removed?)"))
        })?;
        let (part_header, body) = part::decode(name, &bytes, start, part_end)?;
        if part_header.replica_id != identity.replica_id {
            return Err(foreign(name, part_header.replica_id, identity));
        }
        if part_header.first_seq != next {
            return Err(damaged(
                name,
                format!(
                    "its header says it holds seqs {}..={}, where seq {next} follows",
                    part_header.first_seq, part_header.last_seq
                ),
            ));
        }
        // The first part begins with the segment header; the frames follow it.
        let (header, frames_from) = match header {
            Some(header) => (header, 0),
            None => {
                let found = segment_header(name, body, first_seq, before)?;
                (*header.insert(found), SEGMENT_HEADER_BYTES)
            }
        };
        if part_header.salt != header.salt {
            return Err(damaged(
                name,
                format!(
                    "its salt {:#018x} is not the salt {:#018x} of its segment's header: it \
                     belongs to another incarnation of the segment",
                    part_header.salt, header.salt
                ),
            ));
        }
        let place = Place { object: name, segment: first_seq, start };
        let (kept, stop) =
            check_frames(place, body, frames_from, header.salt_crc(), &mut next, bound)?;
        if stop.is_none() && next - 1 != part_header.last_seq {
            return Err(damaged(
                name,
                format!(
                    "its header says it holds seqs {}..={}, its frames hold seqs {}..={}",
                    part_header.first_seq,
                    part_header.last_seq,
                    part_header.first_seq,
                    next - 1
                ),
            ));
        }
        if let (Some(file), Some(path)) = (&file, &path) {
            file.write_all_at(&body[..kept], start).map_err(|e| Error::io("write", path, e))?;
        }
        used += 1;
        end = start + kept as u64;
        if let Some(stop) = stop {
            if let Stop::Time(record) = stop {
                first_after_time = Some(record);
            }
            cut = true;
            break;
        }
    }
    let Some(header) = header else {
        unreachable!("a segment is listed only with a part, and its first part sets the header");
    };
    if let (Some(file), Some(path)) = (&file, &path) {
        file.sync_data().map_err(|e| Error::io("fdatasync", path, e))?;
    }
    let segment = RestoredSegment {
        first_seq: Seq(first_seq),
        last_seq: (next > first_seq).then(|| Seq(next - 1)),
        parts: used,
        bytes: end,
        cut: cut || used < parts.len(),
    };
    Ok(Restored { segment, header, next_seq: next, first_after_time })
}

/// Where a part's body lies, for messages: its object, its segment, its first byte.
#[derive(Clone, Copy)]
struct Place<'a> {
    object: &'a str,
    segment: u64,
    start: u64,
}

/// Checks the frames of a part's `body` from `offset` (after the segment header in a first
/// part), as [`segment::scan`] does for a whole file: each valid under the segment's salt,
/// holding seq `next` (advanced past it). Stops before the first frame with a record after
/// `bound`'s seq or time. Returns the offset after the last kept frame, and why it stopped
/// before the end of `body`, if it did.
fn check_frames(
    place: Place<'_>,
    body: &[u8],
    mut offset: usize,
    salt_crc: u32,
    next: &mut u64,
    bound: Bound,
) -> Result<(usize, Option<Stop>)> {
    let (name, segment) = (place.object, place.segment);
    while offset < body.len() {
        if bound.past_seq(*next) {
            return Ok((offset, Some(Stop::Seq)));
        }
        let at = place.start + offset as u64;
        match frame::decode(body, offset, salt_crc) {
            Decoded::Frame(f) if f.seq != *next => {
                return Err(damaged(
                    name,
                    format!(
                        "the frame at byte {at} of segment {segment} holds seq {} where seq \
                         {next} follows",
                        f.seq
                    ),
                ));
            }
            // A batch is whole or absent: one with a record after the bound is left out.
            Decoded::Frame(f) if bound.past_seq(f.end_seq().saturating_sub(1)) => {
                return Ok((offset, Some(Stop::Seq)));
            }
            Decoded::Frame(f) => {
                if let Some(record) = after_time(place, at, &f, bound.time_us)? {
                    return Ok((offset, Some(Stop::Time(record))));
                }
                if offset + f.frame_bytes > body.len() {
                    return Err(damaged(
                        name,
                        format!(
                            "its body ends inside the padding of the frame at byte {at} of \
                             segment {segment}"
                        ),
                    ));
                }
                offset += f.frame_bytes;
                *next = f.end_seq();
            }
            Decoded::End => {
                return Err(damaged(
                    name,
                    format!("zeros at byte {at} of segment {segment}, where a frame follows"),
                ));
            }
            Decoded::Invalid(fault) => {
                return Err(damaged(
                    name,
                    format!("byte {at} of segment {segment} is not a valid frame: {fault}"),
                ));
            }
        }
    }
    Ok((offset, None))
}

/// The first record of frame `f` (at byte `at` of its segment) appended after `time_us`, if
/// any. Every record must be an event, which carries its time; one that is not is damage of
/// the replica as a store's replica (the store's open would refuse it too).
fn after_time(
    place: Place<'_>,
    at: u64,
    f: &Frame<'_>,
    time_us: Option<u64>,
) -> Result<Option<RecordTime>> {
    let Some(time_us) = time_us else { return Ok(None) };
    for (seq, record) in (f.seq..).zip(f.records()) {
        let envelope = codec::peek(Seq(seq), record).map_err(|error| {
            damaged(
                place.object,
                format!(
                    "the record at seq {seq} (the frame at byte {at} of segment {}) has no \
                     time to restore to: {error}",
                    place.segment
                ),
            )
        })?;
        if envelope.timestamp_us > time_us {
            return Ok(Some(RecordTime { seq: Seq(seq), timestamp_us: envelope.timestamp_us }));
        }
    }
    Ok(None)
}

/// Checks the segment header at the start of `body`, the first part of segment `first_seq`,
/// and that it follows `before`, the header of the segment before it.
fn segment_header(
    name: &str,
    body: &[u8],
    first_seq: u64,
    before: Option<SegmentHeader>,
) -> Result<SegmentHeader> {
    let header =
        segment::decode_header(body, Path::new(name)).map_err(|error| match error.into_kind() {
            ErrorKind::Corruption { reason, .. } => {
                damaged(name, format!("its segment header is not valid: {reason}"))
            }
            other => other.into(),
        })?;
    if header.first_seq.0 != first_seq {
        return Err(damaged(
            name,
            format!(
                "its segment header says first seq {}, its name {first_seq}",
                header.first_seq.0
            ),
        ));
    }
    if let Some(before) = before {
        if before.id.0.checked_add(1) != Some(header.id.0) {
            return Err(damaged(
                name,
                format!("segment id {} follows segment id {}", header.id.0, before.id.0),
            ));
        }
        if header.format_version != before.format_version {
            return Err(damaged(
                name,
                format!(
                    "segment format version {} follows version {}",
                    header.format_version, before.format_version
                ),
            ));
        }
    }
    Ok(header)
}

/// Copies the valid snapshot objects covering at most the restored seq into
/// `out/snapshots/` (nothing for a dry run), and reports those that are not usable. One that
/// belongs to another replica refuses the restore.
fn copy_snapshots(
    remote: &dyn Remote,
    fs: &dyn Fs,
    out: Option<&Path>,
    listing: &Listing,
    report: &mut RestoreReport,
) -> Result<()> {
    let snapshots = out.map(snapshot::snapshot_dir);
    for (&covered, name) in listing.snapshots.range(..=report.through_seq.0) {
        let Some(bytes) = remote.get(name)? else {
            let reason = "listed, then not found".to_owned();
            report.snapshots_skipped.push(SkippedObject { object: name.clone(), reason });
            continue;
        };
        // An object of another replica is no damage to pass over: it was put here.
        if let Ok((header, _)) = snapshot_object::decode(name, &bytes, covered)
            && header.replica_id != listing.identity.replica_id
        {
            return Err(foreign(name, header.replica_id, &listing.identity));
        }
        let file = match check_snapshot_object(name, &bytes, covered, listing) {
            Ok(file) => file,
            Err(error) => {
                let reason = error.to_string();
                report.snapshots_skipped.push(SkippedObject { object: name.clone(), reason });
                continue;
            }
        };
        if let Some(snapshots) = &snapshots {
            if report.snapshots.is_empty() {
                fs.create_dir_all(snapshots)
                    .map_err(|e| Error::io("create directory", snapshots, e))?;
            }
            write_file(fs, &snapshots.join(snapshot::file_name(Seq(covered))), file)?;
        }
        report.snapshots.push(Seq(covered));
    }
    if let Some(snapshots) = snapshots.filter(|_| !report.snapshots.is_empty()) {
        fs.sync_dir(&snapshots).map_err(|e| Error::io("fsync directory", &snapshots, e))?;
    }
    Ok(())
}

/// Checks that a snapshot object is one of this replica covering `covered` whose file an
/// open would load (it decodes, holds the seq of its name and a state this build folds:
/// [`snapshot::load`]'s rules, on bytes). Returns the file's bytes.
pub(crate) fn check_snapshot_object<'a>(
    name: &str,
    bytes: &'a [u8],
    covered: u64,
    listing: &Listing,
) -> Result<&'a [u8]> {
    let (header, file) = snapshot_object::decode(name, bytes, covered)?;
    if header.replica_id != listing.identity.replica_id {
        return Err(foreign(name, header.replica_id, &listing.identity));
    }
    let path = Path::new(name);
    let decoded = snapshot::decode(path, file)?;
    if decoded.covered_seq != Seq(covered) {
        return Err(damaged(
            name,
            format!("its file covers seq {}, its name says {covered}", decoded.covered_seq.0),
        ));
    }
    let meta = SnapshotMeta {
        path: path.to_path_buf(),
        covered_seq: decoded.covered_seq,
        state_schema: decoded.state_schema,
        file_bytes: file.len() as u64,
    };
    snapshot::decode_state(&meta, &decoded.body)?;
    Ok(file)
}

/// Creates `path` (owner-only) holding `bytes`, synced.
fn write_file(fs: &dyn Fs, path: &Path, bytes: &[u8]) -> Result<()> {
    let file = fs.open(path, OpenMode::CreateNew).map_err(|e| Error::io("create", path, e))?;
    file.write_all_at(bytes, 0).map_err(|e| Error::io("write", path, e))?;
    file.sync_data().map_err(|e| Error::io("fdatasync", path, e))
}
