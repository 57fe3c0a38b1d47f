//! The seed corpus: a few small inputs per target, each reaching a path a random byte string
//! would rarely find (valid frames under their salted CRC, every header check, a clean, torn
//! and corrupt tail, a crash in the middle of segment rolls). They are generated here from the
//! library's own encoders and committed under `fuzz/corpus/TARGET/seed-NAME`; the replay test
//! in the main crate checks that the committed files are what [`all`] generates and rewrites
//! them on request (`cargo test --test integration -- --ignored fuzz_corpus::write_seed_corpus`). The
//! `snapshot_decode` seeds hold zstd output, which may change with the zstd library locked in
//! `Cargo.lock`: after an update that changes it, rewrite them the same way.

use factlog::engine::frame;
use factlog::engine::segment::SegmentHeader;
use factlog::{SegmentId, Seq};

use super::{damaged_tail, event_decode, frame_decode, holder_crash, snapshot_decode};

/// The salt of the format spec's examples.
pub const SALT: u64 = 0x0123_4567_89AB_CDEF;

/// One seed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seed {
    /// The target it feeds.
    pub target: &'static str,
    /// Its file name in `fuzz/corpus/TARGET/`.
    pub name: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Every seed of every target.
#[must_use]
pub fn all() -> Vec<Seed> {
    let mut seeds = Vec::new();
    let mut add = |target: &'static str, name: &str, bytes: Vec<u8>| {
        seeds.push(Seed { target, name: format!("seed-{name}"), bytes });
    };
    for (name, bytes) in frame_seeds() {
        add("frame_decode", name, bytes);
    }
    for (name, bytes) in header_seeds() {
        add("segment_header", name, bytes);
    }
    for (name, bytes) in tail_seeds() {
        add("tail_recovery", name, bytes);
    }
    for (name, bytes) in ops_seeds() {
        add("ops_crash", name, bytes);
    }
    for (name, bytes) in snapshot_decode::seeds() {
        add("snapshot_decode", name, bytes);
    }
    for (name, bytes) in event_decode::seeds() {
        add("event_decode", &name, bytes);
    }
    for (name, bytes) in holder_crash::seeds() {
        add("holder_crash", name, bytes);
    }
    for (name, bytes) in damaged_tail::seeds() {
        add("damaged_tail", name, bytes);
    }
    seeds
}

fn header(first_seq: u64) -> SegmentHeader {
    SegmentHeader { format_version: 1, id: SegmentId(1), first_seq: Seq(first_seq), salt: SALT }
}

/// The base frames of `format-spec/vectors/README.md`: three single records, each written
/// after the one before was synced.
fn base_frames() -> Vec<u8> {
    let salt_crc = frame::salt_crc(SALT);
    let mut out = Vec::new();
    for (seq, payload) in [(1, &b"first"[..]), (2, b"second!!"), (3, b"third record.")] {
        frame::encode_single(&mut out, salt_crc, seq, seq - 1, payload);
    }
    out
}

fn frame_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let salt_crc = frame::salt_crc(SALT);
    let mut spec_example = Vec::new();
    frame::encode_single(&mut spec_example, salt_crc, 1, 0, b"hello");
    frame::encode_batch(&mut spec_example, salt_crc, 2, 1, &[&b"ab"[..], b"cde"]);
    let mut edge = Vec::new();
    frame::encode_single(&mut edge, salt_crc, 7, 0, b"");
    frame::encode_batch(&mut edge, salt_crc, 8, 3, &[&b""[..], b"", b""]);
    frame::encode_single(&mut edge, salt_crc, 1 << 40, 0, b"no durable claim");
    edge.extend_from_slice(&[0; 24]);
    frame::encode_single(&mut edge, salt_crc, u64::MAX - 1, 0, b"last storable seq");
    let mut damaged = base_frames();
    damaged[40] ^= 0x10; // a payload byte of the first frame: BadChecksum
    damaged.truncate(damaged.len() - 12); // the third frame loses its end: Truncated
    vec![
        ("spec-example", frame_decode::seed(SALT, &spec_example)),
        ("base-frames", frame_decode::seed(SALT, &base_frames())),
        ("edge-frames", frame_decode::seed(SALT, &edge)),
        ("damaged", frame_decode::seed(SALT, &damaged)),
    ]
}

