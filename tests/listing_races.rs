//! A file removed between a directory listing and its open is the normal outcome of a race
//! with a writer (a snapshot pruned, a segment reclaimed), never an error: proved with a file
//! system that removes each listed file just before it is opened (or mapped),
//! deterministically, where the race made `tests/replica_ship.rs` fail about one run in
//! twenty. A replicator that finds a segment gone lists the store again and says what that
//! means (a gap it names), never an I/O error on a file that is simply gone.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use factlog::fs::{DirLock, Fs, FsFile, OpenMode, RealFs, Space};
use factlog::harness::snapshot;
use factlog::replica::{DirRemote, Replicator, ShipOptions};
use factlog::{ErrorKind, Options, Store, StoreOptions};

/// The real file system, except that the first open (or map) of a file whose name ends with
/// `suffix` removes it first, as a writer pruning it meanwhile would.
#[derive(Debug)]
struct Vanishing {
    suffix: &'static str,
    removed: Mutex<Vec<PathBuf>>,
}

impl Vanishing {
    fn new(suffix: &'static str) -> Vanishing {
        Vanishing { suffix, removed: Mutex::new(Vec::new()) }
    }

    fn vanish_first(&self, path: &Path) -> io::Result<()> {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut removed = self.removed.lock().unwrap();
        if name.ends_with(self.suffix) && removed.is_empty() {
            std::fs::remove_file(path)?;
            removed.push(path.to_path_buf());
        }
        Ok(())
    }
}

impl Fs for Vanishing {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        RealFs.create_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        RealFs.list_dir(path)
    }
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn FsFile>> {
        self.vanish_first(path)?;
        RealFs.open(path, mode)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealFs.rename(from, to)
    }
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealFs.hard_link(from, to)
    }
    fn is_dir(&self, path: &Path) -> io::Result<bool> {
        RealFs.is_dir(path)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_dir(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        RealFs.sync_dir(path)
    }
    fn lock_dir(&self, dir: &Path) -> io::Result<Option<Box<dyn DirLock>>> {
        RealFs.lock_dir(dir)
    }
    fn map(&self, path: &Path) -> io::Result<Bytes> {
        self.vanish_first(path)?;
        RealFs.map(path)
    }
    fn random_u64(&self) -> u64 {
        RealFs.random_u64()
    }
    fn space(&self, path: &Path) -> io::Result<Space> {
        RealFs.space(path)
    }
}

fn store_with_two_snapshots(dir: &Path) {
    let store = Store::open(dir, StoreOptions::new()).unwrap();
    let task = store.task("t").unwrap();
    task.delta("one").unwrap();
    store.checkpoint().unwrap();
    task.delta("two").unwrap();
    store.checkpoint().unwrap();
    drop(task);
    store.close().unwrap();
}

#[test]
fn a_snapshot_pruned_between_listing_and_open_is_left_out() {
    let temp = tempfile::tempdir().unwrap();
    store_with_two_snapshots(temp.path());
    let fs = Vanishing::new(".snap");
    let listed = snapshot::list(&fs, temp.path()).expect("a listing that races a prune");
    let removed = fs.removed.lock().unwrap().clone();
    assert_eq!(removed.len(), 1);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(listed.iter().all(|f| !removed.contains(&f.path)));
}

#[test]
fn a_store_opened_while_a_snapshot_is_pruned_opens_from_another_or_the_events() {
    let temp = tempfile::tempdir().unwrap();
    store_with_two_snapshots(temp.path());
    let fs: Arc<dyn Fs> = Arc::new(Vanishing::new(".snap"));
    let options = StoreOptions::new().log(Options::new().fs(fs));
    let store = Store::open_read_only(temp.path(), options).expect("the open races a prune");
    assert_eq!(store.state().tasks.len(), 1);
}

#[test]
fn a_segment_gone_before_the_replicator_reads_it_is_a_named_gap_not_an_io_error() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    {
        let log = Options::new().segment_bytes(64 * 1024).background_threads(false);
        let store = Store::open(store_dir.path(), StoreOptions::new().log(log)).unwrap();
        let task = store.task("t").unwrap();
        while store.log().info().unwrap().segments.len() < 3 {
            task.delta(&"x".repeat(1000)).unwrap();
        }
        drop(task);
        store.close().unwrap();
    }
    // The oldest segment is removed just before the round reads it, as a purge beside the
    // replicator would: its records were never shipped, so the replica would have a gap.
    let fs: Arc<dyn Fs> = Arc::new(Vanishing::new("00000000000000000001.seg"));
    let url = format!("file://{}", replica_dir.path().display());
    let remote = DirRemote::create(&url, replica_dir.path()).unwrap();
    let mut replicator =
        Replicator::start(fs, store_dir.path(), Box::new(remote), ShipOptions::new(), 1).unwrap();
    let error = replicator.round().expect_err("records that were never shipped are gone");
    assert!(matches!(error.kind(), ErrorKind::ReplicaGap { .. }), "{error}");
    assert!(error.to_string().contains("seqs 1..="), "{error}");
}
