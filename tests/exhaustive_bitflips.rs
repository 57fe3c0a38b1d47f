//! Proves that no single bit flip in a small log can change a record: a three-segment log
//! on the simulated file system (every record `Synced`, so each frame claims its
//! predecessors durable; plus a variant ending in four `Flushed` frames) is copied once per
//! bit, the bit is flipped, and `factlog::verify` and a read-only open with a full read must
//! agree on one of: corruption at the damaged frame (right file, right offset), a torn tail
//! that cuts only frames never synced (the log mark vouches for every synced one:
//! `format-spec/mark.md`; after the clean close of the all-synced image, no torn tail at all),
//! or nothing (the flip hit padding or zeros nobody reads; every record identical). Anything
//! else, or a panic, is a violation. By default every bit of each file's header, frames and
//! the 64 bytes after them is flipped, and one bit in 64 of the zero tail beyond (a
//! different position in each 64-bit word); `FACTLOG_BITFLIP_ALL=1` flips every bit of every
//! file. Run with `--nocapture` to see the counts.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use factlog::fs::Fs;
use factlog::fs::sim::{CrashModel, SimFs};
use factlog::{Durability, Error, ErrorKind, Log, Options, Seq, TailCut, VerifyOutcome};

const DIR: &str = "/log";

/// Segments of the log: two sealed, one active.
const SEGMENTS: usize = 3;

/// Bytes after the last frame of each file whose every bit is flipped in the default mode.
const AFTER_FRAMES_BYTES: usize = 64;

/// In the default mode, one bit of every this many in the zero tail beyond is flipped.
const TAIL_SAMPLE_BITS: u64 = 64;

fn options(fs: &SimFs) -> Options {
    Options::new()
        .segment_bytes(8192)
        .buffer_bytes(4096)
        .background_threads(false)
        .fs(Arc::new(fs.clone()))
}

fn every_bit() -> bool {
    std::env::var("FACTLOG_BITFLIP_ALL").is_ok_and(|v| v == "1")
}

/// A frame of the undamaged image.
#[derive(Debug, Clone, Copy)]
struct Span {
    offset: usize,
    /// End including the padding: where the next frame starts.
    end: usize,
    /// Records before this frame in the whole log.
    records_before: usize,
}

#[derive(Debug)]
struct Segment {
    path: PathBuf,
    bytes: Vec<u8>,
    frames: Vec<Span>,
    /// Offset after the last frame.
    end: usize,
}

/// An undamaged log image and what a flip may cost.
#[derive(Debug)]
struct Image {
    name: &'static str,
    segments: Vec<Segment>,
    records: Vec<Vec<u8>>,
    /// The smallest offset of the active segment a torn-tail cut may start at: the end of the
    /// last synced frame, which the log mark vouches for.
    cut_floor: usize,
    /// Offset in the active segment after the last synced frame.
    synced_end: usize,
    /// Cleanly closed with every record synced: the mark vouches for every byte.
    clean: bool,
    /// The log mark `MARK`, as the writer left it.
    mark: Vec<u8>,
}

impl Image {
    /// Where the damage at `byte` of segment `file` must be reported: 0 for the header, the
    /// start of the frame holding it, or the end of the frames for bytes after them.
    fn region_start(&self, file: usize, byte: usize) -> usize {
        let segment = &self.segments[file];
        if byte < 64 {
            return 0;
        }
        segment
            .frames
            .iter()
            .find(|f| f.offset <= byte && byte < f.end)
            .map_or(segment.end, |f| f.offset)
    }

    /// Records of the log in frames before `offset` of segment `file`.
    fn records_before(&self, file: usize, offset: usize) -> usize {
        let segment = &self.segments[file];
        match segment.frames.iter().find(|f| f.offset >= offset) {
            Some(frame) => frame.records_before,
            None => {
                let later = self.segments.get(file + 1).and_then(|s| s.frames.first());
                later.map_or(self.records.len(), |f| f.records_before)
            }
        }
    }

    fn fresh_copy(&self) -> SimFs {
        let fs = SimFs::new(1);
        fs.create_dir_all(Path::new(DIR)).expect("create the log directory");
        for segment in &self.segments {
            fs.write_file(&segment.path, &segment.bytes);
        }
        fs.write_file(&Path::new(DIR).join(factlog::engine::mark::MARK_FILE_NAME), &self.mark);
        fs
    }
}

fn payload(i: u64, len: usize) -> Vec<u8> {
    let mut bytes = format!("record {i:04} ").into_bytes();
    bytes.extend((0..len).map(|k| b'a' + u8::try_from((k + i as usize) % 26).expect("small")));
    bytes.truncate(len);
    bytes
}

