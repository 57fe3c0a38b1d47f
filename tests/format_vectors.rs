//! Proves that every test vector in `format-spec/vectors/` holds exactly the bytes its
//! description in `format-spec/vectors/README.md` gives, and that this build gives each one the
//! outcome the spec promises. Each vector is built in code from the public encoders
//! (`SegmentHeader::encode`, `frame::encode_single`, `frame::encode_batch`, fixed salts, fixed
//! payloads, then the stated damage) and compared byte for byte with the committed `.bin` and
//! with the hex columns of its annotated `.txt`; its header and frames are decoded with
//! `segment::decode_header` and `frame::decode`; then it is copied into a temporary directory as
//! `00000000000000000001.seg` and checked with `verify`, `Log::open_read_only` and `Log::open`
//! under both recovery modes against the decision table of `format-spec/recovery.md`.
//!
//! `FACTLOG_WRITE_VECTORS=1 cargo test --test integration format_vectors::` writes the `.bin` and the `.txt`
//! of a vector whose `.bin` does not exist yet. It never overwrites a file: the committed vectors
//! are the compatibility promise and are never regenerated.

use crate::common;

use common::vectors;
use std::fs;
use std::path::{Path, PathBuf};

use factlog::engine::frame::{self, Decoded};
use factlog::engine::segment::{self, SegmentHeader};
use factlog::{
    CorruptionReason, ErrorKind, FrameFault, Log, Options, RecoveryMode, SegmentId, Seq, TailCut,
    VerifyOutcome,
};

/// The salt of every vector's header (`vectors/README.md`, "Common content").
const SALT: u64 = 0x0123_4567_89AB_CDEF;
/// The salt vector 005's stale frame was checksummed with.
const STALE_SALT: u64 = 0xFEDC_BA98_7654_3210;
/// The `header_crc` of the common header, as `segment.md` ("Example") states it.
const HEADER_CRC: u32 = 0x988D_EB7E;
/// Length of every vector file: the smallest allowed `segment_bytes`.
const FILE_BYTES: usize = 8192;
/// The name each vector is given in a temporary log directory.
const SEGMENT_NAME: &str = "00000000000000000001.seg";
const LOCK_NAME: &str = "LOCK";
const FRAME_HEADER_BYTES: usize = 24;
const WRITE_VARIABLE: &str = "FACTLOG_WRITE_VECTORS";

fn options() -> Options {
    Options::new().background_threads(false).segment_bytes(FILE_BYTES as u64)
}

fn common_header() -> SegmentHeader {
    SegmentHeader { format_version: 1, id: SegmentId(1), first_seq: Seq(1), salt: SALT }
}

// ---------------------------------------------------------------------------------------------
// Building a vector: the bytes and the structures they hold, for the annotated dump.

#[derive(Debug, Clone, Copy)]
enum Part {
    HeaderIdentity,
    HeaderIds,
    HeaderSalt,
    HeaderCrc,
    FrameHeader { number: usize },
    Payload { number: usize, frame_start: usize },
    Padding { number: usize },
    ZeroTail,
}

/// One structure of a vector file: `[start, end)` and the notes the dump prints before it.
#[derive(Debug)]
struct Span {
    start: usize,
    end: usize,
    part: Part,
    notes: Vec<String>,
}

/// A segment file under construction, with the structures written into it.
#[derive(Debug)]
struct Image {
    bytes: Vec<u8>,
    salt: u64,
    spans: Vec<Span>,
    frames: usize,
}

impl Image {
    fn new(header: &SegmentHeader) -> Image {
        let mut image = Image {
            bytes: header.encode().to_vec(),
            salt: header.salt,
            spans: Vec::new(),
            frames: 0,
        };
        for (start, end, part) in [
            (0, 16, Part::HeaderIdentity),
            (16, 32, Part::HeaderIds),
            (32, 60, Part::HeaderSalt),
            (60, 64, Part::HeaderCrc),
        ] {
            image.spans.push(Span { start, end, part, notes: Vec::new() });
        }
        image
    }

    /// Appends a single-record frame encoded with `salt`, written when `durable` was the
    /// durable seq.
    fn single(&mut self, salt: u64, seq: u64, durable: u64, payload: &[u8]) {
        let start = self.bytes.len();
        frame::encode_single(&mut self.bytes, frame::salt_crc(salt), seq, durable, payload);
        self.frame_spans(start, payload.len());
    }

    /// Appends a batch frame encoded with this segment's salt.
    fn batch(&mut self, seq: u64, durable: u64, records: &[&[u8]]) {
        let start = self.bytes.len();
        frame::encode_batch(&mut self.bytes, frame::salt_crc(self.salt), seq, durable, records);
        self.frame_spans(start, frame::batch_payload_bytes(records));
    }

    fn frame_spans(&mut self, start: usize, payload_bytes: usize) {
        self.frames += 1;
        let number = self.frames;
        let payload = start + FRAME_HEADER_BYTES;
        let padding = payload + payload_bytes;
        let end = self.bytes.len();
        let mut push = |start, end, part| {
            if end > start {
                self.spans.push(Span { start, end, part, notes: Vec::new() });
            }
        };
        push(start, payload, Part::FrameHeader { number });
        push(payload, padding, Part::Payload { number, frame_start: start });
        push(padding, end, Part::Padding { number });
    }

    /// Pads the file with zeros to its full length.
    fn finish(mut self) -> Image {
        let end = self.bytes.len();
        assert!(end <= FILE_BYTES, "the frames fit in the file");
        self.bytes.resize(FILE_BYTES, 0);
        self.spans.push(Span { start: end, end: FILE_BYTES, part: Part::ZeroTail, notes: vec![] });
        self
    }

