//! Reading records in order from any sequence number, starting inside a segment at the last
//! frame start an earlier reader recorded before it ([`crate::engine::seeks`]). Segments are
//! read through read-only
//! memory maps of a bounded window ([`crate::fs::Fs::map_range`], [`READ_WINDOW_BYTES`] or one
//! frame, whichever is larger) that moves on with the reader, so a scan of a whole log keeps
//! about one window of it resident; every frame's CRC is checked as it is read, and the
//! sequence must continue without a gap from one segment to the next, unless the log's gap file
//! declares exactly that gap ([`crate::engine::gaps`]).

use std::sync::Arc;

use bytes::Bytes;

use crate::engine::frame::{self, Decoded, KIND_BATCH};
use crate::engine::gaps::Gaps;
use crate::engine::segment;
use crate::engine::segments::SegmentMeta;
use crate::error::{CorruptionReason, Error, ErrorKind, Result};
use crate::fs::Fs;
use crate::limits::{
    BATCH_ENTRY_HEADER_BYTES, FRAME_HEADER_BYTES, FRAME_PAYLOAD_BYTES_MAX, READ_WINDOW_BYTES,
    SEEK_STRIDE_BYTES, SEGMENT_HEADER_BYTES,
};
use crate::types::Seq;

/// One record read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its sequence number.
    pub seq: Seq,
    /// Its bytes: a zero-copy slice of the segment's memory map.
    pub payload: Bytes,
}

/// An iterator over the records of a log, in sequence order, from a chosen sequence number up
/// to the last record written when it was created. Yields an error and then ends if it meets
/// corruption.
#[derive(Debug)]
pub struct Reader {
    fs: Arc<dyn Fs>,
    segments: Vec<SegmentMeta>,
    gaps: Arc<Gaps>,
    index: usize,
    /// Whether the segment at `index` is open: its header read and checked, or its window
    /// mapped from a frame start an earlier reader recorded (`engine::seeks`).
    open: bool,
    /// The mapped window of the segment: bytes from file offset `base`.
    map: Bytes,
    base: usize,
    /// Whether the window reaches the end of the file.
    at_file_end: bool,
    salt_crc: u32,
    /// File offset of the next frame.
    offset: usize,
    /// The offset from which the next frame start is recorded in the segment's seeks.
    next_note: usize,
    next_seq: u64,
    from: u64,
    last: u64,
    batch: Option<Batch>,
    failed: bool,
}

#[derive(Debug)]
struct Batch {
    at: usize,
    left: u16,
}

impl Reader {
    /// A reader of `segments` yielding records `from..=last`.
    pub(crate) fn new(
        fs: Arc<dyn Fs>,
        segments: Vec<SegmentMeta>,
        gaps: Arc<Gaps>,
        from: Seq,
        last: u64,
    ) -> Reader {
        let from = from.0.max(1);
        let index = segments.partition_point(|s| s.header.first_seq.0 <= from).saturating_sub(1);
        Reader {
            fs,
            segments,
            gaps,
            index,
            open: false,
            map: Bytes::new(),
            base: 0,
            at_file_end: false,
            salt_crc: 0,
            offset: 0,
            next_note: 0,
            next_seq: 0,
            from,
            last,
            batch: None,
            failed: false,
        }
    }

    fn open_segment(&mut self) -> Result<()> {
        let meta = &self.segments[self.index];
        // A frame start recorded by an earlier reader, at or before `from`: start there,
        // mapping only the window from it. Its header was checked by the reader that recorded
        // the start, and every frame from the start on is checked as from the first, against
        // the listed header's salt and the expected seq: a frame of another file (a segment
        // rewritten since has a new salt) or of another place fails those checks.
        if let Some((seq, offset)) = meta.seeks.start_for(self.from)
            && seq > meta.header.first_seq.0
        {
            self.salt_crc = meta.header.salt_crc();
            self.offset = usize::try_from(offset).unwrap_or(usize::MAX);
            self.next_seq = seq;
            self.map_window(self.offset, READ_WINDOW_BYTES)?;
        } else {
            self.map_window(0, READ_WINDOW_BYTES)?;
            let meta = &self.segments[self.index];
            let header = segment::decode_header(&self.map, &meta.path)?;
            if header != meta.header {
                return Err(Error::corruption(
                    Some(meta.header.id),
                    &meta.path,
                    0,
                    CorruptionReason::BadHeaderChecksum,
                ));
            }
            self.salt_crc = header.salt_crc();
            self.offset = SEGMENT_HEADER_BYTES;
            self.next_seq = header.first_seq.0;
        }
        self.next_note = self.offset + SEEK_STRIDE_BYTES;
        self.open = true;
        Ok(())
    }

