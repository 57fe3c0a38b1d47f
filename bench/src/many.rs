//! The many-session form of the workload, shared by `benches/sessions.rs` (threads of one
//! process against peers) and `benches/clients.rs` (client processes of a served store):
//! what a session's thread times, the parallel release of N sessions, and the typed store
//! shared by N threads.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use factlog::limits::SEGMENT_BYTES_DEFAULT;
use factlog::{Durability, Options, Store, StoreOptions, Task};
use parking_lot::Mutex;

use crate::events::Workload;
use crate::settle;
use crate::workload::{self, Action, StepClose};
use factlog::engine::counting_fs::CountingFs;

/// What one session timed.
#[derive(Default)]
pub struct Timings {
    /// The latency of every synced append, in nanoseconds.
    pub synced_ns: Vec<u64>,
    /// The longest any single append took, in nanoseconds.
    pub max_any_ns: u64,
    /// What the sessions' processes used while they ran: the whole process for threads,
    /// summed over the processes otherwise.
    pub usage: Usage,
}

impl Timings {
    /// Records one append that began at `start`.
    pub fn record(&mut self, start: Instant, synced: bool) {
        let ns = start.elapsed().as_nanos() as u64;
        self.max_any_ns = self.max_any_ns.max(ns);
        if synced {
            self.synced_ns.push(ns);
        }
    }

    /// Adds another session's timings to these.
    pub fn merge(&mut self, other: Timings) {
        self.synced_ns.extend(other.synced_ns);
        self.max_any_ns = self.max_any_ns.max(other.max_any_ns);
        self.usage.cpu_ns += other.usage.cpu_ns;
        self.usage.switches += other.usage.switches;
    }
}

/// What a process used: processor time and context switches.
#[derive(Debug, Default, Clone, Copy)]
pub struct Usage {
    /// Processor time, user and system, in nanoseconds.
    pub cpu_ns: u64,
    /// Context switches, voluntary (a wait) and involuntary (preempted).
    pub switches: u64,
}

impl Usage {
    /// What this process (all its threads, exited ones included) has used so far.
    #[expect(unsafe_code, reason = "getrusage is the one call that counts exited threads too")]
    pub fn now() -> Usage {
        // SAFETY: `getrusage` only fills the zeroed struct it is given.
        let usage = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_SELF, &mut usage);
            usage
        };
        let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
        Usage {
            cpu_ns: ns(usage.ru_utime) + ns(usage.ru_stime),
            switches: (usage.ru_nvcsw + usage.ru_nivcsw) as u64,
        }
    }

    /// The processor time, user and system, the calling thread has used so far, in
    /// nanoseconds (exact to the call: the running slice is counted).
    #[must_use]
    pub fn thread_cpu_ns() -> u64 {
        let time = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        time.tv_sec as u64 * 1_000_000_000 + time.tv_nsec as u64
    }

    /// What was used since `before`.
    #[must_use]
    pub fn since(self, before: Usage) -> Usage {
        Usage { cpu_ns: self.cpu_ns - before.cpu_ns, switches: self.switches - before.switches }
    }
}

/// Runs `work(i)` on one thread per session, all released together; the wall time from the
/// release until every thread is done, and what they timed.
pub fn parallel(sessions: usize, work: impl Fn(usize) -> Timings + Sync) -> (Duration, Timings) {
    let barrier = Barrier::new(sessions + 1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..sessions)
            .map(|i| {
                let (barrier, work) = (&barrier, &work);
                scope.spawn(move || {
                    barrier.wait();
                    work(i)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let before = Usage::now();
        let timings: Vec<Timings> =
            handles.into_iter().map(|h| h.join().expect("a session thread")).collect();
        let elapsed = start.elapsed();
        let mut all = Timings { usage: Usage::now().since(before), ..Timings::default() };
        for t in timings {
            all.merge(t);
        }
        (elapsed, all)
    })
}

/// Whether the typed store's append of `action` waits for an `fdatasync`.
pub fn synced_action(action: &Action) -> bool {
    match action {
        Action::Delta(_) => false,
        Action::Append(body) => {
            body.event_type().is_some_and(|t| t.default_durability() == Durability::Synced)
        }
        Action::CloseStep(_) => true,
    }
}

/// The typed store (default options, fixed clock) shared by one thread per session, each
/// step closed by one batch of `tool/result` + `step/end`: the wall time, the `fdatasync`s
/// counted through a counting file system (segment and other syncs), and the timings.
pub fn factlog_threads(sessions: &[Workload], dir: &std::path::Path) -> (Duration, u64, Timings) {
    let (fs, counters) = CountingFs::new();
    let options = StoreOptions::new().clock(workload::fixed_clock).log(Options::new().fs(fs));
    let store = Store::open(dir, options).expect("open the store");
    settle::wait_for_prealloc(dir, SEGMENT_BYTES_DEFAULT);
    let tasks: Vec<Task> = sessions.iter().map(|w| store.task(&w.task).expect("task")).collect();
    let work: Vec<Mutex<Option<workload::Session>>> =
        sessions.iter().map(|w| Mutex::new(Some(w.session.clone()))).collect();
    let before = counters.read();
    let (elapsed, timings) = parallel(sessions.len(), |i| {
        let session = work[i].lock().take().expect("each session runs once");
        let mut timings = Timings::default();
        for action in session.actions {
            let synced = synced_action(&action);
            let start = Instant::now();
            workload::perform(&tasks[i], &session.deltas, action, StepClose::Batch);
            timings.record(start, synced);
        }
        timings
    });
    let counts = counters.read().since(&before);
    drop(tasks);
    store.close().expect("close the store");
    (elapsed, counts.segment_syncs() + counts.other_syncs(), timings)
}

/// The nearest-rank percentile `p` (0-100) of sorted `values`, in microseconds.
pub fn percentile_us(sorted: &[u64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len().max(1)) - 1).map_or(f64::NAN, |&ns| ns as f64 / 1e3)
}

/// A positive number from the environment variable `name`, or `default`.
pub fn env_number<T: std::str::FromStr + PartialOrd + From<u8>>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(text) => match text.trim().parse::<T>() {
            Ok(value) if value >= T::from(1) => value,
            _ => panic!("{name}={text:?}: give a whole number of at least 1"),
        },
        Err(_) => default,
    }
}
