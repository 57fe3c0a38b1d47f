//! A migration whose verification fails changes nothing: on a file system that flips one bit
//! of every write to a staged segment (a write damaged on its way to disk), the read-back check
//! of `factlog migrate` refuses the staged files, and afterwards the store holds the same files
//! with the same bytes, no staged file, no commit marker and no backup, and still opens in its
//! old format with the same events.

use crate::common;
use crate::common::faulty_fs;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::fixtures::{copy_of, digest_data, digest_tree};
use factlog::fs::Fs;
use factlog::harness::migrate::{MigrateOptions, migrate};
use factlog::{ErrorKind, Options, Seq, Store, StoreOptions};
use faulty_fs::FaultyFs;

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

    // Every write to a staged segment (`*.seg.new`) has one bit flipped.
    let fs = FaultyFs::new();
    *fs.faults.write_filter.lock() = ".new".to_owned();
    fs.faults.damage_writes.store(true, Ordering::SeqCst);
    let to_2 = MigrateOptions { to: 2, dry_run: false, backup: None };
    let err = migrate(&dir, options(Arc::new(fs.clone())), &to_2).unwrap_err();
    assert!(
        fs.faults.damaged.load(Ordering::SeqCst) > 0,
        "the staged writes went through the seam"
    );
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
