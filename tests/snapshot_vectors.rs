//! Proves that the snapshot test vectors (`format-spec/vectors/NNN-snapshot-*`) hold the bytes
//! their description in `format-spec/vectors/README.md` ("Snapshot vectors") gives, and that
//! this build gives each one the outcome `format-spec/snapshot.md` promises. The hex columns of
//! each `.txt` must rebuild its `.bin`; 011 to 013 are rebuilt from the committed 010 by their
//! stated damage and compared byte for byte; 010 is checked by decoding it (the compressed bytes
//! may differ between zstd library versions, so `encode`'s output is checked by round trip and
//! by its compressor-independent header bytes instead); then every vector goes through
//! `snapshot::decode` and, placed alone in a store on `SimFs`, through `snapshot::load_newest`,
//! down to the error kind and reason.
//!
//! `FACTLOG_WRITE_VECTORS=1 cargo test --test integration snapshot_vectors::` writes the `.bin` and the `.txt`
//! of a vector whose `.bin` does not exist yet. It never overwrites a file.

use crate::common;

use common::vectors;
use std::fs;
use std::path::Path;

use factlog::fs::sim::SimFs;
use factlog::harness::snapshot::{self, Decoded};
use factlog::{ErrorKind, Seq, SnapshotFault};

const COVERED_SEQ: Seq = Seq(42);
const STATE_SCHEMA: u16 = 1;
const BODY_PIECE: &[u8] = b"factlog snapshot test vector 010. ";
const BODY_REPEATS: usize = 8;
const HEADER_BYTES: usize = 64;
const STORE: &str = "/store";
const WRITE_VARIABLE: &str = "FACTLOG_WRITE_VECTORS";

fn body() -> Vec<u8> {
    BODY_PIECE.repeat(BODY_REPEATS)
}

// ---------------------------------------------------------------------------------------------
// Building a vector and its annotated dump.

#[derive(Debug, Clone, Copy)]
enum Part {
    Identity,
    Lengths,
    BodyCrc,
    HeaderCrc,
    ZstdMagic,
    ZstdFrameHeader,
    BlockHeader { number: usize },
    BlockContent { number: usize, bytes: usize },
    ZstdChecksum,
    Trailing,
}

/// Bytes of the `Frame_Content_Size` field for a frame header descriptor (RFC 8878); a 2-byte
/// field holds the size minus 256.
fn content_size_bytes(descriptor: u8) -> usize {
    match descriptor >> 6 {
        0 => usize::from(descriptor >> 5 & 1 == 1),
        1 => 2,
        2 => 4,
        _ => 8,
    }
}

/// The structures of the zstd frame at offset 64 (RFC 8878, "Frames" and "Blocks"), as far as
/// the bytes go: the magic, the frame header, each block's header and content, the checksum.
fn zstd_parts(b: &[u8]) -> Vec<(usize, usize, Part)> {
    let mut parts = vec![(64, 68, Part::ZstdMagic)];
    let Some(&descriptor) = b.get(68) else { return parts };
    let single_segment = descriptor >> 5 & 1 == 1;
    let header = 1
        + usize::from(!single_segment)
        + [0, 1, 2, 4][usize::from(descriptor & 3)]
        + content_size_bytes(descriptor);
    parts.push((68, 68 + header, Part::ZstdFrameHeader));
    let mut at = 68 + header;
    for number in 1.. {
        let Some(raw) = b.get(at..at + 3) else { break };
        let block = u32::from(raw[0]) | u32::from(raw[1]) << 8 | u32::from(raw[2]) << 16;
        let size = (block >> 3) as usize;
        let bytes = if block >> 1 & 3 == 1 { 1 } else { size };
        parts.push((at, at + 3, Part::BlockHeader { number }));
        parts.push((at + 3, at + 3 + bytes, Part::BlockContent { number, bytes }));
        at += 3 + bytes;
        if block & 1 == 1 {
            break;
        }
    }
    if descriptor >> 2 & 1 == 1 {
        parts.push((at, at + 4, Part::ZstdChecksum));
        at += 4;
    }
    parts.push((at, usize::MAX, Part::Trailing));
    parts
}

#[derive(Debug)]
struct Span {
    start: usize,
    end: usize,
    part: Part,
    notes: Vec<String>,
}