    /// Overwrites the bytes at `offset` and notes it on the structure they belong to.
    fn damage(mut self, offset: usize, bytes: &[u8], note: &str) -> Image {
        self.bytes[offset..offset + bytes.len()].copy_from_slice(bytes);
        self.note(offset, note)
    }

    fn note(mut self, offset: usize, note: &str) -> Image {
        let span = self
            .spans
            .iter_mut()
            .find(|s| (s.start..s.end).contains(&offset))
            .expect("a note on a structure of the file");
        span.notes.push(note.to_owned());
        self
    }

    /// The annotated hex dump: `about` first, then each structure's annotation and its bytes.
    fn dump(&self, name: &str, about: &[&str]) -> String {
        const LEGEND: &[&str] = &[
            "Generated by tests/format_vectors.rs together with the .bin, which it checks byte for byte.",
            "Each line: offset (hex), up to 16 bytes in hex, the same bytes as ASCII. A line \"*\" repeats",
            "the line above up to the next offset shown; the last line is the file length. Lines",
            "starting with \"#\" annotate the structure whose bytes follow them.",
        ];
        let sections: Vec<vectors::Section> = self
            .spans
            .iter()
            .map(|span| vectors::Section {
                description: self.describe(span),
                notes: span.notes.clone(),
                start: span.start,
                end: span.end,
            })
            .collect();
        vectors::dump(name, &self.bytes, about, LEGEND, &sections)
    }

    fn describe(&self, span: &Span) -> String {
        let b = &self.bytes;
        let (start, end) = (span.start, span.end);
        match span.part {
            Part::HeaderIdentity => format!(
                "header [0, 16): magic {:?}, format_version {}, content {}, header_bytes {}",
                String::from_utf8_lossy(&b[0..8]),
                vectors::u16_at(b, 8),
                vectors::u16_at(b, 10),
                vectors::u32_at(b, 12)
            ),
            Part::HeaderIds => {
                format!(
                    "header [16, 32): segment_id {}, first_seq {}",
                    vectors::u64_at(b, 16),
                    vectors::u64_at(b, 24)
                )
            }
            Part::HeaderSalt => format!(
                "header [32, 60): salt {:#018x}, reserved [40, 60) {}",
                vectors::u64_at(b, 32),
                if b[40..60].iter().all(|&x| x == 0) { "all zero" } else { "NOT all zero" }
            ),
            Part::HeaderCrc => {
                let stored = vectors::u32_at(b, 60);
                let actual = crc32fast::hash(&b[..60]);
                let verdict = if stored == actual {
                    "equals the CRC-32 of [0, 60)".to_owned()
                } else {
                    format!("does not match: the CRC-32 of [0, 60) is {actual:#010x}")
                };
                format!("header [60, 64): header_crc {stored:#010x}, {verdict}")
            }
            Part::FrameHeader { number } => {
                let o = start;
                let (seq, lag) = (vectors::u64_at(b, o + 8), vectors::u32_at(b, o + 20));
                let kind = b[o + 18];
                let kind_name = match kind {
                    frame::KIND_SINGLE => "single record",
                    frame::KIND_BATCH => "batch",
                    _ => "unknown kind",
                };
                let claim = if lag == u32::MAX {
                    "no claim".to_owned()
                } else if lag >= 1 && u64::from(lag) <= seq {
                    format!("durable claim {}", seq - u64::from(lag))
                } else {
                    "invalid".to_owned()
                };
                let outcome = match frame::decode(b, o, frame::salt_crc(self.salt)) {
                    Decoded::End => "End".to_owned(),
                    Decoded::Frame(_) => "Frame".to_owned(),
                    Decoded::Invalid(fault) => format!("Invalid({fault:?})"),
                };
                format!(
                    "frame {number} header [{o}, {end}): crc {:#010x}, len {}, seq {seq}, count {}, \
                     kind {kind} ({kind_name}),\n#   flags {}, durable_lag {lag} ({claim}); \
                     decoding at {o} with this segment's salt gives {outcome}",
                    vectors::u32_at(b, o),
                    vectors::u32_at(b, o + 4),
                    vectors::u16_at(b, o + 16),
                    b[o + 19],
                )
            }
            Part::Payload { number, frame_start } => {
                let payload = &b[start..end];
                let content = if b[frame_start + 18] == frame::KIND_BATCH {
                    batch_entries(payload).unwrap_or_else(|| runs(payload))
                } else {
                    show(payload)
                };
                format!("frame {number} payload [{start}, {end}), {} bytes: {content}", end - start)
            }
            Part::Padding { number } => format!(
                "frame {number} padding [{start}, {end}): {} {} bytes",
                end - start,
                if b[start..end].iter().all(|&x| x == 0) { "zero" } else { "NON-ZERO" }
            ),
            Part::ZeroTail => format!(
                "[{start}, {end}): {}, never written (zeros to {end})",
                if b[start..end].iter().all(|&x| x == 0) { "zero tail" } else { "NON-ZERO tail" }
            ),
        }
    }
}

/// A payload as a quoted string when it is short printable text, else as runs of equal bytes.
fn show(bytes: &[u8]) -> String {
    if !bytes.is_empty() && bytes.len() <= 40 && bytes.iter().all(|b| (0x20..0x7f).contains(b)) {
        format!("{:?}", String::from_utf8_lossy(bytes))
    } else {
        runs(bytes)
    }
}

fn runs(bytes: &[u8]) -> String {
    let mut runs: Vec<(u8, usize)> = Vec::new();
    for &b in bytes {
        match runs.last_mut() {
            Some((value, n)) if *value == b => *n += 1,
            _ => runs.push((b, 1)),
        }
    }
    if runs.len() > 4 {
        return "(mixed bytes)".to_owned();
    }
    let shown: Vec<String> = runs
        .iter()
        .map(|&(value, n)| {
            let ascii = if (0x21..0x7f).contains(&value) {
                format!(" '{}'", value as char)
            } else {
                String::new()
            };
            format!("{n} x {value:#04x}{ascii}")
        })
        .collect();
    shown.join(", then ")
}

