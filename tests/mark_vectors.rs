//! Proves that the log mark vectors (`format-spec/vectors/035-mark-*` to `039-*`) and the kept
//! tail vector (`040-kept-tail`) hold exactly the bytes their description in
//! `format-spec/vectors/README.md` ("Log mark and kept tail vectors") gives: built here from the
//! field tables of `format-spec/mark.md` ("Slot", "Kept tails"), independently of the library's
//! encoders (and, for the valid slots, also equal to `Mark::encode`), then the stated damage,
//! and also as rebuilt from the hex columns of their annotated `.txt`. It then checks the exact
//! outcome of each: `Mark::decode` of each slot and `mark::read` of the file placed as `MARK` in
//! a directory (the mark of the newer valid slot, or the error kind, path, offset and reason),
//! and `torn::decode` of the kept tail (its offset, the segment header of vector 001, and the
//! bytes, which decode to the frame of seq 2 under that header's salt).
//!
//! `FACTLOG_WRITE_VECTORS=1 cargo test --test integration mark_vectors::` writes the files of a vector that
//! does not exist yet; it never overwrites one.

use crate::common;

use std::fs;
use std::path::Path;

use common::vectors::{self, Section};
use factlog::engine::frame::{self, Decoded};
use factlog::engine::mark::{
    self, MARK_FILE_BYTES, MARK_FILE_NAME, MARK_SLOT_BYTES, MARK_SLOT_STRIDE, Mark, MarkState,
};
use factlog::engine::segment;
use factlog::engine::torn::{self, KEPT_HEADER_BYTES, KeptTail};
use factlog::fs::RealFs;
use factlog::{CorruptionReason, ErrorKind, SegmentId, Seq};

const WRITE_VARIABLE: &str = "FACTLOG_WRITE_VECTORS";
/// The salt of vector 001's segment: the mark names it as the last segment's.
const SALT: u64 = 0x0123_4567_89AB_CDEF;
/// The spec's numbers: a slot, where slot 1 starts, the whole file.
const SLOT: usize = 128;
const SLOT_1: usize = 512;
const FILE: usize = 1024;
/// The kept tail: where its bytes were in vector 001 (the frame of seq 2), and its header.
const KEPT_START: usize = 96;
const KEPT_END: usize = 128;
const KEPT_HEADER: usize = 96;
/// The name an open gives the kept tail of segment 1 cut at 96 (`mark.md`, "Kept tails").
const KEPT_NAME: &str = "00000000000000000001.seg.torn-00000000000000000096-1";

/// The fields of one slot, as the table of `format-spec/mark.md` ("Slot") lists them.
#[derive(Clone, Copy)]
struct Slot {
    version: u16,
    flags: u16,
    generation: u64,
    first_segment: u64,
    first_seq: u64,
    last_segment: u64,
    last_first_seq: u64,
    last_salt: u64,
    durable_seq: u64,
    durable_offset: u64,
}

