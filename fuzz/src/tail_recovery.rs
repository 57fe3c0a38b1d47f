//! Target `tail_recovery`: recovery on arbitrary segment files. The input describes one or two
//! segment files, written into a [`SimFs`] directory; then [`factlog::engine::recovery::analyze_tail`]
//! runs on each file whose header decodes, and [`factlog::verify`], [`Log::open_read_only`] and
//! [`Log::open`] run on the directory, each followed by a read of every record. Nothing may
//! panic, and:
//! - the analysis is consistent with the bytes: a clean tail is all zeros, a torn extent ends at
//!   the last non-zero byte, the records counted are the frames scanned, and zeroing the torn
//!   extent (what an open does) leaves a clean tail with the same records;
//! - a verify that finds the log intact (or torn only at the tail) is matched by a read-only
//!   open that reads exactly the records verify counted and reports the same cut;
//! - the read-only and the writer open reach the same verdict and read the same records, which
//!   carry gap-free sequence numbers;
//! - after a successful writer open, one appended record gets the next sequence number, closing
//!   works, and a second open cuts nothing and reads the same records plus the new one.
//!
//! Input: a control byte, then per mode (see [`Mode`]) either raw file contents, or header
//! fields and raw frame bytes, or a structured list of frames that the harness encodes with
//! the library's encoder and then damages (bit flips, zeroed runs, garbage, truncation), so
//! that the fuzzer reaches valid frames without having to guess their salted CRCs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use factlog::engine::frame;
use factlog::engine::recovery::{self, TailAnalysis, TailState};
use factlog::engine::segment::{self, SegmentHeader};
use factlog::fs::Fs;
use factlog::fs::sim::SimFs;
use factlog::limits::{FRAME_ALIGN_BYTES, SEGMENT_HEADER_BYTES};
use factlog::{
    Durability, Error, ErrorKind, Log, Options, RecoveryMode, SegmentId, Seq, VerifyOutcome,
};

use super::input::Input;

/// The log directory inside the simulated machine.
pub const DIR: &str = "/log";

/// The largest file the harness builds: bounds every allocation it makes from its input.
const FILE_BYTES_MAX: usize = 64 * 1024;

/// Frames the structured mode encodes into one segment, at most.
const FRAMES_MAX: u8 = 32;

/// Records in one structured batch frame, at most.
const BATCH_RECORDS_MAX: u8 = 8;

/// The record the harness appends after a successful open.
const APPENDED: &[u8] = b"appended by the fuzz harness";

/// How the input describes the files, from the two low bits of the control byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The files' bytes are the input, as is.
    Raw = 0,
    /// A valid header from input fields, then raw frame bytes.
    Header = 1,
    /// A valid header, frames encoded by the library from a description, then damage.
    Frames = 2,
    /// As `Frames`, and the file's name may disagree with its header.
    FramesRenamed = 3,
}

/// What one input led to, so the corpus replay can check that the seeds reach deep paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Outcome {
    /// `verify` found every segment intact.
    pub verify_clean: bool,
    /// `verify` found a torn tail.
    pub verify_torn: bool,
    /// `verify` found corruption.
    pub verify_corrupt: bool,
    /// The writer open succeeded.
    pub opened: bool,
    /// The writer open cut a torn tail.
    pub cut: bool,
    /// Records the writer open could read.
    pub records: u64,
    /// The record appended after the open got its sequence number.
    pub appended: bool,
}

/// The body of the target.
pub fn run(data: &[u8]) -> Outcome {
    let mut input = Input::new(data);
    let control = input.u8();
    let segments = 1 + usize::from(control >> 2 & 1);
    let mode = match control & 3 {
        0 => Mode::Raw,
        1 => Mode::Header,
        2 => Mode::Frames,
        _ => Mode::FramesRenamed,
    };
    let files = build_files(&mut input, mode, segments);
    check_directory(&files)
}

