//! A migration whose verification fails changes nothing: on a file system that flips one bit
//! of every write to a staged segment (a write damaged on its way to disk), the read-back check
//! of `factlog migrate` refuses the staged files, and afterwards the store holds the same files
//! with the same bytes, no staged file, no commit marker and no backup, and still opens in its
//! old format with the same events.

mod common;

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use common::fixtures::{copy_of, digest_data, digest_tree};
use factlog::fs::{DirLock, Fs, FsFile, OpenMode, RealFs};
use factlog::harness::migrate::{MigrateOptions, migrate};
use factlog::{ErrorKind, Options, Seq, Store, StoreOptions};

/// The real file system, but every write to a `*.new` file (a staged segment) has one bit
/// flipped in its middle; counts the writes it damaged.
#[derive(Debug, Default)]
struct DamagingFs {
    damaged: Arc<AtomicU64>,
}

#[derive(Debug)]
struct DamagedFile {
    file: Box<dyn FsFile>,
    damaged: Arc<AtomicU64>,
}

impl FsFile for DamagedFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut bytes = buf.to_vec();
        if let Some(byte) = bytes.get_mut(buf.len() / 2) {
            *byte ^= 0x10;
            self.damaged.fetch_add(1, Ordering::Relaxed);
        }
        self.file.write_all_at(&bytes, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }
}

impl Fs for DamagingFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        RealFs.create_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        RealFs.list_dir(path)
    }
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn FsFile>> {
        let file = RealFs.open(path, mode)?;
        if path.extension().is_some_and(|x| x == "new") {
            return Ok(Box::new(DamagedFile { file, damaged: Arc::clone(&self.damaged) }));
        }
        Ok(file)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealFs.rename(from, to)
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
        RealFs.map(path)
    }
    fn random_u64(&self) -> u64 {
        RealFs.random_u64()
    }
}

fn options(fs: Arc<dyn Fs>) -> StoreOptions {
    StoreOptions::new().log(Options::new().segment_bytes(8192).background_threads(false).fs(fs))
}

#[test]
fn a_staged_rewrite_that_does_not_read_back_is_refused_and_nothing_changes() {
    let (tmp, dir) = copy_of("v1-clean-multi-task");
    let real = common::fixtures::options();
    let before = Store::open_read_only(&dir, real.clone()).unwrap();
    let events: Vec<_> = before.events(Seq(1)).unwrap().map(Result::unwrap).collect();
    drop(before);
    let data = digest_data(&dir);
    let parent_names = || {
        let mut names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(parent_names(), ["store"]);

    let fs = Arc::new(DamagingFs::default());
    let to_2 = MigrateOptions { to: 2, dry_run: false, backup: None };
    let err = migrate(&dir, options(fs.clone()), &to_2).unwrap_err();
    assert!(fs.damaged.load(Ordering::Relaxed) > 0, "the staged writes went through the seam");
    assert!(matches!(err.kind(), ErrorKind::Corruption { .. }), "{err}");
    assert!(err.to_string().contains(".new"), "the error names the staged file: {err}");

    // The same files with the same bytes; nothing staged, no marker, no backup beside it.
    assert_eq!(digest_data(&dir), data);
    let leftovers: Vec<_> = digest_tree(&dir)
        .into_iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".new") || n.starts_with("REWRITE"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_eq!(parent_names(), ["store"], "the backup was removed again");

    // The store opens in its old format, with the same events; a migration on a sound file
    // system then succeeds.
    let store = Store::open(&dir, real.clone()).unwrap();
    assert_eq!(store.log().format_version(), 1);
    let after: Vec<_> = store.events(Seq(1)).unwrap().map(Result::unwrap).collect();
    assert_eq!(after, events);
    drop(store);
    let report = migrate(&dir, real, &to_2).unwrap();
    assert_eq!((report.from, report.to), (1, 2));
    assert_eq!(parent_names(), ["store", "store.backup-v1"]);
}