/// The frames of the synced log, in order: payload sizes of single records, or of the
/// records of a batch. Sized so that the log has three segments of 8192 bytes while holding
/// little more than one segment of data: many small frames (an empty record and batches
/// among them) in the first, a 6900-byte record that does not fit after them opening the
/// second, a 1000-byte record that does not fit after that opening the third, then six small
/// frames.
const SCHEDULE: &[&[usize]] = &[
    &[40],
    &[0],
    &[90],
    &[17, 33, 5],
    &[120],
    &[64],
    &[1],
    &[77],
    &[150],
    &[8, 0, 23],
    &[101],
    &[55],
    &[130],
    &[66],
    &[6900],
    &[45],
    &[88],
    &[1000],
    &[30],
    &[12, 19],
    &[140],
    &[3],
    &[96],
    &[57],
];

/// Appends the [`SCHEDULE`], every frame `Synced`; returns the machine and the records.
fn synced_log() -> (SimFs, Vec<Vec<u8>>) {
    let fs = SimFs::new(0xB17F);
    let log = Log::open(DIR, options(&fs)).expect("open");
    let mut records = Vec::new();
    for (i, sizes) in SCHEDULE.iter().enumerate() {
        let i = i as u64 * 10;
        let frame: Vec<Vec<u8>> = sizes.iter().zip(i..).map(|(&len, n)| payload(n, len)).collect();
        if frame.len() == 1 {
            log.append(&frame[0], Durability::Synced).expect("append");
        } else {
            log.append_batch(&frame, Durability::Synced).expect("append batch");
        }
        records.extend(frame);
    }
    assert_eq!(log.info().expect("info").segments.len(), SEGMENTS);
    log.close().expect("close");
    (fs, records)
}

fn layout(name: &'static str, fs: &SimFs, records: Vec<Vec<u8>>, synced: usize) -> Image {
    let mut segments = Vec::new();
    let mut seen = 0;
    let mark =
        fs.read_file(&Path::new(DIR).join(factlog::engine::mark::MARK_FILE_NAME)).expect("MARK");
    for path in fs.files() {
        if path.file_name().is_some_and(|n| n == factlog::engine::mark::MARK_FILE_NAME) {
            continue;
        }
        assert!(path.extension().is_some_and(|e| e == "seg"), "only segments: {path:?}");
        let bytes = fs.read_file(&path).expect("file");
        let header = factlog::engine::segment::decode_header(&bytes, &path).expect("header");
        let mut frames = Vec::new();
        let scan = factlog::engine::segment::scan(&bytes, &header, None, |offset, frame| {
            frames.push(Span { offset, end: offset + frame.frame_bytes, records_before: seen });
            seen += usize::from(frame.count);
        });
        assert_eq!(scan.end, factlog::engine::segment::ScanEnd::Clean);
        segments.push(Segment { path, bytes, frames, end: scan.end_offset });
    }
    assert_eq!(seen, records.len(), "the image holds every record");
    assert_eq!(segments.len(), SEGMENTS);
    let frames: Vec<usize> = segments.iter().map(|s| s.frames.len()).collect();
    assert!(frames.iter().all(|&n| n >= 3), "frames per segment: {frames:?}");
    let active = segments.last().expect("segments");
    let synced_frame = active
        .frames
        .iter()
        .rev()
        .find(|f| f.records_before < synced)
        .expect("a synced frame in the active segment");
    let clean = synced == records.len();
    // The mark vouches for every synced frame: no cut may reach into them.
    let cut_floor = synced_frame.end;
    let synced_end = synced_frame.end;
    Image { name, segments, records, cut_floor, synced_end, clean, mark }
}

/// The all-synced image, and the same log reopened with four `Flushed` frames appended and
/// never synced (the written image a process crash leaves).
fn images() -> [Image; 2] {
    let (fs, records) = synced_log();
    let synced = records.len();
    let all_synced = layout("all synced", &fs, records.clone(), synced);
    let log = Log::open(DIR, options(&fs)).expect("reopen");
    let mut with_tail = records;
    for i in 0..4 {
        let record = payload(5000 + i, 20 + 31 * i as usize);
        log.append(&record, Durability::Flushed).expect("flushed append");
        with_tail.push(record);
    }
    fs.halt();
    drop(log);
    let kept = fs.reboot(CrashModel::ProcessCrash, 0);
    let flushed_tail = layout("flushed tail", &kept, with_tail, synced);
    [all_synced, flushed_tail]
}

/// What a read-only open and a full read saw.
struct ReadBack {
    open: Result<Option<TailCut>, Error>,
    records: Vec<Vec<u8>>,
    error: Option<Error>,
}

