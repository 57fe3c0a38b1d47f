//! The console's picture of the store: the folded state of every task, kept current by one
//! reader thread that never holds the store and never slows its writer, and the stream of
//! [`Update`]s the live pages subscribe to.
//!
//! How the reader follows the store, by who holds it:
//! - nobody, or a process that does not serve it: every [`POLL_INTERVAL`] the segment files
//!   are listed, and when they changed (or changed less than a second ago) the log is opened
//!   again read-only (no lock, nothing written, as `factlog tail --follow` does), the records
//!   after the last one seen are decoded and folded into the picture with
//!   [`crate::harness::fold::apply`], the fold every door uses. An idle store costs a listing
//!   per look, not a read of its active segment; beside a writer the reader waits four times
//!   as long as its last look took, so it takes at most a fifth of a core;
//! - a process that serves it (`DIR/factlog.sock`): a [`Client`] long-polls its `follow`
//!   request, which the server answers as soon as an event is appended, and the state of each
//!   task a page touched is asked of the server ([`Client::state`]), which already holds it
//!   folded.
//!
//! The first picture is a read-only open of the store in both cases (its newest snapshot and
//! the log after it): no task is asked for one by one. Should the store reclaim records the
//! picture has not seen (a purge, a retention), the picture is read again whole and the
//! subscribers are told to reload ([`Update::resync`]).
//!
//! Bounds: one update holds at most [`CONSOLE_UPDATE_EVENTS_MAX`] events and stops after the first
//! that takes it past [`CONSOLE_UPDATE_BYTES_MAX`] bytes of JSON; the channel keeps at most
//! [`CONSOLE_UPDATES_QUEUED_MAX`] updates, and a subscriber that falls further behind is told to
//! reload instead of being buffered for.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use serde_json::{Map, Value};
use tokio::sync::broadcast;

use crate::client::Client;
use crate::client::served::{Held, holder_of};
use crate::harness::operator::{self, TaskSummary};
use crate::harness::{State, TaskId, codec, fold};
use crate::limits::{
    CONSOLE_UPDATE_BYTES_MAX, CONSOLE_UPDATE_EVENTS_MAX, CONSOLE_UPDATES_QUEUED_MAX,
};
use crate::protocol::views;
use crate::{Log, Options, Seq, Store, StoreOptions};

/// How often the reader looks for new records when the store is not served.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// After a look at the files that took `T`, the reader waits at least `T` times this: at most
/// one part in `READ_SHARE_INVERSE + 1` of its time goes to reading.
const READ_SHARE_INVERSE: u32 = 4;

/// How often the reader asks who holds the store while it polls files (a holder may start
/// serving it).
const HOLDER_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// How long one `follow` request of a served store waits for an event.
const FOLLOW_WAIT: Duration = Duration::from_millis(500);

/// How long the reader waits before trying again after a failed read.
const RETRY_DELAY: Duration = Duration::from_millis(500);

/// What changed in the store since the previous update.
#[derive(Debug, Default)]
pub struct Update {
    /// The events appended, in order, as `factlog dump --json` prints them.
    pub events: Vec<Map<String, Value>>,
    /// The tasks those events belong to.
    pub tasks: BTreeSet<String>,
    /// The store's last seq as of this update.
    pub last_seq: u64,
    /// The picture was read again whole: whatever a page shows may be stale.
    pub resync: bool,
}

/// How the reader reaches the store now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Read-only opens of the store's files.
    Files,
    /// A client of the process that serves the store.
    Served,
}

impl Source {
    /// The name the health page shows.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Files => "files",
            Source::Served => "served",
        }
    }
}

/// The state as of an update, and how the reader got it.
#[derive(Debug)]
struct Picture {
    state: State,
    /// The seq the reader reads from next.
    next_seq: u64,
    /// Bumped at every change of `state`.
    version: u64,
    source: Source,
    /// Why the last read failed, when it did (cleared by the next that succeeds).
    last_error: Option<String>,
    /// The report of the read-only open the picture was last read whole from.
    opened: Value,
}

/// The console's picture of the store and its stream of updates.
#[derive(Debug)]
pub struct Mirror {
    dir: PathBuf,
    picture: RwLock<Picture>,
    /// The summaries of every task for one version of the picture.
    summaries: Mutex<Option<(u64, Arc<Vec<TaskSummary>>)>>,
    updates: broadcast::Sender<Arc<Update>>,
    stop: AtomicBool,
}