/// `bytes` with its header CRC recomputed, so that a check after the CRC is reached.
fn recrc(mut bytes: [u8; 64]) -> Vec<u8> {
    let crc = crc32fast::hash(&bytes[..60]);
    bytes[60..64].copy_from_slice(&crc.to_le_bytes());
    bytes.to_vec()
}

fn header_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let valid = header(1).encode();
    let mut with_frames = valid.to_vec();
    with_frames.extend_from_slice(&base_frames());
    let field = |at: usize, value: &[u8]| {
        let mut b = valid;
        b[at..at + value.len()].copy_from_slice(value);
        b
    };
    vec![
        ("valid", valid.to_vec()),
        ("valid-then-frames", with_frames),
        ("short", valid[..40].to_vec()),
        ("bad-magic", field(0, b"FACTLSEX").to_vec()),
        ("future-version", field(8, &2u16.to_le_bytes()).to_vec()),
        ("bad-checksum", field(33, &[0xEE]).to_vec()),
        ("unknown-content", recrc(field(10, &7u16.to_le_bytes()))),
        ("bad-header-bytes", recrc(field(12, &65u32.to_le_bytes()))),
        ("reserved-not-zero", recrc(field(50, &[1]))),
        ("segment-id-zero", recrc(field(16, &0u64.to_le_bytes()))),
        ("first-seq-zero", recrc(field(24, &0u64.to_le_bytes()))),
    ]
}

/// Builds a `tail_recovery` input in its `Frames` mode (see `tail_recovery.rs`, which reads
/// the bytes in the same order).
struct FramesInput {
    bytes: Vec<u8>,
}

/// Durability claim choices of a frame (the `lag_choice` byte).
const CLAIM_NOTHING: u8 = 0;
const CLAIM_EVERYTHING_BEFORE: u8 = 1;

impl FramesInput {
    fn new(segments: u8) -> FramesInput {
        let control = 2 | (segments - 1) << 2;
        FramesInput { bytes: vec![control] }
    }

    /// A header with the default first seq (1 for the first segment, the successor's for a
    /// later one).
    fn header(&mut self, salt: u64, frames: u8) -> &mut Self {
        self.bytes.push(3);
        self.bytes.extend_from_slice(&salt.to_le_bytes());
        self.bytes.push(frames);
        self
    }

    /// A first-segment header starting at `u64::MAX - below`.
    fn header_near_top(&mut self, salt: u64, below: u8, frames: u8) -> &mut Self {
        self.bytes.push(6);
        self.bytes.extend_from_slice(&salt.to_le_bytes());
        self.bytes.push(below);
        self.bytes.push(frames);
        self
    }

    /// A single-record frame at the next seq (`gap`: one past it) with `len` bytes.
    fn single(&mut self, claim: u8, len: u8, gap: bool) -> &mut Self {
        let seq_choice = if gap { 0 } else { 3 };
        self.bytes.extend_from_slice(&[seq_choice << 1, claim, len]);
        self
    }

    /// A batch frame at the next seq holding records of `lens` bytes.
    fn batch(&mut self, claim: u8, lens: &[u8]) -> &mut Self {
        let count = u8::try_from(lens.len() - 1).expect("a small batch");
        self.bytes.extend_from_slice(&[3 << 1 | 1, claim, count]);
        self.bytes.extend_from_slice(lens);
        self
    }

    /// The file size (0: 8 KiB) and the damage: `(kind, position)` pairs.
    fn finish_segment(&mut self, size: u8, damage: &[(u8, u16)]) -> &mut Self {
        self.bytes.push(size);
        self.bytes.push(u8::try_from(damage.len()).expect("at most 3 changes"));
        for (kind, at) in damage {
            self.bytes.push(*kind);
            self.bytes.extend_from_slice(&at.to_le_bytes());
        }
        self
    }

    fn build(&self) -> Vec<u8> {
        self.bytes.clone()
    }
}

/// Damage kinds of `tail_recovery` (the low two bits; a flip takes its bit from the top three).
const FLIP_BIT_4: u8 = 4 << 5;
const ZERO_16: u8 = 1 | 2 << 2;

