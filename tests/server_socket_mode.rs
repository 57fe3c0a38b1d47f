//! The socket of a served store is owner-only (mode 0600), 0660 with an allowed group, and a
//! store directory that group or others can write is refused with the command that fixes it.

use crate::common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use common::server::store_dir;
use factlog::server::{ServeOptions, socket_path};
use factlog::{Store, StoreOptions};

#[test]
fn the_socket_is_owner_only_and_group_only_when_a_group_is_allowed() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let meta = std::fs::metadata(socket_path(&dir)).expect("the socket");
    assert_eq!(meta.mode() & 0o777, 0o600, "mode {:o}", meta.mode());
    drop(server);
    assert!(!socket_path(&dir).exists(), "removed when serving stops");

    // The process's own primary group can always be given.
    let gid = rustix::process::getegid().as_raw();
    let server = store.serve(ServeOptions::new().allow_group(Some(gid))).expect("serve");
    let meta = std::fs::metadata(socket_path(&dir)).expect("the socket");
    assert_eq!(meta.mode() & 0o777, 0o660, "mode {:o}", meta.mode());
    assert_eq!(meta.gid(), gid);
    drop(server);
    store.close().expect("close");
}

#[test]
fn a_directory_others_can_write_is_refused_with_the_fix() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    for mode in [0o777, 0o775, 0o757] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let error = store.serve(ServeOptions::new()).expect_err("a writable directory");
        let message = error.to_string();
        assert!(message.contains("chmod go-w"), "mode {mode:o}: {message}");
        assert!(!socket_path(&dir).exists(), "no socket left behind");
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    drop(store.serve(ServeOptions::new()).expect("served once fixed"));
    store.close().expect("close");
}
