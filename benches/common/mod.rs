//! Helpers shared by the benches.

use std::path::Path;

use tempfile::TempDir;

/// A fresh directory under Cargo's target tmpdir (`target/tmp`), which lives on the real disk
/// of the checkout: unlike `/dev/shm`, an `fdatasync` there reaches a device. Removed on drop.
pub fn temp_dir(name: &str) -> TempDir {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(root).expect("create the bench tmpdir");
    tempfile::Builder::new()
        .prefix(&format!("factlog-bench-{name}-"))
        .tempdir_in(root)
        .expect("create a bench directory")
}