    /// Maps `[offset, offset + len)` of the current segment as the window.
    fn map_window(&mut self, offset: usize, len: usize) -> Result<()> {
        let meta = &self.segments[self.index];
        // The old window goes first, so that two are never mapped at once.
        self.map = Bytes::new();
        let map = match self.fs.map_range(&meta.path, offset as u64, len as u64) {
            Ok(map) => map,
            // The segment was removed since this reader listed it: a purge reclaimed its
            // records (a snapshot covers them), which is not damage. The next segment listed
            // is the earliest the log may still hold.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let first_available = self
                    .segments
                    .get(self.index + 1)
                    .map_or(self.last + 1, |next| next.header.first_seq.0);
                let requested = self.next_seq.max(self.from);
                return Err(ErrorKind::Reclaimed { requested, first_available }.into());
            }
            Err(e) => return Err(Error::io("map", &meta.path, e)),
        };
        self.at_file_end = map.len() < len;
        self.base = offset;
        self.map = map;
        Ok(())
    }

    /// Moves the window so that it holds the whole frame at `self.offset` (as long as its
    /// header says, at most the largest frame), unless the file ends first.
    fn fit_frame(&mut self) -> Result<()> {
        loop {
            let at = self.offset - self.base;
            let have = self.map.len().saturating_sub(at);
            let need = match self.map.get(at..at + 8) {
                Some(word) => {
                    let first = u64::from_le_bytes(word.try_into().unwrap_or_default());
                    frame::frame_bytes(((first >> 32) as usize).min(FRAME_PAYLOAD_BYTES_MAX))
                }
                None => FRAME_HEADER_BYTES,
            };
            if have >= need || self.at_file_end {
                return Ok(());
            }
            self.map_window(self.offset, need.max(READ_WINDOW_BYTES))?;
        }
    }

    fn corrupt(&self, reason: CorruptionReason) -> Error {
        let meta = &self.segments[self.index];
        Error::corruption(Some(meta.header.id), &meta.path, self.offset as u64, reason)
    }

    /// Moves to the next record: its seq and where its bytes lie in the current map.
    fn advance(&mut self) -> Result<Option<(u64, usize, usize)>> {
        loop {
            if self.next_seq > self.last || self.segments.is_empty() {
                return Ok(None);
            }
            if !self.open {
                self.open_segment()?;
                continue;
            }
            if let Some(batch) = &mut self.batch {
                let at = batch.at;
                let len_bytes: [u8; 4] =
                    self.map[at..at + BATCH_ENTRY_HEADER_BYTES].try_into().unwrap_or_default();
                let len = u32::from_le_bytes(len_bytes) as usize;
                let start = at + BATCH_ENTRY_HEADER_BYTES;
                batch.at = start + len;
                batch.left -= 1;
                if batch.left == 0 {
                    self.batch = None;
                }
                let seq = self.next_seq;
                self.next_seq += 1;
                if seq >= self.from {
                    return Ok(Some((seq, start, start + len)));
                }
                continue;
            }
            self.fit_frame()?;
            match frame::decode(&self.map, self.offset - self.base, self.salt_crc) {
                Decoded::Frame(f) if f.seq != self.next_seq => {
                    return Err(self.corrupt(CorruptionReason::SequenceMismatch {
                        expected: self.next_seq,
                        found: f.seq,
                    }));
                }
                Decoded::Frame(f) => {
                    if let Some(next) = self.segments.get(self.index + 1)
                        && f.end_seq() > next.header.first_seq.0
                    {
                        return Err(self.corrupt(CorruptionReason::SegmentOverlap {
                            next_first_seq: next.header.first_seq.0,
                            found: f.seq,
                        }));
                    }
                    if self.offset >= self.next_note {
                        // One start a stride, for the readers after this one.
                        self.segments[self.index].seeks.note(f.seq, self.offset as u64);
                        self.next_note = self.offset + SEEK_STRIDE_BYTES;
                    }
                    let payload_at = self.offset - self.base + FRAME_HEADER_BYTES;
                    self.offset += f.frame_bytes;
                    if f.end_seq() <= self.from {
                        self.next_seq = f.end_seq();
                        continue;
                    }
                    if f.kind == KIND_BATCH {
                        self.batch = Some(Batch { at: payload_at, left: f.count });
                        continue;
                    }
                    let seq = self.next_seq;
                    self.next_seq += 1;
                    return Ok(Some((seq, payload_at, payload_at + f.payload.len())));
                }
                Decoded::Invalid(fault) => {
                    return Err(self.corrupt(CorruptionReason::BadFrame(fault)));
                }
                Decoded::End => {
                    let Some(next) = self.segments.get(self.index + 1) else {
                        return Err(self.corrupt(CorruptionReason::MissingRecords {
                            expected: self.next_seq,
                        }));
                    };
                    let found = next.header.first_seq.0;
                    if found != self.next_seq && !self.gaps.declares(self.next_seq, found) {
                        return Err(self.corrupt(CorruptionReason::SequenceGap {
                            expected: self.next_seq,
                            found: next.header.first_seq.0,
                        }));
                    }
                    self.index += 1;
                    self.open = false;
                    self.map = Bytes::new();
                }
            }
        }
    }
}

impl Reader {
    /// The next record, borrowed from the segment's memory map instead of sharing it: the
    /// fastest way to scan a log. `None` at the end; after an error, `None` too.
    pub fn next_ref(&mut self) -> Option<Result<(Seq, &[u8])>> {
        if self.failed {
            return None;
        }
        match self.advance() {
            Ok(Some((seq, start, end))) => Some(Ok((Seq(seq), &self.map[start..end]))),
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

impl Iterator for Reader {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Result<Record>> {
        if self.failed {
            return None;
        }
        match self.advance() {
            Ok(Some((seq, start, end))) => {
                Some(Ok(Record { seq: Seq(seq), payload: self.map.slice(start..end) }))
            }
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}