fn read_back(fs: &SimFs) -> ReadBack {
    let log = match Log::open_read_only(DIR, options(fs)) {
        Ok(log) => log,
        Err(e) => return ReadBack { open: Err(e), records: Vec::new(), error: None },
    };
    let mut records = Vec::new();
    let mut error = None;
    match log.read_from(Seq(1)) {
        Ok(reader) => {
            for record in reader {
                match record {
                    Ok(record) => {
                        assert_eq!(record.seq.0, records.len() as u64 + 1, "gap-free");
                        records.push(record.payload.to_vec());
                    }
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                }
            }
        }
        Err(e) => error = Some(e),
    }
    ReadBack { open: Ok(log.recovery_report().tail_cut.clone()), records, error }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    /// Reported as corruption at the damaged frame, by verify and by the readers.
    Corruption,
    /// A torn tail starting after every frame: the flip hit the active segment's zero tail.
    TornTailNothingLost,
    /// A torn tail cutting only frames that were never synced.
    TornTailUnsyncedFrames,
    /// Verify clean and every record identical.
    Harmless,
    Violation,
}

fn located(error: &Error, segment: &Segment, id: u64, region: usize, byte: usize) -> bool {
    match error.kind() {
        ErrorKind::Corruption { segment: found, path, offset, .. } => {
            let expected_segment = (region > 0).then_some(factlog::SegmentId(id));
            *path == segment.path && *found == expected_segment && *offset as usize == region
        }
        ErrorKind::UnsupportedVersion { path, .. } => {
            *path == segment.path && (8..10).contains(&byte)
        }
        _ => false,
    }
}

/// Flips bit `bit` of segment `file` of a fresh copy of `image` and classifies the outcome;
/// a violation comes with its description.
fn evaluate(image: &Image, file: usize, bit: u64) -> (Outcome, Option<String>) {
    let fs = image.fresh_copy();
    let segment = &image.segments[file];
    assert!(fs.flip_bit(&segment.path, bit));
    let byte = usize::try_from(bit / 8).expect("small");
    let id = file as u64 + 1;
    let region = image.region_start(file, byte);
    let active = file + 1 == image.segments.len();
    let violation = |what: String| {
        let at = format!("{}: {} bit {bit} (byte {byte})", image.name, segment.path.display());
        (Outcome::Violation, Some(format!("{at}: {what}")))
    };
    let verdict = match catch_unwind(AssertUnwindSafe(|| factlog::verify(DIR, options(&fs)))) {
        Ok(Ok(report)) => report.outcome,
        Ok(Err(e)) => return violation(format!("verify failed to run: {e}")),
        Err(_) => return violation("verify panicked".into()),
    };
    let Ok(read) = catch_unwind(AssertUnwindSafe(|| read_back(&fs))) else {
        return violation("read-only open or read panicked".into());
    };
    if let Some(i) = read.records.iter().zip(&image.records).position(|(a, b)| a != b) {
        return violation(format!("record {} read back changed ({verdict:?})", i + 1));
    }
    if read.records.len() > image.records.len() {
        return violation("more records read than were written".into());
    }
    match verdict {
        VerifyOutcome::Clean => {
            let whole = read.records.len() == image.records.len();
            if matches!(read.open, Ok(None)) && whole && read.error.is_none() {
                return (Outcome::Harmless, None);
            }
            violation(format!(
                "verify clean but the read-only open saw {:?}, {} records, error {:?}",
                read.open,
                read.records.len(),
                read.error
            ))
        }
        VerifyOutcome::TornTail(cut) => {
            let offset = usize::try_from(cut.offset).expect("small");
            if !active || cut.path != segment.path {
                return violation(format!("torn tail outside the flipped active segment: {cut:?}"));
            }
            if offset < image.cut_floor {
                let lost = image.records_before(file, image.cut_floor)
                    - image.records_before(file, offset);
                return violation(format!(
                    "torn tail at {offset} cuts {lost} provably synced records (floor {})",
                    image.cut_floor
                ));
            }
            if offset != region {
                return violation(format!("torn tail at {offset}, damage at region {region}"));
            }
            let kept = image.records_before(file, offset);
            let same_cut = matches!(&read.open, Ok(Some(c)) if *c == cut);
            // (A read-only open keeps nothing aside, so the two cuts are equal field by field.)
            if !same_cut || read.records.len() != kept || read.error.is_some() {
                return violation(format!(
                    "verify cut {cut:?} but the read-only open saw {:?}, {} records (expected \
                     {kept}), error {:?}",
                    read.open,
                    read.records.len(),
                    read.error
                ));
            }
            if image.clean {
                return violation(format!("a torn tail in a cleanly closed log: {cut:?}"));
            }
            assert!(offset >= image.synced_end, "the floor is the synced end");
            let outcome = if offset == segment.end {
                Outcome::TornTailNothingLost
            } else {
                Outcome::TornTailUnsyncedFrames
            };
            (outcome, None)
        }
        VerifyOutcome::Corrupt(error) => {
            if !located(&error, segment, id, region, byte) {
                return violation(format!("verify reports {error:?}, damage at region {region}"));
            }
            let reader_error = match read.open {
                Err(e) => e,
                Ok(_) => match read.error {
                    Some(e) => e,
                    None => {
                        return violation(format!(
                            "verify reports {error} but a full read saw no error"
                        ));
                    }
                },
            };
            if !located(&reader_error, segment, id, region, byte) {
                return violation(format!("readers report {reader_error:?}, region {region}"));
            }
            let before = image.records_before(file, region);
            if read.records.len() > before {
                return violation(format!(
                    "{} records read past damage after record {before}",
                    read.records.len()
                ));
            }
            (Outcome::Corruption, None)
        }
    }
}

