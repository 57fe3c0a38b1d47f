//! Where to start reading inside a segment: a sparse list, in memory only, of frame starts
//! (the frame's first seq and its file offset), at most one per [`SEEK_STRIDE_BYTES`] of the
//! segment. Readers record them as they pass them (`engine::reader`); a later reader
//! from seq N opens the segment at the last start at or before N instead of its first frame,
//! so reading a record deep in a segment checks at most a stride of frames before it, not the
//! whole segment up to it.
//!
//! Nothing is trusted that is not checked again: a reader that starts at an entry checks
//! every frame's CRC (seeded with the salt of the segment's header as the log listed it at
//! open) and the sequence from that frame on, so an entry that did not point at a frame of that
//! seq would be reported as corruption, never read past. It maps only the window from the
//! entry, not the segment's header again: the reader that recorded the entry checked that
//! header, and a file put in the segment's place since (a migration's rewrite, which gives
//! every segment a new random salt) fails the frame checks. Entries are only ever
//! added from frames a reader found valid, and a segment's frames never move while the log is
//! open (its tail is repaired only at open, when the segments are listed again with empty
//! lists).
//!
//! Memory: 16 bytes per stride of log read, kept while the log is open: 256 KiB for a 1 GiB
//! log read whole (proportional to the log, never more than one entry per stride).
//!
//! What it changes: a read from seq N checks the frames from the start it begins at, not
//! the segment's header nor the frames before it, so damage before that start is reported by
//! a read that reaches it (a read from earlier, `factlog verify`, an open), not by this one.

use parking_lot::Mutex;

use crate::limits::SEEK_STRIDE_BYTES;

/// The frame starts of one segment recorded so far, in order.
#[derive(Default)]
pub struct Seeks {
    starts: Mutex<Vec<(u64, u64)>>,
}

/// Says how many starts are recorded, not each of them.
impl std::fmt::Debug for Seeks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seeks").field("starts", &self.len()).finish()
    }
}

impl Seeks {
    /// The last recorded frame start whose seq is at most `from`: (seq, file offset).
    #[must_use]
    pub fn start_for(&self, from: u64) -> Option<(u64, u64)> {
        let starts = self.starts.lock();
        let after = starts.partition_point(|&(seq, _)| seq <= from);
        after.checked_sub(1).map(|at| starts[at])
    }

    /// Records the frame of `seq` at `offset`, when it lies a stride or more past the last
    /// start recorded (a reader that began before the last one adds nothing).
    pub fn note(&self, seq: u64, offset: u64) {
        let mut starts = self.starts.lock();
        let beyond = starts.last().is_none_or(|&(last_seq, last_offset)| {
            seq > last_seq && offset >= last_offset + SEEK_STRIDE_BYTES as u64
        });
        if beyond {
            starts.push((seq, offset));
        }
    }

    /// How many frame starts are recorded.
    #[must_use]
    pub fn len(&self) -> usize {
        self.starts.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_are_kept_a_stride_apart_and_found_at_or_before() {
        let seeks = Seeks::default();
        let stride = SEEK_STRIDE_BYTES as u64;
        seeks.note(10, stride);
        seeks.note(11, stride + 100);
        seeks.note(20, 2 * stride);
        seeks.note(15, 3 * stride);
        assert_eq!(seeks.len(), 2, "one per stride, in seq order");
        assert_eq!(seeks.start_for(9), None);
        assert_eq!(seeks.start_for(10), Some((10, stride)));
        assert_eq!(seeks.start_for(19), Some((10, stride)));
        assert_eq!(seeks.start_for(1_000), Some((20, 2 * stride)));
    }
}
