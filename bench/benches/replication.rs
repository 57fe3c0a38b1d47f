//! Replication on and off (issue 17, "Benchmark"; `format-spec/replication.md`): the
//! single-session agent workload (`/work/shared/mission/workload.md`, `benches/common/
//! workload.rs`) on the typed store with default options, steps closed by one batch, on the
//! real disk (`target/tmp`), in two forms run interleaved (the order alternates from run to
//! run):
//!
//! - `off`: the store alone;
//! - `on`: the same store replicating in its own process (`Store::replicate`, default
//!   options) to a `file://` replica in another directory of the same disk; the clock stops
//!   with the session's last append, as for `off` (the replica's lag is reported apart).
//!
//! Reported: median ns per token (wall time / deltas) of each form and the median of the
//! per-run ratios `on / off`; for `on`, the bytes shipped per token, the parts a session
//! makes, and the replication lag of the synced appends: from the moment each one returned
//! until the replica held it, p50/p99 pooled over runs, sampled by a thread that reads the
//! replication's status every 200 us; and, after each `on` session (outside its timing),
//! the latency of 100 `Replicated` appends (`AppendOptions::replicated`), against that of the
//! session's synced appends with replication off.
//!
//! Run with `cargo bench --bench replication` (5 runs, 50 turns); `FACTLOG_RUNS`,
//! `FACTLOG_TURNS`. Smoke test: `cargo bench --bench replication -- --test` (one short run).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use factlog::harness::Body;
use factlog::harness::event::UserMessage;
use factlog::replica::{DirRemote, ReplicateOptions};
use factlog::{AppendOptions, Appended, Durability, Options, Store, StoreOptions};
use workload::{Action, Shape, StepClose};

use factlog_bench::events;
use factlog_bench::settle;
use factlog_bench::workload;

use events::median;

/// How often the sampling thread reads the replication's status.
const SAMPLE_EVERY: Duration = Duration::from_micros(200);

/// One measured session.
struct Run {
    elapsed: Duration,
    /// The latency of each synced append of the session, in ns.
    synced_ns: Vec<u64>,
    /// For `on`: body bytes shipped, parts, the lag of each synced append in ns (from its
    /// return until the replica held it), and the latency of the `Replicated` appends made
    /// after the session.
    shipped: Option<(u64, u64, Vec<u64>, Vec<u64>)>,
}

/// `Replicated` appends timed after each `on` session.
const REPLICATED_APPENDS: usize = 100;

fn main() {
    let test = std::env::args().any(|arg| arg == "--test");
    let (shape, runs) = if test {
        (Shape { turns: 2, steps: 2, tokens: 20, ..Shape::DEFAULT }, 1)
    } else {
        let env = |name: &str, default: u32| {
            std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
        };
        (Shape { turns: env("FACTLOG_TURNS", 50), ..Shape::DEFAULT }, env("FACTLOG_RUNS", 5))
    };
    println!(
        "replication: {} turns x {} steps x {} tokens, {runs} runs",
        shape.turns, shape.steps, shape.tokens
    );
    let mut off = Vec::new();
    let mut on = Vec::new();
    for run in 0..runs {
        let first_on = run % 2 == 1;
        for replicate in [first_on, !first_on] {
            let measured = measure(shape, replicate);
            if replicate { on.push(measured) } else { off.push(measured) }
        }
        eprintln!("run {} of {runs} done", run + 1);
    }
    let tokens = shape.deltas() as f64;
    let ns_per_token =
        |runs: &[Run]| median(runs.iter().map(|r| r.elapsed.as_nanos() as f64 / tokens).collect());
    let ratio = median(
        on.iter()
            .zip(&off)
            .map(|(a, b)| a.elapsed.as_secs_f64() / b.elapsed.as_secs_f64())
            .collect(),
    );
    let mut lags: Vec<u64> =
        on.iter().flat_map(|r| r.shipped.as_ref().unwrap().2.clone()).collect();
    let mut latencies: Vec<u64> =
        on.iter().flat_map(|r| r.shipped.as_ref().unwrap().3.clone()).collect();
    let mut synced: Vec<u64> = off.iter().flat_map(|r| r.synced_ns.clone()).collect();
    lags.sort_unstable();
    latencies.sort_unstable();
    synced.sort_unstable();
    let bytes = median(on.iter().map(|r| r.shipped.as_ref().unwrap().0 as f64 / tokens).collect());
    let parts = median(on.iter().map(|r| r.shipped.as_ref().unwrap().1 as f64).collect());
    println!(
        "off: {:.0} ns/token   on: {:.0} ns/token   on/off: {ratio:.3}x",
        ns_per_token(&off),
        ns_per_token(&on)
    );
    println!("shipped: {bytes:.1} bytes/token, {parts:.0} parts a session");
    println!(
        "lag of a synced append (from its return): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile_ms(&lags, 50.0),
        percentile_ms(&lags, 99.0),
        lags.last().map_or(f64::NAN, |&ns| ns as f64 / 1e6),
    );
    println!(
        "Replicated append: p50 {:.2} ms, p99 {:.2} ms   (Synced append, replication off: p50 {:.2} ms, p99 {:.2} ms)",
        percentile_ms(&latencies, 50.0),
        percentile_ms(&latencies, 99.0),
        percentile_ms(&synced, 50.0),
        percentile_ms(&synced, 99.0),
    );
}