/// The entries of a batch payload, or `None` if they do not fill it exactly.
fn batch_entries(mut payload: &[u8]) -> Option<String> {
    let mut shown = Vec::new();
    while !payload.is_empty() {
        let (len, rest) = payload.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        let (record, rest) = rest.split_at_checked(len)?;
        shown.push(format!("[len {len}] {}", show(record)));
        payload = rest;
    }
    Some(format!("entries {}", shown.join(", ")))
}

// ---------------------------------------------------------------------------------------------
// What each vector must give.

/// An error the spec promises, down to the reason and offset.
#[derive(Debug, Clone)]
enum Refusal {
    Corruption { segment: Option<SegmentId>, offset: u64, reason: CorruptionReason },
    UnsupportedVersion { found: u16, supported: u16 },
}

/// The outcome of the open-time analysis of the vector as the only (active) segment.
#[derive(Debug, Clone)]
enum Outcome {
    /// Every mode opens, nothing is cut, `verify` is clean.
    Clean,
    /// A torn tail `[offset, offset + bytes)` up to the last non-zero byte.
    TornTail { offset: u64, bytes: u64 },
    /// Every mode, the read-only open and `verify` refuse with this error.
    Refused(Refusal),
}

/// The outcome of `frame::decode` at one offset.
#[derive(Debug, Clone)]
enum Decode {
    End,
    Invalid(FrameFault),
    Frame {
        seq: u64,
        count: u16,
        kind: u8,
        claim: Option<u64>,
        records: Vec<Vec<u8>>,
        frame_bytes: usize,
    },
}

fn single(seq: u64, claim: u64, payload: &[u8], frame_bytes: usize) -> Decode {
    Decode::Frame {
        seq,
        count: 1,
        kind: frame::KIND_SINGLE,
        claim: Some(claim),
        records: vec![payload.to_vec()],
        frame_bytes,
    }
}

struct Vector {
    /// `NNN-name`, the file name without its extension.
    name: &'static str,
    /// Content and expected outcome, restated from `vectors/README.md` at the top of the `.txt`.
    about: &'static [&'static str],
    build: fn() -> Image,
    /// What `segment::decode_header` returns.
    header: Result<SegmentHeader, Refusal>,
    /// What `frame::decode` returns at each listed offset (with the header's salt).
    decodes: Vec<(usize, Decode)>,
    /// The recovered end `P` of the active segment; `None` when the header is refused.
    end: Option<u64>,
    /// The records before `P`, from seq 1.
    records: Vec<Vec<u8>>,
    outcome: Outcome,
}

impl Vector {
    fn last_seq(&self) -> Option<Seq> {
        (!self.records.is_empty()).then_some(Seq(self.records.len() as u64))
    }

    fn expected_records(&self) -> Vec<(u64, Vec<u8>)> {
        (1..).zip(self.records.iter().cloned()).collect()
    }
}

fn base_frames(image: &mut Image) {
    image.single(SALT, 1, 0, b"first");
    image.single(SALT, 2, 1, b"second!!");
    image.single(SALT, 3, 2, b"third record.");
}

fn base_image() -> Image {
    let mut image = Image::new(&common_header());
    base_frames(&mut image);
    image.finish()
}

fn base_records() -> Vec<Vec<u8>> {
    vec![b"first".to_vec(), b"second!!".to_vec(), b"third record.".to_vec()]
}

fn base_decodes() -> Vec<(usize, Decode)> {
    vec![
        (64, single(1, 0, b"first", 32)),
        (96, single(2, 1, b"second!!", 32)),
        (128, single(3, 2, b"third record.", 40)),
    ]
}

fn with(
    mut list: Vec<(usize, Decode)>,
    more: impl IntoIterator<Item = (usize, Decode)>,
) -> Vec<(usize, Decode)> {
    list.extend(more);
    list
}

fn damaged(reason: CorruptionReason, offset: u64) -> Outcome {
    Outcome::Refused(Refusal::Corruption { segment: Some(SegmentId(1)), offset, reason })
}