/// A snapshot file under construction, with the structures it holds.
#[derive(Debug)]
struct Image {
    bytes: Vec<u8>,
    spans: Vec<Span>,
}

impl Image {
    fn new(bytes: Vec<u8>) -> Image {
        let mut image = Image { bytes, spans: Vec::new() };
        image.respan();
        image
    }

    /// Splits the file into its structures (the header by the spec's layout, the body at
    /// the zstd frame magic), keeping the notes already made.
    fn respan(&mut self) {
        let end = self.bytes.len();
        let mut spans = Vec::new();
        let header = [
            (0, 16, Part::Identity),
            (16, 40, Part::Lengths),
            (40, 60, Part::BodyCrc),
            (60, 64, Part::HeaderCrc),
        ];
        for (start, stop, part) in header.into_iter().chain(zstd_parts(&self.bytes)) {
            let stop = stop.min(end);
            if stop > start {
                let notes = self
                    .spans
                    .iter_mut()
                    .find(|s| s.start == start)
                    .map(|s| std::mem::take(&mut s.notes))
                    .unwrap_or_default();
                spans.push(Span { start, end: stop, part, notes });
            }
        }
        self.spans = spans;
    }

    /// Overwrites the bytes at `offset` and notes it on the structure they belong to.
    fn damage(mut self, offset: usize, bytes: &[u8], note: &str) -> Image {
        self.bytes[offset..offset + bytes.len()].copy_from_slice(bytes);
        self.note(offset, note)
    }

    /// Cuts the file to `length` bytes.
    fn truncate(mut self, length: usize, note: &str) -> Image {
        let note_at = length.saturating_sub(1);
        self.bytes.truncate(length);
        self.respan();
        self.note(note_at, note)
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

    fn dump(&self, name: &str, about: &[&str]) -> String {
        const LEGEND: &[&str] = &[
            "Generated by tests/snapshot_vectors.rs together with the .bin. That test rebuilds the",
            ".bin from the hex columns below; rebuilds 011 to 013 from the committed 010 by their",
            "damage; decodes each with snapshot::decode and loads it with snapshot::load_newest.",
            "010's zstd bytes are not compared with snapshot::encode's output (they may change with",
            "the zstd library); encode is checked by round trip and by its header bytes [0, 32) and",
            "[44, 60).",
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
            Part::Identity => format!(
                "header [0, 16): magic {:?}, format_version {}, state_schema {}, flags {}",
                String::from_utf8_lossy(&b[0..8]),
                vectors::u16_at(b, 8),
                vectors::u16_at(b, 10),
                vectors::u32_at(b, 12)
            ),
            Part::Lengths => {
                let compressed = vectors::u64_at(b, 32);
                let present = (b.len() - HEADER_BYTES) as u64;
                let verdict = if present == compressed {
                    "equals the file length minus 64".to_owned()
                } else {
                    format!("but the file holds {present} bytes after the header")
                };
                format!(
                    "header [16, 40): covered_seq {}, body_bytes {}, compressed_bytes \
                     {compressed}\n#   ({verdict})",
                    vectors::u64_at(b, 16),
                    vectors::u64_at(b, 24),
                )
            }
            Part::BodyCrc => {
                let stored = vectors::u32_at(b, 40);
                let actual = crc32fast::hash(&b[HEADER_BYTES..]);
                let verdict = if stored == actual {
                    "equals the CRC-32 of [64, end)".to_owned()
                } else {
                    format!("does not match: the CRC-32 of [64, end) is {actual:#010x}")
                };
                format!(
                    "header [40, 60): body_crc {stored:#010x}, {verdict};\n#   compression {} \
                     (zstd), reserved [46, 60) {}",
                    vectors::u16_at(b, 44),
                    if b[46..60].iter().all(|&x| x == 0) { "all zero" } else { "NOT all zero" }
                )
            }
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
            Part::ZstdMagic => {
                let frame = &b[HEADER_BYTES..];
                let content = match zstd::bulk::decompress(frame, 1 << 20) {
                    Ok(body) => format!("decompresses to {} bytes: {}", body.len(), show(&body)),
                    Err(_) => "does not decompress".to_owned(),
                };
                format!(
                    "body [64, {end}): zstd frame magic number 0xfd2fb528 (RFC 8878); the \
                     compressed body\n#   [64, {}) {content}",
                    b.len()
                )
            }
            Part::ZstdFrameHeader => {
                let d = b[start];
                let field = &b[end - content_size_bytes(d)..end];
                let content_size = match *field {
                    [] => "no content size".to_owned(),
                    [x] => format!("content size {x}"),
                    [x, y] => {
                        format!("content size {}", 256 + u32::from(u16::from_le_bytes([x, y])))
                    }
                    _ => format!(
                        "content size {}",
                        field.iter().rev().fold(0u64, |v, &x| v << 8 | u64::from(x))
                    ),
                };
                format!(
                    "zstd frame header [{start}, {end}): descriptor {d:#04x} (single segment {}, \
                     checksum {}, dictionary id\n#   bytes {}), {content_size}",
                    d >> 5 & 1,
                    d >> 2 & 1,
                    [0, 1, 2, 4][usize::from(d & 3)]
                )
            }
            Part::BlockHeader { number } => {
                let block = u32::from(b[start])
                    | u32::from(b[start + 1]) << 8
                    | u32::from(b[start + 2]) << 16;
                let kind = ["raw", "RLE", "compressed", "reserved"][(block >> 1 & 3) as usize];
                format!(
                    "zstd block {number} header [{start}, {end}): {}, type {} ({kind}), \
                     block size {}",
                    if block & 1 == 1 { "last block" } else { "not the last block" },
                    block >> 1 & 3,
                    block >> 3
                )
            }
            Part::BlockContent { number, bytes } => {
                let present = end - start;
                let shown = if present == bytes {
                    format!("{bytes} bytes")
                } else {
                    format!("{present} of its {bytes} bytes")
                };
                format!("zstd block {number} content [{start}, {end}), {shown}")
            }
            Part::ZstdChecksum => format!("zstd content checksum [{start}, {end})"),
            Part::Trailing => {
                format!("[{start}, {end}): {} bytes after the zstd frame", end - start)
            }
        }
    }
}

/// A body as runs of a repeated piece when it is one, else as its length.
fn show(body: &[u8]) -> String {
    if body.len() == BODY_PIECE.len() * BODY_REPEATS && body == &*BODY_PIECE.repeat(BODY_REPEATS) {
        format!("{BODY_REPEATS} x {:?}", String::from_utf8_lossy(BODY_PIECE))
    } else {
        "not the body of 010".to_owned()
    }
}

// ---------------------------------------------------------------------------------------------
// The vectors and what each must give.

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Valid,
    Corrupt(SnapshotFault),
    UnsupportedVersion { found: u16, supported: u16 },
}

