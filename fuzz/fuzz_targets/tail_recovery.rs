//! Fuzz target `tail_recovery`. Its body is [`factlog_fuzz::tail_recovery::run`], which
//! `tests/fuzz_corpus.rs` also replays on the committed corpus.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    factlog_fuzz::tail_recovery::run(data);
});
