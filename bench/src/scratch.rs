//! Scratch directories of the benches.

use std::path::Path;

use tempfile::TempDir;

/// A fresh directory named after `name` under `root`, removed on drop. Panics when it cannot
/// be made: a bench has nothing to measure without it.
pub fn temp_dir_in(root: &Path, name: &str) -> TempDir {
    std::fs::create_dir_all(root).expect("create the bench tmpdir");
    tempfile::Builder::new()
        .prefix(&format!("factlog-bench-{name}-"))
        .tempdir_in(root)
        .expect("create a bench directory")
}

/// A fresh directory under Cargo's target tmpdir (`target/tmp`) of the bench that calls it,
/// which lives on the real disk of the checkout: unlike `/dev/shm`, an `fdatasync` there
/// reaches a device. Removed on drop.
#[macro_export]
macro_rules! temp_dir {
    ($name:expr) => {
        $crate::scratch::temp_dir_in(::std::path::Path::new(env!("CARGO_TARGET_TMPDIR")), $name)
    };
}