struct Vector {
    name: &'static str,
    about: &'static [&'static str],
    /// Builds the file from the bytes of 010.
    build: fn(Vec<u8>) -> Image,
    outcome: Outcome,
}

fn vectors() -> Vec<Vector> {
    vec![
        Vector {
            name: "010-snapshot-valid",
            about: &[
                "010-snapshot-valid: covered_seq 42, state_schema 1, body: the 34 bytes",
                "\"factlog snapshot test vector 010. \" 8 times (272 bytes), as written by",
                "snapshot::encode (zstd level 3) with the zstd library of the generating build.",
                "Expected: decode gives covered_seq 42, state_schema 1 and the 272-byte body;",
                "load_newest loads it.",
            ],
            build: Image::new,
            outcome: Outcome::Valid,
        },
        Vector {
            name: "011-snapshot-bad-body-crc",
            about: &[
                "011-snapshot-bad-body-crc: 010 with byte 80 (the 17th compressed byte) XOR",
                "0x01; the header, body_crc included, is unchanged and still matches.",
                "Expected: CorruptSnapshot { reason: BadBodyChecksum }, not BadCompression: the",
                "body checksum is checked before decompression. load_newest skips it and loads",
                "nothing.",
            ],
            build: |bytes| {
                let flipped = bytes[80] ^ 0x01;
                let note = format!(
                    "damage: byte 80 changed from {:#04x} to {flipped:#04x} (bit 0 flipped)",
                    bytes[80]
                );
                Image::new(bytes).damage(80, &[flipped], &note)
            },
            outcome: Outcome::Corrupt(SnapshotFault::BadBodyChecksum),
        },
        Vector {
            name: "012-snapshot-future-version",
            about: &[
                "012-snapshot-future-version: 010 with format_version 2 (bytes 8 and 9 are",
                "02 00) and header_crc 0, which does not match the header.",
                "Expected: UnsupportedVersion { found: 2, supported: 1 }, not BadHeaderChecksum:",
                "the version is checked before the header checksum. load_newest skips it and",
                "loads nothing.",
            ],
            build: |bytes| {
                Image::new(bytes).damage(8, &[2, 0], "damage: format_version set to 2").damage(
                    60,
                    &[0; 4],
                    "damage: header_crc set to 0",
                )
            },
            outcome: Outcome::UnsupportedVersion { found: 2, supported: 1 },
        },
        Vector {
            name: "013-snapshot-truncated",
            about: &[
                "013-snapshot-truncated: 010 cut after byte 79: the header and the first 16",
                "compressed bytes remain; the header is unchanged.",
                "Expected: CorruptSnapshot { reason: LengthMismatch }. load_newest skips it and",
                "loads nothing.",
            ],
            build: |bytes| {
                Image::new(bytes).truncate(80, "damage: the file ends here, after byte 79")
            },
            outcome: Outcome::Corrupt(SnapshotFault::LengthMismatch),
        },
    ]
}

