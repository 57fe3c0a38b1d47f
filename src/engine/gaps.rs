//! The gap file `GAPS` (`format-spec/salvage.md`, "The gap file"): the ranges of sequence
//! numbers that `factlog salvage` declared lost when it copied a damaged log into a new one.
//!
//! A log's sequence numbers increase by exactly one from record to record, and a jump between
//! two segments is corruption, so that damage which removes records is never skipped. A
//! salvaged log may hold real jumps: each is declared here, and a jump is accepted if and only
//! if a declared gap names exactly its range. Every declared gap lies at a segment boundary:
//! the segment after it starts at the gap's end. Only `salvage` writes this file, once, before
//! the new log is first opened; nothing changes it afterwards.
//!
//! Invariant: a [`Gaps`] value holds ranges that are non-empty, start at 1 or later, and are
//! sorted and separated (each ends before the next one starts); [`Gaps::decode`] refuses
//! anything else.

use std::io;
use std::path::Path;

use crate::error::{CorruptionReason, Error, ErrorKind, Result};
use crate::fs::{Fs, OpenMode};
use crate::limits::GAPS_MAX;
use crate::types::Seq;

/// Name of the gap file in a log directory.
pub const GAPS_FILE_NAME: &str = "GAPS";
/// Magic bytes at offset 0 of the gap file.
pub const GAPS_MAGIC: [u8; 8] = *b"FACTLGAP";
/// The gap-file version this build reads and writes.
pub const GAPS_VERSION: u16 = 1;
/// Bytes before the first entry.
const HEADER_BYTES: usize = 16;
/// Bytes of one entry: the first lost seq and the seq after the last lost one.
const ENTRY_BYTES: usize = 16;
/// Bytes of the trailing checksum.
const CRC_BYTES: usize = 4;

/// One declared gap: the seqs `[first, end)` are lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// The first lost sequence number.
    pub first: Seq,
    /// The sequence number after the last lost one: the first seq of the segment after the
    /// gap.
    pub end: Seq,
}

/// The gaps a log declares; empty for every log that was not written by a salvage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gaps {
    ranges: Vec<Gap>,
}

impl Gaps {
    /// The gaps `ranges`, which must be non-empty ranges from seq 1 on, sorted and separated.
    ///
    /// # Errors
    /// [`ErrorKind::LimitExceeded`] for more than [`GAPS_MAX`] ranges.
    ///
    /// # Panics
    /// If the ranges break the invariant: the caller builds them from its own scan.
    pub fn new(ranges: Vec<Gap>) -> Result<Gaps> {
        if ranges.len() > GAPS_MAX {
            return Err(ErrorKind::LimitExceeded {
                what: "declared gaps",
                value: ranges.len() as u64,
                limit: GAPS_MAX as u64,
            }
            .into());
        }
        assert!(well_formed(&ranges), "gaps must be non-empty, sorted and separated");
        Ok(Gaps { ranges })
    }

    /// The declared gaps, in sequence order.
    #[must_use]
    pub fn ranges(&self) -> &[Gap] {
        &self.ranges
    }

    /// True if no gap is declared.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Whether the jump from `expected` (the seq that had to come next) to `found` (the first
    /// seq of the next segment) is exactly a declared gap.
    #[must_use]
    pub fn declares(&self, expected: u64, found: u64) -> bool {
        self.ranges.iter().any(|g| g.first.0 == expected && g.end.0 == found)
    }

    /// The start of the declared gap that ends at `first_seq`, the first seq of a log's first
    /// segment: the log then officially begins there.
    #[must_use]
    pub fn leading(&self, first_seq: u64) -> Option<Seq> {
        self.ranges.iter().find(|g| g.end.0 == first_seq).map(|g| g.first)
    }

    /// The bytes of the gap file (`format-spec/salvage.md`, "The gap file").
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + self.ranges.len() * ENTRY_BYTES + 4);
        out.extend_from_slice(&GAPS_MAGIC);
        out.extend_from_slice(&GAPS_VERSION.to_le_bytes());
        out.extend_from_slice(&[0, 0]);
        let count = u32::try_from(self.ranges.len()).expect("bounded by GAPS_MAX");
        out.extend_from_slice(&count.to_le_bytes());
        for gap in &self.ranges {
            out.extend_from_slice(&gap.first.0.to_le_bytes());
            out.extend_from_slice(&gap.end.0.to_le_bytes());
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes and checks the gap file `bytes` read from `path`, in the order the spec gives:
    /// length, magic, version (before the checksum), checksum, fields, entries.
    ///
    /// # Errors
    /// [`ErrorKind::UnsupportedVersion`] for another version; [`ErrorKind::Corruption`] with
    /// reason [`CorruptionReason::BadGapFile`] for anything else that is wrong.
    pub fn decode(bytes: &[u8], path: &Path) -> Result<Gaps> {
        let bad = |offset: usize, what: &'static str| {
            Error::corruption(None, path, offset as u64, CorruptionReason::BadGapFile(what))
        };
        let Some(header) = bytes.first_chunk::<HEADER_BYTES>() else {
            return Err(bad(0, "shorter than its header"));
        };
        if header[0..8] != GAPS_MAGIC {
            return Err(bad(0, "bad magic"));
        }
        let version = u16::from_le_bytes([header[8], header[9]]);
        if version != GAPS_VERSION {
            return Err(ErrorKind::UnsupportedVersion {
                path: path.to_path_buf(),
                found: version,
                supported: GAPS_VERSION,
            }
            .into());
        }
        let count = u32::from_le_bytes([header[12], header[13], header[14], header[15]]) as usize;
        if count > GAPS_MAX {
            return Err(bad(12, "more gaps than the limit"));
        }
        let body_bytes = HEADER_BYTES + count * ENTRY_BYTES;
        if bytes.len() != body_bytes + CRC_BYTES {
            return Err(bad(12, "length does not match the count"));
        }
        let (body, crc) = bytes.split_at(body_bytes);
        let stored = u32::from_le_bytes(crc.try_into().unwrap_or([0; 4]));
        if crc32fast::hash(body) != stored {
            return Err(bad(body_bytes, "checksum mismatch"));
        }
        if header[10..12] != [0, 0] {
            return Err(bad(10, "non-zero reserved field"));
        }
        let mut ranges = Vec::with_capacity(count);
        for (i, entry) in body[HEADER_BYTES..].chunks_exact(ENTRY_BYTES).enumerate() {
            let word =
                |at: usize| u64::from_le_bytes(entry[at..at + 8].try_into().unwrap_or([0; 8]));
            ranges.push(Gap { first: Seq(word(0)), end: Seq(word(8)) });
            if !well_formed(&ranges) {
                return Err(bad(
                    HEADER_BYTES + i * ENTRY_BYTES,
                    "gaps empty, unsorted or touching",
                ));
            }
        }
        Ok(Gaps { ranges })
    }
}

