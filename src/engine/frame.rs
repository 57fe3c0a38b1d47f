//! Record frames: encode and decode, with the salted CRC. Pure functions on byte slices, no
//! I/O, so the decoder can be fuzzed directly (`format-spec/record.md`).
//!
//! Invariants: a decoder never panics, never allocates and never reads outside the slice it is
//! given, whatever the bytes; every frame the encoder produces decodes back to the same records
//! (checked by `debug_assert!` on the encode path and by the tests).

use crate::error::FrameFault;
use crate::limits::{
    BATCH_ENTRY_HEADER_BYTES, BATCH_RECORDS_MAX, DURABLE_LAG_NONE, FRAME_ALIGN_BYTES,
    FRAME_HEADER_BYTES, FRAME_PAYLOAD_BYTES_MAX,
};

/// Frame kind tag of a single record (`format-spec/record.md`, field `kind`).
pub const KIND_SINGLE: u8 = 1;
/// Frame kind tag of a batch of records.
pub const KIND_BATCH: u8 = 2;

/// The CRC state a segment's salt contributes: every frame CRC in the segment starts from it.
#[must_use]
pub fn salt_crc(salt: u64) -> u32 {
    crc32fast::hash(&salt.to_le_bytes())
}

/// Bytes a frame with `payload_bytes` of payload occupies on disk, padding included.
#[must_use]
pub const fn frame_bytes(payload_bytes: usize) -> usize {
    (FRAME_HEADER_BYTES + payload_bytes).next_multiple_of(FRAME_ALIGN_BYTES)
}

/// Payload bytes of a batch frame holding `records`.
pub fn batch_payload_bytes<P: AsRef<[u8]>>(records: &[P]) -> usize {
    records.iter().map(|r| BATCH_ENTRY_HEADER_BYTES + r.as_ref().len()).sum()
}

/// The `durable_lag` field for a frame starting at `seq` when `durable` is the highest
/// sequence number known to be on stable storage (0 for none).
#[must_use]
pub fn durable_lag(seq: u64, durable: u64) -> u32 {
    assert!(durable < seq, "a frame is encoded after everything durable");
    u32::try_from(seq - durable).unwrap_or(DURABLE_LAG_NONE)
}

/// Appends one single-record frame to `out`. The caller has checked the payload limit.
pub fn encode_single(out: &mut Vec<u8>, salt_crc: u32, seq: u64, durable: u64, payload: &[u8]) {
    assert!(payload.len() <= FRAME_PAYLOAD_BYTES_MAX);
    let start = out.len();
    push_header(out, seq, payload.len(), 1, KIND_SINGLE, durable_lag(seq, durable));
    out.extend_from_slice(payload);
    finish(out, start, salt_crc);
}

/// Appends a single-record frame whose `payload_len`-byte payload `fill` writes in place, so
/// the caller needs no buffer of its own. If `fill` fails, `out` is left as it was.
pub fn encode_single_with<E>(
    out: &mut Vec<u8>,
    salt_crc: u32,
    seq: u64,
    durable: u64,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
) -> Result<(), E> {
    assert!(payload_len <= FRAME_PAYLOAD_BYTES_MAX);
    let start = out.len();
    push_header(out, seq, payload_len, 1, KIND_SINGLE, durable_lag(seq, durable));
    let payload_at = out.len();
    out.resize(payload_at + payload_len, 0);
    if let Err(e) = fill(&mut out[payload_at..]) {
        out.truncate(start);
        return Err(e);
    }
    finish(out, start, salt_crc);
    Ok(())
}

/// Appends one batch frame holding `records` to `out`. The caller has checked the limits.
pub fn encode_batch<P: AsRef<[u8]>>(
    out: &mut Vec<u8>,
    salt_crc: u32,
    seq: u64,
    durable: u64,
    records: &[P],
) {
    assert!(!records.is_empty() && records.len() <= BATCH_RECORDS_MAX);
    let payload_bytes = batch_payload_bytes(records);
    assert!(payload_bytes <= FRAME_PAYLOAD_BYTES_MAX);
    let start = out.len();
    push_header(out, seq, payload_bytes, records.len(), KIND_BATCH, durable_lag(seq, durable));
    for record in records {
        let record = record.as_ref();
        out.extend_from_slice(&u32::try_from(record.len()).unwrap_or(u32::MAX).to_le_bytes());
        out.extend_from_slice(record);
    }
    finish(out, start, salt_crc);
}

fn push_header(out: &mut Vec<u8>, seq: u64, len: usize, count: usize, kind: u8, lag: u32) {
    let len = u32::try_from(len).expect("payload length checked against the limit");
    let count = u16::try_from(count).expect("batch count checked against the limit");
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.push(kind);
    out.push(0);
    out.extend_from_slice(&lag.to_le_bytes());
}

