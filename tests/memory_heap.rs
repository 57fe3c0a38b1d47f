//! Proves that the heap a process needs to write the agent-session workload is bounded and does
//! not grow with the length of the session: a counting global allocator measures the peak of
//! the bytes allocated while one session of 5 turns, and then one of 20 turns, is written into
//! a fresh store on the real file system (default options, background threads on). The peak
//! stays under the two append buffers (`limits::BUFFER_BYTES_DEFAULT` each) plus 1 MiB, and the
//! longer session's peak exceeds the shorter one's by less than 256 KiB: nothing of the
//! engine is kept per event (the task's folded state keeps a little per tool call). Bytes,
//! never time. One test in this binary, so no other test's allocations are counted.

#![expect(unsafe_code, reason = "a global allocator that counts heap bytes")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use factlog::harness::Body;
use factlog::harness::event::{
    Effect, StepEnd, StepStart, ToolCall, ToolResult, TurnEnd, TurnStart, UserMessage,
};
use factlog::limits::BUFFER_BYTES_DEFAULT;
use factlog::{AppendOptions, Store, StoreOptions};
use serde_json::json;

struct Counting;

static HEAP_BYTES: AtomicUsize = AtomicUsize::new(0);
static HEAP_BYTES_PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counters are atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = HEAP_BYTES.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        HEAP_BYTES_PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: the caller's contract of `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HEAP_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract of `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The peak heap bytes, above what was allocated before, of writing `turns` turns of the
/// workload (`/work/shared/mission/workload.md`) into a fresh store, from its open to its close.
fn session_peak_bytes(turns: u32) -> usize {
    let tmp = tempfile::tempdir().unwrap();
    let text = "token ".repeat(200);
    let base = HEAP_BYTES.load(Ordering::Relaxed);
    HEAP_BYTES_PEAK.store(base, Ordering::Relaxed);
    let store = Store::open(tmp.path(), StoreOptions::new()).unwrap();
    let task = store.task("session-1").unwrap();
    for turn in 0..turns {
        task.append(Body::TurnStart(TurnStart::default())).unwrap();
        let message = UserMessage { text: text[..360].to_owned(), ..Default::default() };
        task.append(Body::UserMessage(message)).unwrap();
        for step in 0..4 {
            task.append(Body::StepStart(StepStart::default())).unwrap();
            for token in 0..200 {
                task.delta(&text[token % 7..token % 7 + 24]).unwrap();
            }
            let call_id = format!("call-{turn}-{step}");
            task.append(Body::ToolCall(ToolCall {
                call_id: call_id.as_str().into(),
                tool: "search".into(),
                effect: Effect::ReadOnly,
                args: Some(json!({ "query": &text[..24] })),
                ..Default::default()
            }))
            .unwrap();
            let result = Body::ToolResult(ToolResult {
                call_id: call_id.as_str().into(),
                output: Some(json!({ "text": &text[..960] })),
                ..Default::default()
            });
            let end = Body::StepEnd(StepEnd::default());
            task.append_batch_with(vec![result, end], AppendOptions::default()).unwrap();
        }
        task.append(Body::TurnEnd(TurnEnd::default())).unwrap();
    }
    drop(task);
    store.close().unwrap();
    HEAP_BYTES_PEAK.load(Ordering::Relaxed) - base
}

#[test]
fn writing_a_session_needs_a_bounded_heap_that_does_not_grow_with_the_session() {
    let short = session_peak_bytes(5);
    let long = session_peak_bytes(20);
    println!("peak heap: {short} bytes for 5 turns, {long} bytes for 20 turns");
    let bound = 2 * BUFFER_BYTES_DEFAULT + 1024 * 1024;
    assert!(short <= bound && long <= bound, "{short} and {long} bytes, bound {bound}");
    assert!(long < short + 256 * 1024, "{short} then {long} bytes: the heap grows per event");
}
