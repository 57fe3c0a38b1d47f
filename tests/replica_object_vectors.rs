//! Proves that the replica snapshot object and retention record vectors
//! (`format-spec/vectors/042-replica-snapshot-object-*` to `045-replica-retention-record-*`)
//! hold exactly the bytes their description in `format-spec/vectors/README.md` ("Replica
//! object vectors") gives: built with `replica::snapshot_object::encode` around the committed
//! snapshot vector 010 and with `RetentionRecord::encode`, then the stated damage, and also as
//! rebuilt from the hex columns of their annotated `.txt`. It then checks the exact outcome of
//! `replica::snapshot_object::decode` and `RetentionRecord::decode` for each, as the README
//! states it: the header and the wrapped file of the valid snapshot object (which decodes as
//! snapshot vector 010), the fields of the valid record (which re-encodes to the same bytes),
//! and the error kind and reason of each refused one.
//!
//! `FACTLOG_WRITE_VECTORS=1 cargo test --test integration replica_object_vectors::` writes the files of a
//! vector that does not exist yet; it never overwrites one.

use crate::common;

use std::fs;
use std::path::Path;

use common::vectors::{self, Section};
use factlog::harness::snapshot;
use factlog::replica::retain::{self, RetentionRecord};
use factlog::replica::snapshot_object::{self, SNAPSHOT_OBJECT_HEADER_BYTES, SnapshotObjectHeader};
use factlog::replica::{Identity, snapshot_name};
use factlog::{ErrorKind, Seq};

const WRITE_VARIABLE: &str = "FACTLOG_WRITE_VECTORS";
/// The replica the objects belong to (the replica id of the part vectors).
const REPLICA_ID: u128 = 0x0123_4567_89ab_cdef_0123_4567_89ab_cdef;
/// The snapshot vector the snapshot object wraps, and the seq it covers.
const SNAPSHOT_VECTOR: &str = "010-snapshot-valid.bin";
const COVERED_SEQ: u64 = 42;
/// 010's `state_schema` and the length of its body.
const STATE_SCHEMA: u16 = 1;
const SNAPSHOT_BODY_BYTES: usize = 272;
/// The record's first kept seq and creation time (2023-11-14T22:13:20Z, the event vectors').
const FIRST_KEPT_SEQ: u64 = 40;
const CREATED_US: u64 = 1_700_000_000_000_000;
/// Bytes of a snapshot file's header.
const SNAPSHOT_HEADER_BYTES: usize = 64;
/// The byte of 043's damage: the low byte of the wrapped file's `covered_seq`.
const DAMAGED_AT: usize = SNAPSHOT_OBJECT_HEADER_BYTES + 16;
/// The reason every refusal of `RetentionRecord::decode` for damage ends with.
const RECORD_REASON_TAIL: &str =
    ": it is not a retention record as factlog retain writes it (if no retention ran, remove it)";

