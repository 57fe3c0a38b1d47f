//! The bodies of factlog's fuzz targets, one module per target, each a plain `run(&[u8])`
//! function that panics on any violated invariant. The `fuzz_targets/` binaries only hand
//! libFuzzer's input to them; `tests/fuzz_corpus.rs` in the main crate includes this file with
//! `#[path]` and replays the committed corpus through the same functions, so `cargo test`
//! catches a regression without libFuzzer.
//!
//! No body allocates from a length it read from its input: every size derived from the input
//! is bounded by a constant of the module that derives it.

#![forbid(unsafe_code)]

pub mod changes;
pub mod damaged_tail;
pub mod event_decode;
pub mod frame_decode;
pub mod holder_crash;
pub mod input;
pub mod ops_crash;
pub mod seeds;
pub mod segment_header;
pub mod snapshot_decode;
pub mod tail_recovery;

#[path = "../../tests/common/crash_workload.rs"]
pub mod crash_workload;
#[path = "../../tests/common/holder_workload.rs"]
pub mod holder_workload;