/// The bits to flip in `segment`: all of them, or all up to 64 bytes after the frames and a
/// sample of one in 64 beyond (a different bit position in each 64-bit word).
fn bits(segment: &Segment, all: bool) -> Vec<u64> {
    let total = segment.bytes.len() as u64 * 8;
    let dense = ((segment.end + AFTER_FRAMES_BYTES) as u64 * 8).min(total);
    let mut bits: Vec<u64> = (0..dense).collect();
    if all {
        bits.extend(dense..total);
    } else {
        let words = dense.div_ceil(TAIL_SAMPLE_BITS)..total.div_ceil(TAIL_SAMPLE_BITS);
        bits.extend(
            words
                .map(|w| w * TAIL_SAMPLE_BITS + (w * 7) % TAIL_SAMPLE_BITS)
                .filter(|&b| b >= dense && b < total),
        );
    }
    bits
}

#[derive(Default)]
struct Tally {
    counts: BTreeMap<(&'static str, usize, Outcome), u64>,
    violations: Vec<String>,
}

#[test]
fn no_single_bit_flip_changes_a_record() {
    let started = Instant::now();
    let all = every_bit();
    let images = images();
    for image in &images {
        // Sanity: the undamaged image is clean and reads back whole.
        let read = read_back(&image.fresh_copy());
        assert!(matches!(read.open, Ok(None)) && read.error.is_none(), "{}", image.name);
        assert_eq!(read.records, image.records, "{}", image.name);
    }
    // The flushed-tail image differs from the synced one only in its active segment.
    let mut work: Vec<(usize, usize, u64)> = Vec::new();
    for (i, image) in images.iter().enumerate() {
        for (file, segment) in image.segments.iter().enumerate() {
            if i == 1 && file + 1 < image.segments.len() {
                continue;
            }
            work.extend(bits(segment, all).into_iter().map(|bit| (i, file, bit)));
        }
    }
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    let tallies: Vec<Tally> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let work = &work;
                let images = &images;
                scope.spawn(move || {
                    let mut tally = Tally::default();
                    for &(i, file, bit) in work.iter().skip(w).step_by(workers) {
                        let (outcome, violation) = evaluate(&images[i], file, bit);
                        *tally.counts.entry((images[i].name, file, outcome)).or_default() += 1;
                        tally.violations.extend(violation);
                    }
                    tally
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker")).collect()
    });
    let mut total = Tally::default();
    for tally in tallies {
        for (key, n) in tally.counts {
            *total.counts.entry(key).or_default() += n;
        }
        total.violations.extend(tally.violations);
    }
    let mode = if all { "every bit" } else { "dense region + 1/64 of the zero tail" };
    println!("{} flips ({mode}) in {:.1?}, {workers} threads", work.len(), started.elapsed());
    for ((name, file, outcome), n) in &total.counts {
        println!("  {name:12} segment {} {outcome:?}: {n}", file + 1);
    }
    let mut by_outcome: BTreeMap<Outcome, u64> = BTreeMap::new();
    for ((_, _, outcome), n) in &total.counts {
        *by_outcome.entry(*outcome).or_default() += n;
    }
    println!("totals: {by_outcome:?}");
    assert!(by_outcome.get(&Outcome::Corruption).copied().unwrap_or(0) > 0);
    assert!(by_outcome.get(&Outcome::Harmless).copied().unwrap_or(0) > 0);
    assert!(
        total.violations.is_empty(),
        "{} violations, first ones:\n{}",
        total.violations.len(),
        total.violations[..total.violations.len().min(20)].join("\n")
    );
}