fn vectors() -> Vec<Vector> {
    vec![
        Vector {
            name: "001-valid-segment",
            about: &[
                "001-valid-segment: the common header (segment_id 1, first_seq 1, salt",
                "0x0123456789abcdef) and the three base frames, seqs 1 to 3, each written after",
                "the one before was synced (durable_lag 1).",
                "Expected: decoding gives Frame at 64, 96 and 128, then End at 168. Clean: both",
                "writer modes and the read-only open succeed with tail_cut None and read records",
                "1 \"first\", 2 \"second!!\", 3 \"third record.\"; last_seq 3; verify exits 0.",
            ],
            build: base_image,
            header: Ok(common_header()),
            decodes: with(base_decodes(), [(168, Decode::End)]),
            end: Some(168),
            records: base_records(),
            outcome: Outcome::Clean,
        },
        Vector {
            name: "002-torn-tail",
            about: &[
                "002-torn-tail: the base frames, then frame 4 at 168 (seq 4, durable_lag 1, 400",
                "bytes of 0x78 'x', [168, 592)) torn at the 512-byte sector boundary: [168, 512)",
                "present, [512, 592) zero.",
                "Expected: decoding at 168 gives Invalid(BadChecksum); no witness frame; the last",
                "non-zero byte is 511. TolerateTornTail: records 1 to 3 and TailCut { segment 1,",
                "offset 168, bytes 344 }, after which [168, 512) is zero and a second open is",
                "clean. Strict: TornTail { segment 1, offset 168, bytes 344 }, file unchanged.",
                "Read-only: records 1 to 3, the same TailCut reported, file unchanged. verify: 1.",
            ],
            build: || {
                let mut image = Image::new(&common_header());
                base_frames(&mut image);
                image.single(SALT, 4, 3, &[b'x'; 400]);
                image.finish().damage(
                    512,
                    &[0; 80],
                    "torn write: [512, 592), past the 512-byte sector boundary, never reached \
                     the disk",
                )
            },
            header: Ok(common_header()),
            decodes: with(base_decodes(), [(168, Decode::Invalid(FrameFault::BadChecksum))]),
            end: Some(168),
            records: base_records(),
            outcome: Outcome::TornTail { offset: 168, bytes: 344 },
        },
        Vector {
            name: "003-zero-tail",
            about: &[
                "003-zero-tail: frame 1 (seq 1, \"first\") at [64, 96); frame 2 (seq 2,",
                "durable_lag 1, 8056 bytes of 0x33 '3') at [96, 8176), no padding; the last 16",
                "bytes of the file are zero.",
                "Expected: decoding at 8176 gives End by its second form (fewer than 24 bytes",
                "remain, all zero). Clean; records 1 and 2; last_seq 2; verify exits 0.",
            ],
            build: || {
                let mut image = Image::new(&common_header());
                image.single(SALT, 1, 0, b"first");
                image.single(SALT, 2, 1, &[b'3'; 8056]);
                image.finish()
            },
            header: Ok(common_header()),
            decodes: vec![
                (64, single(1, 0, b"first", 32)),
                (96, single(2, 1, &[b'3'; 8056], 8080)),
                (8176, Decode::End),
            ],
            end: Some(8176),
            records: vec![b"first".to_vec(), vec![b'3'; 8056]],
            outcome: Outcome::Clean,
        },
        Vector {
            name: "004-bad-crc",
            about: &[
                "004-bad-crc: 001 with one bit flipped: byte 120, the first payload byte of",
                "frame 2, changed from 0x73 's' to 0x72 'r'.",
                "Expected: decoding at 96 gives Invalid(BadChecksum); frame 3 at 128 is a",
                "witness frame whose durable claim 2 covers the expected seq 2. Both writer",
                "modes and the read-only open: Corruption { segment Some(1), offset 96, reason",
                "DurableRecordDamaged(BadChecksum) }, file unchanged. verify: exit 3.",
            ],
            build: || {
                base_image().damage(
                    120,
                    &[0x72],
                    "damage: byte 120, the first payload byte, changed from 0x73 's' to 0x72 'r'",
                )
            },
            header: Ok(common_header()),
            decodes: vec![
                (64, single(1, 0, b"first", 32)),
                (96, Decode::Invalid(FrameFault::BadChecksum)),
                (128, single(3, 2, b"third record.", 40)),
            ],
            end: Some(96),
            records: vec![b"first".to_vec()],
            outcome: damaged(CorruptionReason::DurableRecordDamaged(FrameFault::BadChecksum), 96),
        },
        Vector {
            name: "005-stale-salt",
            about: &[
                "005-stale-salt: base frames 1 and 2, then frame 3 exactly as in 001 except",
                "that its crc was computed with salt 0xfedcba9876543210 (another segment's).",
                "Expected: decoding at 128 gives Invalid(BadChecksum); the stale frame is no",
                "witness; the last non-zero byte is 164. TolerateTornTail: records 1 and 2 and",
                "TailCut { segment 1, offset 128, bytes 37 }. Strict: TornTail { segment 1,",
                "offset 128, bytes 37 }, file unchanged. Read-only: records 1 and 2, the same",
                "TailCut reported, file unchanged. verify: exit 0.",
            ],
            build: || {
                let mut image = Image::new(&common_header());
                image.single(SALT, 1, 0, b"first");
                image.single(SALT, 2, 1, b"second!!");
                image.single(STALE_SALT, 3, 2, b"third record.");
                image.finish().note(
                    128,
                    "stale: this crc was computed with salt 0xfedcba9876543210, not this \
                     segment's",
                )
            },
            header: Ok(common_header()),
            decodes: vec![
                (64, single(1, 0, b"first", 32)),
                (96, single(2, 1, b"second!!", 32)),
                (128, Decode::Invalid(FrameFault::BadChecksum)),
                (168, Decode::End),
            ],
            end: Some(128),
            records: vec![b"first".to_vec(), b"second!!".to_vec()],
            outcome: Outcome::TornTail { offset: 128, bytes: 37 },
        },
        Vector {
            name: "006-future-version",
            about: &[
                "006-future-version: 001 with format_version 2 (bytes 8 and 9 are 02 00) and",
                "header_crc 0, which does not match the header. Written when 1 was the only",
                "version; 014 now tests a version from the future.",
                "Expected from a build that knows only version 1: UnsupportedVersion { found 2,",
                "supported 1 }. From a build that knows versions 1 and 2 (this one): in every",
                "mode, for the read-only open and for verify: Corruption { segment None, offset",
                "0, reason BadHeaderChecksum }. The file is unchanged. verify: exit 3.",
            ],
            build: || {
                base_image().damage(8, &[2, 0], "damage: format_version set to 2").damage(
                    60,
                    &[0; 4],
                    "damage: header_crc set to 0",
                )
            },
            header: Err(Refusal::Corruption {
                segment: None,
                offset: 0,
                reason: CorruptionReason::BadHeaderChecksum,
            }),
            decodes: with(base_decodes(), [(168, Decode::End)]),
            end: None,
            records: vec![],
            outcome: Outcome::Refused(Refusal::Corruption {
                segment: None,
                offset: 0,
                reason: CorruptionReason::BadHeaderChecksum,
            }),
        },
        Vector {
            name: "007-bad-magic",
            about: &[
                "007-bad-magic: 001 with byte 0 changed from 0x46 'F' to 0x47 'G' (magic",
                "\"GACTLSEG\"); header_crc is left as in 001 and no longer matches.",
                "Expected: in every mode, for the read-only open and for verify: Corruption {",
                "segment None, offset 0, reason BadMagic }, not BadHeaderChecksum: the magic is",
                "checked first. The file is unchanged. verify: exit 3.",
            ],
            build: || {
                base_image().damage(0, b"G", "damage: byte 0 changed from 0x46 'F' to 0x47 'G'")
            },
            header: Err(Refusal::Corruption {
                segment: None,
                offset: 0,
                reason: CorruptionReason::BadMagic,
            }),
            decodes: with(base_decodes(), [(168, Decode::End)]),
            end: None,
            records: vec![],
            outcome: Outcome::Refused(Refusal::Corruption {
                segment: None,
                offset: 0,
                reason: CorruptionReason::BadMagic,
            }),
        },
        Vector {
            name: "008-oversized-length",
            about: &[
                "008-oversized-length: 001 with the len field of frame 2 (bytes [100, 104)) set",
                "to 16777217 (01 00 00 01), one more than the limit.",
                "Expected: decoding at 96 gives Invalid(OversizedLength), without reading the",
                "claimed length; the witness scan finds frame 3 at 128 with durable claim 2,",
                "which covers the expected seq 2. Both writer modes and the read-only open:",
                "Corruption { segment Some(1), offset 96, reason",
                "DurableRecordDamaged(OversizedLength) }, file unchanged. verify: exit 3.",
            ],
            build: || {
                base_image().damage(
                    100,
                    &16_777_217_u32.to_le_bytes(),
                    "damage: len set to 16777217, one more than the 16 MiB limit",
                )
            },
            header: Ok(common_header()),
            decodes: vec![
                (64, single(1, 0, b"first", 32)),
                (96, Decode::Invalid(FrameFault::OversizedLength)),
                (128, single(3, 2, b"third record.", 40)),
            ],
            end: Some(96),
            records: vec![b"first".to_vec()],
            outcome: damaged(
                CorruptionReason::DurableRecordDamaged(FrameFault::OversizedLength),
                96,
            ),
        },
        Vector {
            name: "009-batch",
            about: &[
                "009-batch: a batch frame (kind 2, seq 1, count 3, durable_lag 1) at [64, 112)",
                "holding \"a\", \"bc\", \"def\" (18 payload bytes, 6 padding), then a single record",
                "(seq 4, \"after\", durable claim 3, durable_lag 1) at [112, 144).",
                "Expected: clean; records 1 \"a\", 2 \"bc\", 3 \"def\", 4 \"after\"; last_seq 4;",
                "verify exits 0.",
            ],
            build: || {
                let mut image = Image::new(&common_header());
                image.batch(1, 0, &[b"a", b"bc", b"def"]);
                image.single(SALT, 4, 3, b"after");
                image.finish()
            },
            header: Ok(common_header()),
            decodes: vec![
                (
                    64,
                    Decode::Frame {
                        seq: 1,
                        count: 3,
                        kind: frame::KIND_BATCH,
                        claim: Some(0),
                        records: vec![b"a".to_vec(), b"bc".to_vec(), b"def".to_vec()],
                        frame_bytes: 48,
                    },
                ),
                (112, single(4, 3, b"after", 32)),
                (144, Decode::End),
            ],
            end: Some(144),
            records: vec![b"a".to_vec(), b"bc".to_vec(), b"def".to_vec(), b"after".to_vec()],
            outcome: Outcome::Clean,
        },
        Vector {
            name: "014-future-version",
            about: &[
                "014-future-version: 001 with format_version 3 (bytes 8 and 9 are 03 00) and",
                "header_crc 0, which does not match the header.",
                "Expected: in every mode, for the read-only open and for verify:",
                "UnsupportedVersion { found 3, supported 2 }, not BadHeaderChecksum: the version",
                "is checked before the checksum. A writer open leaves only LOCK behind: the",
                "segment is unchanged and no prealloc.tmp is created. verify: exit 3.",
            ],
            build: || {
                base_image().damage(8, &[3, 0], "damage: format_version set to 3").damage(
                    60,
                    &[0; 4],
                    "damage: header_crc set to 0",
                )
            },
            header: Err(Refusal::UnsupportedVersion { found: 3, supported: 2 }),
            decodes: with(base_decodes(), [(168, Decode::End)]),
            end: None,
            records: vec![],
            outcome: Outcome::Refused(Refusal::UnsupportedVersion { found: 3, supported: 2 }),
        },
    ]
}