fn percentile_ms(sorted: &[u64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len().max(1)) - 1).map_or(f64::NAN, |&ns| ns as f64 / 1e6)
}

/// One session on a fresh store, replicating or not.
fn measure(shape: Shape, replicate: bool) -> Run {
    let dir = factlog_bench::temp_dir!("replication");
    let replica_dir = factlog_bench::temp_dir!("replica");
    let options = StoreOptions::new().clock(workload::fixed_clock).log(Options::new());
    let store = Store::open(dir.path(), options).expect("open the store");
    settle::wait_for_prealloc(dir.path(), factlog::limits::SEGMENT_BYTES_DEFAULT);
    let session = workload::session(shape, 1);
    let task = store.task("session").expect("task");
    let url = format!("file://{}", replica_dir.path().display());
    let replication = replicate.then(|| {
        let remote = DirRemote::create(&url, replica_dir.path()).expect("remote");
        store.replicate(Box::new(remote), ReplicateOptions::new()).expect("replicate")
    });
    // For each synced append: (seq, started, returned).
    let synced: Mutex<Vec<(u64, Instant, Instant)>> = Mutex::new(Vec::new());
    // (when, shipped seq) as the sampling thread saw them.
    let samples: Mutex<Vec<(Instant, u64)>> = Mutex::new(Vec::new());
    let done = AtomicBool::new(false);
    let start = Instant::now();
    std::thread::scope(|scope| {
        if let Some(replication) = &replication {
            scope.spawn(|| {
                let mut seen = 0;
                while !done.load(Ordering::Acquire) {
                    let shipped = replication.status().shipped_seq;
                    if shipped > seen {
                        seen = shipped;
                        samples.lock().unwrap().push((Instant::now(), shipped));
                    }
                    std::thread::sleep(SAMPLE_EVERY);
                }
            });
        }
        let deltas = &session.deltas;
        for action in session.actions.iter().cloned() {
            let is_synced = match &action {
                Action::Delta(_) => false,
                Action::Append(body) => {
                    body.event_type().is_some_and(|t| t.default_durability() == Durability::Synced)
                }
                Action::CloseStep(_) => true,
            };
            if !is_synced {
                workload::perform(&task, deltas, action, StepClose::Batch);
                continue;
            }
            let began = Instant::now();
            let seq = match action {
                Action::Append(body) => seq_of(task.append(*body)),
                Action::CloseStep(bodies) => {
                    let [result, end] = *bodies;
                    seq_of(task.append_batch_with(vec![result, end], Default::default())) + 1
                }
                Action::Delta(_) => unreachable!("deltas are not synced"),
            };
            synced.lock().unwrap().push((seq, began, Instant::now()));
        }
        done.store(true, Ordering::Release);
    });
    let elapsed = start.elapsed();
    let synced = synced.into_inner().unwrap();
    let synced_ns =
        synced.iter().map(|(_, began, returned)| (*returned - *began).as_nanos() as u64);
    let synced_ns: Vec<u64> = synced_ns.collect();
    let Some(replication) = replication else {
        return Run { elapsed, synced_ns, shipped: None };
    };
    let status = replication.status();
    let samples = samples.into_inner().unwrap();
    let mut lags = Vec::new();
    for (seq, _, returned) in &synced {
        // The first sample that saw the seq shipped; the end of the session otherwise.
        let at = samples.iter().find(|(_, s)| s >= seq).map_or(start + elapsed, |s| s.0);
        lags.push(at.saturating_duration_since(*returned).as_nanos() as u64);
    }
    let mut replicated = Vec::with_capacity(REPLICATED_APPENDS);
    let options = AppendOptions::default().replicated();
    for i in 0..REPLICATED_APPENDS {
        let body =
            Body::UserMessage(UserMessage { text: format!("receipt {i}"), ..Default::default() });
        let began = Instant::now();
        seq_of(task.append_with(body, options));
        replicated.push(began.elapsed().as_nanos() as u64);
    }
    replication.stop().expect("stop replicating");
    Run { elapsed, synced_ns, shipped: Some((status.bytes, status.parts, lags, replicated)) }
}

fn seq_of(appended: factlog::Result<Appended>) -> u64 {
    match appended.expect("append") {
        Appended::Written { seq, .. } => seq.0,
        Appended::Duplicate { call_id, .. } => panic!("call {call_id} taken for a duplicate"),
    }
}
