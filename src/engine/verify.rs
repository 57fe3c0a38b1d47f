//! [`verify`]: a read-only check of every segment of a log, sealed ones included, with the
//! same verdict on the active segment as an open would reach.

use std::path::{Path, PathBuf};

use crate::engine::mark::{self, Mark};
use crate::engine::options::Options;
use crate::engine::recovery::{self, TailCut, TailState};
use crate::engine::segment::{self, ScanEnd};
use crate::error::{CorruptionReason, Error, ErrorKind, Result};
use crate::types::{SegmentId, Seq};

/// The result of [`verify`].
#[derive(Debug)]
pub struct VerifyReport {
    /// Each segment checked, in order, up to the first corrupt one.
    pub segments: Vec<SegmentVerify>,
    /// Valid records found.
    pub records: u64,
    /// The last valid record.
    pub last_seq: Option<Seq>,
    /// The verdict.
    pub outcome: VerifyOutcome,
    /// The log mark (`format-spec/mark.md`): what it vouched for, checked against the
    /// segments. `None` for a log without one (or with a damaged one: then the outcome says
    /// so).
    pub mark: Option<Mark>,
    /// Torn tails an earlier open kept aside (`NAME.seg.torn-*`), which `factlog salvage`
    /// reads back.
    pub kept_tails: Vec<PathBuf>,
}

/// What [`verify`] found in one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentVerify {
    /// Its id.
    pub id: SegmentId,
    /// Its file.
    pub path: PathBuf,
    /// Its first record's sequence number.
    pub first_seq: Seq,
    /// Its last valid record.
    pub last_seq: Option<Seq>,
    /// Valid records in it.
    pub records: u64,
    /// Bytes used by the header and the valid frames.
    pub used_bytes: u64,
    /// Size of the file.
    pub file_bytes: u64,
}

/// The verdict of [`verify`].
#[derive(Debug)]
pub enum VerifyOutcome {
    /// Every segment is intact.
    Clean,
    /// Intact but for a torn tail, which an open would cut.
    TornTail(TailCut),
    /// Corruption, or a format this build does not read.
    Corrupt(Error),
}

/// Checks every frame of every segment in `dir` without changing anything. Operating errors
/// (a file that cannot be read) are returned as `Err`; what is wrong with the bytes is the
/// report's outcome.
pub fn verify(dir: impl AsRef<Path>, options: Options) -> Result<VerifyReport> {
    let dir = dir.as_ref();
    let fs = &*options.fs;
    let generation = || mark::read(fs, dir).ok().map(|state| state.mark().map(|m| m.generation));
    let mut attempts = 0;
    loop {
        attempts += 1;
        let before = generation();
        let report = verify_once(dir, fs)?;
        // Beside a live writer, a roll or a mark update during the scan can make the mark read
        // first disagree with the segments read after it: scan again with the new mark.
        let corrupt = matches!(report.outcome, VerifyOutcome::Corrupt(_));
        if !corrupt || attempts >= 5 || generation() == before {
            return Ok(report);
        }
    }
}