fn tail_seeds() -> Vec<(&'static str, Vec<u8>)> {
    // Five single records of 40 bytes: frames of 64 bytes at offsets 64, 128, ..., 320.
    let five = |claim: u8, damage: &[(u8, u16)]| {
        let mut input = FramesInput::new(1);
        input.header(SALT, 5);
        for _ in 0..5 {
            input.single(claim, 40, false);
        }
        input.finish_segment(0, damage).build()
    };
    let mut raw = vec![0u8];
    raw.extend_from_slice(&header(1).encode());
    raw.extend_from_slice(&base_frames());
    let mut header_mode = vec![1u8, 0];
    header_mode.extend_from_slice(&SALT.to_le_bytes());
    header_mode.extend_from_slice(&base_frames());
    let mut two = FramesInput::new(2);
    two.header(SALT, 3)
        .single(CLAIM_EVERYTHING_BEFORE, 200, false)
        .batch(CLAIM_EVERYTHING_BEFORE, &[10, 0, 33])
        .single(CLAIM_EVERYTHING_BEFORE, 7, false)
        .finish_segment(0, &[])
        .header(SALT ^ 0xFF, 2)
        .batch(CLAIM_NOTHING, &[1, 2])
        .single(CLAIM_NOTHING, 100, false)
        .finish_segment(0, &[(FLIP_BIT_4, 64 + 24 + 30)]);
    let mut top = FramesInput::new(1);
    top.header_near_top(SALT, 5, 2)
        .single(CLAIM_EVERYTHING_BEFORE, 3, false)
        .single(CLAIM_EVERYTHING_BEFORE, 3, false)
        .finish_segment(0, &[]);
    let mut gap = FramesInput::new(1);
    gap.header(SALT, 3)
        .single(CLAIM_EVERYTHING_BEFORE, 8, false)
        .single(CLAIM_EVERYTHING_BEFORE, 8, true)
        .single(CLAIM_EVERYTHING_BEFORE, 8, false)
        .finish_segment(2, &[]);
    vec![
        ("raw-base-frames", raw),
        ("raw-garbage", b"\x00FACTLSEG\x01\x00\x01\x00\x40\x00\x00\x00 not a header".to_vec()),
        ("header-base-frames", header_mode),
        ("frames-clean", five(CLAIM_EVERYTHING_BEFORE, &[])),
        // A bit of the last frame's payload: a torn tail, cut at open.
        ("frames-torn-last", five(CLAIM_EVERYTHING_BEFORE, &[(FLIP_BIT_4, 320 + 24 + 5)])),
        // The second frame zeroed while later frames claim it durable: corruption.
        ("frames-witnessed-damage", five(CLAIM_EVERYTHING_BEFORE, &[(ZERO_16, 128)])),
        // The same hole with frames that claim nothing: a torn tail.
        ("frames-unsynced-hole", five(CLAIM_NOTHING, &[(ZERO_16, 128)])),
        ("frames-two-segments", two.build()),
        ("frames-near-top-seq", top.build()),
        ("frames-seq-gap", gap.build()),
    ]
}

/// Builds an `ops_crash` input: model, crash point, second crash point, seed, steps after the
/// first recovery, then step tags with their operands.
fn ops_input(model: u8, crash_at: u16, again: u8, after: u8, steps: &[u8]) -> Vec<u8> {
    let mut out = vec![model];
    out.extend_from_slice(&crash_at.to_le_bytes());
    out.push(again);
    out.extend_from_slice(&0x5EED_u64.to_le_bytes());
    out.push(after);
    out.extend_from_slice(steps);
    out
}

/// Step tags of `ops_crash`: the operation in the low three bits, the tier above them.
const BUFFERED: u8 = 0;
const FLUSHED: u8 = 1 << 3;
const SYNCED: u8 = 2 << 3;
const APPEND: u8 = 0;
const APPEND_BIG: u8 = 4;
const BATCH: u8 = 5;
const FLUSH: u8 = 6;
const REOPEN: u8 = 7;

