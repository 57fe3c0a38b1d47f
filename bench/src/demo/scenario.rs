//! What the demo's harness does, shared by the writer that is killed and the process that
//! recovers: the task, call and approval ids, the store options, and what the seed decides.
//!
//! The seed decides two things the recovery depends on: whether the `publish` service is
//! `queryable` (recovery plans `verify`) or `idempotent` (it plans `retry_same_key`), and
//! whether the writer is killed after the article reached the service or before. It also
//! picks the article's topic. Everything else is fixed, so a seed always gives the same run.

use std::sync::Arc;

use factlog::harness::event::Effect;
use factlog::{Options, StoreOptions};

use factlog::engine::counting_fs::{CountingFs, FsCounters};

/// The demo's task.
pub const TASK: &str = "publish-article";
/// The read-only search of turn 1.
pub const CALL_SEARCH: &str = "call-search-1";
/// The side-effecting publish of turn 2, in flight when the writer is killed.
pub const CALL_PUBLISH: &str = "call-publish-1";
/// The notification of turn 2, asked for and approved but never dispatched before the crash.
pub const CALL_NOTIFY: &str = "call-notify-1";
/// The `once` approval that the publish call consumes.
pub const APPROVAL_PUBLISH: &str = "approval-publish-1";
/// The `once` approval for the notification: unused at the crash, so recovery expires it.
pub const APPROVAL_NOTIFY: &str = "approval-notify-1";
/// The approval asked for again after the restart.
pub const APPROVAL_NOTIFY_AGAIN: &str = "approval-notify-2";
/// The operation the publish request key is derived from.
pub const PUBLISH_OPERATION: &str = "publish_article:draft-1";

/// The seed used when `--seed` is not given: a `queryable` service and an article that landed
/// before the crash, so the run shows recovery verifying instead of publishing twice.
pub const DEFAULT_SEED: u64 = 2;

/// Capacity of the demo store's segment: the run writes a few KiB, and a small segment keeps
/// every open (which scans the active segment) quick.
const SEGMENT_BYTES: u64 = 1 << 20;

/// The fixed time stamped on every event (2026-01-01T00:00:00Z): timestamps are not printed,
/// and a fixed clock keeps the log's bytes the same for a seed.
const DEMO_CLOCK_US: u64 = 1_767_225_600_000_000;

fn demo_clock() -> u64 {
    DEMO_CLOCK_US
}

const TOPICS: [&str; 4] = [
    "crash-safe agent harnesses",
    "idempotency keys for tool calls",
    "why approvals must not outlive a restart",
    "group commit on a shared disk",
];

/// What one seed decides.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// The seed.
    pub seed: u64,
    /// The publish service's effect class.
    pub publish_effect: Effect,
    /// Whether the article reaches the service before the writer is killed.
    pub lands_before_crash: bool,
    /// The article's topic.
    pub topic: &'static str,
}

impl Scenario {
    /// The scenario of `seed`.
    pub fn new(seed: u64) -> Scenario {
        let bits = splitmix64(seed);
        let publish_effect = if bits & 1 == 0 { Effect::Queryable } else { Effect::Idempotent };
        Scenario {
            seed,
            publish_effect,
            lands_before_crash: (bits >> 1) & 3 != 0,
            topic: TOPICS[usize::try_from((bits >> 8) % 4).expect("less than 4")],
        }
    }

    /// The article's title.
    pub fn title(&self) -> String {
        format!("A field guide to {}", self.topic)
    }
}

/// The store options of both processes, with a counting file system. The background flusher
/// is off so that the number of syncs is the same in every run of a seed: buffered events
/// (deltas, starts) become durable with the next synced one.
pub fn store_options() -> (StoreOptions, Arc<FsCounters>) {
    let (fs, counters) = CountingFs::new();
    let log = Options::new().segment_bytes(SEGMENT_BYTES).background_threads(false).fs(fs);
    (StoreOptions::new().log(log).clock(demo_clock), counters)
}

/// One step of the SplitMix64 generator: a well-mixed 64-bit value of `seed`.
fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_seed_verifies_an_article_that_landed() {
        let scenario = Scenario::new(DEFAULT_SEED);
        assert_eq!(scenario.publish_effect, Effect::Queryable);
        assert!(scenario.lands_before_crash);
    }
}
