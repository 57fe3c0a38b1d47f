//! Proves that salvage refuses a target directory that holds anything, or that lies inside
//! the damaged log, with a typed error and without writing anything anywhere.

use crate::common;

use common::damage::{small_options, store_with_calls};
use common::harness::files_under;
use factlog::{ErrorKind, SalvageOptions};

#[test]
fn a_non_empty_or_nested_target_is_refused_and_nothing_is_written() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let dir = temp.path().join("store");
    store_with_calls(&dir, 3);
    let busy = temp.path().join("busy");
    std::fs::create_dir(&busy).expect("mkdir");
    std::fs::write(busy.join("notes.txt"), b"mine").expect("write");
    let image = files_under(temp.path());
    let options = SalvageOptions::new().store(small_options());

    let err = factlog::salvage(&dir, &busy, options.clone()).expect_err("non-empty target");
    assert!(matches!(err.kind(), ErrorKind::TargetNotEmpty { dir } if dir == &busy), "{err:?}");
    assert!(err.to_string().contains("not empty"), "{err}");

    let nested = dir.join("saved");
    let err = factlog::salvage(&dir, &nested, options.clone()).expect_err("nested target");
    assert!(matches!(err.kind(), ErrorKind::TargetInsideSource { .. }), "{err:?}");
    let err = factlog::salvage(&dir, &dir, options).expect_err("the log itself");
    assert!(matches!(err.kind(), ErrorKind::TargetInsideSource { .. }), "{err:?}");

    assert_eq!(files_under(temp.path()), image, "nothing written");
}