/// What the vector's decoder must say of it.
#[derive(Clone, Copy)]
enum Outcome {
    Valid,
    /// `ReplicaDamaged` naming the object, with this reason (for a retention record, before
    /// [`RECORD_REASON_TAIL`]).
    Damaged(&'static str),
}

/// Which kind of object a vector is.
#[derive(Clone, Copy)]
enum Kind {
    SnapshotObject,
    RetentionRecord,
}

struct Vector {
    name: &'static str,
    about: &'static [&'static str],
    kind: Kind,
    /// The bytes, built with the library's encoders and the stated damage.
    bytes: Vec<u8>,
    /// `(offset, note)` for each changed byte range.
    notes: Vec<(usize, &'static str)>,
    outcome: Outcome,
}

/// The bytes of snapshot vector 010.
fn snapshot_file() -> Vec<u8> {
    fs::read(vectors::dir().join(SNAPSHOT_VECTOR)).expect("snapshot vector 010")
}

fn snapshot_object_name() -> String {
    snapshot_name(&snapshot::file_name(Seq(COVERED_SEQ)))
}

fn snapshot_object() -> Vec<u8> {
    let header = SnapshotObjectHeader { replica_id: REPLICA_ID, covered_seq: COVERED_SEQ };
    snapshot_object::encode(header, &snapshot_file())
}

fn record() -> RetentionRecord {
    RetentionRecord {
        replica_id: REPLICA_ID,
        covered_seq: COVERED_SEQ,
        snapshot: snapshot_object_name(),
        snapshot_crc: crc32fast::hash(&snapshot_object()),
        first_kept_seq: FIRST_KEPT_SEQ,
        created_us: CREATED_US,
    }
}

fn identity() -> Identity {
    Identity {
        replica_id: REPLICA_ID,
        device: "vector-device".to_owned(),
        store: "/store".to_owned(),
        created_us: CREATED_US,
    }
}

fn vectors() -> Vec<Vector> {
    let mut bad_crc = snapshot_object();
    bad_crc[DAMAGED_AT] ^= 0x01;
    vec![
        Vector {
            name: "042-replica-snapshot-object-valid",
            about: &[
                "042-replica-snapshot-object-valid: the snapshot object",
                "snapshots/00000000000000000042.snap of replica 0x0123456789abcdef0123456789abcdef:",
                "the 64-byte header (magic \"FACTLRSN\", version 1, covered_seq 42, file_bytes 117,",
                "file_crc the CRC-32 of the file), then the 117 bytes of snapshot vector 010.",
                "Expected: valid; that replica id, covered_seq 42, and the file, which",
                "snapshot::decode reads as 010: covered_seq 42, state_schema 1, a 272-byte body.",
            ],
            kind: Kind::SnapshotObject,
            bytes: snapshot_object(),
            notes: Vec::new(),
            outcome: Outcome::Valid,
        },
        Vector {
            name: "043-replica-snapshot-object-bad-crc",
            about: &[
                "043-replica-snapshot-object-bad-crc: 042 with byte 80 (the low byte of the",
                "wrapped file's covered_seq: 42 becomes 43) XOR 0x01; the object's header is",
                "unchanged.",
                "Expected: ReplicaDamaged, \"the file's checksum does not match\".",
            ],
            kind: Kind::SnapshotObject,
            bytes: bad_crc,
            notes: vec![(DAMAGED_AT, "byte 80 XOR 0x01: covered_seq 42 became 43 (damage)")],
            outcome: Outcome::Damaged("the file's checksum does not match"),
        },
        Vector {
            name: "044-replica-retention-record-valid",
            about: &[
                "044-replica-retention-record-valid: the retention record",
                "retained/00000000000000000042 of replica 0x0123456789abcdef0123456789abcdef:",
                "covered_seq 42, snapshot snapshots/00000000000000000042.snap, snapshot_crc the",
                "CRC-32 of 042, first_kept_seq 40, created_us 1700000000000000; one line of JSON,",
                "then \"crc32 \", the CRC-32 of that line (newline included) and a newline.",
                "Expected: valid; exactly those fields; it encodes to the same bytes again.",
            ],
            kind: Kind::RetentionRecord,
            bytes: record().encode(),
            notes: Vec::new(),
            outcome: Outcome::Valid,
        },
        Vector {
            name: "045-replica-retention-record-empty",
            about: &[
                "045-replica-retention-record-empty: an empty object named",
                "retained/00000000000000000042, as the empty markers of a replica of version 1.",
                "Expected: ReplicaDamaged, \"an empty marker: it is not a retention record as",
                "factlog retain writes it (if no retention ran, remove it)\".",
            ],
            kind: Kind::RetentionRecord,
            bytes: Vec::new(),
            notes: Vec::new(),
            outcome: Outcome::Damaged("an empty marker"),
        },
    ]
}

/// The whole reason `decode` must give for a refused vector.
fn full_reason(kind: Kind, reason: &str) -> String {
    match kind {
        Kind::SnapshotObject => reason.to_owned(),
        Kind::RetentionRecord => format!("{reason}{RECORD_REASON_TAIL}"),
    }
}

fn object_name(kind: Kind) -> String {
    match kind {
        Kind::SnapshotObject => snapshot_object_name(),
        Kind::RetentionRecord => retain::record_name(COVERED_SEQ),
    }
}

/// The sections of a snapshot object: its header in four pieces, then the wrapped file's
/// header and its zstd frame.
fn snapshot_object_sections(b: &[u8]) -> Vec<Section> {
    let section = |description: String, start: usize, end: usize| Section {
        description,
        notes: Vec::new(),
        start,
        end: end.min(b.len()),
    };
    let file = SNAPSHOT_OBJECT_HEADER_BYTES;
    vec![
        section(
            format!(
                "[0, 16) magic \"FACTLRSN\", version {}, reserved {}, header_bytes {}",
                vectors::u16_at(b, 8),
                vectors::u16_at(b, 10),
                vectors::u32_at(b, 12)
            ),
            0,
            16,
        ),
        section(
            format!(
                "[16, 32) replica_id {:#034x}",
                u128::from_le_bytes(b[16..32].try_into().expect("16 bytes"))
            ),
            16,
            32,
        ),
        section(
            format!(
                "[32, 48) covered_seq {}, file_bytes {}",
                vectors::u64_at(b, 32),
                vectors::u64_at(b, 40)
            ),
            32,
            48,
        ),
        section(
            format!(
                "[48, 64) reserved {}, file_crc {:#010x}, header_crc {:#010x}",
                vectors::u64_at(b, 48),
                vectors::u32_at(b, 56),
                vectors::u32_at(b, 60)
            ),
            48,
            64,
        ),
        section(
            format!(
                "[{file}, {}) file: vector 010's header (magic \"FACTLSNP\", covered_seq {})",
                file + SNAPSHOT_HEADER_BYTES,
                vectors::u64_at(b, file + 16)
            ),
            file,
            file + SNAPSHOT_HEADER_BYTES,
        ),
        section(
            format!(
                "[{}, {}) file: the zstd frame of snapshot vector 010",
                file + SNAPSHOT_HEADER_BYTES,
                b.len()
            ),
            file + SNAPSHOT_HEADER_BYTES,
            b.len(),
        ),
    ]
}

/// The sections of a retention record: its JSON line and its checksum line (none when empty).
fn record_sections(b: &[u8]) -> Vec<Section> {
    let Some(newline) = b.iter().position(|&c| c == b'\n') else { return Vec::new() };
    let line = newline + 1;
    vec![
        Section {
            description: format!("[0, {line}) the JSON line, newline included"),
            notes: Vec::new(),
            start: 0,
            end: line,
        },
        Section {
            description: format!(
                "[{line}, {}) \"crc32 \", the CRC-32 of [0, {line}) ({:08x}), a newline",
                b.len(),
                crc32fast::hash(&b[..line])
            ),
            notes: Vec::new(),
            start: line,
            end: b.len(),
        },
    ]
}

/// The annotated dump of a vector.
fn dump(vector: &Vector) -> String {
    const LEGEND: &[&str] = &[
        "Generated by tests/replica_object_vectors.rs together with the .bin, which it checks",
        "byte for byte against replica::snapshot_object::encode (around snapshot vector 010)",
        "or RetentionRecord::encode and the stated damage, and decodes with",
        "replica::snapshot_object::decode or RetentionRecord::decode",
        "(format-spec/replication.md, \"Snapshot object\", \"Retention\").",
        "Each line: offset (hex), up to 16 bytes in hex, the same bytes as ASCII. The last line",
        "is the file length. Lines starting with \"#\" annotate the structure whose bytes follow.",
    ];
    let b = &vector.bytes;
    let mut sections = match vector.kind {
        Kind::SnapshotObject => snapshot_object_sections(b),
        Kind::RetentionRecord => record_sections(b),
    };
    for &(offset, note) in &vector.notes {
        let at = sections.iter_mut().rev().find(|s| s.start <= offset).expect("a section");
        at.notes.push(format!("{note} at offset {offset}"));
    }
    vectors::dump(vector.name, b, vector.about, LEGEND, &sections)
}

fn check(name: &str) {
    let vector = vectors().into_iter().find(|v| v.name == name).expect("a listed vector");
    let builder = match vector.kind {
        Kind::SnapshotObject => "replica::snapshot_object::encode and the stated damage",
        Kind::RetentionRecord => "RetentionRecord::encode",
    };
    let bytes = vectors::Files {
        name,
        built: &vector.bytes,
        builder,
        test: "replica_object_vectors",
        write_variable: WRITE_VARIABLE,
    }
    .committed(|| dump(&vector));
    let object = object_name(vector.kind);
    match (vector.outcome, vector.kind) {
        (Outcome::Valid, Kind::SnapshotObject) => {
            let (header, file) =
                snapshot_object::decode(&object, &bytes, COVERED_SEQ).expect("a valid object");
            assert_eq!(
                header,
                SnapshotObjectHeader { replica_id: REPLICA_ID, covered_seq: COVERED_SEQ },
                "{name}: the header"
            );
            assert_eq!(file, snapshot_file(), "{name}: the file is snapshot vector 010");
            let decoded = snapshot::decode(Path::new(&object), file).expect("snapshot 010");
            assert_eq!(
                (decoded.covered_seq, decoded.state_schema, decoded.body.len()),
                (Seq(COVERED_SEQ), STATE_SCHEMA, SNAPSHOT_BODY_BYTES),
                "{name}: the wrapped file"
            );
        }
        (Outcome::Valid, Kind::RetentionRecord) => {
            let decoded =
                RetentionRecord::decode(&object, &bytes, &identity()).expect("a valid record");
            assert_eq!(decoded, record(), "{name}: the record's fields");
            assert_eq!(decoded.encode(), bytes, "{name}: encoded again");
        }
        (Outcome::Damaged(reason), kind) => {
            let refused = match kind {
                Kind::SnapshotObject => snapshot_object::decode(&object, &bytes, COVERED_SEQ).err(),
                Kind::RetentionRecord => {
                    RetentionRecord::decode(&object, &bytes, &identity()).err()
                }
            };
            let error = refused.unwrap_or_else(|| panic!("{name}: decoded as valid"));
            match error.kind() {
                ErrorKind::ReplicaDamaged { object: named, reason: said } => {
                    assert_eq!(named, &object, "{name}");
                    assert_eq!(said, &full_reason(kind, reason), "{name}");
                }
                other => panic!("{name}: {other:?}"),
            }
        }
    }
}

#[test]
fn vector_042_replica_snapshot_object_valid() {
    check("042-replica-snapshot-object-valid");
}

#[test]
fn vector_043_replica_snapshot_object_bad_crc() {
    check("043-replica-snapshot-object-bad-crc");
}

#[test]
fn vector_044_replica_retention_record_valid() {
    check("044-replica-retention-record-valid");
}

#[test]
fn vector_045_replica_retention_record_empty() {
    check("045-replica-retention-record-empty");
}

/// The record of 044 names the object of 042, by name and by checksum, as a retention that
/// keeps that object writes it.
#[test]
fn the_record_names_the_snapshot_object() {
    let bytes =
        |name: &str| vectors().into_iter().find(|v| v.name == name).expect("a listed vector").bytes;
    let object = bytes("042-replica-snapshot-object-valid");
    let record = bytes("044-replica-retention-record-valid");
    let decoded = RetentionRecord::decode(&retain::record_name(COVERED_SEQ), &record, &identity())
        .expect("044 is a valid record");
    assert_eq!(decoded.snapshot, snapshot_object_name());
    assert_eq!(decoded.snapshot_crc, crc32fast::hash(&object));
    let (header, _) = snapshot_object::decode(&decoded.snapshot, &object, decoded.covered_seq)
        .expect("042 is a valid snapshot object");
    assert_eq!(header.replica_id, decoded.replica_id);
}

/// Snapshot object and retention record vectors; the part vectors are
/// `tests/replica_part_vectors.rs`'s.
fn is_object_vector(stem: &str) -> bool {
    stem.get(3..).is_some_and(|rest| {
        rest.starts_with("-replica-snapshot-object-")
            || rest.starts_with("-replica-retention-record-")
    })
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
fn every_object_vector_is_described_and_checked() {
    let listed: Vec<&str> = vectors().iter().map(|v| v.name).collect();
    let readme = fs::read_to_string(vectors::dir().join("README.md")).expect("vectors/README.md");
    let headings: Vec<&str> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .map(str::trim)
        .filter(|h| is_object_vector(h))
        .collect();
    assert_eq!(headings, listed, "the replica object vectors of vectors/README.md, in order");
    for vector in vectors() {
        let text = described(&readme, vector.name);
        let expected = match vector.outcome {
            Outcome::Valid => "Expected: valid".to_owned(),
            Outcome::Damaged(reason) => format!(
                "`ReplicaDamaged` naming the object, reason `{}`",
                full_reason(vector.kind, reason)
            ),
        };
        assert!(text.contains(&expected), "{}: the README says {text:?}", vector.name);
        let length = format!("{} bytes", vector.bytes.len());
        assert!(text.contains(&length), "{}: the README does not say {length:?}", vector.name);
    }
    for entry in fs::read_dir(vectors::dir()).expect("the vectors directory") {
        let file = entry.expect("a directory entry").file_name().to_string_lossy().into_owned();
        let stem = file.strip_suffix(".bin").or_else(|| file.strip_suffix(".txt"));
        if let Some(stem) = stem.filter(|s| is_object_vector(s)) {
            assert!(listed.contains(&stem), "{file} is not a checked replica object vector");
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