// ---------------------------------------------------------------------------------------------
// The checks.

fn check(name: &str) {
    let vector = vectors().into_iter().find(|v| v.name == name).expect("a listed vector");
    let image = (vector.build)();
    assert_eq!(image.bytes.len(), FILE_BYTES, "{name}: file length");
    let bytes = vectors::Files {
        name: vector.name,
        built: &image.bytes,
        builder: "the encoder",
        test: "format_vectors",
        write_variable: WRITE_VARIABLE,
    }
    .committed(|| image.dump(vector.name, vector.about));
    check_decoders(&vector, &bytes);
    check_verify(&vector, &bytes);
    for mode in [RecoveryMode::TolerateTornTail, RecoveryMode::Strict] {
        check_read_only(&vector, &bytes, mode);
        check_writer(&vector, &bytes, mode);
    }
}

fn assert_refusal(expected: &Refusal, got: &ErrorKind, path: &Path, what: &str) {
    match (expected, got) {
        (
            Refusal::Corruption { segment, offset, reason },
            ErrorKind::Corruption { segment: s, path: p, offset: o, reason: r },
        ) => assert_eq!((s, p.as_path(), o, r), (segment, path, offset, reason), "{what}"),
        (
            Refusal::UnsupportedVersion { found, supported },
            ErrorKind::UnsupportedVersion { path: p, found: f, supported: s },
        ) => assert_eq!((p.as_path(), f, s), (path, found, supported), "{what}"),
        _ => panic!("{what}: expected {expected:?}, got {got:?}"),
    }
}

