//! Open-time recovery of the active segment: find where its valid frames end, tell a torn
//! tail from damage a later frame proves was durable, and decide what open does
//! (`format-spec/recovery.md`, the decision table). [`analyze_tail`] is pure, so it can be
//! fuzzed on arbitrary bytes.

use std::path::PathBuf;

use crate::engine::frame::{self, Decoded};
use crate::engine::segment::{self, ScanEnd, SegmentHeader};
use crate::error::{CorruptionReason, FrameFault};
use crate::limits::FRAME_ALIGN_BYTES;
use crate::types::{RecoveryMode, SegmentId, Seq};

/// What the tail of the active segment holds after its last valid frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailState {
    /// Only zeros: the log ends cleanly.
    Clean,
    /// Non-zero bytes that no valid later frame claims were durable: a torn or partial write.
    Torn {
        /// Bytes from the end of the last valid frame up to the last non-zero byte.
        bytes: u64,
        /// What was found where the valid frames end (`Truncated` for zeros there).
        fault: FrameFault,
        /// Valid frames of this segment found after the hole, none of them vouching for it:
        /// they were written and may hold acknowledged records, so a cut keeps them aside.
        frames: u64,
    },
    /// Damage a crash cannot explain.
    Corrupt {
        /// Where the damage is.
        offset: u64,
        /// What it is.
        reason: CorruptionReason,
    },
}

/// The analysis of an active segment (`bytes` is its whole file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailAnalysis {
    /// Offset after the last valid frame.
    pub end_offset: u64,
    /// The sequence number after the last valid record.
    pub next_seq: Seq,
    /// Valid records in the segment.
    pub records: u64,
    /// What follows them.
    pub state: TailState,
}

/// Analyzes the active segment whose header is `header` and whose contents are `bytes`.
#[must_use]
pub fn analyze_tail(bytes: &[u8], header: &SegmentHeader) -> TailAnalysis {
    analyze_tail_with(bytes, header, |end| last_nonzero(bytes.get(end..).unwrap_or_default()))
}

/// [`analyze_tail`], with the search for the last non-zero byte after the valid frames left to
/// `last_nonzero_from`: given the offset where the frames end, it returns the index (relative
/// to that offset) of the last non-zero byte of the rest of the file. Open reads that rest in
/// bounded chunks instead of through the memory map of `bytes`, so the zeros a growth step
/// put ahead of the writer are read but never become resident memory of the process; the map
/// is touched after the frames only where non-zero bytes are.
pub fn analyze_tail_with(
    bytes: &[u8],
    header: &SegmentHeader,
    last_nonzero_from: impl FnOnce(usize) -> Option<usize>,
) -> TailAnalysis {
    let scan = segment::scan(bytes, header, None, |_, _| {});
    let end = scan.end_offset;
    let state = match scan.end {
        ScanEnd::WrongSeq(found) => TailState::Corrupt {
            offset: end as u64,
            reason: CorruptionReason::SequenceMismatch { expected: scan.next_seq.0, found },
        },
        ScanEnd::Clean | ScanEnd::Invalid(_) | ScanEnd::Bound => {
            let fault = match scan.end {
                ScanEnd::Invalid(fault) => fault,
                _ => FrameFault::Truncated,
            };
            classify_rest(bytes, header, end, last_nonzero_from(end), scan.next_seq.0, fault)
        }
    };
    TailAnalysis { end_offset: end as u64, next_seq: scan.next_seq, records: scan.records, state }
}

/// Looks at everything after the valid frames: zeros, a torn tail, or a witness frame whose
/// durable claim covers the first missing record.
fn classify_rest(
    bytes: &[u8],
    header: &SegmentHeader,
    end: usize,
    last_nonzero: Option<usize>,
    next: u64,
    fault: FrameFault,
) -> TailState {
    let Some(last_nonzero) = last_nonzero else {
        return TailState::Clean;
    };
    let salt_crc = header.salt_crc();
    let mut offset = end + FRAME_ALIGN_BYTES;
    let mut frames = 0;
    while offset <= end + last_nonzero {
        if let Decoded::Frame(witness) = frame::decode(bytes, offset, salt_crc) {
            frames += 1;
            if witness.seq < next {
                return TailState::Corrupt {
                    offset: offset as u64,
                    reason: CorruptionReason::SequenceMismatch {
                        expected: next,
                        found: witness.seq,
                    },
                };
            }
            if witness.durable_claim.is_some_and(|claim| claim >= next) {
                return TailState::Corrupt {
                    offset: end as u64,
                    reason: CorruptionReason::DurableRecordDamaged(fault),
                };
            }
        }
        offset += FRAME_ALIGN_BYTES;
    }
    TailState::Torn { bytes: last_nonzero as u64 + 1, fault, frames }
}

