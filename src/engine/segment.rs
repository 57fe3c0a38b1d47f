//! One segment file: its name, its 64-byte header (`format-spec/segment.md`) and the scan of
//! its frames. Pure functions over bytes; the file I/O is done by the callers through the
//! [`crate::fs`] seam.
//!
//! Invariant: a header that [`decode_header`] accepts re-encodes to the same 64 bytes.

use std::path::Path;

use crate::engine::frame::{self, Decoded, Frame};
use crate::error::{CorruptionReason, Error, ErrorKind, FrameFault, Result};
use crate::limits::SEGMENT_HEADER_BYTES;
use crate::types::{SegmentId, Seq};

/// The magic bytes at offset 0 of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"FACTLSEG";
/// The newest segment format version this build reads and writes; it writes it in every new
/// log (`format-spec/versions.md`). Version 2 has the layout of version 1.
pub const FORMAT_VERSION: u16 = 2;
/// The oldest segment format version this build reads and appends to.
pub const FORMAT_VERSION_MIN: u16 = 1;
/// The `content` value of a segment holding event-log records.
pub const CONTENT_EVENT_LOG: u16 = 1;
/// File-name suffix of segment files.
pub const SEGMENT_SUFFIX: &str = ".seg";

/// The decoded header of a segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The format version the segment is written in: every segment of a log has the same.
    pub format_version: u16,
    /// Position of the segment in the directory, from 1.
    pub id: SegmentId,
    /// Sequence number of the first record the segment holds.
    pub first_seq: Seq,
    /// Seeds every frame CRC of the segment.
    pub salt: u64,
}

impl SegmentHeader {
    /// The 64 header bytes.
    #[must_use]
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_BYTES] {
        let mut out = [0u8; SEGMENT_HEADER_BYTES];
        out[0..8].copy_from_slice(&SEGMENT_MAGIC);
        out[8..10].copy_from_slice(&self.format_version.to_le_bytes());
        out[10..12].copy_from_slice(&CONTENT_EVENT_LOG.to_le_bytes());
        out[12..16].copy_from_slice(&(SEGMENT_HEADER_BYTES as u32).to_le_bytes());
        out[16..24].copy_from_slice(&self.id.0.to_le_bytes());
        out[24..32].copy_from_slice(&self.first_seq.0.to_le_bytes());
        out[32..40].copy_from_slice(&self.salt.to_le_bytes());
        let crc = crc32fast::hash(&out[..60]);
        out[60..64].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// The CRC seed of this segment's frames.
    #[must_use]
    pub fn salt_crc(&self) -> u32 {
        frame::salt_crc(self.salt)
    }
}

/// The file name of the segment whose first record is `first_seq`.
#[must_use]
pub fn file_name(first_seq: Seq) -> String {
    format!("{:020}{SEGMENT_SUFFIX}", first_seq.0)
}

/// The first sequence number a segment file name stands for, or `None` if it is not one.
#[must_use]
pub fn parse_file_name(name: &str) -> Option<Seq> {
    let digits = name.strip_suffix(SEGMENT_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&seq| seq > 0).map(Seq)
}

/// Decodes and checks the header at the start of `bytes`, the contents of the file at `path`,
/// in the order `format-spec/segment.md` gives.
pub fn decode_header(bytes: &[u8], path: &Path) -> Result<SegmentHeader> {
    let bad = |reason| Error::corruption(None, path, 0, reason);
    let Some(header) = bytes.first_chunk::<SEGMENT_HEADER_BYTES>() else {
        return Err(bad(CorruptionReason::ShortHeader));
    };
    let u16_at = |at: usize| u16::from_le_bytes([header[at], header[at + 1]]);
    let u32_at = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().unwrap_or([0; 4]));
    let u64_at = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().unwrap_or([0; 8]));
    if header[0..8] != SEGMENT_MAGIC {
        return Err(bad(CorruptionReason::BadMagic));
    }
    let version = u16_at(8);
    if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&version) {
        return Err(ErrorKind::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
            supported: FORMAT_VERSION,
        }
        .into());
    }
    if crc32fast::hash(&header[..60]) != u32_at(60) {
        return Err(bad(CorruptionReason::BadHeaderChecksum));
    }
    let content = u16_at(10);
    if content != CONTENT_EVENT_LOG {
        return Err(bad(CorruptionReason::UnknownContent(content)));
    }
    if u32_at(12) as usize != SEGMENT_HEADER_BYTES {
        return Err(bad(CorruptionReason::BadHeaderField("header_bytes")));
    }
    if header[40..60].iter().any(|&b| b != 0) {
        return Err(bad(CorruptionReason::BadHeaderField("reserved")));
    }
    let parsed = SegmentHeader {
        format_version: version,
        id: SegmentId(u64_at(16)),
        first_seq: Seq(u64_at(24)),
        salt: u64_at(32),
    };
    if parsed.id.0 == 0 {
        return Err(bad(CorruptionReason::BadHeaderField("segment_id")));
    }
    if parsed.first_seq.0 == 0 {
        return Err(bad(CorruptionReason::BadHeaderField("first_seq")));
    }
    debug_assert_eq!(&parsed.encode(), header);
    Ok(parsed)
}