// ---------------------------------------------------------------------------------------------
// The checks.

/// The bytes of 010: the committed file, or what `encode` writes when it is being generated.
fn valid_bytes() -> Vec<u8> {
    let bin = vectors::dir().join("010-snapshot-valid.bin");
    match fs::read(&bin) {
        Ok(bytes) => bytes,
        Err(_) if vectors::writing(WRITE_VARIABLE) => {
            snapshot::encode(COVERED_SEQ, STATE_SCHEMA, &body()).expect("encode")
        }
        Err(e) => panic!("{}: {e}", bin.display()),
    }
}

fn outcome_of(kind: &ErrorKind, path: &Path) -> Outcome {
    match kind {
        ErrorKind::CorruptSnapshot { path: p, reason } => {
            assert_eq!(p, path, "the error names the file");
            Outcome::Corrupt(reason.clone())
        }
        ErrorKind::UnsupportedVersion { path: p, found, supported } => {
            assert_eq!(p, path, "the error names the file");
            Outcome::UnsupportedVersion { found: *found, supported: *supported }
        }
        other => panic!("expected a snapshot refusal, got {other:?}"),
    }
}

fn check_decode(vector: &Vector, bytes: &[u8]) {
    let path = Path::new("vector.snap");
    match snapshot::decode(path, bytes) {
        Ok(decoded) => {
            assert_eq!(vector.outcome, Outcome::Valid, "{}: decoded", vector.name);
            let expected =
                Decoded { covered_seq: COVERED_SEQ, state_schema: STATE_SCHEMA, body: body() };
            assert_eq!(decoded, expected, "{}: decoded fields and body", vector.name);
        }
        Err(e) => assert_eq!(outcome_of(e.kind(), path), vector.outcome, "{}", vector.name),
    }
}

fn check_load(vector: &Vector, bytes: &[u8]) {
    let fs = SimFs::new(10);
    let store = Path::new(STORE);
    let path = snapshot::snapshot_dir(store).join(snapshot::file_name(COVERED_SEQ));
    factlog::fs::Fs::create_dir_all(&fs, &snapshot::snapshot_dir(store)).expect("directory");
    fs.write_file(&path, bytes);
    let mut accepted = 0;
    let loaded = snapshot::load_newest(&fs, store, |_, _| {
        accepted += 1;
        Ok(())
    })
    .expect("load_newest");
    if vector.outcome == Outcome::Valid {
        let (meta, loaded_body) = loaded.loaded.expect("the valid vector loads");
        assert_eq!(
            (meta.path, meta.covered_seq, meta.state_schema, meta.file_bytes),
            (path, COVERED_SEQ, STATE_SCHEMA, bytes.len() as u64),
            "{}: meta",
            vector.name
        );
        assert_eq!(loaded_body, body(), "{}: body", vector.name);
        assert!(loaded.skipped.is_empty(), "{}: nothing skipped", vector.name);
        assert_eq!(accepted, 1);
    } else {
        assert!(loaded.loaded.is_none(), "{}: nothing loads", vector.name);
        assert_eq!(accepted, 0, "{}: a refused file never reaches accept", vector.name);
        let [skipped] = &loaded.skipped[..] else {
            panic!("{}: one skipped file, got {:?}", vector.name, loaded.skipped)
        };
        assert_eq!(skipped.path, path);
        assert_eq!(outcome_of(skipped.error.kind(), &path), vector.outcome, "{}", vector.name);
    }
}