fn ops_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mixed: &[&[u8]] = &[
        &[APPEND | SYNCED, 40],
        &[APPEND | BUFFERED, 200],
        &[APPEND | FLUSHED, 3],
        &[BATCH | SYNCED, 2, 10, 20, 30],
        &[APPEND | BUFFERED, 90],
        &[FLUSH | SYNCED],
        &[APPEND | FLUSHED, 255],
        &[REOPEN],
        &[APPEND | SYNCED, 1],
    ];
    // Records larger than the 4 KiB buffer: nearly every one rolls an 8 KiB segment.
    let rolls: &[&[u8]] = &[
        &[APPEND_BIG | SYNCED, 200],
        &[APPEND_BIG | BUFFERED, 150],
        &[APPEND_BIG | FLUSHED, 255],
        &[APPEND | BUFFERED, 9],
        &[BATCH | FLUSHED, 3, 100, 100, 100, 100],
        &[APPEND_BIG | SYNCED, 180],
        &[REOPEN],
        &[APPEND_BIG | BUFFERED, 250],
        &[FLUSH | FLUSHED],
        &[APPEND | SYNCED, 5],
    ];
    let buffered: &[&[u8]] = &[
        &[APPEND | BUFFERED, 100],
        &[APPEND | BUFFERED, 100],
        &[BATCH | BUFFERED, 7, 1, 2, 3, 4, 5, 6, 7, 8],
        &[APPEND | BUFFERED, 100],
        &[FLUSH | FLUSHED],
        &[APPEND | BUFFERED, 100],
    ];
    let (mixed, rolls, buffered) = (mixed.concat(), rolls.concat(), buffered.concat());
    vec![
        ("mixed-process-crash", ops_input(0, 9, 0, 3, &mixed)),
        ("mixed-lose-unsynced", ops_input(1, 12, 5, 3, &mixed)),
        ("rolls-torn-sectors", ops_input(2, 40, 9, 4, &rolls)),
        ("rolls-lose-unsynced-late", ops_input(1, 75, 0, 2, &rolls)),
        ("buffered-torn-sectors", ops_input(2, 6, 2, 1, &buffered)),
        ("no-crash", ops_input(0, u16::MAX, 0, 0, &mixed)),
    ]
}

/// The inputs a format vector (`format-spec/vectors/NNN-name.bin`) gives each target, named
/// `vector-NNN-name`. A snapshot vector (`NNN-snapshot-*`) feeds `snapshot_decode` whole, an
/// event record vector (`NNN-event-*`) feeds `event_decode` whole. A segment vector feeds the
/// segment targets, cut after its last non-zero byte (rounded up to 8, at least the header) so
/// the inputs stay small; the replay test also feeds every vector whole.
#[must_use]
pub fn from_vector(stem: &str, file: &[u8]) -> Vec<Seed> {
    if is_snapshot_vector(stem) {
        let name = format!("vector-{stem}");
        return vec![Seed { target: "snapshot_decode", name, bytes: file.to_vec() }];
    }
    if is_event_vector(stem) {
        let name = format!("vector-{stem}");
        return vec![Seed { target: "event_decode", name, bytes: file.to_vec() }];
    }
    let used = file.iter().rposition(|&b| b != 0).map_or(0, |at| at + 1);
    let kept = &file[..used.next_multiple_of(8).max(64).min(file.len())];
    let salt = kept.get(32..40).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes);
    let mut raw = vec![0u8]; // tail_recovery: raw mode, one segment
    raw.extend_from_slice(kept);
    let name = format!("vector-{stem}");
    vec![
        Seed {
            target: "frame_decode",
            name: name.clone(),
            bytes: frame_decode::seed(salt, kept.get(64..).unwrap_or_default()),
        },
        Seed { target: "segment_header", name: name.clone(), bytes: kept.to_vec() },
        Seed { target: "tail_recovery", name, bytes: raw },
    ]
}

/// Whether a vector's stem names a snapshot file (`NNN-snapshot-*`) rather than a segment.
#[must_use]
pub fn is_snapshot_vector(stem: &str) -> bool {
    stem.get(3..).is_some_and(|rest| rest.starts_with("-snapshot-"))
}

/// Whether a vector's stem names one event record (`NNN-event-*`) rather than a segment.
#[must_use]
pub fn is_event_vector(stem: &str) -> bool {
    stem.get(3..).is_some_and(|rest| rest.starts_with("-event-"))
}
