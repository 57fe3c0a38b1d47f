//! Fuzz target `ops_crash`. Its body is [`factlog_fuzz::ops_crash::run`], which
//! `tests/fuzz_corpus.rs` also replays on the committed corpus.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    factlog_fuzz::ops_crash::run(data);
});
