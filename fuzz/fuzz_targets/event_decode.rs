//! Fuzz target `event_decode`. Its body is [`factlog_fuzz::event_decode::run`], which
//! `tests/fuzz_corpus.rs` also replays on the committed corpus.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    factlog_fuzz::event_decode::run(data);
});
