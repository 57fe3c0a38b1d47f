//! Replicas in tests (`format-spec/replication.md`): a session written to a store, a remote
//! that fails on request, and the segment bytes a replica's parts put back together.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use factlog::replica::{Remote, parse_part_name, part};
use factlog::{ErrorKind, Store};

use super::harness;

/// Numbers the tool calls of [`session`], unique in the process.
static CALLS: AtomicU64 = AtomicU64::new(0);

/// Appends `turns` turns of a session to `task`: a user message, deltas, a tool call and its
/// result (synced), the step and turn closed.
pub fn session(store: &Store, task: &str, turns: usize) {
    let task = store.task(task).expect("task");
    for turn in 0..turns {
        task.append(harness::turn_start()).expect("turn/start");
        task.append(harness::user(&format!("question {turn}"))).expect("user");
        task.append(harness::step_start()).expect("step/start");
        for i in 0..40 {
            task.delta(&format!("fragment {turn}.{i} ")).expect("delta");
        }
        let call_id = format!("call-{}", CALLS.fetch_add(1, Ordering::Relaxed));
        task.append(harness::call(
            &call_id,
            "search",
            factlog::harness::event::Effect::ReadOnly,
            None,
        ))
        .expect("tool/call");
        task.append(harness::result(&call_id, None)).expect("tool/result");
        task.append(harness::step_end()).expect("step/end");
        task.append(harness::turn_end()).expect("turn/end");
    }
}

/// The segment files a replica's parts rebuild, by first seq: each segment's parts checked
/// and put back together in order. Panics if a part is damaged or they do not follow.
pub fn segments_in(remote: &dyn Remote) -> BTreeMap<u64, Vec<u8>> {
    let mut segments: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for name in remote.list("segments/").expect("list") {
        let (first_seq, start, end) = parse_part_name(&name).expect("a part name");
        let object = remote.get(&name).expect("get").expect("listed");
        let (_, body) = part::decode(&name, &object, start, end).expect("a valid part");
        let bytes = segments.entry(first_seq).or_default();
        assert_eq!(bytes.len() as u64, start, "{name} follows the part before it");
        bytes.extend_from_slice(body);
    }
    segments
}

/// The bytes of each segment file of the log in `dir` up to the end of its valid frames,
/// by first seq.
pub fn segments_of(dir: &Path) -> BTreeMap<u64, Vec<u8>> {
    let fs = factlog::fs::RealFs;
    let listing = factlog::engine::segments::list(&fs, dir).expect("list segments");
    listing
        .segments
        .iter()
        .map(|meta| {
            let bytes = std::fs::read(&meta.path).expect("read a segment");
            let scan = factlog::engine::segment::scan(&bytes, &meta.header, None, |_, _| {});
            (meta.header.first_seq.0, bytes[..scan.end_offset].to_vec())
        })
        .collect()
}

/// What a [`FaultyRemote`] does to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Fails it; the store does nothing.
    Fail,
    /// Does it, then reports a failure (the answer was lost on the way back).
    LoseAnswer,
}

/// A remote that does `fault` to every `every`-th `put_new` (counting from 1; `u64::MAX`
/// for none, settable while in use), and passes everything else to `inner`.
pub struct FaultyRemote<R: Remote> {
    pub inner: R,
    pub every: Arc<AtomicU64>,
    pub fault: Fault,
    puts: AtomicU64,
    /// Requests it failed.
    pub failed: AtomicU64,
}

impl<R: Remote> FaultyRemote<R> {
    pub fn new(inner: R, every: u64, fault: Fault) -> FaultyRemote<R> {
        FaultyRemote {
            inner,
            every: Arc::new(AtomicU64::new(every)),
            fault,
            puts: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    fn failure(&self, name: &str) -> factlog::Error {
        self.failed.fetch_add(1, Ordering::Relaxed);
        ErrorKind::Remote {
            location: self.inner.location().to_owned(),
            op: "put",
            object: name.to_owned(),
            reason: "injected".to_owned(),
        }
        .into()
    }
}

impl<R: Remote> Remote for FaultyRemote<R> {
    fn put_new(&self, name: &str, bytes: &[u8]) -> factlog::Result<bool> {
        let n = self.puts.fetch_add(1, Ordering::Relaxed) + 1;
        if !n.is_multiple_of(self.every.load(Ordering::Relaxed)) {
            return self.inner.put_new(name, bytes);
        }
        if self.fault == Fault::LoseAnswer {
            self.inner.put_new(name, bytes)?;
        }
        Err(self.failure(name))
    }

    fn get(&self, name: &str) -> factlog::Result<Option<Vec<u8>>> {
        self.inner.get(name)
    }

    fn list(&self, prefix: &str) -> factlog::Result<Vec<String>> {
        self.inner.list(prefix)
    }

    fn delete(&self, name: &str) -> factlog::Result<()> {
        self.inner.delete(name)
    }

    fn location(&self) -> &str {
        self.inner.location()
    }
}
