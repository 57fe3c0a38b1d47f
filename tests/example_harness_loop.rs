//! Runs `examples/harness_loop.rs` as a test, so the documented harness loop (open, contract,
//! turn, deltas, a keyed tool call, a crash, reopen, the recovery report, the confirmed
//! resume and the duplicate receipt) is checked by `cargo test`, its assertions included.

#[path = "../examples/harness_loop.rs"]
mod harness_loop;

#[test]
fn the_harness_loop_example_runs() {
    harness_loop::main().expect("the example's harness loop");
}