fn finish(out: &mut Vec<u8>, start: usize, salt_crc: u32) {
    let mut hasher = crc32fast::Hasher::new_with_initial(salt_crc);
    hasher.update(&out[start + 4..]);
    let crc = hasher.finalize();
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
    let padded = start + (out.len() - start).next_multiple_of(FRAME_ALIGN_BYTES);
    out.resize(padded, 0);
    debug_assert!(matches!(decode(out, start, salt_crc), Decoded::Frame(_)));
}

/// A valid frame, borrowed from the bytes it was decoded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Sequence number of the first record.
    pub seq: u64,
    /// Records in the frame (1 for a single record).
    pub count: u16,
    /// [`KIND_SINGLE`] or [`KIND_BATCH`].
    pub kind: u8,
    /// The highest sequence number the writer knew was durable, if the frame says.
    pub durable_claim: Option<u64>,
    /// The payload (for a batch, the entries with their length prefixes).
    pub payload: &'a [u8],
    /// Bytes the frame occupies, padding included: the next frame starts this far on.
    pub frame_bytes: usize,
}

impl<'a> Frame<'a> {
    /// The records of the frame, in order.
    #[must_use]
    pub fn records(&self) -> Records<'a> {
        Records { kind: self.kind, rest: self.payload, left: self.count }
    }

    /// The sequence number after the frame's last record.
    #[must_use]
    pub fn end_seq(&self) -> u64 {
        self.seq + u64::from(self.count)
    }
}

/// Iterator over the records of one valid frame.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    kind: u8,
    rest: &'a [u8],
    left: u16,
}

impl<'a> Iterator for Records<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        if self.kind == KIND_SINGLE {
            return Some(std::mem::take(&mut self.rest));
        }
        // The frame was validated by `decode`, so every entry is in bounds; a failed lookup
        // here would be a bug, and it ends the iteration instead of panicking.
        let (len, rest) = split_entry(self.rest)?;
        let (record, rest) = rest.split_at_checked(len)?;
        self.rest = rest;
        Some(record)
    }
}

fn split_entry(bytes: &[u8]) -> Option<(usize, &[u8])> {
    let (len, rest) = bytes.split_first_chunk::<BATCH_ENTRY_HEADER_BYTES>()?;
    Some((u32::from_le_bytes(*len) as usize, rest))
}

/// The outcome of decoding at one offset (`format-spec/record.md`, decode outcomes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// Zero bytes, or the end of the slice: no frame was ever written here.
    End,
    /// A valid frame.
    Frame(Frame<'a>),
    /// Non-zero bytes that are not a valid frame.
    Invalid(FrameFault),
}

/// Decodes the frame at `offset` of `bytes`, in a segment whose salt gives `salt_crc`.
#[must_use]
#[inline]
pub fn decode(bytes: &[u8], offset: usize, salt_crc: u32) -> Decoded<'_> {
    let Some(rest) = bytes.get(offset..) else {
        return Decoded::End;
    };
    let Some(header) = rest.first_chunk::<FRAME_HEADER_BYTES>() else {
        return if rest.iter().all(|&b| b == 0) {
            Decoded::End
        } else {
            Decoded::Invalid(FrameFault::Truncated)
        };
    };
    let word = |at: usize| u64::from_le_bytes(*header[at..].first_chunk::<8>().unwrap_or(&[0; 8]));
    let (first, seq, third) = (word(0), word(8), word(16));
    if first | seq | third == 0 {
        return Decoded::End;
    }
    let stored_crc = first as u32;
    let len = (first >> 32) as usize;
    let count = third as u16;
    let kind = (third >> 16) as u8;
    let flags = (third >> 24) as u8;
    let lag = (third >> 32) as u32;
    if len > FRAME_PAYLOAD_BYTES_MAX {
        return Decoded::Invalid(FrameFault::OversizedLength);
    }
    let Some(covered) = rest.get(4..FRAME_HEADER_BYTES + len) else {
        return Decoded::Invalid(FrameFault::Truncated);
    };
    let mut hasher = crc32fast::Hasher::new_with_initial(salt_crc);
    hasher.update(covered);
    if hasher.finalize() != stored_crc {
        return Decoded::Invalid(FrameFault::BadChecksum);
    }
    let payload = &covered[FRAME_HEADER_BYTES - 4..];
    if flags != 0 {
        return Decoded::Invalid(FrameFault::BadFlags);
    }
    let count_ok = match kind {
        KIND_SINGLE => count == 1,
        KIND_BATCH => count >= 1,
        _ => return Decoded::Invalid(FrameFault::UnknownKind),
    };
    if !count_ok {
        return Decoded::Invalid(FrameFault::BadCount);
    }
    if seq == 0 || seq.checked_add(u64::from(count)).is_none() {
        return Decoded::Invalid(FrameFault::BadSeq);
    }
    if lag == 0 || (lag != DURABLE_LAG_NONE && u64::from(lag) > seq) {
        return Decoded::Invalid(FrameFault::BadDurableLag);
    }
    if kind == KIND_BATCH && !batch_fills(payload, count) {
        return Decoded::Invalid(FrameFault::BadBatch);
    }
    let durable_claim = (lag != DURABLE_LAG_NONE).then(|| seq - u64::from(lag));
    Decoded::Frame(Frame {
        seq,
        count,
        kind,
        durable_claim,
        payload,
        frame_bytes: frame_bytes(len),
    })
}

