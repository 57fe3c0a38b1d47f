//! Proves that the replica part vectors hold exactly the bytes their description in
//! `format-spec/vectors/README.md` ("Replica part vectors") gives, also as rebuilt from the hex
//! columns of their annotated `.txt` (and that the `.txt` is exactly the dump this file
//! writes), and that `replica::part::decode` gives exactly the outcome the README states:
//!
//! - `031-replica-part-*` to `034-*` were written when parts were of version 1; their bytes
//!   never change. They are built field by field in the 48-byte layout of part version 1 and
//!   the stated damage. This build reads part version 2 only, so each is checked for what it
//!   gives now, and for what the rules of part version 1 gave (their outcome when they were
//!   written, which their `.txt` still states).
//! - `046-replica-part-v2-*` to `049-*` are parts of version 2, built with
//!   `replica::part::encode` and the stated damage: the header and body of the valid part
//!   (whose body decodes to the frames of seqs 1 and 2), and the error kind and reason of each
//!   refused one.
//!
//! `FACTLOG_WRITE_VECTORS=1 cargo test --test integration replica_part_vectors::` writes the files of a
//! vector that does not exist yet; it never overwrites one.

use crate::common;

use std::fs;

use common::vectors::{self, Section};
use factlog::ErrorKind;
use factlog::engine::frame::{self, Decoded};
use factlog::replica::part::{self, PART_HEADER_BYTES, PART_VERSION, PartHeader};
use factlog::replica::part_name;

const WRITE_VARIABLE: &str = "FACTLOG_WRITE_VECTORS";
/// The salt of vector 001's segment, which the part's header repeats.
const SALT: u64 = 0x0123_4567_89AB_CDEF;
/// The replica the parts of version 2 belong to.
const REPLICA_ID: u128 = 0x0123_4567_89ab_cdef_0123_4567_89ab_cdef;
/// The body: bytes `[64, 128)` of vector 001, the frames of seqs 1 and 2.
const START: u64 = 64;
const END: u64 = 128;
const FIRST_SEQ: u64 = 1;
const LAST_SEQ: u64 = 2;
/// Bytes of the header of a part of version 1, and where its checksums lie.
const V1_HEADER_BYTES: usize = 48;
const V1_BODY_CRC_AT: usize = 40;
const V1_HEADER_CRC_AT: usize = 44;
/// Where the header checksum of a part of version 2 lies.
const HEADER_CRC_AT: usize = 76;
/// The reason `part::decode` gives for a part of version 1.
const VERSION_1_REASON: &str = "a part of version 1, the format of an older replica, which \
                                names no replica: it does not belong to this one";