impl Slot {
    /// The 128 bytes of the slot, field by field from the table; `crc` over `[0, 124)`.
    fn bytes(&self) -> [u8; SLOT] {
        let mut out = [0u8; SLOT];
        out[0..8].copy_from_slice(b"FACTLMRK");
        out[8..10].copy_from_slice(&self.version.to_le_bytes());
        out[10..12].copy_from_slice(&self.flags.to_le_bytes());
        // [12, 16) reserved: zero.
        let fields = [
            (16, self.generation),
            (24, self.first_segment),
            (32, self.first_seq),
            (40, self.last_segment),
            (48, self.last_first_seq),
            (56, self.last_salt),
            (64, self.durable_seq),
            (72, self.durable_offset),
        ];
        for (at, value) in fields {
            out[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        // [80, 124) reserved: zero.
        let crc = crc32fast::hash(&out[..124]);
        out[124..128].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// The mark the slot holds.
    fn mark(&self) -> Mark {
        Mark {
            generation: self.generation,
            clean: self.flags & 1 != 0,
            first_segment: SegmentId(self.first_segment),
            first_seq: Seq(self.first_seq),
            last_segment: SegmentId(self.last_segment),
            last_first_seq: Seq(self.last_first_seq),
            last_salt: self.last_salt,
            durable_seq: self.durable_seq,
            durable_offset: self.durable_offset,
        }
    }
}

/// Slot 0 of 035: generation 6, not clean.
fn older() -> Slot {
    Slot {
        version: 1,
        flags: 0,
        generation: 6,
        first_segment: 2,
        first_seq: 40,
        last_segment: 3,
        last_first_seq: 90,
        last_salt: SALT,
        durable_seq: 120,
        durable_offset: 4096,
    }
}

/// Slot 1 of 035: generation 7, clean; otherwise the fields of slot 0.
fn newer() -> Slot {
    Slot { flags: 1, generation: 7, ..older() }
}

/// A whole `MARK` file: the slots at 0 and 512, zeros elsewhere.
fn mark_file(slot_0: [u8; SLOT], slot_1: [u8; SLOT]) -> Vec<u8> {
    let mut out = vec![0u8; FILE];
    out[..SLOT].copy_from_slice(&slot_0);
    out[SLOT_1..SLOT_1 + SLOT].copy_from_slice(&slot_1);
    out
}

/// Vector 001, the segment whose header and frame of seq 2 the kept tail holds.
fn segment_001() -> Vec<u8> {
    fs::read(vectors::dir().join("001-valid-segment.bin")).expect("vector 001")
}

/// The kept tail, field by field from the table of `mark.md` ("Kept tails").
fn kept_tail() -> Vec<u8> {
    let segment = segment_001();
    let kept = &segment[KEPT_START..KEPT_END];
    let mut out = vec![0u8; KEPT_HEADER];
    out[0..8].copy_from_slice(b"FACTLTRN");
    out[8..10].copy_from_slice(&1u16.to_le_bytes());
    // [10, 12) reserved: zero; [12, 16) crc, below.
    out[16..24].copy_from_slice(&(KEPT_START as u64).to_le_bytes());
    out[24..32].copy_from_slice(&(kept.len() as u64).to_le_bytes());
    out[32..96].copy_from_slice(&segment[..64]);
    let crc = crc32fast::hash(&out[16..96]);
    out[12..16].copy_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(kept);
    out
}

/// What `Mark::decode` must say of one slot.
#[derive(Clone, Copy)]
enum SlotOutcome {
    Holds(Slot),
    NoMark,
    Refused,
}

/// What must be read from a vector.
enum Outcome {
    /// `mark::read` finds this mark; `Mark::decode` says these of slots 0 and 1. When a slot
    /// holds no mark but is not all zeros (a damaged update), `read` says the mark was found
    /// beside a damaged slot (`MarkState::FoundBesideDamagedSlot`).
    Mark(Slot, [SlotOutcome; 2]),
    /// `mark::read` refuses with `Corruption`, reason `BadMark(..)`.
    BadMark(&'static str, [SlotOutcome; 2]),
    /// `mark::read` refuses with `UnsupportedVersion`.
    UnsupportedVersion(u16, [SlotOutcome; 2]),
    /// `torn::decode` gives the kept tail of vector 001's bytes `[96, 128)`.
    KeptTail,
}

struct Vector {
    name: &'static str,
    about: &'static [&'static str],
    /// The bytes, built from the tables and the stated damage.
    bytes: Vec<u8>,
    /// `(offset, note)` for each changed byte range.
    notes: Vec<(usize, &'static str)>,
    outcome: Outcome,
}

fn vectors() -> Vec<Vector> {
    use SlotOutcome::{Holds, NoMark, Refused};
    let valid = mark_file(older().bytes(), newer().bytes());
    let mut torn = valid.clone();
    torn[SLOT_1 + 64] ^= 0x01;
    let mut no_valid = torn.clone();
    no_valid[64] ^= 0x01;
    let future = mark_file(older().bytes(), Slot { version: 2, ..newer() }.bytes());
    let rule = mark_file([0; SLOT], Slot { durable_offset: 8, ..newer() }.bytes());
    vec![
        Vector {
            name: "035-mark-valid",
            about: &[
                "035-mark-valid: a whole MARK file, slot 0 holding generation 6 (not clean) and",
                "slot 1 generation 7 (clean), both with first_segment 2, first_seq 40,",
                "last_segment 3, last_first_seq 90, last_salt 0x0123456789ABCDEF (vector 001's),",
                "durable_seq 120, durable_offset 4096.",
                "Expected: both slots valid; the mark is slot 1's, generation 7, clean.",
            ],
            bytes: valid,
            notes: Vec::new(),
            outcome: Outcome::Mark(newer(), [Holds(older()), Holds(newer())]),
        },
        Vector {
            name: "036-mark-torn-slot",
            about: &[
                "036-mark-torn-slot: 035 with byte 576 (the low byte of slot 1's durable_seq)",
                "XOR 0x01, so that slot 1's crc no longer matches, as after a torn update.",
                "Expected: slot 1 holds no mark; the mark is slot 0's, generation 6, not clean.",
            ],
            bytes: torn,
            notes: vec![(SLOT_1 + 64, "XOR 0x01: durable_seq 120 became 121 (damage)")],
            outcome: Outcome::Mark(older(), [Holds(older()), NoMark]),
        },
        Vector {
            name: "037-mark-no-valid-slot",
            about: &[
                "037-mark-no-valid-slot: 036 with byte 64 (the low byte of slot 0's durable_seq)",
                "XOR 0x01 too: neither slot's crc matches.",
                "Expected: Corruption { path: MARK, offset: 0, reason:",
                "BadMark(\"no valid slot\") }.",
            ],
            bytes: no_valid,
            notes: vec![
                (64, "XOR 0x01: durable_seq 120 became 121 (damage)"),
                (SLOT_1 + 64, "XOR 0x01: durable_seq 120 became 121 (damage)"),
            ],
            outcome: Outcome::BadMark("no valid slot", [NoMark, NoMark]),
        },
        Vector {
            name: "038-mark-future-version",
            about: &[
                "038-mark-future-version: 035 with slot 1's version 2 (bytes 520 and 521 are",
                "02 00) and its crc recomputed, so that the slot checks itself.",
                "Expected: UnsupportedVersion { path: MARK, found: 2, supported: 1 }, although",
                "slot 0 is valid: a newer build's mark is never guessed at.",
            ],
            bytes: future,
            notes: vec![
                (SLOT_1 + 8, "version 2 (damage)"),
                (SLOT_1 + 124, "crc recomputed over the changed slot"),
            ],
            outcome: Outcome::UnsupportedVersion(2, [Holds(older()), Refused]),
        },
        Vector {
            name: "039-mark-field-rule",
            about: &[
                "039-mark-field-rule: slot 0 all zero; slot 1 the slot of 035 with durable_offset",
                "8 (below 64, the segment header's end) and its crc computed over it, so that it",
                "passes its checksum and breaks a field rule.",
                "Expected: Corruption { path: MARK, offset: 0, reason: BadMark(\"field rule\") }.",
            ],
            bytes: rule,
            notes: vec![
                (SLOT_1 + 72, "durable_offset 8, below 64 (damage)"),
                (SLOT_1 + 124, "crc computed over the slot as it is"),
            ],
            outcome: Outcome::BadMark("field rule", [NoMark, Refused]),
        },
        Vector {
            name: "040-kept-tail",
            about: &[
                "040-kept-tail: the kept tail 00000000000000000001.seg.torn-00000000000000000096-1",
                "of vector 001 cut at 96: its 96-byte header (offset 96, bytes 32, vector 001's",
                "segment header) and bytes [96, 128) of vector 001, the frame of seq 2.",
                "Expected: valid; offset 96, vector 001's header, those 32 bytes, which decode",
                "under the header's salt to the frame of seq 2 (\"second!!\") and then End.",
            ],
            bytes: kept_tail(),
            notes: Vec::new(),
            outcome: Outcome::KeptTail,
        },
    ]
}

/// The sections of one slot of a `MARK` file at `at`: the fields in seven pieces, or one
/// section when the slot is all zero.
fn slot_sections(b: &[u8], number: usize, at: usize) -> Vec<Section> {
    let slot = &b[at..at + SLOT];
    let section = |start: usize, end: usize, what: String| Section {
        description: format!("[{}, {}) slot {number}: {what}", at + start, at + end),
        notes: Vec::new(),
        start: at + start,
        end: at + end,
    };
    if slot.iter().all(|&x| x == 0) {
        return vec![section(0, SLOT, "all zero, no magic: holds no mark".into())];
    }
    let flags = vectors::u16_at(slot, 10);
    let crc = vectors::u32_at(slot, 124);
    let matches = if crc == crc32fast::hash(&slot[..124]) { "matches" } else { "does not match" };
    let zero = |range: &[u8]| if range.iter().all(|&x| x == 0) { "zero" } else { "not zero" };
    vec![
        section(
            0,
            16,
            format!(
                "magic \"{}\", version {}, flags {flags:#06x} (clean: {}), reserved {}",
                vectors::ascii(&slot[..8]),
                vectors::u16_at(slot, 8),
                if flags & 1 != 0 { "yes" } else { "no" },
                zero(&slot[12..16])
            ),
        ),
        section(16, 24, format!("generation {}", vectors::u64_at(slot, 16))),
        section(
            24,
            40,
            format!(
                "first_segment {}, first_seq {}",
                vectors::u64_at(slot, 24),
                vectors::u64_at(slot, 32)
            ),
        ),
        section(
            40,
            64,
            format!(
                "last_segment {}, last_first_seq {}, last_salt {:#018x}",
                vectors::u64_at(slot, 40),
                vectors::u64_at(slot, 48),
                vectors::u64_at(slot, 56)
            ),
        ),
        section(
            64,
            80,
            format!(
                "durable_seq {}, durable_offset {}",
                vectors::u64_at(slot, 64),
                vectors::u64_at(slot, 72)
            ),
        ),
        section(80, 124, format!("reserved, {}", zero(&slot[80..124]))),
        section(124, SLOT, format!("crc {crc:#010x}, {matches} the CRC-32 of its [0, 124)")),
    ]
}

/// The annotated dump of a `MARK` vector: each slot in pieces, and the zeros around them.
fn mark_sections(b: &[u8]) -> Vec<Section> {
    let zeros = |start: usize, end: usize, what: &str| Section {
        description: format!("[{start}, {end}) zeros {what}"),
        notes: Vec::new(),
        start,
        end,
    };
    let mut sections = slot_sections(b, 0, 0);
    sections.push(zeros(SLOT, SLOT_1, "between the slots"));
    sections.extend(slot_sections(b, 1, SLOT_1));
    sections.push(zeros(SLOT_1 + SLOT, FILE, "after slot 1"));
    sections
}

/// The annotated dump of the kept tail: its header in three pieces, then the bytes.
fn kept_sections(b: &[u8]) -> Vec<Section> {
    let header = &b[32..96];
    vec![
        Section {
            description: format!(
                "[0, 16) magic \"{}\", version {}, reserved {}, crc {:#010x} (of [16, 96))",
                vectors::ascii(&b[..8]),
                vectors::u16_at(b, 8),
                vectors::u16_at(b, 10),
                vectors::u32_at(b, 12)
            ),
            notes: Vec::new(),
            start: 0,
            end: 16,
        },
        Section {
            description: format!(
                "[16, 32) offset {}, bytes {}",
                vectors::u64_at(b, 16),
                vectors::u64_at(b, 24)
            ),
            notes: Vec::new(),
            start: 16,
            end: 32,
        },
        Section {
            description: format!(
                "[32, 96) segment_header (vector 001's): segment_id {}, first_seq {}, \
                 salt {:#018x}",
                vectors::u64_at(header, 16),
                vectors::u64_at(header, 24),
                vectors::u64_at(header, 32)
            ),
            notes: Vec::new(),
            start: 32,
            end: 96,
        },
        Section {
            description: format!(
                "[96, {}) the bytes: segment bytes [96, 128) of vector 001, the frame of seq 2",
                b.len()
            ),
            notes: Vec::new(),
            start: 96,
            end: b.len(),
        },
    ]
}

fn dump(vector: &Vector) -> String {
    const MARK_LEGEND: &[&str] = &[
        "Generated by tests/mark_vectors.rs together with the .bin, which it checks byte for",
        "byte against the slot table of format-spec/mark.md (\"Slot\") and the stated damage,",
        "and reads with mark::read as DIR/MARK (format-spec/mark.md, \"Reading\").",
        "Each line: offset (hex), up to 16 bytes in hex, the same bytes as ASCII. A line \"*\"",
        "repeats the line above up to the next offset shown; the last line is the file length.",
        "Lines starting with \"#\" annotate the structure whose bytes follow them.",
    ];
    const KEPT_LEGEND: &[&str] = &[
        "Generated by tests/mark_vectors.rs together with the .bin, which it checks byte for",
        "byte against the table of format-spec/mark.md (\"Kept tails\"), and decodes with",
        "torn::decode.",
        "Each line: offset (hex), up to 16 bytes in hex, the same bytes as ASCII. The last line",
        "is the file length. Lines starting with \"#\" annotate the structure whose bytes follow.",
    ];
    let b = &vector.bytes;
    let (mut sections, legend) = match vector.outcome {
        Outcome::KeptTail => (kept_sections(b), KEPT_LEGEND),
        _ => (mark_sections(b), MARK_LEGEND),
    };
    for &(offset, note) in &vector.notes {
        let at = sections.iter_mut().rev().find(|s| s.start <= offset).expect("a section");
        at.notes.push(format!("{note} at offset {offset}"));
    }
    vectors::dump(vector.name, b, vector.about, legend, &sections)
}

fn check(name: &str) {
    let vector = vectors().into_iter().find(|v| v.name == name).expect("a listed vector");
    let bytes = vectors::Files {
        name,
        built: &vector.bytes,
        builder: "the tables of format-spec/mark.md and the stated damage",
        test: "mark_vectors",
        write_variable: WRITE_VARIABLE,
    }
    .committed(|| dump(&vector));
    let slots = match vector.outcome {
        Outcome::KeptTail => return check_kept_tail(&bytes),
        Outcome::Mark(_, slots)
        | Outcome::BadMark(_, slots)
        | Outcome::UnsupportedVersion(_, slots) => slots,
    };
    assert_eq!(bytes.len() as u64, MARK_FILE_BYTES, "{name}");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join(MARK_FILE_NAME);
    fs::write(&path, &bytes).expect("write MARK");
    for (number, (at, outcome)) in [0, SLOT_1].into_iter().zip(slots).enumerate() {
        let decoded = Mark::decode(&bytes[at..at + SLOT], &path);
        match (outcome, decoded) {
            (SlotOutcome::Holds(slot), Ok(Some(mark))) => {
                assert_eq!(mark, slot.mark(), "{name}: slot {number}");
            }
            (SlotOutcome::NoMark, Ok(None)) | (SlotOutcome::Refused, Err(_)) => {}
            (_, other) => panic!("{name}: slot {number}: {other:?}"),
        }
    }
    let read = mark::read(&RealFs, dir.path());
    match (vector.outcome, read) {
        (Outcome::Mark(slot, slots), Ok(state)) => {
            let damaged_beside = slots.iter().any(|s| matches!(s, SlotOutcome::NoMark))
                && (0..2).any(|i| {
                    let at = i * SLOT_1;
                    matches!(slots[i], SlotOutcome::NoMark)
                        && bytes[at..at + SLOT].iter().any(|&b| b != 0)
                });
            match state {
                MarkState::Found(mark) if !damaged_beside => {
                    assert_eq!(mark, slot.mark(), "{name}")
                }
                MarkState::FoundBesideDamagedSlot(mark) if damaged_beside => {
                    assert_eq!(mark, slot.mark(), "{name}");
                }
                other => panic!("{name}: {other:?}"),
            }
        }
        (Outcome::BadMark(expected, _), Err(error)) => match error.kind() {
            ErrorKind::Corruption { segment, path: named, offset, reason } => {
                assert_eq!(
                    (segment, named, offset, reason),
                    (&None, &path, &0, &CorruptionReason::BadMark(expected)),
                    "{name}"
                );
            }
            other => panic!("{name}: {other:?}"),
        },
        (Outcome::UnsupportedVersion(found, _), Err(error)) => match error.kind() {
            ErrorKind::UnsupportedVersion { path: named, found: f, supported } => {
                assert_eq!((named, *f, *supported), (&path, found, 1), "{name}");
            }
            other => panic!("{name}: {other:?}"),
        },
        (_, other) => panic!("{name}: {other:?}"),
    }
}

fn check_kept_tail(bytes: &[u8]) {
    let segment = segment_001();
    let path = Path::new(KEPT_NAME);
    assert!(torn::is_kept_name(KEPT_NAME));
    let header = segment::decode_header(&segment[..64], path).expect("vector 001's header");
    assert_eq!(header.salt, SALT);
    let kept = torn::decode(bytes, path).expect("a valid kept tail");
    let expected =
        KeptTail { header, offset: KEPT_START as u64, bytes: &segment[KEPT_START..KEPT_END] };
    assert_eq!(kept, expected);
    let salt_crc = frame::salt_crc(kept.header.salt);
    let Decoded::Frame(f) = frame::decode(kept.bytes, 0, salt_crc) else {
        panic!("the kept bytes start with a frame");
    };
    assert_eq!(
        (f.seq, f.count, f.payload, f.durable_claim, f.frame_bytes),
        (2, 1, &b"second!!"[..], Some(1), KEPT_END - KEPT_START)
    );
    assert!(matches!(frame::decode(kept.bytes, f.frame_bytes, salt_crc), Decoded::End));
}

#[test]
fn vector_035_mark_valid() {
    check("035-mark-valid");
}

#[test]
fn vector_036_mark_torn_slot() {
    check("036-mark-torn-slot");
}

#[test]
fn vector_037_mark_no_valid_slot() {
    check("037-mark-no-valid-slot");
}

#[test]
fn vector_038_mark_future_version() {
    check("038-mark-future-version");
}

#[test]
fn vector_039_mark_field_rule() {
    check("039-mark-field-rule");
}

#[test]
fn vector_040_kept_tail() {
    check("040-kept-tail");
}

/// The slots built from the spec's table are what the library's encoder writes, and the
/// spec's sizes are the library's.
#[test]
fn the_table_is_what_the_encoder_writes() {
    assert_eq!((MARK_SLOT_BYTES, MARK_SLOT_STRIDE, MARK_FILE_BYTES), (128, 512, 1024));
    assert_eq!(KEPT_HEADER_BYTES, KEPT_HEADER);
    for slot in [older(), newer()] {
        assert_eq!(slot.mark().encode(), slot.bytes(), "generation {}", slot.generation);
    }
}

/// Log mark (`NNN-mark-*`) and kept tail (`NNN-kept-tail*`) vectors.
fn is_mark_vector(stem: &str) -> bool {
    stem.get(3..).is_some_and(|rest| rest.starts_with("-mark-") || rest.starts_with("-kept-tail"))
}

#[test]
fn every_mark_vector_is_described_and_checked() {
    let listed: Vec<&str> = vectors().iter().map(|v| v.name).collect();
    assert!(listed.iter().all(|n| is_mark_vector(n)), "{listed:?}");
    let readme = fs::read_to_string(vectors::dir().join("README.md")).expect("vectors/README.md");
    let described: Vec<&str> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .map(str::trim)
        .filter(|h| is_mark_vector(h))
        .collect();
    assert_eq!(described, listed, "the mark vectors of vectors/README.md, in order");
    for entry in fs::read_dir(vectors::dir()).expect("the vectors directory") {
        let file = entry.expect("a directory entry").file_name().to_string_lossy().into_owned();
        let stem = file.strip_suffix(".bin").or_else(|| file.strip_suffix(".txt"));
        if let Some(stem) = stem.filter(|s| is_mark_vector(s)) {
            assert!(listed.contains(&stem), "{file} is not a checked mark vector");
        }
    }
    if !vectors::writing(WRITE_VARIABLE) {
        for name in &listed {
            for ext in ["bin", "txt"] {
                let path = vectors::dir().join(format!("{name}.{ext}"));
                assert!(path.exists(), "{} is missing", path.display());
            }
        }
    }
}