fn check_decoders(vector: &Vector, bytes: &[u8]) {
    let name = vector.name;
    let path = Path::new(SEGMENT_NAME);
    match (&vector.header, segment::decode_header(bytes, path)) {
        (Ok(expected), Ok(header)) => {
            assert_eq!(&header, expected, "{name}: decode_header");
            assert_eq!(vectors::u32_at(bytes, 60), HEADER_CRC, "{name}: the header of segment.md");
        }
        (Err(refusal), Err(error)) => {
            assert_refusal(refusal, error.kind(), path, &format!("{name}: decode_header"));
        }
        (expected, got) => panic!("{name}: decode_header: expected {expected:?}, got {got:?}"),
    }
    let salt_crc = frame::salt_crc(SALT);
    for (offset, expected) in &vector.decodes {
        let what = format!("{name}: decode at {offset}");
        match (expected, frame::decode(bytes, *offset, salt_crc)) {
            (Decode::End, Decoded::End) => {}
            (Decode::Invalid(fault), Decoded::Invalid(got)) => assert_eq!(got, *fault, "{what}"),
            (
                Decode::Frame { seq, count, kind, claim, records, frame_bytes },
                Decoded::Frame(f),
            ) => {
                let got: Vec<Vec<u8>> = f.records().map(<[u8]>::to_vec).collect();
                assert_eq!(
                    (f.seq, f.count, f.kind, f.durable_claim, f.frame_bytes),
                    (*seq, *count, *kind, *claim, *frame_bytes),
                    "{what}: seq, count, kind, durable claim, frame bytes"
                );
                assert_eq!(&got, records, "{what}: records");
                let len = vectors::u32_at(bytes, offset + 4) as usize;
                assert_eq!(f.payload, &bytes[offset + 24..offset + 24 + len], "{what}: payload");
            }
            (expected, got) => panic!("{what}: expected {expected:?}, got {got:?}"),
        }
    }
}

/// A temporary log directory holding the vector as its only segment.
struct Placed {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    segment: PathBuf,
}