/// Where a sequential scan of a segment's frames stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanEnd {
    /// Zero bytes or the end of the file: nothing more was written.
    Clean,
    /// Non-zero bytes that are not a valid frame.
    Invalid(FrameFault),
    /// A valid frame with an unexpected sequence number.
    WrongSeq(u64),
    /// The caller's upper bound was reached.
    Bound,
}

/// The result of scanning the frames of one segment from its header on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scan {
    /// Offset after the last valid frame: where the next frame goes.
    pub end_offset: usize,
    /// Sequence number after the last valid record.
    pub next_seq: Seq,
    /// Records in the valid frames.
    pub records: u64,
    /// Why the scan stopped at `end_offset`.
    pub end: ScanEnd,
}

/// Scans the frames of a segment (`bytes` is the whole file) in order, calling `each` for every
/// valid frame, and stops at the first position that is not a valid frame with the expected
/// sequence number, or after the record `bound` (inclusive) if given.
pub fn scan<'a>(
    bytes: &'a [u8],
    header: &SegmentHeader,
    bound: Option<Seq>,
    mut each: impl FnMut(usize, &Frame<'a>),
) -> Scan {
    let salt_crc = header.salt_crc();
    let mut offset = SEGMENT_HEADER_BYTES;
    let mut next = header.first_seq.0;
    let mut records = 0;
    let end = loop {
        if bound.is_some_and(|b| next > b.0) {
            break ScanEnd::Bound;
        }
        match frame::decode(bytes, offset, salt_crc) {
            Decoded::End => break ScanEnd::Clean,
            Decoded::Invalid(fault) => break ScanEnd::Invalid(fault),
            Decoded::Frame(f) if f.seq != next => break ScanEnd::WrongSeq(f.seq),
            Decoded::Frame(f) => {
                each(offset, &f);
                offset += f.frame_bytes;
                next = f.end_seq();
                records += u64::from(f.count);
            }
        }
    };
    Scan { end_offset: offset, next_seq: Seq(next), records, end }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> SegmentHeader {
        SegmentHeader { format_version: 1, id: SegmentId(2), first_seq: Seq(17), salt: 0xfeed_beef }
    }

    #[test]
    fn header_round_trips() {
        let bytes = header().encode();
        assert_eq!(decode_header(&bytes, Path::new("x")).unwrap(), header());
    }

    #[test]
    fn header_faults_are_classified_in_order() {
        let p = Path::new("x");
        let reason = |bytes: &[u8]| match decode_header(bytes, p).unwrap_err().into_kind() {
            ErrorKind::Corruption { reason, .. } => format!("{reason:?}"),
            other => format!("{other:?}"),
        };
        assert_eq!(reason(&[0; 10]), "ShortHeader");
        let mut b = header().encode();
        b[0] = b'X';
        assert_eq!(reason(&b), "BadMagic");
        let mut b = header().encode();
        b[8] = 3;
        assert!(reason(&b).starts_with("UnsupportedVersion"));
        let mut b = header().encode();
        b[8] = 0;
        assert!(reason(&b).starts_with("UnsupportedVersion"));
        let mut b = header().encode();
        b[33] ^= 1;
        assert_eq!(reason(&b), "BadHeaderChecksum");
    }

    #[test]
    fn names_sort_in_log_order() {
        assert_eq!(file_name(Seq(1)), "00000000000000000001.seg");
        assert_eq!(parse_file_name(&file_name(Seq(u64::MAX))), Some(Seq(u64::MAX)));
        assert_eq!(parse_file_name("1.seg"), None);
        assert_eq!(parse_file_name("00000000000000000000.seg"), None);
        assert_eq!(parse_file_name("prealloc.tmp"), None);
        assert!(file_name(Seq(9)) < file_name(Seq(10)));
    }

    #[test]
    fn scan_stops_at_zeros_and_at_the_bound() {
        let h = header();
        let mut bytes = h.encode().to_vec();
        for seq in 17..20 {
            frame::encode_single(&mut bytes, h.salt_crc(), seq, 0, b"abc");
        }
        let used = bytes.len();
        bytes.resize(used + 100, 0);
        let s = scan(&bytes, &h, None, |_, _| {});
        assert_eq!(
            (s.end_offset, s.next_seq, s.records, s.end),
            (used, Seq(20), 3, ScanEnd::Clean)
        );
        let s = scan(&bytes, &h, Some(Seq(18)), |_, _| {});
        assert_eq!((s.next_seq, s.end), (Seq(19), ScanEnd::Bound));
    }
}
