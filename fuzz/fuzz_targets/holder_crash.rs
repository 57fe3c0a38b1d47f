//! Fuzz target `holder_crash`. Its body is [`factlog_fuzz::holder_crash::run`], which
//! `tests/fuzz_corpus.rs` also replays on the committed corpus.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    factlog_fuzz::holder_crash::run(data);
});
