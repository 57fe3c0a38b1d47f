//! A snapshot object: a copy of one of the store's snapshot files, framed to check itself and
//! bound to its replica and the seq it covers (`format-spec/replication.md`, "Snapshot
//! object").

use crate::error::{ErrorKind, Result};

/// The snapshot object's magic bytes.
pub const SNAPSHOT_OBJECT_MAGIC: [u8; 8] = *b"FACTLRSN";
/// The snapshot object format version this build writes and reads.
pub const SNAPSHOT_OBJECT_VERSION: u16 = 1;
/// Bytes of a snapshot object's header.
pub const SNAPSHOT_OBJECT_HEADER_BYTES: usize = 64;
/// Where the header checksum lies: it covers the bytes before it.
const HEADER_CRC_AT: usize = 60;

/// What a snapshot object's header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotObjectHeader {
    /// The replica it belongs to.
    pub replica_id: u128,
    /// The seq the snapshot covers (its file's and its name's).
    pub covered_seq: u64,
}

/// The object holding the snapshot file `file` (its bytes, as the store wrote them).
#[must_use]
pub fn encode(header: SnapshotObjectHeader, file: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(SNAPSHOT_OBJECT_HEADER_BYTES + file.len());
    out.extend_from_slice(&SNAPSHOT_OBJECT_MAGIC);
    out.extend_from_slice(&SNAPSHOT_OBJECT_VERSION.to_le_bytes());
    out.extend_from_slice(&0_u16.to_le_bytes());
    out.extend_from_slice(&(SNAPSHOT_OBJECT_HEADER_BYTES as u32).to_le_bytes());
    out.extend_from_slice(&header.replica_id.to_le_bytes());
    out.extend_from_slice(&header.covered_seq.to_le_bytes());
    out.extend_from_slice(&(file.len() as u64).to_le_bytes());
    out.extend_from_slice(&0_u64.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(file).to_le_bytes());
    let header_crc = crc32fast::hash(&out[..HEADER_CRC_AT]);
    out.extend_from_slice(&header_crc.to_le_bytes());
    out.extend_from_slice(file);
    out
}

/// Checks the snapshot object `bytes` named `name`, whose name says it covers `covered_seq`:
/// its header and the checksum of the file it holds. The caller checks the replica id and
/// loads the file ([`crate::harness::snapshot::decode`]).
///
/// # Errors
///
/// [`ErrorKind::UnsupportedVersion`] for a newer version; [`ErrorKind::ReplicaDamaged`] for
/// any other way the object is not a valid snapshot object covering `covered_seq` (a bare
/// snapshot file, as a version-1 replica held, included).
pub fn decode<'a>(
    name: &str,
    bytes: &'a [u8],
    covered_seq: u64,
) -> Result<(SnapshotObjectHeader, &'a [u8])> {
    let damaged = |reason: String| -> crate::Error {
        ErrorKind::ReplicaDamaged { object: name.to_owned(), reason }.into()
    };
    if bytes.len() < SNAPSHOT_OBJECT_HEADER_BYTES || bytes[..8] != SNAPSHOT_OBJECT_MAGIC {
        return Err(damaged(
            "not a snapshot object (no FACTLRSN header: a bare snapshot file, as an older \
             replica holds, or damage)"
                .to_owned(),
        ));
    }
    let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    if crc32fast::hash(&bytes[..HEADER_CRC_AT]) != u32_at(HEADER_CRC_AT) {
        return Err(damaged("the header's checksum does not match".to_owned()));
    }
    let version = u16_at(8);
    if version != SNAPSHOT_OBJECT_VERSION {
        return Err(ErrorKind::UnsupportedVersion {
            path: name.into(),
            found: version,
            supported: SNAPSHOT_OBJECT_VERSION,
        }
        .into());
    }
    if u16_at(10) != 0 || u32_at(12) as usize != SNAPSHOT_OBJECT_HEADER_BYTES || u64_at(48) != 0 {
        return Err(damaged("reserved header fields are not as version 1 writes them".to_owned()));
    }
    let header = SnapshotObjectHeader {
        replica_id: u128::from_le_bytes(bytes[16..32].try_into().expect("16 bytes")),
        covered_seq: u64_at(32),
    };
    if header.covered_seq != covered_seq {
        return Err(damaged(format!(
            "the header says it covers seq {}, the name {covered_seq}",
            header.covered_seq
        )));
    }
    let file = &bytes[SNAPSHOT_OBJECT_HEADER_BYTES..];
    if file.len() as u64 != u64_at(40) {
        return Err(damaged(format!(
            "{} file bytes where the header says {}",
            file.len(),
            u64_at(40)
        )));
    }
    if crc32fast::hash(file) != u32_at(56) {
        return Err(damaged("the file's checksum does not match".to_owned()));
    }
    Ok((header, file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_object_round_trips_and_damage_is_named() {
        let header = SnapshotObjectHeader { replica_id: 5, covered_seq: 30 };
        let object = encode(header, b"snapshot file");
        assert_eq!(decode("s", &object, 30).expect("valid"), (header, &b"snapshot file"[..]));
        let reason = |bytes: &[u8], covered| match decode("s", bytes, covered) {
            Err(e) => e.to_string(),
            Ok(_) => "valid".to_owned(),
        };
        assert!(reason(&object, 31).contains("the name 31"));
        assert!(
            reason(b"FACTLSNPxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 30)
                .contains("bare snapshot file")
        );
        let mut flipped = object.clone();
        *flipped.last_mut().expect("a byte") ^= 1;
        assert!(reason(&flipped, 30).contains("file's checksum"));
        assert!(reason(&object[..70], 30).contains("file bytes"));
    }
}