/// The file-name and contents of each segment the input describes.
fn build_files(input: &mut Input<'_>, mode: Mode, segments: usize) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::with_capacity(segments);
    let mut previous: Option<(SegmentHeader, u64)> = None;
    for index in 0..segments {
        let last = index + 1 == segments;
        let file = match mode {
            Mode::Raw => {
                let len = if last { input.len() } else { usize::from(input.u16()) };
                let bytes = input.bytes(len.min(FILE_BYTES_MAX));
                let first_seq = bytes
                    .get(24..32)
                    .and_then(|b| b.try_into().ok())
                    .map_or(index as u64 + 1, u64::from_le_bytes);
                (segment::file_name(Seq(first_seq)), bytes.to_vec())
            }
            Mode::Header => {
                let header = header_from(input, previous);
                let len = if last { input.len() } else { usize::from(input.u16()) };
                let mut bytes = header.encode().to_vec();
                bytes.extend_from_slice(input.bytes(len.min(FILE_BYTES_MAX)));
                let bytes = sized(bytes, input.u8());
                let scanned = segment::scan(&bytes, &header, None, |_, _| {});
                previous = Some((header, scanned.next_seq.0));
                (segment::file_name(header.first_seq), bytes)
            }
            Mode::Frames | Mode::FramesRenamed => {
                let header = header_from(input, previous);
                let (bytes, next_seq) = encode_frames(input, &header);
                previous = Some((header, next_seq));
                let mut bytes = sized(bytes, input.u8());
                damage(input, &mut bytes);
                let rename = mode == Mode::FramesRenamed && input.u8() & 3 == 0;
                let named =
                    if rename { header.first_seq.0.wrapping_add(1) } else { header.first_seq.0 };
                (segment::file_name(Seq(named)), bytes)
            }
        };
        files.push(file);
    }
    files
}

/// A header whose fields come from the input; after `previous` (its header and the seq after
/// its last frame), usually its successor.
fn header_from(input: &mut Input<'_>, previous: Option<(SegmentHeader, u64)>) -> SegmentHeader {
    let choice = input.u8();
    let salt = input.u64();
    let (id, first_seq) = match previous {
        None => (1 + u64::from(choice >> 6), seq_from(input, choice)),
        Some((prev, next_seq)) => match choice & 7 {
            0 => (prev.id.0 + 1, next_seq.wrapping_add(1)),
            1 => (prev.id.0 + 2, next_seq),
            2 => (prev.id.0 + 1, seq_from(input, choice >> 3)),
            _ => (prev.id.0 + 1, next_seq),
        },
    };
    SegmentHeader { format_version: 1, id: SegmentId(id), first_seq: Seq(first_seq), salt }
}

/// A sequence number: mostly small, sometimes at the top of the range, sometimes anything.
fn seq_from(input: &mut Input<'_>, choice: u8) -> u64 {
    match choice & 7 {
        0..=3 => 1,
        4 | 5 => 1 + u64::from(input.u16()),
        6 => u64::MAX - u64::from(input.u8()),
        _ => input.u64(),
    }
}

/// The header followed by frames encoded from the input's description. Returns the bytes and
/// the seq after the last frame.
fn encode_frames(input: &mut Input<'_>, header: &SegmentHeader) -> (Vec<u8>, u64) {
    let salt_crc = header.salt_crc();
    let mut bytes = header.encode().to_vec();
    let mut next = header.first_seq.0;
    let frames = input.u8() % (FRAMES_MAX + 1);
    for _ in 0..frames {
        let tag = input.u8();
        let seq = match tag >> 1 & 7 {
            0 => next.wrapping_add(1),
            1 => next.wrapping_sub(1),
            2 => input.u64(),
            _ => next,
        }
        .max(1);
        let lag_choice = input.u8();
        let durable = match lag_choice & 3 {
            0 => 0,
            1 | 2 => seq - 1,
            _ => (seq - 1).saturating_sub(u64::from(lag_choice >> 2)),
        };
        let scale = if tag & 0x80 != 0 { 24 } else { 1 };
        if tag & 1 == 0 {
            let len = usize::from(input.u8()) * scale;
            let Some(end) = seq.checked_add(1) else { break };
            if bytes.len() + len > FILE_BYTES_MAX / 2 {
                break;
            }
            frame::encode_single(&mut bytes, salt_crc, seq, durable, &pattern(seq, len));
            next = end;
        } else {
            let count = 1 + input.u8() % BATCH_RECORDS_MAX;
            let records: Vec<Vec<u8>> = (0..u64::from(count))
                .map(|i| pattern(seq.wrapping_add(i), usize::from(input.u8() % 64) * scale))
                .collect();
            let Some(end) = seq.checked_add(u64::from(count)) else { break };
            if bytes.len() + frame::batch_payload_bytes(&records) > FILE_BYTES_MAX / 2 {
                break;
            }
            frame::encode_batch(&mut bytes, salt_crc, seq, durable, &records);
            next = end;
        }
    }
    (bytes, next)
}

