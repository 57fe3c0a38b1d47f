//! The footprint of the agent-session workload (`/work/shared/mission/workload.md`): writes N
//! sessions at once (one thread and one task each) into a fresh store, then prints the peak
//! resident memory of the process (`VmHWM` of `/proc/self/status`, what `getrusage` reports as
//! `ru_maxrss`), the disk the store occupies (allocated blocks, what `du` counts), the bytes
//! appended and what the preallocator did.
//!
//! ```sh
//! cargo run --release --example footprint            # one session
//! cargo run --release --example footprint -- 32      # 32 sessions
//! cargo run --release --example footprint -- 1 DIR   # keep the store in DIR
//! FOOTPRINT_NO_SNAPSHOT=1 cargo run --release --example footprint -- 32   # no policy snapshot
//! ```
//!
//! With 32 sessions the store passes a million events, so the default policy writes a snapshot
//! during the run: its fold of the log and its serialised body are a large part of the peak.
//!
//! Run one configuration per process: the peak of a process never goes down.

#![expect(unsafe_code, reason = "a global allocator that counts heap bytes")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use factlog::harness::Body;
use factlog::harness::event::{
    Effect, StepEnd, StepStart, ToolCall, ToolResult, TurnEnd, TurnStart, UserMessage,
};
use factlog::{AppendOptions, Store, StoreOptions, Task};
use serde_json::json;

/// Counts the bytes allocated on the heap, to tell them from the rest of the resident memory.
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

const TURNS: u32 = 50;
const STEPS: u32 = 4;
const TOKENS: u32 = 200;
const DELTA_BYTES: usize = 24;
const USER_MESSAGE_TEXT_BYTES: usize = 360;
const TOOL_QUERY_BYTES: usize = 24;
const TOOL_OUTPUT_BYTES: usize = 1024 - 64;

/// Deterministic lower-case words, as the bench's workload writes them.
struct Text(u64);

impl Text {
    fn words(&mut self, bytes: usize, out: &mut String) {
        const WORDS: [&str; 8] = ["the", "agent", "reads", "file", "and", "calls", "tool", "log"];
        out.clear();
        while out.len() < bytes {
            let mut x = self.0;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0 = x;
            out.push_str(WORDS[(x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 61) as usize]);
            out.push(' ');
        }
        out.truncate(bytes);
    }
}

/// One session of the workload through `task`, generating its events as it goes.
fn session(task: &Task, index: usize) -> factlog::Result<()> {
    let mut text = Text((index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut words = String::with_capacity(TOOL_OUTPUT_BYTES + 8);
    for turn in 0..TURNS {
        task.append(Body::TurnStart(TurnStart::default()))?;
        text.words(USER_MESSAGE_TEXT_BYTES, &mut words);
        let message = UserMessage { text: words.clone(), ..Default::default() };
        task.append(Body::UserMessage(message))?;
        for step in 0..STEPS {
            task.append(Body::StepStart(StepStart::default()))?;
            for _ in 0..TOKENS {
                text.words(DELTA_BYTES, &mut words);
                task.delta(&words)?;
            }
            let call_id = format!("call-{index}-{turn}-{step}");
            text.words(TOOL_QUERY_BYTES, &mut words);
            task.append(Body::ToolCall(ToolCall {
                call_id: call_id.as_str().into(),
                tool: "search".into(),
                effect: Effect::ReadOnly,
                args: Some(json!({ "query": words })),
                ..Default::default()
            }))?;
            text.words(TOOL_OUTPUT_BYTES, &mut words);
            let result = Body::ToolResult(ToolResult {
                call_id: call_id.as_str().into(),
                output: Some(json!({ "text": words })),
                ..Default::default()
            });
            let end = Body::StepEnd(StepEnd::default());
            task.append_batch_with(vec![result, end], AppendOptions::default())?;
        }
        task.append(Body::TurnEnd(TurnEnd::default()))?;
    }
    Ok(())
}

/// Waits, as `factlog bench` does, until the store's next segment file is prepared (one first
/// growth step, or a whole segment for builds that preallocated whole), so that its zeros are
/// not written during the timed sessions.
fn wait_for_prealloc(dir: &Path) {
    let path = dir.join(factlog::engine::segments::PREALLOC_FILE_NAME);
    let started = std::time::Instant::now();
    let prepared = |len: u64| len == 1 << 20 || len == 32 << 20;
    while !std::fs::metadata(&path).is_ok_and(|m| prepared(m.len())) {
        if started.elapsed().as_secs() > 60 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let _ = std::fs::File::open(&path).and_then(|file| file.sync_data());
    std::thread::sleep(std::time::Duration::from_millis(20));
}

/// The peak resident set of this process, in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// KiB of disk allocated to the files of `dir`, as `du -sk` counts them (without the
/// directory entries themselves).
fn disk_kib(dir: &Path) -> u64 {
    let mut blocks = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        blocks += if meta.is_dir() { disk_kib(&entry.path()) * 2 } else { meta.blocks() };
    }
    blocks / 2
}

fn main() -> factlog::Result<()> {
    let mut args = std::env::args().skip(1);
    let sessions: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let kept = args.next();
    let temporary = tempfile::tempdir().expect("a temporary directory");
    let dir = kept.as_deref().map_or(temporary.path(), Path::new);
    let mut options = StoreOptions::new();
    if std::env::var_os("FOOTPRINT_NO_SNAPSHOT").is_some() {
        options = options.snapshot_every_bytes(0).snapshot_every_events(0);
    }
    let store = Store::open(dir, options)?;
    let tasks: Vec<Task> =
        (0..sessions).map(|i| store.task(&format!("session-{i}"))).collect::<Result<_, _>>()?;
    wait_for_prealloc(dir);
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        let running: Vec<_> = tasks
            .iter()
            .enumerate()
            .map(|(i, task)| scope.spawn(move || session(task, i)))
            .collect();
        running.into_iter().try_for_each(|t| t.join().expect("a session thread panicked"))
    })?;
    let elapsed = started.elapsed();
    let segment_bytes = store.log().info()?.segments.iter().map(|s| s.file_bytes).sum::<u64>();
    let prealloc = store.log().prealloc_stats();
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let resident_now: Vec<&str> = status
        .lines()
        .filter(|line| line.starts_with("RssAnon") || line.starts_with("RssFile"))
        .map(|line| line.split_whitespace().nth(1).unwrap_or("?"))
        .collect();
    drop(tasks);
    store.close()?;
    println!("sessions: {sessions}");
    println!("time of the sessions: {} us", elapsed.as_micros());
    println!("peak resident memory (VmHWM, ru_maxrss): {} KiB", peak_rss_kib());
    println!("peak heap (bytes allocated): {} KiB", HEAP_BYTES_PEAK.load(Ordering::Relaxed) / 1024);
    println!("resident at the end (anonymous, file-backed): {resident_now:?} KiB");
    println!("store on disk (du -sk): {} KiB", disk_kib(dir));
    println!("segment files: {segment_bytes} bytes");
    println!("preallocator: {prealloc:?}");
    Ok(())
}
