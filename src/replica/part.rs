//! A part: the bytes `[start, end)` of one segment file, framed to check itself
//! (`format-spec/replication.md`, "Part").

use crate::error::{ErrorKind, Result};

/// The part's magic bytes.
pub const PART_MAGIC: [u8; 8] = *b"FACTLPRT";
/// The part format version this build writes and reads.
pub const PART_VERSION: u16 = 1;
/// Bytes of a part's header.
pub const PART_HEADER_BYTES: usize = 48;

/// What a part's header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartHeader {
    /// Offset in the segment file of the body's first byte.
    pub start: u64,
    /// Offset after the body's last byte.
    pub end: u64,
    /// The salt of the segment's header.
    pub salt: u64,
}

/// The object of a part holding `body`, the segment bytes from `start`.
#[must_use]
pub fn encode(start: u64, salt: u64, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PART_HEADER_BYTES + body.len());
    out.extend_from_slice(&PART_MAGIC);
    out.extend_from_slice(&PART_VERSION.to_le_bytes());
    out.extend_from_slice(&0_u16.to_le_bytes());
    out.extend_from_slice(&(PART_HEADER_BYTES as u32).to_le_bytes());
    out.extend_from_slice(&start.to_le_bytes());
    out.extend_from_slice(&(start + body.len() as u64).to_le_bytes());
    out.extend_from_slice(&salt.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    let header_crc = crc32fast::hash(&out[..44]);
    out.extend_from_slice(&header_crc.to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// Checks the part object `bytes` named `name`, whose name says it holds `[start, end)`;
/// its header and body.
///
/// # Errors
///
/// [`ErrorKind::UnsupportedVersion`] for another part version; [`ErrorKind::ReplicaDamaged`]
/// for any other way the object is not a valid part with that range.
pub fn decode<'a>(
    name: &str,
    bytes: &'a [u8],
    start: u64,
    end: u64,
) -> Result<(PartHeader, &'a [u8])> {
    let damaged = |reason: String| -> crate::Error {
        ErrorKind::ReplicaDamaged { object: name.to_owned(), reason }.into()
    };
    if bytes.len() < PART_HEADER_BYTES {
        return Err(damaged(format!("{} bytes, shorter than a part's header", bytes.len())));
    }
    let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    if bytes[..8] != PART_MAGIC {
        return Err(damaged("not a part (bad magic)".to_owned()));
    }
    if crc32fast::hash(&bytes[..44]) != u32_at(44) {
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
        return Err(damaged("reserved header fields are not as version 1 writes them".to_owned()));
    }
    let header = PartHeader { start: u64_at(16), end: u64_at(24), salt: u64_at(32) };
    if header.start != start || header.end != end || end <= start {
        return Err(damaged(format!(
            "the header says bytes [{}, {}), the name [{start}, {end})",
            header.start, header.end
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
    if crc32fast::hash(body) != u32_at(40) {
        return Err(damaged("the body's checksum does not match".to_owned()));
    }
    Ok((header, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_round_trips_and_damage_is_named() {
        let object = encode(64, 0xfeed, b"frames!!");
        let (header, body) = decode("p", &object, 64, 72).expect("valid");
        assert_eq!(header, PartHeader { start: 64, end: 72, salt: 0xfeed });
        assert_eq!(body, b"frames!!");
        let reason = |bytes: &[u8], start, end| match decode("p", bytes, start, end) {
            Err(e) => e.to_string(),
            Ok(_) => "valid".to_owned(),
        };
        assert!(reason(&object, 0, 8).contains("the name [0, 8)"));
        let mut flipped = object.clone();
        *flipped.last_mut().expect("a byte") ^= 1;
        assert!(reason(&flipped, 64, 72).contains("body's checksum"));
        assert!(reason(&object[..50], 64, 72).contains("body bytes"));
        assert!(reason(&object[..10], 64, 72).contains("shorter"));
        let mut version = object.clone();
        version[8] = 2;
        let crc = crc32fast::hash(&version[..44]);
        version[44..48].copy_from_slice(&crc.to_le_bytes());
        assert!(reason(&version, 64, 72).contains("version"));
    }
}