/// The index of the last non-zero byte of `bytes`. Scans 64-byte blocks with a word-wide OR
/// that the compiler vectorises: the zero tail of a preallocated segment is megabytes long.
#[must_use]
pub fn last_nonzero(bytes: &[u8]) -> Option<usize> {
    const BLOCK: usize = 64;
    let whole = bytes.len() - bytes.len() % BLOCK;
    if let Some(i) = bytes[whole..].iter().rposition(|&b| b != 0) {
        return Some(whole + i);
    }
    let block =
        bytes[..whole].rchunks_exact(BLOCK).position(|c| c.iter().fold(0, |a, &b| a | b) != 0)?;
    let start = whole - (block + 1) * BLOCK;
    bytes[start..start + BLOCK].iter().rposition(|&b| b != 0).map(|i| start + i)
}

/// The torn tail a writer open cuts (zeroed and synced before its first write, or at its
/// close if nothing is written: `format-spec/recovery.md`, step 9), or in a read-only open,
/// what a writer open would cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailCut {
    /// The active segment.
    pub segment: SegmentId,
    /// Its file.
    pub path: PathBuf,
    /// Offset of the first byte cut: the end of the last valid frame.
    pub offset: u64,
    /// Bytes cut (zeroed), up to the last non-zero one.
    pub bytes: u64,
    /// The seq of the first record lost with the cut, if a record was there: the seq after
    /// the last one kept.
    pub first_seq_cut: Seq,
    /// Valid frames found after the hole in the cut bytes (written, never vouched for).
    pub frames: u64,
    /// Where the cut bytes were kept aside before the cut (only when `frames` is not zero; in
    /// a read-only open, never: nothing is written). `factlog salvage` reads them back.
    pub kept: Option<PathBuf>,
}

impl std::fmt::Display for TailCut {
    /// One line for an operator: what was cut, from which seq, and where kept bytes are.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cut a torn tail of {} at offset {} of segment {} ({}): records from seq {} on \
             were not vouched for by the log mark nor claimed durable by a later frame",
            crate::error::counted(self.bytes, "byte"),
            self.offset,
            self.segment,
            self.path.display(),
            self.first_seq_cut
        )?;
        match &self.kept {
            Some(kept) => write!(
                f,
                "; {} valid frames after the hole were kept in {} (`factlog salvage` puts them \
                 back if run before anything is written to the log)",
                self.frames,
                kept.display()
            ),
            None => Ok(()),
        }
    }
}

/// What recovery did at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The mode it ran in.
    pub mode: RecoveryMode,
    /// Segments found.
    pub segments: usize,
    /// Records scanned in the active segment (the only one open reads).
    pub records_scanned: u64,
    /// The last record of the log after recovery.
    pub last_seq: Option<Seq>,
    /// The torn tail cut off (in a read-only open: the one an open would cut), if any.
    pub tail_cut: Option<TailCut>,
    /// The log mark found at open (`format-spec/mark.md`): it vouched for everything through
    /// its durable seq. `None` for a log without one (written before marks existed): its tail
    /// was classified by the witness rule alone, and a writer open gave it a mark.
    pub mark: Option<crate::engine::mark::Mark>,
}

