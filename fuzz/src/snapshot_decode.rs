//! Target `snapshot_decode`: [`factlog::harness::snapshot::decode`] on arbitrary bytes taken
//! as a whole snapshot file, and the same bytes loaded from a store on the simulated file
//! system with [`factlog::harness::snapshot::load_newest`] (`format-spec/snapshot.md`).
//!
//! It checks that decoding never panics; that a refusal is `CorruptSnapshot` or
//! `UnsupportedVersion` naming the file, never another kind of error; that an accepted file
//! has the magic, version and lengths the spec requires, and that its fields and body encode
//! again to a file that decodes to the same (a pair assertion); that one byte less or one byte
//! more makes an accepted file `LengthMismatch`; and that loading the file from disk, which
//! reads the header before the rest, gives the same outcome as decoding it in memory.
//!
//! Inputs whose header claims a body above [`FUZZ_BODY_BYTES_MAX`] are not decoded: `decode`
//! may allocate up to the claimed `body_bytes` (at most `SNAPSHOT_BODY_BYTES_MAX`, 1 GiB) once
//! both checksums match, and the fuzz runs cap allocations at 64 MiB
//! (`-malloc_limit_mb=64`). The unit tests of the module cover the 1 GiB bound itself.

use std::path::{Path, PathBuf};

use factlog::fs::Fs;
use factlog::fs::sim::SimFs;
use factlog::harness::snapshot::{self, Decoded, SNAPSHOT_FORMAT_VERSION, SNAPSHOT_MAGIC};
use factlog::limits::SNAPSHOT_HEADER_BYTES;
use factlog::{Error, ErrorKind, Seq, SnapshotFault};

/// The largest claimed body this target decodes: well under the fuzz runs' allocation cap.
pub const FUZZ_BODY_BYTES_MAX: u64 = 16 * 1024 * 1024;

/// Offset of `covered_seq` in the header (`format-spec/snapshot.md`, "Header").
const COVERED_SEQ_AT: usize = 16;
/// Offset of `body_bytes` in the header.
const BODY_BYTES_AT: usize = 24;
/// Offset of `compressed_bytes` in the header.
const COMPRESSED_BYTES_AT: usize = 32;

const STORE: &str = "/store";

fn u64_at(data: &[u8], at: usize) -> Option<u64> {
    data.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes)
}

/// The body of the target. Returns whether the bytes are a valid snapshot file.
pub fn run(data: &[u8]) -> bool {
    if u64_at(data, BODY_BYTES_AT).is_some_and(|claimed| claimed > FUZZ_BODY_BYTES_MAX) {
        return false;
    }
    let path = Path::new("/fuzz/input.snap");
    let decoded = snapshot::decode(path, data);
    match &decoded {
        Ok(file) => check_valid(data, file),
        Err(error) => check_refusal(data, error, path),
    }
    check_load(data, &decoded);
    decoded.is_ok()
}

fn check_valid(data: &[u8], file: &Decoded) {
    assert!(data.len() > SNAPSHOT_HEADER_BYTES, "a valid file holds a zstd frame");
    assert_eq!(data[..8], SNAPSHOT_MAGIC);
    assert_eq!(data[8..10], SNAPSHOT_FORMAT_VERSION.to_le_bytes());
    assert_eq!(u64_at(data, COVERED_SEQ_AT), Some(file.covered_seq.0));
    assert_eq!(u64_at(data, BODY_BYTES_AT), Some(file.body.len() as u64), "body length");
    let compressed = (data.len() - SNAPSHOT_HEADER_BYTES) as u64;
    assert_eq!(u64_at(data, COMPRESSED_BYTES_AT), Some(compressed), "compressed length");

    let again = snapshot::encode(file.covered_seq, file.state_schema, &file.body)
        .expect("an accepted body can be encoded again");
    let path = Path::new("/fuzz/again.snap");
    assert_eq!(&snapshot::decode(path, &again).expect("the re-encoded file decodes"), file);

    let shorter = &data[..data.len() - 1];
    assert_eq!(fault(snapshot::decode(path, shorter)), Some(SnapshotFault::LengthMismatch));
    let mut longer = data.to_vec();
    longer.push(0);
    assert_eq!(fault(snapshot::decode(path, &longer)), Some(SnapshotFault::LengthMismatch));
}

fn fault<T>(result: factlog::Result<T>) -> Option<SnapshotFault> {
    match result.err()?.into_kind() {
        ErrorKind::CorruptSnapshot { reason, .. } => Some(reason),
        _ => None,
    }
}