/// Record bytes that name their seq, so a record replayed at the wrong place is visible.
fn pattern(seq: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seq as u8).wrapping_mul(31).wrapping_add(i as u8)).collect()
}

/// `bytes` grown to a file size chosen by `choice`: mostly a preallocated 8 KiB (or the next
/// multiple of 4 KiB), sometimes exactly as long as the contents or a few bytes longer.
fn sized(mut bytes: Vec<u8>, choice: u8) -> Vec<u8> {
    let len = bytes.len();
    let target = match choice & 3 {
        0 | 1 => len.max(8192).next_multiple_of(4096),
        2 => len,
        _ => len + usize::from(choice >> 2),
    };
    bytes.resize(target.min(FILE_BYTES_MAX), 0);
    bytes
}

/// Applies up to three changes the input chooses: a bit flip, a zeroed run, garbage bytes
/// from the input, or a truncation.
fn damage(input: &mut Input<'_>, bytes: &mut Vec<u8>) {
    let changes = input.u8() % 4;
    for _ in 0..changes {
        let kind = input.u8();
        let raw = usize::from(input.u16());
        if bytes.is_empty() {
            return;
        }
        let at = raw % bytes.len();
        match kind & 3 {
            0 => bytes[at] ^= 1 << (kind >> 5),
            1 => {
                let end = (at + usize::from(kind >> 2) * 8).min(bytes.len());
                bytes[at..end].fill(0);
            }
            2 => {
                let garbage = input.bytes(usize::from(kind >> 4) + 1);
                let end = (at + garbage.len()).min(bytes.len());
                bytes[at..end].copy_from_slice(&garbage[..end - at]);
            }
            _ => bytes.truncate(at),
        }
    }
}

fn options(fs: &SimFs) -> Options {
    Options::new()
        .segment_bytes(8192)
        .buffer_bytes(4096)
        .recovery_mode(RecoveryMode::TolerateTornTail)
        .background_threads(false)
        .fs(Arc::new(fs.clone()))
}

/// The records a reader yields, and the error it ended on, if any.
#[derive(Debug, PartialEq, Eq)]
struct Read {
    records: Vec<(u64, Vec<u8>)>,
    error: Option<String>,
}

/// Reads every record of `log`, checking that the sequence numbers have no gap.
fn read_all(log: &Log, bytes_on_disk: usize) -> Read {
    let mut read = Read { records: Vec::new(), error: None };
    // A log may start after seq 1 (its earlier segments reclaimed): read all it holds.
    let reader = match log.first_seq().and_then(|first| log.read_from(first)) {
        Ok(reader) => reader,
        Err(e) => {
            read.error = Some(e.to_string());
            return read;
        }
    };
    // Every record takes at least 4 bytes on disk (an empty batch entry): a reader yielding
    // more than that would be inventing records.
    let bound = bytes_on_disk / 4 + 2;
    for record in reader.take(bound + 1) {
        match record {
            Ok(record) => {
                if let Some((prev, _)) = read.records.last() {
                    assert_eq!(Some(record.seq.0), prev.checked_add(1), "a gap in the records");
                }
                assert!(record.seq.0 >= 1);
                read.records.push((record.seq.0, record.payload.to_vec()));
            }
            Err(e) => read.error = Some(e.to_string()),
        }
    }
    assert!(read.records.len() <= bound, "the reader yields more records than fit on disk");
    read
}