fn batch_fills(mut payload: &[u8], count: u16) -> bool {
    for _ in 0..count {
        let Some((len, rest)) = split_entry(payload) else {
            return false;
        };
        let Some(rest) = rest.get(len..) else {
            return false;
        };
        payload = rest;
    }
    payload.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SALT: u64 = 0x0123_4567_89ab_cdef;

    fn single(seq: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_single(&mut out, salt_crc(SALT), seq, 0, payload);
        out
    }

    #[test]
    fn crc_has_the_documented_check_value() {
        assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn single_round_trips_and_is_aligned() {
        for len in [0, 1, 7, 8, 31, 32, 1000] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7 + 1) as u8).collect();
            let bytes = single(5, &payload);
            assert_eq!(bytes.len(), frame_bytes(len));
            assert_eq!(bytes.len() % FRAME_ALIGN_BYTES, 0);
            let Decoded::Frame(frame) = decode(&bytes, 0, salt_crc(SALT)) else {
                panic!("frame of {len} bytes did not decode");
            };
            assert_eq!((frame.seq, frame.count, frame.durable_claim), (5, 1, Some(0)));
            assert_eq!(frame.records().collect::<Vec<_>>(), vec![&payload[..]]);
        }
    }

    #[test]
    fn batch_round_trips() {
        let records: [&[u8]; 3] = [b"a", b"", b"three"];
        let mut out = Vec::new();
        encode_batch(&mut out, salt_crc(SALT), 10, 7, &records);
        let Decoded::Frame(frame) = decode(&out, 0, salt_crc(SALT)) else { panic!() };
        assert_eq!((frame.seq, frame.count, frame.end_seq()), (10, 3, 13));
        assert_eq!(frame.durable_claim, Some(7));
        assert_eq!(frame.records().collect::<Vec<_>>(), records.to_vec());
    }

    #[test]
    fn zeros_and_empty_are_end() {
        assert_eq!(decode(&[0; 64], 0, 0), Decoded::End);
        assert_eq!(decode(&[0; 5], 0, 0), Decoded::End);
        assert_eq!(decode(&[], 0, 0), Decoded::End);
        assert_eq!(decode(&[1; 8], 100, 0), Decoded::End);
        assert_eq!(decode(&[0, 0, 1], 0, 0), Decoded::Invalid(FrameFault::Truncated));
    }

    #[test]
    fn a_different_salt_rejects_the_frame() {
        let bytes = single(1, b"payload");
        assert_eq!(
            decode(&bytes, 0, salt_crc(SALT + 1)),
            Decoded::Invalid(FrameFault::BadChecksum)
        );
    }

    #[test]
    fn every_truncation_is_torn_and_every_bit_flip_is_caught() {
        let bytes = single(3, b"a record of some length");
        let used = FRAME_HEADER_BYTES + 23;
        for cut in 1..used {
            let got = decode(&bytes[..cut], 0, salt_crc(SALT));
            assert!(matches!(got, Decoded::Invalid(_)), "cut at {cut}: {got:?}");
        }
        for bit in 0..used * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let got = decode(&flipped, 0, salt_crc(SALT));
            assert!(matches!(got, Decoded::Invalid(_)), "bit {bit}: {got:?}");
        }
    }

    #[test]
    fn oversized_length_is_refused_before_reading() {
        let mut bytes = single(1, b"x");
        bytes[4..8].copy_from_slice(&(FRAME_PAYLOAD_BYTES_MAX as u32 + 1).to_le_bytes());
        assert_eq!(
            decode(&bytes, 0, salt_crc(SALT)),
            Decoded::Invalid(FrameFault::OversizedLength)
        );
    }

    #[test]
    fn lag_saturates_to_no_claim() {
        assert_eq!(durable_lag(1, 0), 1);
        assert_eq!(durable_lag(u64::MAX, 0), DURABLE_LAG_NONE);
        let mut out = Vec::new();
        encode_single(&mut out, salt_crc(SALT), 1 << 40, 0, b"x");
        let Decoded::Frame(frame) = decode(&out, 0, salt_crc(SALT)) else { panic!() };
        assert_eq!(frame.durable_claim, None);
    }
}
