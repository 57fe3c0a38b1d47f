//! Fuzz target `segment_header`. Its body is [`factlog_fuzz::segment_header::run`], which
//! `tests/fuzz_corpus.rs` also replays on the committed corpus.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    factlog_fuzz::segment_header::run(data);
});