fn place(bytes: &[u8]) -> Placed {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dir = tmp.path().to_path_buf();
    let segment = dir.join(SEGMENT_NAME);
    fs::write(&segment, bytes).expect("write the segment");
    Placed { _tmp: tmp, dir, segment }
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("list the log directory")
        .map(|e| e.expect("directory entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn read_all(log: &Log) -> Vec<(u64, Vec<u8>)> {
    let reader = log.read_from(Seq(1)).expect("a reader");
    reader.map(|r| r.expect("a record")).map(|r| (r.seq.0, r.payload.to_vec())).collect()
}

/// The fields of a cut the vectors pin: where and how much (the seq, the frames after the hole
/// and the kept copy are checked by `tests/mark_damage.rs`).
#[derive(Debug, PartialEq)]
struct Cut {
    segment: SegmentId,
    path: std::path::PathBuf,
    offset: u64,
    bytes: u64,
}

fn tail_cut(placed: &Placed, offset: u64, bytes: u64) -> Cut {
    Cut { segment: SegmentId(1), path: placed.segment.clone(), offset, bytes }
}

fn cut_of(cut: &TailCut) -> Cut {
    Cut { segment: cut.segment, path: cut.path.clone(), offset: cut.offset, bytes: cut.bytes }
}

/// Checks an opened log: what recovery reports and the records it reads.
fn assert_opened(log: &Log, vector: &Vector, cut: Option<Cut>, what: &str) {
    let report = log.recovery_report();
    assert_eq!(report.tail_cut.as_ref().map(cut_of), cut, "{what}: tail_cut");
    assert_eq!(report.segments, 1, "{what}: segments");
    assert_eq!(report.records_scanned, vector.records.len() as u64, "{what}: records scanned");
    assert_eq!(report.last_seq, vector.last_seq(), "{what}: reported last_seq");
    assert_eq!(log.last_seq(), vector.last_seq(), "{what}: last_seq");
    assert_eq!(log.durable_seq(), vector.last_seq(), "{what}: durable_seq");
    assert_eq!(read_all(log), vector.expected_records(), "{what}: records");
}

fn assert_torn_tail(got: &ErrorKind, expected: &Cut, what: &str) {
    match got {
        ErrorKind::TornTail { segment, path, offset, bytes } => assert_eq!(
            (segment, path, offset, bytes),
            (&expected.segment, &expected.path, &expected.offset, &expected.bytes),
            "{what}"
        ),
        other => panic!("{what}: expected TornTail, got {other:?}"),
    }
}

fn check_verify(vector: &Vector, bytes: &[u8]) {
    let what = format!("{}: verify", vector.name);
    let placed = place(bytes);
    let report = factlog::verify(&placed.dir, options()).expect("verify runs");
    match (&vector.outcome, &report.outcome) {
        (Outcome::Clean, VerifyOutcome::Clean) => {}
        (Outcome::TornTail { offset, bytes }, VerifyOutcome::TornTail(cut)) => {
            assert_eq!(cut_of(cut), tail_cut(&placed, *offset, *bytes), "{what}");
        }
        (Outcome::Refused(refusal), VerifyOutcome::Corrupt(error)) => {
            assert_refusal(refusal, error.kind(), &placed.segment, &what);
        }
        (expected, got) => panic!("{what}: expected {expected:?}, got {got:?}"),
    }
    assert_eq!(report.records, vector.records.len() as u64, "{what}: records");
    assert_eq!(report.last_seq, vector.last_seq(), "{what}: last_seq");
    match vector.end {
        Some(end) => {
            assert_eq!(report.segments.len(), 1, "{what}: segments");
            assert_eq!(report.segments[0].used_bytes, end, "{what}: used bytes");
            assert_eq!(report.segments[0].file_bytes, FILE_BYTES as u64, "{what}: file bytes");
        }
        None => assert!(report.segments.is_empty(), "{what}: no segment passes its header"),
    }
    assert_eq!(fs::read(&placed.segment).expect("read segment"), bytes, "{what}: unchanged");
    assert_eq!(names(&placed.dir), [SEGMENT_NAME], "{what}: nothing created");
}

fn check_read_only(vector: &Vector, bytes: &[u8], mode: RecoveryMode) {
    let what = format!("{}: read-only open, {mode}", vector.name);
    let placed = place(bytes);
    let result = Log::open_read_only(&placed.dir, options().recovery_mode(mode));
    match (&vector.outcome, mode, result) {
        (Outcome::Clean, _, Ok(log)) => assert_opened(&log, vector, None, &what),
        (Outcome::TornTail { offset, bytes }, RecoveryMode::TolerateTornTail, Ok(log)) => {
            assert_opened(&log, vector, Some(tail_cut(&placed, *offset, *bytes)), &what);
        }
        (Outcome::TornTail { offset, bytes }, RecoveryMode::Strict, Err(error)) => {
            assert_torn_tail(error.kind(), &tail_cut(&placed, *offset, *bytes), &what);
        }
        (Outcome::Refused(refusal), _, Err(error)) => {
            assert_refusal(refusal, error.kind(), &placed.segment, &what);
        }
        (expected, _, got) => panic!("{what}: expected {expected:?}, got {got:?}"),
    }
    assert_eq!(fs::read(&placed.segment).expect("read segment"), bytes, "{what}: unchanged");
    assert_eq!(names(&placed.dir), [SEGMENT_NAME], "{what}: nothing created, no LOCK");
}

fn check_writer(vector: &Vector, bytes: &[u8], mode: RecoveryMode) {
    let what = format!("{}: writer open, {mode}", vector.name);
    let placed = place(bytes);
    let result = Log::open(&placed.dir, options().recovery_mode(mode));
    let mut expected_file = bytes.to_vec();
    match (&vector.outcome, mode, result) {
        (Outcome::Clean, _, Ok(log)) => {
            assert_opened(&log, vector, None, &what);
            log.close().expect("close");
        }
        (Outcome::TornTail { offset, bytes }, RecoveryMode::TolerateTornTail, Ok(log)) => {
            assert_opened(&log, vector, Some(tail_cut(&placed, *offset, *bytes)), &what);
            log.close().expect("close");
            let cut = usize::try_from(*offset).expect("offset")
                ..usize::try_from(offset + bytes).expect("end");
            expected_file[cut].fill(0);
        }
        (Outcome::TornTail { offset, bytes }, RecoveryMode::Strict, Err(error)) => {
            assert_torn_tail(error.kind(), &tail_cut(&placed, *offset, *bytes), &what);
        }
        (Outcome::Refused(refusal), _, Err(error)) => {
            assert_refusal(refusal, error.kind(), &placed.segment, &what);
        }
        (expected, _, got) => panic!("{what}: expected {expected:?}, got {got:?}"),
    }
    let file = fs::read(&placed.segment).expect("read segment");
    vectors::assert_same_bytes(&file, &expected_file, &format!("{what}: the segment afterwards"));
    let header_refused = matches!(
        vector.outcome,
        Outcome::Refused(
            Refusal::UnsupportedVersion { .. } | Refusal::Corruption { segment: None, .. }
        )
    );
    if header_refused {
        // A refused header is found before the lock is taken: nothing is created.
        assert_eq!(names(&placed.dir), [SEGMENT_NAME], "{what}: nothing created");
    } else {
        assert_eq!(names(&placed.dir), [SEGMENT_NAME, LOCK_NAME], "{what}: only LOCK created");
    }
    if matches!(vector.outcome, Outcome::TornTail { .. }) && mode == RecoveryMode::TolerateTornTail
    {
        // The cut is durable and complete: every later open finds a clean log.
        for again in [RecoveryMode::TolerateTornTail, RecoveryMode::Strict] {
            let log = Log::open(&placed.dir, options().recovery_mode(again)).expect("reopen");
            assert_opened(&log, vector, None, &format!("{what}, then reopened {again}"));
            log.close().expect("close");
        }
        let report = factlog::verify(&placed.dir, options()).expect("verify runs");
        assert!(matches!(report.outcome, VerifyOutcome::Clean), "{what}: verify after the cut");
    }
}

// ---------------------------------------------------------------------------------------------
// One test per vector, and the bookkeeping that keeps the list complete.

#[test]
fn vector_001_valid_segment() {
    check("001-valid-segment");
}

#[test]
fn vector_002_torn_tail() {
    check("002-torn-tail");
    // The README's promise that the cut gives back 001: the torn frame was the only difference.
    let find = |name: &str| vectors().into_iter().find(|v| v.name == name).expect("listed");
    let mut cut = (find("002-torn-tail").build)().bytes;
    cut[168..512].fill(0);
    vectors::assert_same_bytes(
        &cut,
        &(find("001-valid-segment").build)().bytes,
        "002 after the cut",
    );
}

#[test]
fn vector_003_zero_tail() {
    check("003-zero-tail");
}

#[test]
fn vector_004_bad_crc() {
    check("004-bad-crc");
}

#[test]
fn vector_005_stale_salt() {
    check("005-stale-salt");
}

#[test]
fn vector_006_future_version() {
    check("006-future-version");
}

#[test]
fn vector_007_bad_magic() {
    check("007-bad-magic");
}

#[test]
fn vector_008_oversized_length() {
    check("008-oversized-length");
}

#[test]
fn vector_009_batch() {
    check("009-batch");
}

#[test]
fn vector_014_future_version() {
    check("014-future-version");
}

/// Snapshot vectors (`NNN-snapshot-*`) are snapshot files, checked by
/// `tests/snapshot_vectors.rs`; this file checks the segment vectors.
fn is_snapshot_vector(stem: &str) -> bool {
    stem.get(3..).is_some_and(|rest| rest.starts_with("-snapshot-"))
}

/// Event vectors (`NNN-event-*` records and `NNN-request-keys`) are checked by
/// `tests/event_vectors.rs`.
fn is_event_vector(stem: &str) -> bool {
    stem.get(3..).is_some_and(|rest| rest.starts_with("-event-") || rest == "-request-keys")
}

/// Gap-file vectors (`NNN-gaps*`) are checked by `tests/salvage_gaps_vector.rs`.
fn is_gaps_vector(stem: &str) -> bool {
    stem.get(3..).is_some_and(|rest| rest.starts_with("-gaps"))
}

/// Replica part vectors (`NNN-replica-*`) are checked by `tests/replica_part_vectors.rs`.
fn is_replica_vector(stem: &str) -> bool {
    stem.get(3..).is_some_and(|rest| rest.starts_with("-replica-"))
}

/// Log mark and kept tail vectors (`NNN-mark-*`, `NNN-kept-tail*`) are checked by
/// `tests/mark_vectors.rs`.
fn is_mark_vector(stem: &str) -> bool {
    stem.get(3..).is_some_and(|rest| rest.starts_with("-mark-") || rest.starts_with("-kept-tail"))
}

/// Every segment vector file in the directory and every segment vector the README describes is
/// checked here, and numbers are not reused: a vector can be added, never dropped.
#[test]
fn every_vector_is_described_and_checked() {
    let listed: Vec<&str> = vectors().iter().map(|v| v.name).collect();
    let mut numbers: Vec<&str> = listed.iter().map(|n| &n[..3]).collect();
    numbers.sort_unstable();
    numbers.dedup();
    assert_eq!(numbers.len(), listed.len(), "vector numbers are unique");
    for name in &listed {
        let (number, rest) = name.split_at(3);
        assert!(number.bytes().all(|b| b.is_ascii_digit()) && rest.starts_with('-'), "{name}");
    }
    let readme = fs::read_to_string(vectors::dir().join("README.md")).expect("vectors/README.md");
    let described: Vec<&str> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .map(str::trim)
        .filter(|name| {
            !is_snapshot_vector(name)
                && !is_event_vector(name)
                && !is_gaps_vector(name)
                && !is_replica_vector(name)
                && !is_mark_vector(name)
        })
        .collect();
    assert_eq!(described, listed, "the segment vectors of vectors/README.md, in order");
    let writing = std::env::var(WRITE_VARIABLE).is_ok_and(|v| v == "1");
    for file in names(&vectors::dir()) {
        if file == "README.md" {
            continue;
        }
        let stem = file.strip_suffix(".bin").or_else(|| file.strip_suffix(".txt"));
        if stem.is_some_and(|s| {
            is_snapshot_vector(s)
                || is_event_vector(s)
                || is_gaps_vector(s)
                || is_replica_vector(s)
                || is_mark_vector(s)
        }) {
            continue;
        }
        assert!(stem.is_some_and(|s| listed.contains(&s)), "{file} is not a checked vector");
    }
    if !writing {
        for name in &listed {
            for ext in ["bin", "txt"] {
                let path = vectors::dir().join(format!("{name}.{ext}"));
                assert!(path.exists(), "{} is missing", path.display());
            }
        }
    }
}

/// Parses the hex columns of an example block (lines `XXXXXXXX  hex...  comment`) that
/// follows `heading` in a spec document, returning the first offset and the bytes.
fn spec_example(document: &str, heading: &str) -> (usize, Vec<u8>) {
    let text = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("format-spec").join(document),
    )
    .expect("spec document");
    let after = text.split_once(heading).expect("example heading").1;
    let mut lines = after
        .lines()
        .skip_while(|l| !l.starts_with("```"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"));
    let first = lines.next().expect("an example line");
    let start = usize::from_str_radix(&first[..8], 16).expect("offset");
    let mut bytes = vectors::hex_columns(first).expect("hex");
    for line in lines {
        let offset = usize::from_str_radix(&line[..8], 16).expect("offset");
        assert_eq!(offset, start + bytes.len(), "{document}: example offsets follow each other");
        bytes.extend(vectors::hex_columns(line).expect("hex"));
    }
    (start, bytes)
}

/// The example dumps in `segment.md` and `record.md` are what the encoders write.
#[test]
fn spec_examples_are_what_the_encoder_writes() {
    let header = common_header();
    assert_eq!(spec_example("segment.md", "### Example"), (0, header.encode().to_vec()));
    let mut bytes = header.encode().to_vec();
    frame::encode_single(&mut bytes, header.salt_crc(), 1, 0, b"hello");
    frame::encode_batch(&mut bytes, header.salt_crc(), 2, 1, &[b"ab".as_slice(), b"cde"]);
    assert_eq!(spec_example("record.md", "## Example"), (64, bytes[64..].to_vec()));
}