impl Mirror {
    /// The picture of the store in `dir`, read through a read-only open.
    ///
    /// # Errors
    ///
    /// Those of [`Store::open_read_only`] and [`Store::try_state`].
    pub fn open(dir: &Path) -> crate::Result<Mirror> {
        let (state, opened) = read_state(dir)?;
        let (updates, _) = broadcast::channel(CONSOLE_UPDATES_QUEUED_MAX);
        Ok(Mirror {
            dir: dir.to_path_buf(),
            picture: RwLock::new(Picture {
                next_seq: state.last_seq + 1,
                state,
                version: 1,
                source: Source::Files,
                last_error: None,
                opened,
            }),
            summaries: Mutex::new(None),
            updates,
            stop: AtomicBool::new(false),
        })
    }

    /// The store's directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A receiver of the updates from now on.
    #[must_use]
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Update>> {
        self.updates.subscribe()
    }

    /// The summary of every task, in task-id order ([`operator::summaries`]), computed once per
    /// version of the picture.
    #[must_use]
    pub fn summaries(&self) -> Arc<Vec<TaskSummary>> {
        let picture = self.picture.read();
        let mut cached = self.summaries.lock();
        if let Some((version, summaries)) = cached.as_ref()
            && *version == picture.version
        {
            return Arc::clone(summaries);
        }
        let summaries = Arc::new(operator::summaries(&picture.state));
        *cached = Some((picture.version, Arc::clone(&summaries)));
        summaries
    }

    /// The tasks that wait for a person, oldest wait first ([`operator::attention`]).
    #[must_use]
    pub fn attention(&self) -> Vec<TaskSummary> {
        operator::attention(&self.picture.read().state)
    }

    /// `f` of the picture's state.
    pub fn with_state<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.picture.read().state)
    }

    /// The source, the last seq seen, and the last read's error.
    #[must_use]
    pub fn status(&self) -> (Source, u64, Option<String>) {
        let picture = self.picture.read();
        (picture.source, picture.state.last_seq, picture.last_error.clone())
    }

    /// The report of the read-only open the picture was last read whole from: the snapshot
    /// it loaded, the events it replayed, the torn tail a writer's open would cut.
    #[must_use]
    pub fn opened(&self) -> Value {
        self.picture.read().opened.clone()
    }

    /// Asks the reader to stop (it does within one wait).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn publish(&self, update: Update) {
        // No subscriber is not an error: nobody looks at a live page.
        let _ = self.updates.send(Arc::new(update));
    }

    fn failed(&self, error: String) {
        self.picture.write().last_error = Some(error);
    }
}

/// The reader: follows the store until [`Mirror::stop`].
pub fn run(mirror: &Mirror) {
    let mut client: Option<Client> = None;
    let mut holder_checked: Option<Instant> = None;
    let mut quiet_since: Option<Fingerprint> = None;
    while !mirror.stopped() {
        if client.is_none() && holder_checked.is_none_or(|at| at.elapsed() >= HOLDER_CHECK_INTERVAL)
        {
            holder_checked = Some(Instant::now());
            if matches!(holder_of(&mirror.dir), Some(Held::Served { .. })) {
                client = Client::connect(&mirror.dir).ok();
            }
        }
        let outcome = match client.as_mut() {
            Some(served) => follow_served(mirror, served).map_err(|error| error.to_string()),
            None => {
                let started = Instant::now();
                let polled =
                    poll_files(mirror, &mut quiet_since).map_err(|error| error.to_string());
                // A read-only open reads the active segment whole: beside a writer filling a
                // large one, the reader waits four times as long as its look took, so that it
                // spends at most a fifth of a core on the store.
                std::thread::sleep(POLL_INTERVAL.max(started.elapsed() * READ_SHARE_INVERSE));
                polled
            }
        };
        match outcome {
            Ok(()) => mirror.picture.write().last_error = None,
            Err(error) => {
                // The server went away or a read failed mid-write: read the files again
                // after a pause; a served store is found again at the next holder check.
                client = None;
                quiet_since = None;
                mirror.failed(error);
                std::thread::sleep(RETRY_DELAY);
            }
        }
    }
}

/// The state of every task of the store in `dir`, through a read-only open, and that open's
/// report ([`crate::OpenReport::to_json`]).
fn read_state(dir: &Path) -> crate::Result<(State, Value)> {
    let store = Store::open_read_only(dir, StoreOptions::new())?;
    let report = store.open_report().to_json();
    Ok((store.try_state()?, report))
}

/// Reads the picture again whole and tells the subscribers to reload.
fn reload(mirror: &Mirror) -> crate::Result<()> {
    let (state, opened) = read_state(&mirror.dir)?;
    let last_seq = state.last_seq;
    {
        let mut picture = mirror.picture.write();
        picture.opened = opened;
        picture.next_seq = last_seq + 1;
        picture.state = state;
        picture.version += 1;
    }
    mirror.publish(Update { last_seq, resync: true, ..Update::default() });
    Ok(())
}

/// How long a segment file must have gone unmodified before an unchanged [`Fingerprint`] is
/// trusted to mean "nothing new": file times tick coarsely (a clock tick, milliseconds), so a
/// write in the same tick as the last look leaves the time as it was.
const QUIET_FOR: Duration = Duration::from_secs(1);

