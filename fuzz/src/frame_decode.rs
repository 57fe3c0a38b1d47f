//! Target `frame_decode`: [`factlog::engine::frame::decode`] on arbitrary bytes at every 8-aligned
//! offset. Input: the segment salt (8 bytes, little-endian), then the bytes to decode.
//!
//! For every valid frame it checks, as `format-spec/record.md` states them: the covered bytes
//! lie inside the input and the occupied size is `24 + len` rounded up to 8 (the padding may run
//! past the end: step 4 of the decoding rules does not require it to be present); the records
//! iterate to exactly `count` entries that fill the payload; re-encoding the decoded frame with
//! [`factlog::engine::frame::encode_single`] or [`factlog::engine::frame::encode_batch`] gives back the same
//! bytes (a pair assertion: what the decoder accepts is exactly what the encoder writes); and
//! cutting the last covered byte makes the frame invalid.

use factlog::engine::frame::{self, Decoded, Frame, KIND_BATCH, KIND_SINGLE};
use factlog::limits::{BATCH_ENTRY_HEADER_BYTES, DURABLE_LAG_NONE, FRAME_ALIGN_BYTES};

use super::input::Input;

/// Offset of the `durable_lag` field in the frame header (`format-spec/record.md`).
const LAG_AT: usize = 20;

/// The body of the target. Returns how many valid frames it found.
pub fn run(data: &[u8]) -> usize {
    let mut input = Input::new(data);
    let salt = input.u64();
    let bytes = input.rest();
    let salt_crc = frame::salt_crc(salt);
    let mut valid = 0;
    for offset in (0..=bytes.len()).step_by(FRAME_ALIGN_BYTES) {
        match frame::decode(bytes, offset, salt_crc) {
            Decoded::Frame(f) => {
                check_frame(bytes, offset, salt_crc, &f);
                valid += 1;
            }
            Decoded::End => {
                let rest = &bytes[offset..];
                let head = &rest[..rest.len().min(24)];
                assert!(head.iter().all(|&b| b == 0), "End at {offset} over non-zero bytes");
            }
            Decoded::Invalid(_) => {}
        }
    }
    // Past the end there is nothing to decode, whatever the offset.
    assert_eq!(frame::decode(bytes, bytes.len() + FRAME_ALIGN_BYTES, salt_crc), Decoded::End);
    valid
}

fn check_frame(bytes: &[u8], offset: usize, salt_crc: u32, f: &Frame<'_>) {
    let rest = &bytes[offset..];
    let covered = 24 + f.payload.len();
    assert!(covered <= rest.len(), "frame at {offset} covers bytes past the input");
    assert_eq!(f.frame_bytes, frame::frame_bytes(f.payload.len()));
    assert!(
        f.frame_bytes <= rest.len().next_multiple_of(FRAME_ALIGN_BYTES),
        "frame at {offset} occupies {} bytes but only {} remain",
        f.frame_bytes,
        rest.len()
    );
    assert_eq!(&rest[24..covered], f.payload, "the payload follows the header");

    let records: Vec<&[u8]> = f.records().take(usize::from(f.count) + 1).collect();
    assert_eq!(records.len(), usize::from(f.count), "records of the frame at {offset}");
    match f.kind {
        KIND_SINGLE => assert_eq!(records, [f.payload]),
        KIND_BATCH => {
            let filled: usize = records.iter().map(|r| BATCH_ENTRY_HEADER_BYTES + r.len()).sum();
            assert_eq!(filled, f.payload.len(), "batch entries fill the payload");
        }
        other => panic!("decoded a frame of unknown kind {other}"),
    }

    // The encoder expresses "no claim" only when the lag does not fit (seq at least
    // 0xFFFFFFFF with nothing durable); on a smaller seq it would write a claim of 0 instead,
    // and then every byte but the CRC and the lag is compared.
    let expressible = f.durable_claim.is_some() || f.seq >= u64::from(DURABLE_LAG_NONE);
    let durable = f.durable_claim.unwrap_or(0);
    let mut out = Vec::with_capacity(f.frame_bytes);
    if f.kind == KIND_SINGLE {
        frame::encode_single(&mut out, salt_crc, f.seq, durable, f.payload);
    } else {
        frame::encode_batch(&mut out, salt_crc, f.seq, durable, &records);
    }
    assert_eq!(out.len(), f.frame_bytes, "re-encoded size of the frame at {offset}");
    assert!(out[covered..].iter().all(|&b| b == 0), "the encoder pads with zeros");
    if expressible {
        assert_eq!(&out[..covered], &rest[..covered], "re-encoding the frame at {offset}");
    } else {
        assert_eq!(&out[4..LAG_AT], &rest[4..LAG_AT], "re-encoded header at {offset}");
        assert_eq!(&out[24..covered], &rest[24..covered], "re-encoded payload at {offset}");
    }
    let Decoded::Frame(again) = frame::decode(&out, 0, salt_crc) else {
        panic!("the re-encoded frame at {offset} does not decode");
    };
    let claim = if expressible { f.durable_claim } else { Some(0) };
    assert_eq!(
        (again.seq, again.count, again.kind, again.durable_claim, again.payload),
        (f.seq, f.count, f.kind, claim, f.payload),
        "the re-encoded frame at {offset} decodes to the same fields"
    );

    // The frame is valid only with every covered byte present.
    let cut = &bytes[..offset + covered - 1];
    assert!(
        !matches!(frame::decode(cut, offset, salt_crc), Decoded::Frame(_)),
        "the frame at {offset} stays valid without its last byte"
    );
}

/// A frame body for the seed corpus: `salt` followed by `frames`.
#[must_use]
pub fn seed(salt: u64, frames: &[u8]) -> Vec<u8> {
    let mut out = salt.to_le_bytes().to_vec();
    out.extend_from_slice(frames);
    out
}
