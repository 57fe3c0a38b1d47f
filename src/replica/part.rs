//! A part: the bytes `[start, end)` of one segment file, framed to check itself and bound to
//! its replica and the seqs it holds (`format-spec/replication.md`, "Part").

use crate::error::{ErrorKind, Result};

/// The part's magic bytes.
pub const PART_MAGIC: [u8; 8] = *b"FACTLPRT";
/// The part format version this build writes and reads.
pub const PART_VERSION: u16 = 2;
/// Bytes of a part's header.
pub const PART_HEADER_BYTES: usize = 80;
/// Where the header checksum lies: it covers the bytes before it.
const HEADER_CRC_AT: usize = 76;

/// What a part's header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartHeader {
    /// Offset in the segment file of the body's first byte.
    pub start: u64,
    /// Offset after the body's last byte.
    pub end: u64,
    /// The salt of the segment's header.
    pub salt: u64,
    /// The replica the part belongs to ([`super::identity::Identity::replica_id`]).
    pub replica_id: u128,
    /// The seq of the first record in the body.
    pub first_seq: u64,
    /// The seq of the last record in the body.
    pub last_seq: u64,
}

/// The object of a part holding `body`, the segment bytes from `header.start`; the header's
/// `end` is `start + body.len()` whatever `header.end` says.
#[must_use]
pub fn encode(header: PartHeader, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PART_HEADER_BYTES + body.len());
    out.extend_from_slice(&PART_MAGIC);
    out.extend_from_slice(&PART_VERSION.to_le_bytes());
    out.extend_from_slice(&0_u16.to_le_bytes());
    out.extend_from_slice(&(PART_HEADER_BYTES as u32).to_le_bytes());
    out.extend_from_slice(&header.start.to_le_bytes());
    out.extend_from_slice(&(header.start + body.len() as u64).to_le_bytes());
    out.extend_from_slice(&header.salt.to_le_bytes());
    out.extend_from_slice(&header.replica_id.to_le_bytes());
    out.extend_from_slice(&header.first_seq.to_le_bytes());
    out.extend_from_slice(&header.last_seq.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    let header_crc = crc32fast::hash(&out[..HEADER_CRC_AT]);
    out.extend_from_slice(&header_crc.to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// The seqs of the first and last record of the frames in `body`, the bytes of a segment
/// file from `start` (a frame boundary, or 0: the segment header first) under the segment's
/// `salt`, as a part's header records them; `None` when it holds no valid frame.
#[must_use]
pub fn seq_range(start: u64, salt: u64, body: &[u8]) -> Option<(u64, u64)> {
    let salt_crc = crate::engine::frame::salt_crc(salt);
    let mut offset = if start == 0 { crate::limits::SEGMENT_HEADER_BYTES } else { 0 };
    let mut range: Option<(u64, u64)> = None;
    while let crate::engine::frame::Decoded::Frame(f) =
        crate::engine::frame::decode(body, offset, salt_crc)
    {
        range = Some((range.map_or(f.seq, |(first, _)| first), f.end_seq() - 1));
        offset += f.frame_bytes;
    }
    range
}

/// Checks the part object `bytes` named `name`, whose name says it holds `[start, end)`;
/// its header and body. The caller checks the replica id and that the body's records are
/// the header's seqs.
///
/// # Errors
///
/// [`ErrorKind::UnsupportedVersion`] for a newer part version; [`ErrorKind::ReplicaDamaged`]
/// for any other way the object is not a valid part with that range (a part of version 1,
/// which an older replica holds, is not part of this one).
pub fn decode<'a>(
    name: &str,
    bytes: &'a [u8],
    start: u64,
    end: u64,
) -> Result<(PartHeader, &'a [u8])> {
    let damaged = |reason: String| -> crate::Error {
        ErrorKind::ReplicaDamaged { object: name.to_owned(), reason }.into()
    };
    if bytes.len() >= 10 && bytes[..8] == PART_MAGIC && bytes[8..10] == 1_u16.to_le_bytes() {
        return Err(damaged(
            "a part of version 1, the format of an older replica, which names no replica: it \
             does not belong to this one"
                .to_owned(),
        ));
    }
    if bytes.len() < PART_HEADER_BYTES {
        return Err(damaged(format!("{} bytes, shorter than a part's header", bytes.len())));
    }
    let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    if bytes[..8] != PART_MAGIC {
        return Err(damaged("not a part (bad magic)".to_owned()));
    }
    if crc32fast::hash(&bytes[..HEADER_CRC_AT]) != u32_at(HEADER_CRC_AT) {
        return Err(damaged("the header's checksum does not match".to_owned()));
    }
    let version = u16_at(8);
    if version != PART_VERSION {
        return Err(ErrorKind::UnsupportedVersion {
            path: name.into(),
            found: version,
            supported: PART_VERSION,
        }
        .into());
    }
    if u16_at(10) != 0 || u32_at(12) as usize != PART_HEADER_BYTES {
        return Err(damaged("reserved header fields are not as version 2 writes them".to_owned()));
    }
    let header = PartHeader {
        start: u64_at(16),
        end: u64_at(24),
        salt: u64_at(32),
        replica_id: u128::from_le_bytes(bytes[40..56].try_into().expect("16 bytes")),
        first_seq: u64_at(56),
        last_seq: u64_at(64),
    };
    if header.start != start || header.end != end || end <= start {
        return Err(damaged(format!(
            "the header says bytes [{}, {}), the name [{start}, {end})",
            header.start, header.end
        )));
    }
    if header.first_seq == 0 || header.last_seq < header.first_seq {
        return Err(damaged(format!(
            "the header says seqs {}..={}, which no part holds",
            header.first_seq, header.last_seq
        )));
    }
    let body = &bytes[PART_HEADER_BYTES..];
    if body.len() as u64 != end - start {
        return Err(damaged(format!(
            "{} body bytes where the header says {}",
            body.len(),
            end - start
        )));
    }
    if crc32fast::hash(body) != u32_at(72) {
        return Err(damaged("the body's checksum does not match".to_owned()));
    }
    Ok((header, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_round_trips_and_damage_is_named() {
        let fields = PartHeader {
            start: 64,
            end: 0,
            salt: 0xfeed,
            replica_id: 9,
            first_seq: 3,
            last_seq: 4,
        };
        let object = encode(fields, b"frames!!");
        let (header, body) = decode("p", &object, 64, 72).expect("valid");
        assert_eq!(header, PartHeader { end: 72, ..fields });
        assert_eq!(body, b"frames!!");
        let reason = |bytes: &[u8], start, end| match decode("p", bytes, start, end) {
            Err(e) => e.to_string(),
            Ok(_) => "valid".to_owned(),
        };
        assert!(reason(&object, 0, 8).contains("the name [0, 8)"));
        let mut flipped = object.clone();
        *flipped.last_mut().expect("a byte") ^= 1;
        assert!(reason(&flipped, 64, 72).contains("body's checksum"));
        assert!(reason(&object[..84], 64, 72).contains("body bytes"));
        assert!(reason(&object[..10], 64, 72).contains("shorter"));
        let with_version = |v: u16| {
            let mut bytes = object.clone();
            bytes[8..10].copy_from_slice(&v.to_le_bytes());
            let crc = crc32fast::hash(&bytes[..HEADER_CRC_AT]);
            bytes[HEADER_CRC_AT..PART_HEADER_BYTES].copy_from_slice(&crc.to_le_bytes());
            bytes
        };
        assert!(reason(&with_version(3), 64, 72).contains("version 3"));
        assert!(reason(&with_version(1), 64, 72).contains("older replica"));
        let empty = encode(PartHeader { first_seq: 0, ..fields }, b"frames!!");
        assert!(reason(&empty, 64, 72).contains("seqs 0..=4"));
    }
}