/// The segment files of a store as the system lists them: name, length and modification
/// time. Unchanged, and older than [`QUIET_FOR`], it means the log has not grown.
type Fingerprint = Vec<(std::ffi::OsString, u64, std::time::SystemTime)>;

fn fingerprint(dir: &Path) -> Option<Fingerprint> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        let name = entry.file_name();
        if name.to_str().and_then(crate::engine::segment::parse_file_name).is_some() {
            let metadata = entry.metadata().ok()?;
            files.push((name, metadata.len(), metadata.modified().ok()?));
        }
    }
    files.sort();
    Some(files)
}

/// Whether every file of `fingerprint` was last modified at least [`QUIET_FOR`] before `now`.
fn quiet(fingerprint: &Fingerprint, now: std::time::SystemTime) -> bool {
    fingerprint
        .iter()
        .all(|(_, _, modified)| now.duration_since(*modified).is_ok_and(|age| age >= QUIET_FOR))
}

/// One look at the store's files: when they changed since the last look that read
/// everything (or recently enough that a change could hide in a clock tick), a read-only open
/// of the log whose new records are folded and published. An idle store costs one listing.
fn poll_files(mirror: &Mirror, quiet_since: &mut Option<Fingerprint>) -> crate::Result<()> {
    let now = std::time::SystemTime::now();
    let seen = fingerprint(&mirror.dir);
    if seen.is_some() && seen == *quiet_since {
        return Ok(());
    }
    *quiet_since = None;
    read_files(mirror)?;
    *quiet_since = seen.filter(|seen| quiet(seen, now));
    Ok(())
}

/// One read-only open of the log: folds and publishes the records after the last one seen.
fn read_files(mirror: &Mirror) -> crate::Result<()> {
    let log = Log::open_read_only(&mirror.dir, Options::new())?;
    mirror.picture.write().source = Source::Files;
    let next = mirror.picture.read().next_seq;
    if log.first_seq()?.0 > next {
        return reload(mirror);
    }
    let Some(last) = log.last_seq() else { return Ok(()) };
    while !mirror.stopped() {
        let next = mirror.picture.read().next_seq;
        if last.0 < next {
            return Ok(());
        }
        let mut events = Vec::new();
        let mut bytes = 0;
        for record in log.read_from(Seq(next))? {
            let record = record?;
            events.push(codec::decode(record.seq, &record.payload)?);
            bytes += record.payload.len();
            if events.len() >= CONSOLE_UPDATE_EVENTS_MAX
                || bytes >= CONSOLE_UPDATE_BYTES_MAX
                || record.seq >= last
            {
                break;
            }
        }
        let Some(through) = events.last().map(|event| event.seq.0) else { return Ok(()) };
        let mut update = Update { last_seq: through, ..Update::default() };
        {
            let mut picture = mirror.picture.write();
            for event in &events {
                fold::apply(&mut picture.state, event);
            }
            picture.next_seq = through + 1;
            picture.version += 1;
        }
        for event in &events {
            update.tasks.insert(event.task.as_str().to_owned());
            update.events.push(views::event_object(event, false));
        }
        mirror.publish(update);
    }
    Ok(())
}

/// One `follow` request of the served store: the events after the last one seen, and the
/// server's state of each task they touched.
fn follow_served(mirror: &Mirror, client: &mut Client) -> Result<(), crate::client::ClientError> {
    let next = mirror.picture.read().next_seq;
    let (events, next_seq) = client.follow(next, None, FOLLOW_WAIT)?;
    mirror.picture.write().source = Source::Served;
    if events.is_empty() {
        if next_seq != next {
            mirror.picture.write().next_seq = next_seq;
        }
        return Ok(());
    }
    let tasks: BTreeSet<String> = events
        .iter()
        .filter_map(|event| event.get("task").and_then(Value::as_str).map(str::to_owned))
        .collect();
    let mut states = Vec::with_capacity(tasks.len());
    for task in &tasks {
        states.push((task, client.state(task)?));
    }
    let last_seq = events.last().and_then(|event| event.get("seq")).and_then(Value::as_u64);
    let last_seq = last_seq.unwrap_or(next_seq.saturating_sub(1));
    {
        let mut picture = mirror.picture.write();
        for (task, state) in states {
            let Ok(id) = TaskId::new(task) else { continue };
            match state {
                Some(state) => picture.state.tasks.insert(id, state),
                None => picture.state.tasks.remove(&id),
            };
        }
        picture.state.last_seq = picture.state.last_seq.max(last_seq);
        picture.next_seq = next_seq;
        picture.version += 1;
    }
    mirror.publish(Update { events, tasks, last_seq, resync: false });
    Ok(())
}