fn check_refusal(data: &[u8], error: &Error, path: &Path) {
    match error.kind() {
        ErrorKind::CorruptSnapshot { path: p, reason } => {
            assert_eq!(p, path, "the error names the file");
            assert!(
                !matches!(reason, SnapshotFault::BadBody(_)),
                "decode never judges the body's content: {reason:?}"
            );
        }
        ErrorKind::UnsupportedVersion { path: p, found, supported } => {
            assert_eq!(p, path, "the error names the file");
            assert_eq!(*supported, SNAPSHOT_FORMAT_VERSION);
            assert_ne!(*found, SNAPSHOT_FORMAT_VERSION);
            assert_eq!(data[..8], SNAPSHOT_MAGIC, "the version is read only after the magic");
            assert_eq!(data[8..10], found.to_le_bytes());
        }
        other => panic!("a bad snapshot is CorruptSnapshot or UnsupportedVersion: {other:?}"),
    }
}

/// The file under the name of the `covered_seq` it claims, alone in a store, loaded: the same
/// outcome as [`snapshot::decode`].
fn check_load(data: &[u8], decoded: &factlog::Result<Decoded>) {
    let fs = SimFs::new(1);
    let store = Path::new(STORE);
    let named = Seq(u64_at(data, COVERED_SEQ_AT).unwrap_or(0));
    let path: PathBuf = snapshot::snapshot_dir(store).join(snapshot::file_name(named));
    fs.create_dir_all(&snapshot::snapshot_dir(store)).expect("the snapshot directory");
    fs.write_file(&path, data);
    let loaded = snapshot::load_newest(&fs, store, |_, _| Ok(())).expect("load_newest");
    match (decoded, &loaded.loaded, &loaded.skipped[..]) {
        (Ok(file), Some((meta, body)), []) => {
            assert_eq!(
                (meta.covered_seq, meta.state_schema, meta.file_bytes, body),
                (file.covered_seq, file.state_schema, data.len() as u64, &file.body)
            );
            assert_eq!(meta.path, path);
        }
        (Err(error), None, [skipped]) => {
            assert_eq!(skipped.path, path);
            assert_eq!(refusal(skipped.error.kind()), refusal(error.kind()), "the same refusal");
        }
        _ => panic!("load_newest differs from decode: {decoded:?} / {loaded:?}"),
    }
}

/// A refusal without the path it names.
fn refusal(kind: &ErrorKind) -> Option<String> {
    match kind {
        ErrorKind::CorruptSnapshot { reason, .. } => Some(format!("{reason:?}")),
        ErrorKind::UnsupportedVersion { found, supported, .. } => {
            Some(format!("version {found}, supported {supported}"))
        }
        _ => None,
    }
}

/// Valid and damaged snapshot files for the seed corpus, from the library's encoder.
#[must_use]
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let encode = |seq, schema, body: &[u8]| snapshot::encode(Seq(seq), schema, body).expect("seed");
    let valid = encode(42, 1, &b"factlog snapshot seed. ".repeat(12));
    let with = |at: usize, value: &[u8], fix_crc: bool| {
        let mut b = valid.clone();
        b[at..at + value.len()].copy_from_slice(value);
        if fix_crc {
            let crc = crc32fast::hash(&b[..60]);
            b[60..64].copy_from_slice(&crc.to_le_bytes());
        }
        b
    };
    let body_bytes = u64_at(&valid, BODY_BYTES_AT).unwrap_or(0);
    let mut bad_body = valid.clone();
    if let Some(byte) = bad_body.get_mut(SNAPSHOT_HEADER_BYTES + 8) {
        *byte ^= 0x01;
    }
    vec![
        ("valid", valid.clone()),
        ("valid-empty-body", encode(0, 1, b"")),
        ("valid-binary-body", encode(u64::MAX, u16::MAX, &(0..=255).collect::<Vec<u8>>())),
        ("valid-repetitive", encode(7, 2, &[b'a'; 70_000])),
        ("short", valid[..40].to_vec()),
        ("bad-magic", with(0, b"FACTLSEG", false)),
        ("future-version", with(8, &2u16.to_le_bytes(), false)),
        ("bad-header-checksum", with(17, &[0xEE], false)),
        ("flags-not-zero", with(12, &[1], true)),
        ("unknown-compression", with(44, &[2], true)),
        ("reserved-not-zero", with(50, &[1], true)),
        ("body-bytes-lie", with(BODY_BYTES_AT, &(body_bytes + 1).to_le_bytes(), true)),
        ("bad-body-checksum", bad_body),
        ("truncated", valid[..valid.len() - 5].to_vec()),
    ]
}
