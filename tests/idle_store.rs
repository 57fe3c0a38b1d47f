//! An idle store does not wake: once what was appended is durable and the mark is written,
//! the background threads (flusher, preallocator, snapshotter) block until there is work, and
//! an append wakes the flusher again so a `Buffered` record still reaches the disk without a
//! flush call. Proved by counting the voluntary context switches of the store's threads
//! (`/proc/self/task/*/status`) over an idle period of a hundred flush delays: a count, which
//! a thread that polls every flush delay would raise by about a hundred.

use std::time::{Duration, Instant};

use factlog::{Log, Options, Seq, Store, StoreOptions};

/// The flush delay of the store under test; the idle period is a hundred of them.
const FLUSH_DELAY: Duration = Duration::from_millis(5);

/// Wake-ups an idle period may still see: none is expected, a couple leaves room for a mark
/// update that fell due at its very start.
const IDLE_WAKEUPS_MAX: u64 = 2;

/// The voluntary context switches of this process's threads whose name starts with
/// `factlog-` (the store's background threads), summed.
fn store_thread_switches() -> u64 {
    let mut total = 0;
    let mut threads = 0;
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = task.expect("a task").path();
        let Ok(name) = std::fs::read_to_string(dir.join("comm")) else { continue };
        if !name.starts_with("factlog-") {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(dir.join("status")) else { continue };
        let switches = status
            .lines()
            .find_map(|line| line.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|value| value.trim().parse::<u64>().ok())
            .expect("voluntary_ctxt_switches in the status of a task");
        total += switches;
        threads += 1;
    }
    assert!(threads >= 1, "the store runs its background threads");
    total
}

/// Waits (bounded) until `seq` is durable, with no flush call: the flusher's work.
fn wait_durable(log: &Log, seq: Seq) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while log.durable_seq() < Some(seq) {
        assert!(Instant::now() < deadline, "seq {seq:?} became durable by itself");
        std::thread::sleep(FLUSH_DELAY);
    }
}

#[test]
fn an_idle_store_blocks_and_an_append_wakes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::new().flush_delay(FLUSH_DELAY).mark_interval(Duration::from_millis(20));
    let store = Store::open(dir.path(), StoreOptions::new().log(options)).expect("open");
    let task = store.task("idle").expect("task");
    for round in 0..3 {
        // A delta is `Buffered`: durable only through the flusher.
        let seq = task.delta(&format!("fragment {round} ")).expect("delta");
        wait_durable(store.log(), seq);
        // The mark falls due one mark interval after the sync: let it be written.
        std::thread::sleep(Duration::from_millis(100));
        let before = store_thread_switches();
        std::thread::sleep(FLUSH_DELAY * 100);
        let woken = store_thread_switches() - before;
        assert!(
            woken <= IDLE_WAKEUPS_MAX,
            "round {round}: the store's threads woke {woken} times in 100 idle flush delays"
        );
    }
    drop(task);
    store.close().expect("close");
}