fn check_directory(files: &[(String, Vec<u8>)]) -> Outcome {
    let mut outcome = Outcome::default();
    let fs = SimFs::new(1);
    let dir = Path::new(DIR);
    fs.create_dir_all(dir).expect("the simulated machine is up");
    let mut bytes_on_disk = 0;
    for (name, bytes) in files {
        let path: PathBuf = dir.join(name);
        if let Ok(header) = segment::decode_header(bytes, &path) {
            check_analysis(bytes, &header);
        }
        fs.write_file(&path, bytes);
        bytes_on_disk += bytes.len();
    }

    let verified = factlog::verify(dir, options(&fs));
    let read_only = Log::open_read_only(dir, options(&fs));
    let ro_read = read_only.as_ref().ok().map(|log| read_all(log, bytes_on_disk));
    if let Ok(report) = &verified {
        match &report.outcome {
            VerifyOutcome::Clean | VerifyOutcome::TornTail(_) => {
                let Ok(log) = &read_only else {
                    panic!("verify found the log readable but a read-only open failed");
                };
                let read = ro_read.as_ref().expect("read above");
                assert_eq!(read.error, None, "verify found every frame valid");
                assert_eq!(read.records.len() as u64, report.records, "records verify counted");
                assert_eq!(read.records.last().map(|r| Seq(r.0)), report.last_seq);
                let cut = match &report.outcome {
                    VerifyOutcome::TornTail(cut) => Some(cut.clone()),
                    _ => None,
                };
                assert_eq!(log.recovery_report().tail_cut, cut, "verify and open agree on the cut");
                outcome.verify_clean = cut.is_none();
                outcome.verify_torn = cut.is_some();
            }
            VerifyOutcome::Corrupt(e) => {
                assert!(is_refusal(e), "verify reports damage as corruption: {e:?}");
                outcome.verify_corrupt = true;
            }
        }
    }
    if let Err(e) = &read_only {
        assert!(is_refusal(e), "a read-only open refuses damage as corruption: {e:?}");
    }

    let log = match Log::open(dir, options(&fs)) {
        Ok(log) => log,
        Err(e) => {
            assert!(read_only.is_err(), "a read-only open succeeded where open failed: {e}");
            assert!(is_refusal(&e), "open refuses damage as corruption: {e:?}");
            return outcome;
        }
    };
    let Ok(ro) = &read_only else {
        panic!("open succeeded where a read-only open failed");
    };
    let report = log.recovery_report().clone();
    let ro_report = ro.recovery_report();
    // Only the writer keeps the cut bytes aside (when valid frames follow the hole).
    let writer_cut = report.tail_cut.clone().map(|cut| {
        assert_eq!(cut.kept.is_some(), cut.frames > 0, "kept aside exactly when frames follow");
        factlog::TailCut { kept: None, ..cut }
    });
    assert_eq!(
        (report.last_seq, &writer_cut, report.records_scanned, report.segments),
        (ro_report.last_seq, &ro_report.tail_cut, ro_report.records_scanned, ro_report.segments),
        "the writer and the read-only open recover the same log"
    );
    outcome.opened = true;
    outcome.cut = report.tail_cut.is_some();
    let read = read_all(&log, bytes_on_disk);
    assert_eq!(Some(&read), ro_read.as_ref(), "both opens read the same records");
    outcome.records = read.records.len() as u64;
    if let Some((last, _)) = read.records.last() {
        assert!(report.last_seq >= Some(Seq(*last)), "a record after the recovered last seq");
    }

    // A record at seq `s` needs `s + 1` to fit in a u64 (`format-spec/record.md`, `seq`).
    let expected = report
        .last_seq
        .map_or(Some(1), |s| s.0.checked_add(1))
        .filter(|s| s.checked_add(1).is_some());
    let appended = match log.append(APPENDED, Durability::Synced) {
        Ok(seq) => {
            assert_eq!(Some(seq.0), expected, "the appended record follows the recovered ones");
            outcome.appended = true;
            Some(seq)
        }
        Err(e) => {
            assert!(
                matches!(e.kind(), ErrorKind::LimitExceeded { .. }),
                "an append after a successful open fails only on a limit: {e:?}"
            );
            None
        }
    };
    log.close().expect("closing after a successful open");

    let again = Log::open(dir, options(&fs)).expect("a second open of a log just closed");
    let second = again.recovery_report();
    assert_eq!(second.tail_cut, None, "the second open cuts nothing");
    assert_eq!(second.last_seq, appended.or(report.last_seq), "the second open ends where we did");
    let reread = read_all(&again, bytes_on_disk + 2 * 8192);
    let mut expected_records = read.records.clone();
    if let Some(seq) = appended {
        expected_records.push((seq.0, APPENDED.to_vec()));
    }
    if outcome.verify_clean || outcome.verify_torn {
        assert_eq!(reread.error, None, "an intact log reads whole after the append");
        assert_eq!(reread.records, expected_records, "the second open reads the same records");
    } else {
        // Damage in a sealed segment that the first read stopped short of may be met now, but
        // every record read must still be the one recovered or appended at that seq.
        assert!(
            reread.records.starts_with(&read.records),
            "the second open reads the same records"
        );
        assert!(
            expected_records.starts_with(&reread.records),
            "the second open reads a record that was neither recovered nor appended"
        );
    }
    again.close().expect("closing the second open");
    outcome
}

