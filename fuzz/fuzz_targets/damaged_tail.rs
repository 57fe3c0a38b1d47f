//! Fuzz target `damaged_tail`. Its body is [`factlog_fuzz::damaged_tail::run`], which
//! `tests/fuzz_corpus.rs` also replays on the committed corpus.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    factlog_fuzz::damaged_tail::run(data);
});
