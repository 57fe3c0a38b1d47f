//! Helpers for the salvage tests: a harness store spread over several small segments whose
//! every tool call has a result, the frame that holds a given seq found on disk, and one
//! flipped byte in it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use factlog::engine::frame::{self, Decoded};
use factlog::harness::event::Effect;
use factlog::harness::request_key;
use factlog::{Options, Seq, Store, StoreOptions};

use super::harness::{call, fixed_clock, result, turn_end, turn_start};

/// Segments of 8 KiB, the smallest: a store of a few dozen calls spans several.
pub const SMALL_SEGMENT_BYTES: u64 = 8 * 1024;

/// Store options with the fixed clock and 8 KiB segments.
pub fn small_options() -> StoreOptions {
    StoreOptions::new().clock(fixed_clock).log(Options::new().segment_bytes(SMALL_SEGMENT_BYTES))
}

/// Writes a store in `dir` where task `t1` makes `calls` idempotent tool calls `c0`, `c1`, ...
/// (each with a request key), each in its own turn with its result. Returns the seq of each
/// call's `tool/result`.
pub fn store_with_calls(dir: &Path, calls: usize) -> BTreeMap<String, u64> {
    let store = Store::open(dir, small_options()).expect("open the store");
    let task = store.task("t1").expect("task");
    let mut results = BTreeMap::new();
    for i in 0..calls {
        let id = format!("c{i}");
        task.append(turn_start()).expect("turn/start");
        let key = request_key::derive(task.id(), &format!("fetch:{i}"), task.revision());
        task.append(call(&id, "fetch", Effect::Idempotent, Some(&key))).expect("tool/call");
        let receipt = serde_json::json!({ "page": i, "padding": "x".repeat(40) });
        let written = task.append(result(&id, Some(receipt))).expect("tool/result");
        let factlog::Appended::Written { seq, .. } = written else { panic!("duplicate") };
        results.insert(id, seq.0);
        task.append(turn_end()).expect("turn/end");
    }
    store.close().expect("close the store");
    results
}

/// The segment files of `dir`, in log order.
pub fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list the log")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    files.sort();
    files
}

/// Where the frame holding `seq` lies: its segment file, its offset and its length.
pub fn frame_of(dir: &Path, seq: u64) -> (PathBuf, u64, u64) {
    for path in segment_files(dir) {
        let bytes = std::fs::read(&path).expect("read a segment");
        let header =
            factlog::engine::segment::decode_header(&bytes, &path).expect("a segment header");
        let mut offset = 64;
        while let Decoded::Frame(f) = frame::decode(&bytes, offset, header.salt_crc()) {
            if (f.seq..f.end_seq()).contains(&seq) {
                return (path, offset as u64, f.frame_bytes as u64);
            }
            offset += f.frame_bytes;
        }
    }
    panic!("no frame holds seq {seq}");
}

/// Flips every bit of the byte at `offset` of `path`.
pub fn flip_byte(path: &Path, offset: u64) {
    let mut bytes = std::fs::read(path).expect("read the file");
    let at = usize::try_from(offset).expect("offset");
    bytes[at] ^= 0xff;
    std::fs::write(path, bytes).expect("write the file");
}

/// Every record of the (intact) log in `dir` through `last`, read through the library.
pub fn records(dir: &Path, last: u64) -> Vec<(u64, Vec<u8>)> {
    let log = factlog::Log::open_read_only(dir, Options::new()).expect("read-only open");
    log.read_from(Seq(1))
        .expect("reader")
        .map(|r| r.expect("record"))
        .take_while(|r| r.seq.0 <= last)
        .map(|r| (r.seq.0, r.payload.to_vec()))
        .collect()
}

/// The seq of the result whose frame is in the middle of the segment file `index` (in log
/// order), neither its first nor its last frame.
pub fn result_inside_segment(
    dir: &Path,
    results: &BTreeMap<String, u64>,
    index: usize,
) -> (String, u64) {
    let files = segment_files(dir);
    let inside: Vec<(&String, &u64)> =
        results.iter().filter(|(_, seq)| frame_of(dir, **seq).0 == files[index]).collect();
    assert!(inside.len() >= 3, "segment {index} holds too few results: {inside:?}");
    let (id, seq) = inside[inside.len() / 2];
    (id.clone(), *seq)
}