/// Whether `e` is how the engine refuses damaged bytes (not a crash of its own logic).
fn is_refusal(e: &Error) -> bool {
    e.is_corruption() || matches!(e.kind(), ErrorKind::UnsupportedVersion { .. })
}

/// Checks [`recovery::analyze_tail`] against the bytes it analyzed.
fn check_analysis(bytes: &[u8], header: &SegmentHeader) {
    let a = recovery::analyze_tail(bytes, header);
    assert_eq!(a, recovery::analyze_tail(bytes, header), "the analysis is deterministic");
    let end = usize::try_from(a.end_offset).expect("an offset inside the file");
    assert!(end >= SEGMENT_HEADER_BYTES);
    assert!(end <= bytes.len().next_multiple_of(FRAME_ALIGN_BYTES), "end past the file");
    assert!(end.is_multiple_of(FRAME_ALIGN_BYTES));
    assert_eq!(header.first_seq.0.checked_add(a.records), Some(a.next_seq.0), "records counted");
    let scanned = segment::scan(bytes, header, None, |_, _| {});
    assert_eq!(
        (scanned.end_offset, scanned.next_seq, scanned.records),
        (end, a.next_seq, a.records)
    );

    let rest = bytes.get(end..).unwrap_or_default();
    match &a.state {
        TailState::Clean => assert!(rest.iter().all(|&b| b == 0), "a clean tail is all zeros"),
        TailState::Torn { bytes: torn, .. } => {
            let torn = usize::try_from(*torn).expect("a length inside the file");
            assert!(torn >= 1 && torn <= rest.len(), "the torn extent lies inside the file");
            assert_ne!(rest[torn - 1], 0, "the torn extent ends at a non-zero byte");
            assert!(rest[torn..].iter().all(|&b| b == 0), "only zeros after the torn extent");
            let mut cut = bytes.to_vec();
            cut[end..end + torn].fill(0);
            let after = recovery::analyze_tail(&cut, header);
            assert_eq!(
                after,
                TailAnalysis { state: TailState::Clean, ..a.clone() },
                "cutting the torn tail leaves the same records and a clean tail"
            );
        }
        TailState::Corrupt { offset, .. } => {
            assert!(*offset as usize >= end.min(bytes.len()), "corruption before the valid frames");
        }
    }
    // Only the valid frames decide the records: the file cut right after them is clean.
    let kept = &bytes[..end.min(bytes.len())];
    let prefix = recovery::analyze_tail(kept, header);
    assert_eq!(
        (prefix.next_seq, prefix.records, prefix.state),
        (a.next_seq, a.records, TailState::Clean)
    );
}