/// The invariant of [`Gaps`].
fn well_formed(ranges: &[Gap]) -> bool {
    ranges.iter().all(|g| g.first.0 >= 1 && g.first < g.end)
        && ranges.windows(2).all(|w| w[0].end < w[1].first)
}

/// Reads the gap file of the log in `dir`: no file means no gap.
///
/// # Errors
/// An I/O error other than a missing file, or what [`Gaps::decode`] refuses.
pub fn read(fs: &dyn Fs, dir: &Path) -> Result<Gaps> {
    let path = dir.join(GAPS_FILE_NAME);
    let file = match fs.open(&path, OpenMode::Read) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Gaps::default()),
        Err(e) => return Err(Error::io("open", &path, e)),
    };
    let len = file.len().map_err(|e| Error::io("stat", &path, e))?;
    let limit = (HEADER_BYTES + GAPS_MAX * ENTRY_BYTES + CRC_BYTES) as u64;
    if len > limit {
        return Err(Error::corruption(
            None,
            &path,
            0,
            CorruptionReason::BadGapFile("longer than the largest gap file"),
        ));
    }
    let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(0)];
    file.read_exact_at(&mut bytes, 0).map_err(|e| Error::io("read", &path, e))?;
    Gaps::decode(&bytes, &path)
}

/// Writes `gaps` as the gap file of `dir` and syncs it (the caller syncs the directory).
pub(crate) fn write(fs: &dyn Fs, dir: &Path, gaps: &Gaps) -> Result<()> {
    let path = dir.join(GAPS_FILE_NAME);
    let file = fs.open(&path, OpenMode::CreateNew).map_err(|e| Error::io("create", &path, e))?;
    file.write_all_at(&gaps.encode(), 0).map_err(|e| Error::io("write", &path, e))?;
    file.sync_data().map_err(|e| Error::io("fdatasync", &path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gap(first: u64, end: u64) -> Gap {
        Gap { first: Seq(first), end: Seq(end) }
    }

    #[test]
    fn round_trips_and_declares_exact_ranges() {
        let gaps = Gaps::new(vec![gap(4, 9), gap(20, 21)]).unwrap();
        let decoded = Gaps::decode(&gaps.encode(), Path::new("GAPS")).unwrap();
        assert_eq!(decoded, gaps);
        assert!(gaps.declares(4, 9) && gaps.declares(20, 21));
        assert!(!gaps.declares(4, 10) && !gaps.declares(5, 9));
        assert_eq!(gaps.leading(9), Some(Seq(4)));
    }

    #[test]
    fn every_damage_is_refused_without_panicking() {
        let bytes = Gaps::new(vec![gap(4, 9), gap(20, 21)]).unwrap().encode();
        for cut in 0..bytes.len() {
            assert!(Gaps::decode(&bytes[..cut], Path::new("GAPS")).is_err(), "cut {cut}");
        }
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(Gaps::decode(&flipped, Path::new("GAPS")).is_err(), "bit {bit}");
        }
    }

    #[test]
    fn touching_or_unsorted_gaps_are_refused() {
        for ranges in [vec![gap(4, 9), gap(9, 12)], vec![gap(9, 12), gap(4, 5)], vec![gap(0, 3)]] {
            let mut bytes = GAPS_MAGIC.to_vec();
            bytes.extend_from_slice(&1u16.to_le_bytes());
            bytes.extend_from_slice(&[0, 0]);
            bytes.extend_from_slice(&(ranges.len() as u32).to_le_bytes());
            for g in &ranges {
                bytes.extend_from_slice(&g.first.0.to_le_bytes());
                bytes.extend_from_slice(&g.end.0.to_le_bytes());
            }
            let crc = crc32fast::hash(&bytes);
            bytes.extend_from_slice(&crc.to_le_bytes());
            let err = Gaps::decode(&bytes, Path::new("GAPS")).unwrap_err();
            assert!(err.is_corruption(), "{err}");
        }
    }
}