/// 010 only: `encode` of its fields round-trips, and writes the same compressor-independent
/// header bytes; the `.bin`'s frame decompresses with zstd alone.
fn check_encoder(bytes: &[u8]) {
    let encoded = snapshot::encode(COVERED_SEQ, STATE_SCHEMA, &body()).expect("encode");
    let decoded = snapshot::decode(Path::new("encoded.snap"), &encoded).expect("round trip");
    assert_eq!(
        decoded,
        Decoded { covered_seq: COVERED_SEQ, state_schema: STATE_SCHEMA, body: body() }
    );
    assert_eq!(encoded[..32], bytes[..32], "magic, version, schema, flags, seq, body_bytes");
    assert_eq!(encoded[44..60], bytes[44..60], "compression and reserved");
    let alone = zstd::bulk::decompress(&bytes[HEADER_BYTES..], body().len()).expect("zstd");
    assert_eq!(alone, body(), "the frame decompresses with the zstd library alone");
    if encoded != bytes {
        println!("note: this zstd library compresses 010's body to other (equally valid) bytes");
    }
}

fn check(name: &str) {
    let vector = vectors().into_iter().find(|v| v.name == name).expect("a listed vector");
    let image = (vector.build)(valid_bytes());
    let bytes = vectors::Files {
        name: vector.name,
        built: &image.bytes,
        builder: "its build",
        test: "snapshot_vectors",
        write_variable: WRITE_VARIABLE,
    }
    .committed(|| image.dump(vector.name, vector.about));
    check_decode(&vector, &bytes);
    check_load(&vector, &bytes);
    if vector.outcome == Outcome::Valid {
        check_encoder(&bytes);
    }
    if vector.outcome == Outcome::Corrupt(SnapshotFault::BadBodyChecksum) {
        // The damaged frame still decompresses, to another body: only body_crc catches it.
        let other = zstd::bulk::decompress(&bytes[HEADER_BYTES..], body().len()).expect("zstd");
        assert_eq!(other.len(), body().len());
        assert_ne!(other, body(), "{name}: the flipped bit changes the body");
    }
}

#[test]
fn vector_010_snapshot_valid() {
    check("010-snapshot-valid");
}

#[test]
fn vector_011_snapshot_bad_body_crc() {
    check("011-snapshot-bad-body-crc");
}

#[test]
fn vector_012_snapshot_future_version() {
    check("012-snapshot-future-version");
}

#[test]
fn vector_013_snapshot_truncated() {
    check("013-snapshot-truncated");
}

fn is_snapshot_vector(stem: &str) -> bool {
    stem.get(3..).is_some_and(|rest| rest.starts_with("-snapshot-"))
}

#[test]
fn every_snapshot_vector_is_described_and_checked() {
    let listed: Vec<&str> = vectors().iter().map(|v| v.name).collect();
    assert!(listed.iter().all(|n| is_snapshot_vector(n)), "{listed:?}");
    let readme = fs::read_to_string(vectors::dir().join("README.md")).expect("vectors/README.md");
    let headings: Vec<&str> =
        readme.lines().filter_map(|l| l.strip_prefix("### ")).map(str::trim).collect();
    let mut numbers: Vec<&str> = headings.iter().map(|h| &h[..3]).collect();
    numbers.sort_unstable();
    numbers.dedup();
    assert_eq!(numbers.len(), headings.len(), "vector numbers are unique across all vectors");
    let described: Vec<&str> = headings.into_iter().filter(|h| is_snapshot_vector(h)).collect();
    assert_eq!(described, listed, "the snapshot vectors of vectors/README.md, in order");
    let entries = fs::read_dir(vectors::dir()).expect("the vectors directory");
    for entry in entries {
        let file = entry.expect("a directory entry").file_name().to_string_lossy().into_owned();
        let stem = file.strip_suffix(".bin").or_else(|| file.strip_suffix(".txt"));
        if let Some(stem) = stem.filter(|s| is_snapshot_vector(s)) {
            assert!(listed.contains(&stem), "{file} is not a checked snapshot vector");
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