fn verify_once(dir: &Path, fs: &dyn crate::fs::Fs) -> Result<VerifyReport> {
    let mut report = VerifyReport {
        segments: Vec::new(),
        records: 0,
        last_seq: None,
        outcome: VerifyOutcome::Clean,
        mark: None,
        kept_tails: Vec::new(),
    };
    if crate::engine::rewrite::pending(fs, dir)?.is_some() {
        return Err(ErrorKind::RewritePending { dir: dir.to_path_buf() }.into());
    }
    // Read before the segments: beside a live writer it is a lower bound of what they hold.
    let mark_read = mark::read(fs, dir);
    let listing = match crate::engine::log::list_existing(fs, dir) {
        Ok(listing) => listing,
        Err(e) if e.is_corruption() => {
            report.outcome = VerifyOutcome::Corrupt(e);
            return Ok(report);
        }
        Err(e) => return Err(e),
    };
    report.kept_tails = crate::engine::torn::list(fs, dir)?;
    let mark_state = match mark_read {
        Ok(state) => state,
        Err(e) if e.is_corruption() => {
            report.outcome = VerifyOutcome::Corrupt(e);
            return Ok(report);
        }
        Err(e) => return Err(e),
    };
    report.mark = mark_state.mark().copied();
    if listing.segments.is_empty() {
        let none = recovery::TailAnalysis {
            end_offset: 0,
            next_seq: Seq(1),
            records: 0,
            state: TailState::Clean,
        };
        if let Err(e) = mark::check_state(&mark_state, dir, &listing.segments, &none) {
            report.outcome = VerifyOutcome::Corrupt(e);
            return Ok(report);
        }
        return Err(ErrorKind::NotALog { dir: dir.to_path_buf() }.into());
    }
    let gaps = match crate::engine::gaps::read(fs, dir) {
        Ok(gaps) => gaps,
        Err(e) if e.is_corruption() => {
            report.outcome = VerifyOutcome::Corrupt(e);
            return Ok(report);
        }
        Err(e) => return Err(e),
    };
    let count = listing.segments.len();
    for (i, meta) in listing.segments.iter().enumerate() {
        let map = fs.map(&meta.path).map_err(|e| Error::io("map", &meta.path, e))?;
        let header = &meta.header;
        let corrupt = |offset: usize, reason| {
            Error::corruption(Some(header.id), &meta.path, offset as u64, reason)
        };
        let (end_offset, next_seq, records, problem) = if i + 1 < count {
            let next = listing.segments[i + 1].header.first_seq.0;
            let mut overlap = None;
            let scan = segment::scan(&map, header, None, |offset, frame| {
                if overlap.is_none() && frame.end_seq() > next {
                    overlap = Some((offset, frame.seq));
                }
            });
            let problem = match scan.end {
                ScanEnd::Invalid(fault) => {
                    Some(corrupt(scan.end_offset, CorruptionReason::BadFrame(fault)))
                }
                ScanEnd::WrongSeq(found) => Some(corrupt(
                    scan.end_offset,
                    CorruptionReason::SequenceMismatch { expected: scan.next_seq.0, found },
                )),
                ScanEnd::Clean | ScanEnd::Bound
                    if scan.next_seq.0 < next && !gaps.declares(scan.next_seq.0, next) =>
                {
                    Some(corrupt(
                        scan.end_offset,
                        CorruptionReason::SequenceGap { expected: scan.next_seq.0, found: next },
                    ))
                }
                ScanEnd::Clean | ScanEnd::Bound if scan.next_seq.0 > next => {
                    let (offset, found) = overlap.unwrap_or((scan.end_offset, next));
                    Some(corrupt(
                        offset,
                        CorruptionReason::SegmentOverlap { next_first_seq: next, found },
                    ))
                }
                ScanEnd::Clean | ScanEnd::Bound => None,
            };
            (
                scan.end_offset as u64,
                scan.next_seq,
                scan.records,
                problem.map(VerifyOutcome::Corrupt),
            )
        } else {
            let analysis = recovery::analyze_tail(&map, header);
            let marked = mark::check_state(&mark_state, dir, &listing.segments, &analysis).err();
            let problem = match (marked, analysis.state.clone()) {
                (Some(damage), _) => Some(VerifyOutcome::Corrupt(damage)),
                (None, TailState::Clean) => None,
                (None, TailState::Torn { bytes, frames, .. }) => {
                    Some(VerifyOutcome::TornTail(TailCut {
                        segment: header.id,
                        path: meta.path.clone(),
                        offset: analysis.end_offset,
                        bytes,
                        first_seq_cut: analysis.next_seq,
                        frames,
                        kept: None,
                    }))
                }
                (None, TailState::Corrupt { offset, reason }) => {
                    Some(VerifyOutcome::Corrupt(corrupt(offset as usize, reason)))
                }
            };
            (analysis.end_offset, analysis.next_seq, analysis.records, problem)
        };
        report.records += records;
        if next_seq > header.first_seq {
            report.last_seq = Some(Seq(next_seq.0 - 1));
        }
        report.segments.push(SegmentVerify {
            id: header.id,
            path: meta.path.clone(),
            first_seq: header.first_seq,
            last_seq: (records > 0).then(|| Seq(next_seq.0 - 1)),
            records,
            used_bytes: end_offset,
            file_bytes: map.len() as u64,
        });
        if let Some(outcome) = problem {
            report.outcome = outcome;
            break;
        }
    }
    Ok(report)
}