/// What a decoder says of a vector.
#[derive(Clone, Copy)]
enum Outcome {
    Valid,
    /// `ReplicaDamaged` naming the object, with this reason.
    Damaged(&'static str),
    /// `UnsupportedVersion { found, supported }`.
    UnsupportedVersion(u16, u16),
}

impl Outcome {
    /// The outcome as the README states it.
    fn described(self) -> String {
        match self {
            Outcome::Valid => "valid".to_owned(),
            Outcome::Damaged(reason) => {
                format!("`ReplicaDamaged` naming the object, reason `{reason}`")
            }
            Outcome::UnsupportedVersion(found, supported) => {
                format!("`UnsupportedVersion {{ found: {found}, supported: {supported} }}`")
            }
        }
    }
}

/// The header layout a vector's bytes have.
#[derive(Clone, Copy)]
enum Layout {
    /// The 48-byte header of part version 1 (and of 033, which only changes its version).
    Version1,
    /// The 80-byte header of part version 2 (and of 048, which only changes its version).
    Version2,
}

struct Vector {
    name: &'static str,
    /// The `.txt`'s first lines. For 031 to 034 they are as written under part version 1, and
    /// state the outcome of that version.
    about: &'static [&'static str],
    /// The bytes, built from the valid part of their layout and the stated damage.
    bytes: Vec<u8>,
    layout: Layout,
    /// `(offset, note)` for each changed byte range.
    notes: Vec<(usize, &'static str)>,
    /// What `part::decode` of this build says.
    outcome: Outcome,
    /// For a vector written under part version 1: what the rules of that version said.
    version_1_outcome: Option<Outcome>,
}

/// Bytes `[64, 128)` of vector 001.
fn body() -> Vec<u8> {
    let segment = fs::read(vectors::dir().join("001-valid-segment.bin")).expect("vector 001");
    segment[START as usize..END as usize].to_vec()
}

fn header() -> PartHeader {
    PartHeader {
        start: START,
        end: END,
        salt: SALT,
        replica_id: REPLICA_ID,
        first_seq: FIRST_SEQ,
        last_seq: LAST_SEQ,
    }
}

/// The valid part of version 2.
fn valid() -> Vec<u8> {
    part::encode(header(), &body())
}

/// The same body as a part of version 1 writes it (`format-spec/replication.md`, "Part", as it
/// stood for version 1): magic, version 1, reserved 0, `header_bytes` 48, start, end, salt,
/// `body_crc`, `header_crc` over `[0, 44)`, body.
fn version_1() -> Vec<u8> {
    let body = body();
    let mut out = Vec::new();
    out.extend_from_slice(b"FACTLPRT");
    out.extend_from_slice(&1_u16.to_le_bytes());
    out.extend_from_slice(&0_u16.to_le_bytes());
    out.extend_from_slice(&(V1_HEADER_BYTES as u32).to_le_bytes());
    out.extend_from_slice(&START.to_le_bytes());
    out.extend_from_slice(&END.to_le_bytes());
    out.extend_from_slice(&SALT.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    let header_crc = crc32fast::hash(&out[..V1_HEADER_CRC_AT]);
    out.extend_from_slice(&header_crc.to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// `bytes` with `version` at 8 and the header checksum at `crc_at` recomputed over the bytes
/// before it, so that the header checks itself.
fn with_version(mut bytes: Vec<u8>, version: u16, crc_at: usize) -> Vec<u8> {
    bytes[8..10].copy_from_slice(&version.to_le_bytes());
    let crc = crc32fast::hash(&bytes[..crc_at]);
    bytes[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
    bytes
}

fn vectors() -> Vec<Vector> {
    let mut v1_bad_crc = version_1();
    v1_bad_crc[72] ^= 0x01;
    let mut bad_crc = valid();
    bad_crc[104] ^= 0x01;
    vec![
        Vector {
            name: "031-replica-part-valid",
            about: &[
                "031-replica-part-valid: the part segments/00000000000000000001/",
                "00000000000000000064-00000000000000000128.part: bytes [64, 128) of vector 001 (the",
                "frames of seqs 1 and 2) under vector 001's salt 0x0123456789ABCDEF.",
                "Expected: valid; start 64, end 128, that salt; the body decodes to seqs 1 and 2.",
            ],
            bytes: version_1(),
            layout: Layout::Version1,
            notes: Vec::new(),
            outcome: Outcome::Damaged(VERSION_1_REASON),
            version_1_outcome: Some(Outcome::Valid),
        },
        Vector {
            name: "032-replica-part-bad-body-crc",
            about: &[
                "032-replica-part-bad-body-crc: 031 with byte 72 (the 25th body byte, the first",
                "payload byte of seq 1: 'f' becomes 'g') XOR 0x01; the header is unchanged.",
                "Expected: ReplicaDamaged, \"the body's checksum does not match\".",
            ],
            bytes: v1_bad_crc,
            layout: Layout::Version1,
            notes: vec![(72, "byte 72 XOR 0x01: 'f' became 'g' (damage)")],
            outcome: Outcome::Damaged(VERSION_1_REASON),
            version_1_outcome: Some(Outcome::Damaged("the body's checksum does not match")),
        },
        Vector {
            name: "033-replica-part-future-version",
            about: &[
                "033-replica-part-future-version: 031 with version 2 (bytes 8 and 9 are 02 00) and",
                "header_crc recomputed, so that the header checks itself.",
                "Expected: UnsupportedVersion { found: 2, supported: 1 }.",
            ],
            bytes: with_version(version_1(), 2, V1_HEADER_CRC_AT),
            layout: Layout::Version1,
            notes: vec![
                (8, "version 2 (damage)"),
                (V1_HEADER_CRC_AT, "header_crc recomputed over the changed header"),
            ],
            outcome: Outcome::Damaged("the header's checksum does not match"),
            version_1_outcome: Some(Outcome::UnsupportedVersion(2, 1)),
        },
        Vector {
            name: "034-replica-part-short",
            about: &[
                "034-replica-part-short: 031 cut after byte 79: the header and the first 32 body",
                "bytes (the frame of seq 1) remain, as after an upload that was cut short.",
                "Expected: ReplicaDamaged, \"32 body bytes where the header says 64\".",
            ],
            bytes: version_1()[..V1_HEADER_BYTES + 32].to_vec(),
            layout: Layout::Version1,
            notes: vec![(80, "the file ends here: 32 of the 64 body bytes (damage)")],
            outcome: Outcome::Damaged(VERSION_1_REASON),
            version_1_outcome: Some(Outcome::Damaged("32 body bytes where the header says 64")),
        },
        Vector {
            name: "046-replica-part-v2-valid",
            about: &[
                "046-replica-part-v2-valid: the part segments/00000000000000000001/",
                "00000000000000000064-00000000000000000128.part of part version 2: bytes [64, 128)",
                "of vector 001 (the frames of seqs 1 and 2) under vector 001's salt",
                "0x0123456789ABCDEF, replica id 0x0123456789abcdef0123456789abcdef, first_seq 1,",
                "last_seq 2: the 80-byte header and the 64-byte body.",
                "Expected: valid; start 64, end 128, that salt, that replica id, seqs 1 to 2; the",
                "body decodes to the frames of seqs 1 and 2.",
            ],
            bytes: valid(),
            layout: Layout::Version2,
            notes: Vec::new(),
            outcome: Outcome::Valid,
            version_1_outcome: None,
        },
        Vector {
            name: "047-replica-part-v2-bad-body-crc",
            about: &[
                "047-replica-part-v2-bad-body-crc: 046 with byte 104 (the 25th body byte, the",
                "first payload byte of seq 1: 'f' becomes 'g') XOR 0x01; the header is unchanged.",
                "Expected: ReplicaDamaged, \"the body's checksum does not match\".",
            ],
            bytes: bad_crc,
            layout: Layout::Version2,
            notes: vec![(104, "byte 104 XOR 0x01: 'f' became 'g' (damage)")],
            outcome: Outcome::Damaged("the body's checksum does not match"),
            version_1_outcome: None,
        },
        Vector {
            name: "048-replica-part-v2-future-version",
            about: &[
                "048-replica-part-v2-future-version: 046 with version 3 (bytes 8 and 9 are 03 00)",
                "and header_crc recomputed, so that the header checks itself.",
                "Expected: UnsupportedVersion { found: 3, supported: 2 }.",
            ],
            bytes: with_version(valid(), 3, HEADER_CRC_AT),
            layout: Layout::Version2,
            notes: vec![
                (8, "version 3 (damage)"),
                (HEADER_CRC_AT, "header_crc recomputed over the changed header"),
            ],
            outcome: Outcome::UnsupportedVersion(3, PART_VERSION),
            version_1_outcome: None,
        },
        Vector {
            name: "049-replica-part-v2-short",
            about: &[
                "049-replica-part-v2-short: 046 cut after byte 111: the header and the first 32",
                "body bytes (the frame of seq 1) remain, as after an upload that was cut short.",
                "Expected: ReplicaDamaged, \"32 body bytes where the header says 64\".",
            ],
            bytes: valid()[..PART_HEADER_BYTES + 32].to_vec(),
            layout: Layout::Version2,
            notes: vec![(112, "the file ends here: 32 of the 64 body bytes (damage)")],
            outcome: Outcome::Damaged("32 body bytes where the header says 64"),
            version_1_outcome: None,
        },
    ]
}

/// The header sections of a dump.
fn header_sections(b: &[u8], layout: Layout) -> Vec<Section> {
    let first = Section {
        description: format!(
            "[0, 16) magic \"FACTLPRT\", version {}, reserved {}, header_bytes {}",
            vectors::u16_at(b, 8),
            vectors::u16_at(b, 10),
            vectors::u32_at(b, 12)
        ),
        notes: Vec::new(),
        start: 0,
        end: 16,
    };
    let range = Section {
        description: format!(
            "[16, 40) start {}, end {}, salt {:#018x}",
            vectors::u64_at(b, 16),
            vectors::u64_at(b, 24),
            vectors::u64_at(b, 32)
        ),
        notes: Vec::new(),
        start: 16,
        end: 40,
    };
    let checksums = |at: usize| Section {
        description: format!(
            "[{at}, {}) body_crc {:#010x}, header_crc {:#010x}",
            at + 8,
            vectors::u32_at(b, at),
            vectors::u32_at(b, at + 4)
        ),
        notes: Vec::new(),
        start: at,
        end: at + 8,
    };
    match layout {
        Layout::Version1 => vec![first, range, checksums(V1_BODY_CRC_AT)],
        Layout::Version2 => vec![
            first,
            range,
            Section {
                description: format!(
                    "[40, 56) replica_id {:#034x}",
                    u128::from_le_bytes(b[40..56].try_into().expect("16 bytes"))
                ),
                notes: Vec::new(),
                start: 40,
                end: 56,
            },
            Section {
                description: format!(
                    "[56, 72) first_seq {}, last_seq {}",
                    vectors::u64_at(b, 56),
                    vectors::u64_at(b, 64)
                ),
                notes: Vec::new(),
                start: 56,
                end: 72,
            },
            checksums(72),
        ],
    }
}

/// The annotated dump of a vector: the header in pieces, then each frame of the body. The
/// legend of 031 to 034 is the one they were written with, under part version 1.
fn dump(vector: &Vector) -> String {
    const LEGEND_VERSION_1: &[&str] = &[
        "Generated by tests/replica_part_vectors.rs together with the .bin, which it checks byte",
        "for byte against replica::part::encode and the stated damage, and decodes with",
        "replica::part::decode (format-spec/replication.md, \"Part\").",
        "Each line: offset (hex), up to 16 bytes in hex, the same bytes as ASCII. The last line",
        "is the file length. Lines starting with \"#\" annotate the structure whose bytes follow.",
    ];
    const LEGEND_VERSION_2: &[&str] = &[
        "Generated by tests/replica_part_vectors.rs together with the .bin, which it checks byte",
        "for byte against replica::part::encode (part version 2) and the stated damage, and",
        "decodes with replica::part::decode (format-spec/replication.md, \"Part\").",
        "Each line: offset (hex), up to 16 bytes in hex, the same bytes as ASCII. The last line",
        "is the file length. Lines starting with \"#\" annotate the structure whose bytes follow.",
    ];
    let b = &vector.bytes;
    let len = b.len();
    let (header_bytes, legend) = match vector.layout {
        Layout::Version1 => (V1_HEADER_BYTES, LEGEND_VERSION_1),
        Layout::Version2 => (PART_HEADER_BYTES, LEGEND_VERSION_2),
    };
    let mut sections = header_sections(b, vector.layout);
    for (seq, frame_start) in [(1, 0), (2, 32)] {
        let start = header_bytes + frame_start;
        if start >= len {
            break;
        }
        let end = (start + 32).min(len);
        sections.push(Section {
            description: format!(
                "[{start}, {end}) body: the frame of seq {seq} (segment bytes [{}, {}))",
                start - header_bytes + START as usize,
                end - header_bytes + START as usize
            ),
            notes: Vec::new(),
            start,
            end,
        });
    }
    for &(offset, note) in &vector.notes {
        let at = sections
            .iter_mut()
            .rev()
            .find(|s| s.start <= offset.min(len.saturating_sub(1)))
            .expect("a section");
        at.notes.push(format!("{note} at offset {offset}"));
    }
    vectors::dump(vector.name, b, vector.about, legend, &sections)
}

/// Checks that `body` holds exactly the frames of seqs 1 and 2 under the salt.
fn assert_frames(name: &str, body: &[u8]) {
    assert_eq!(body.len() as u64, END - START, "{name}: the body's length");
    let salt_crc = frame::salt_crc(SALT);
    let mut seqs = Vec::new();
    let mut offset = 0;
    while let Decoded::Frame(f) = frame::decode(body, offset, salt_crc) {
        seqs.push(f.seq);
        offset += f.frame_bytes;
    }
    assert_eq!((seqs, offset), (vec![1, 2], body.len()), "{name}: the body's frames");
}

/// What a build of part version 1 said of `bytes` named `[start, end)`, by the rules of that
/// version, in their order (`format-spec/replication.md`, "Part", as it stood for version 1):
/// at least 48 bytes, the magic, the header checksum over `[0, 44)`, `version` 1, `reserved` 0
/// and `header_bytes` 48, the range of the name, the length, the body checksum. The body when
/// valid, else the outcome as the README states it.
fn version_1_decode(bytes: &[u8], start: u64, end: u64) -> Result<&[u8], String> {
    let damaged =
        |reason: &str| Err(format!("`ReplicaDamaged` naming the object, reason `{reason}`"));
    if bytes.len() < V1_HEADER_BYTES {
        return damaged(&format!("{} bytes, shorter than a part's header", bytes.len()));
    }
    if bytes[..8] != *b"FACTLPRT" {
        return damaged("not a part (bad magic)");
    }
    if crc32fast::hash(&bytes[..V1_HEADER_CRC_AT]) != vectors::u32_at(bytes, V1_HEADER_CRC_AT) {
        return damaged("the header's checksum does not match");
    }
    let version = vectors::u16_at(bytes, 8);
    if version != 1 {
        return Err(Outcome::UnsupportedVersion(version, 1).described());
    }
    if vectors::u16_at(bytes, 10) != 0 || vectors::u32_at(bytes, 12) as usize != V1_HEADER_BYTES {
        return damaged("reserved header fields are not as version 1 writes them");
    }
    let (header_start, header_end) = (vectors::u64_at(bytes, 16), vectors::u64_at(bytes, 24));
    if header_start != start || header_end != end || end <= start {
        return damaged(&format!(
            "the header says bytes [{header_start}, {header_end}), the name [{start}, {end})"
        ));
    }
    let body = &bytes[V1_HEADER_BYTES..];
    if body.len() as u64 != end - start {
        return damaged(&format!(
            "{} body bytes where the header says {}",
            body.len(),
            end - start
        ));
    }
    if crc32fast::hash(body) != vectors::u32_at(bytes, V1_BODY_CRC_AT) {
        return damaged("the body's checksum does not match");
    }
    Ok(body)
}

fn check(name: &str) {
    let vector = vectors().into_iter().find(|v| v.name == name).expect("a listed vector");
    let bytes = vectors::Files {
        name,
        built: &vector.bytes,
        builder: match vector.layout {
            Layout::Version1 => "the layout of part version 1 and the stated damage",
            Layout::Version2 => "replica::part::encode and the stated damage",
        },
        test: "replica_part_vectors",
        write_variable: WRITE_VARIABLE,
    }
    .committed(|| dump(&vector));
    let txt = vectors::dir().join(format!("{name}.txt"));
    let text = fs::read_to_string(&txt).expect("read the committed .txt");
    assert!(text == dump(&vector), "{} is not the dump of its vector", txt.display());
    let object = part_name(FIRST_SEQ, START, END);
    match (vector.outcome, part::decode(&object, &bytes, START, END)) {
        (Outcome::Valid, Ok((decoded_header, body))) => {
            assert_eq!(decoded_header, header(), "{name}: the header");
            assert_frames(name, body);
            assert_eq!(part::seq_range(START, SALT, body), Some((FIRST_SEQ, LAST_SEQ)));
            assert_eq!(bytes.len(), PART_HEADER_BYTES + body.len());
        }
        (Outcome::Damaged(expected), Err(error)) => match error.kind() {
            ErrorKind::ReplicaDamaged { object: named, reason } => {
                assert_eq!(named, &object, "{name}");
                assert_eq!(reason, expected, "{name}");
            }
            other => panic!("{name}: {other:?}"),
        },
        (Outcome::UnsupportedVersion(found, supported), Err(error)) => match error.kind() {
            ErrorKind::UnsupportedVersion { found: f, supported: s, .. } => {
                assert_eq!((*f, *s), (found, supported), "{name}");
            }
            other => panic!("{name}: {other:?}"),
        },
        (_, Ok(_)) => panic!("{name}: decoded as valid"),
        (Outcome::Valid, Err(error)) => panic!("{name}: {error}"),
    }
    if let Some(was) = vector.version_1_outcome {
        match (was, version_1_decode(&bytes, START, END)) {
            (Outcome::Valid, Ok(body)) => {
                assert_frames(name, body);
                assert_eq!(vectors::u64_at(&bytes, 32), SALT, "{name}: the salt");
            }
            (was, Err(said)) => assert_eq!(said, was.described(), "{name} under version 1"),
            (_, Ok(_)) => panic!("{name}: valid under version 1"),
        }
    }
}

#[test]
fn vector_031_replica_part_valid() {
    check("031-replica-part-valid");
}

#[test]
fn vector_032_replica_part_bad_body_crc() {
    check("032-replica-part-bad-body-crc");
}

#[test]
fn vector_033_replica_part_future_version() {
    check("033-replica-part-future-version");
}

#[test]
fn vector_034_replica_part_short() {
    check("034-replica-part-short");
}

#[test]
fn vector_046_replica_part_v2_valid() {
    check("046-replica-part-v2-valid");
}

#[test]
fn vector_047_replica_part_v2_bad_body_crc() {
    check("047-replica-part-v2-bad-body-crc");
}

#[test]
fn vector_048_replica_part_v2_future_version() {
    check("048-replica-part-v2-future-version");
}

#[test]
fn vector_049_replica_part_v2_short() {
    check("049-replica-part-v2-short");
}

/// Part vectors (`NNN-replica-part-*`); the other replica vectors are
/// `tests/replica_object_vectors.rs`'s.
fn is_part_vector(stem: &str) -> bool {
    stem.get(3..).is_some_and(|rest| rest.starts_with("-replica-part-"))
}

/// The text under the heading `### {name}` of the README, up to the next heading, its
/// whitespace runs made single spaces (so that a reason wrapped over two lines is found).
fn described(readme: &str, name: &str) -> String {
    let heading = format!("### {name}");
    let text: Vec<&str> = readme
        .lines()
        .skip_while(|l| l.trim() != heading)
        .skip(1)
        .take_while(|l| !l.starts_with("##"))
        .collect();
    text.join(" ").split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn every_part_vector_is_described_and_checked() {
    let listed: Vec<&str> = vectors().iter().map(|v| v.name).collect();
    let readme = fs::read_to_string(vectors::dir().join("README.md")).expect("vectors/README.md");
    let headings: Vec<&str> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .map(str::trim)
        .filter(|h| is_part_vector(h))
        .collect();
    assert_eq!(headings, listed, "the replica part vectors of vectors/README.md, in order");
    for vector in vectors() {
        let text = described(&readme, vector.name);
        let mut says = Vec::new();
        match vector.version_1_outcome {
            None => says.push(format!("Expected: {}", vector.outcome.described())),
            Some(was) => {
                says.push(format!("Expected from this build: {}", vector.outcome.described()));
                says.push(format!("From a build of part version 1: {}", was.described()));
            }
        }
        says.push(format!("{} bytes", vector.bytes.len()));
        for said in says {
            assert!(text.contains(&said), "{}: the README does not say {said:?}", vector.name);
        }
    }
    for entry in fs::read_dir(vectors::dir()).expect("the vectors directory") {
        let file = entry.expect("a directory entry").file_name().to_string_lossy().into_owned();
        let stem = file.strip_suffix(".bin").or_else(|| file.strip_suffix(".txt"));
        if let Some(stem) = stem.filter(|s| is_part_vector(s)) {
            assert!(listed.contains(&stem), "{file} is not a checked replica part vector");
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
