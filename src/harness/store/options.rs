//! The options of a store: [`StoreOptions`], given to [`Store::open`] (the log's options,
//! the snapshot policy, the clock, the secret and replication policies), and
//! [`AppendOptions`], given to each append (compare-and-set, durability, replication).

use crate::engine::options::Options;
use crate::harness::event::EventType;
use crate::limits::{SNAPSHOT_EVERY_BYTES_DEFAULT, SNAPSHOT_EVERY_EVENTS_DEFAULT};
use crate::types::Durability;

#[cfg(doc)]
use crate::error::ErrorKind;
#[cfg(doc)]
use crate::harness::store::{Store, Task};

/// Options of a [`Store`]: the log's options and the snapshot policy. A policy snapshot is
/// written by the append (other than a delta) that makes it due, before that append returns;
/// a failure to write it does not fail the append ([`Store::last_snapshot_error`]).
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub(crate) log: Options,
    pub(crate) snapshot_every_bytes: u64,
    pub(crate) snapshot_every_events: u64,
    pub(crate) snapshot_at_turn_end: bool,
    pub(crate) clock: fn() -> u64,
    pub(crate) refuse_unmarked_secrets: bool,
    pub(crate) replicated_types: Vec<EventType>,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions::new()
    }
}

impl StoreOptions {
    /// The defaults: [`Options::new`] for the log, a snapshot every 64 MiB or million events.
    #[must_use]
    pub fn new() -> StoreOptions {
        StoreOptions {
            log: Options::new(),
            snapshot_every_bytes: SNAPSHOT_EVERY_BYTES_DEFAULT,
            snapshot_every_events: SNAPSHOT_EVERY_EVENTS_DEFAULT,
            snapshot_at_turn_end: false,
            clock: system_clock_us,
            refuse_unmarked_secrets: false,
            replicated_types: Vec::new(),
        }
    }

    /// The log's options (segment size, buffer, flush delay, recovery mode, file system).
    /// Default: [`Options::new`].
    #[must_use]
    pub fn log(mut self, log: Options) -> StoreOptions {
        self.log = log;
        self
    }

    /// Writes a snapshot once this many bytes of events were appended since the last one;
    /// 0 turns the byte trigger off. Default: 64 MiB.
    #[must_use]
    pub fn snapshot_every_bytes(mut self, bytes: u64) -> StoreOptions {
        self.snapshot_every_bytes = bytes;
        self
    }

    /// Writes a snapshot once this many events were appended since the last one; 0 turns the
    /// event trigger off. Default: 1,000,000.
    #[must_use]
    pub fn snapshot_every_events(mut self, events: u64) -> StoreOptions {
        self.snapshot_every_events = events;
        self
    }

    /// Also writes a snapshot at every `turn/end` (three extra syncs per turn). Default: off.
    #[must_use]
    pub fn snapshot_at_turn_end(mut self, on: bool) -> StoreOptions {
        self.snapshot_at_turn_end = on;
        self
    }

    /// The clock that stamps events, in microseconds since the Unix epoch. Default: the
    /// system clock. Tests set a fixed one to make records byte-for-byte reproducible. It is
    /// read once per event, streamed deltas included, where it is about a quarter of the cost
    /// of an append: a harness that needs less precise timestamps can pass a cheaper clock.
    #[must_use]
    pub fn clock(mut self, clock: fn() -> u64) -> StoreOptions {
        self.clock = clock;
        self
    }

    /// Refuses an event whose body holds a value with the shape of a well-known credential
    /// (`format-spec/events.md`, "Credential shapes") that is not marked `{"$secret": ...}`:
    /// the append fails with [`ErrorKind::UnmarkedSecret`] and writes nothing (a batch
    /// holding one such body writes none). Off, such a body is written as it is; a front end
    /// warns with what [`Task::append_batch_warned`] returns. Events that recovery
    /// writes and `assistant/delta` text are never checked. Default: off.
    #[must_use]
    pub fn refuse_unmarked_secrets(mut self, on: bool) -> StoreOptions {
        self.refuse_unmarked_secrets = on;
        self
    }

    /// Event types whose appends are `Replicated` ([`AppendOptions::replicated`]) unless the
    /// caller asks for it anyway: for example `tool/result` (a payment's receipt) or
    /// `approval/decision`. Such an append needs the store to be replicating
    /// ([`Store::replicate`]). Default: none.
    #[must_use]
    pub fn replicated_types(mut self, types: &[EventType]) -> StoreOptions {
        self.replicated_types = types.to_vec();
        self
    }
}

/// The wall clock in microseconds since the Unix epoch (0 before it): `CLOCK_REALTIME` read
/// straight, as every append stamps its event with it (a `SystemTime` costs half as much again
/// for its checked conversion, on the path of every delta).
fn system_clock_us() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
    let (Ok(secs), Ok(nanos)) = (u64::try_from(now.tv_sec), u64::try_from(now.tv_nsec)) else {
        return 0;
    };
    secs.saturating_mul(1_000_000).saturating_add(nanos / 1_000)
}

/// How to append one event or batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppendOptions {
    /// Compare-and-set: the task revision the update was based on. A stale one fails with
    /// [`ErrorKind::StaleRevision`] and writes nothing. Default: none.
    pub expected_revision: Option<u64>,
    /// The durability to wait for. Default: the event type's
    /// ([`EventType::default_durability`]). A caller may ask for more; asking for less than
    /// `Synced` for a high-risk type is refused with [`ErrorKind::InvalidEvent`].
    pub durability: Option<Durability>,
    /// The `Replicated` tier (`format-spec/replication.md`, "Replicated appends"): the append
    /// is synced, then returns only once the store's replica holds it. Needs the store to be
    /// replicating ([`Store::replicate`]); without, it is refused and nothing is written
    /// ([`ErrorKind::NotReplicated`] with seq 0). Default: off, unless the event type is one
    /// of [`StoreOptions::replicated_types`].
    pub replicated: bool,
}

impl AppendOptions {
    /// A compare-and-set append based on `revision`.
    #[must_use]
    pub fn expecting(revision: u64) -> AppendOptions {
        AppendOptions { expected_revision: Some(revision), ..AppendOptions::default() }
    }

    /// These options with the `Replicated` tier ([`AppendOptions::replicated`]).
    #[must_use]
    pub fn replicated(self) -> AppendOptions {
        AppendOptions { replicated: true, ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::system_clock_us;

    #[test]
    fn the_clock_reads_the_system_time_in_microseconds() {
        let micros = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_micros() as u64
        };
        let before = micros(std::time::SystemTime::now());
        let read = system_clock_us();
        let after = micros(std::time::SystemTime::now());
        assert!(before <= read && read <= after, "{before} <= {read} <= {after}");
    }
}