impl RecoveryReport {
    /// The report as JSON, one shape for every front end (the Python package's
    /// `Store.open_report`): `mark` (null for a log without one) and `tail_cut` (null when
    /// nothing was cut) with every field, and `message`, the line the CLI prints for a cut.
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        let tail_cut = self.tail_cut.as_ref().map_or(serde_json::Value::Null, |cut| {
            serde_json::json!({
                "segment": cut.segment.0,
                "path": cut.path.display().to_string(),
                "offset": cut.offset,
                "bytes": cut.bytes,
                "first_seq_cut": cut.first_seq_cut.0,
                "frames_after_hole": cut.frames,
                "kept": cut.kept.as_ref().map(|p| p.display().to_string()),
                "message": cut.to_string(),
            })
        });
        let mark =
            self.mark.as_ref().map_or(serde_json::Value::Null, crate::engine::mark::Mark::to_json);
        serde_json::json!({
            "segments": self.segments,
            "records_scanned": self.records_scanned,
            "last_seq": self.last_seq.map(|s| s.0),
            "tail_cut": tail_cut,
            "mark": mark,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::SEGMENT_HEADER_BYTES;

    fn header() -> SegmentHeader {
        SegmentHeader { format_version: 1, id: SegmentId(1), first_seq: Seq(1), salt: 99 }
    }

    /// A segment of `n` records of 40 bytes each, each written after the previous was synced
    /// when `synced`, then zeros up to 4096 bytes. Returns the bytes and each frame's offset.
    fn segment(n: u64, synced: bool) -> (Vec<u8>, Vec<usize>) {
        let h = header();
        let mut bytes = h.encode().to_vec();
        let mut offsets = Vec::new();
        for seq in 1..=n {
            offsets.push(bytes.len());
            let durable = if synced { seq - 1 } else { 0 };
            frame::encode_single(&mut bytes, h.salt_crc(), seq, durable, &[seq as u8; 40]);
        }
        bytes.resize(4096, 0);
        (bytes, offsets)
    }

    #[test]
    fn last_nonzero_finds_the_last_set_byte() {
        assert_eq!(last_nonzero(&[]), None);
        assert_eq!(last_nonzero(&[0; 1000]), None);
        for at in [0, 1, 63, 64, 65, 127, 500, 998, 999] {
            let mut bytes = vec![0u8; 1000];
            bytes[at] = 9;
            assert_eq!(last_nonzero(&bytes), Some(at), "at {at}");
            bytes[0] = 1;
            assert_eq!(last_nonzero(&bytes), Some(at), "at {at} with byte 0 set");
        }
    }

    #[test]
    fn clean_segment() {
        let (bytes, offsets) = segment(5, true);
        let a = analyze_tail(&bytes, &header());
        assert_eq!((a.next_seq, a.records, a.state), (Seq(6), 5, TailState::Clean));
        assert_eq!(a.end_offset as usize, offsets[4] + frame::frame_bytes(40));
        let empty = analyze_tail(&header().encode(), &header());
        assert_eq!((empty.next_seq, empty.state), (Seq(1), TailState::Clean));
    }

    #[test]
    fn damaged_last_frame_is_a_torn_tail() {
        let (mut bytes, offsets) = segment(5, true);
        bytes[offsets[4] + 30] ^= 0x40;
        let a = analyze_tail(&bytes, &header());
        assert_eq!(a.next_seq, Seq(5));
        assert_eq!(
            a.state,
            TailState::Torn {
                bytes: frame::frame_bytes(40) as u64,
                fault: FrameFault::BadChecksum,
                frames: 0
            }
        );
    }

    #[test]
    fn damage_witnessed_by_a_later_synced_frame_is_corruption() {
        let (mut bytes, offsets) = segment(5, true);
        bytes[offsets[2] + 30] ^= 0x40;
        let a = analyze_tail(&bytes, &header());
        assert_eq!(a.next_seq, Seq(3));
        assert!(matches!(
            a.state,
            TailState::Corrupt {
                reason: CorruptionReason::DurableRecordDamaged(FrameFault::BadChecksum),
                ..
            }
        ));
    }

    #[test]
    fn unsynced_frames_after_a_hole_are_a_torn_tail() {
        // Sectors of one unsynced write may persist in any order: a hole followed by valid
        // frames that never claimed the hole durable is still a torn tail.
        let (mut bytes, offsets) = segment(5, false);
        bytes[offsets[1]..offsets[2]].fill(0);
        let a = analyze_tail(&bytes, &header());
        assert_eq!(a.next_seq, Seq(2));
        let expected = (offsets[4] + frame::frame_bytes(40) - offsets[1]) as u64;
        // The last frame ends in padding zeros; the torn extent ends at its last non-zero byte.
        assert!(
            matches!(a.state, TailState::Torn { bytes, frames: 3, .. } if bytes <= expected && bytes > expected - 8)
        );
    }

    #[test]
    fn wrong_sequence_is_corruption() {
        let h = header();
        let mut bytes = h.encode().to_vec();
        frame::encode_single(&mut bytes, h.salt_crc(), 1, 0, b"a");
        frame::encode_single(&mut bytes, h.salt_crc(), 3, 0, b"b");
        let a = analyze_tail(&bytes, &h);
        assert!(matches!(
            a.state,
            TailState::Corrupt {
                reason: CorruptionReason::SequenceMismatch { expected: 2, found: 3 },
                ..
            }
        ));
        assert!(a.end_offset as usize > SEGMENT_HEADER_BYTES);
    }
}
