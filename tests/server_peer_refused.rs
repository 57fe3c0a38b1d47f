//! Proves the peer-credential check of a served store: a server running as another user
//! (`nobody`, started through `setpriv` by this test running as root) answers a client of
//! a different user `PERMISSION_DENIED`, naming the client's process, user and group and what
//! to do, and disconnects it; the same server started with `--allow-group` naming the
//! client's primary group serves it. Where the test cannot switch users (not root, or no
//! `setpriv`) it is skipped with a message.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use common::FACTLOG;
use common::server::Conn;
use serde_json::json;

const NOBODY: u32 = 65_534;

fn can_switch_users() -> bool {
    let root = rustix_free_uid() == 0;
    let setpriv = Command::new("setpriv").arg("--version").stdout(Stdio::null()).status();
    root && setpriv.is_ok_and(|s| s.success())
}

/// This process's user id, read from /proc (the test crate has no libc).
fn rustix_free_uid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|uid| uid.parse().ok())
        .unwrap_or(u32::MAX)
}

/// Starts `factlog serve DIR EXTRA..` as `nobody`; waits until the socket answers.
fn serve_as_nobody(dir: &Path, groups: &str, extra: &[&str]) -> std::process::Child {
    // A socket left by a killed server would look ready before the new one binds.
    let _ = std::fs::remove_file(factlog::server::socket_path(dir));
    let mut child = Command::new("setpriv")
        .args(["--reuid", &NOBODY.to_string(), "--regid", &NOBODY.to_string(), "--groups", groups])
        .arg(&*FACTLOG)
        .arg("serve")
        .arg(dir)
        .args(extra)
        .stderr(Stdio::null())
        .spawn()
        .expect("setpriv factlog serve");
    while !factlog::server::socket_path(dir).exists() {
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("factlog serve as nobody exited: {status}");
        }
        std::thread::yield_now();
    }
    child
}

#[test]
fn a_client_of_another_user_is_refused_unless_its_group_is_allowed() {
    if !can_switch_users() {
        eprintln!("skipped: switching users needs root and setpriv");
        return;
    }
    let temp = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(temp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let dir = temp.path().join("store");
    std::fs::create_dir(&dir).expect("store dir");
    std::os::unix::fs::chown(&dir, Some(NOBODY), Some(NOBODY)).expect("chown");

    let mut server = serve_as_nobody(&dir, &NOBODY.to_string(), &[]);
    // Root may open the 0600 socket, but its credentials are not the server's user.
    let mut conn = Conn::connect(&dir).expect("connect");
    let reply = conn.read().expect("a refusal");
    assert_eq!(reply["error"], "PERMISSION_DENIED", "{reply}");
    let message = reply["message"].as_str().unwrap_or_default();
    assert!(message.contains("runs as user 0") && message.contains("--allow-group"), "{message}");
    assert!(conn.read().is_none(), "disconnected");
    server.kill().expect("kill");
    server.wait().expect("reap");

    // The serving user must belong to the group it allows (it gives the socket to it).
    let mut server = serve_as_nobody(&dir, "0", &["--allow-group", "0"]);
    let mut conn = Conn::connect(&dir).expect("connect");
    conn.hello();
    let reply = conn.call(&json!({"id": 1, "task": "t", "type": "user/message", "text": "hi"}));
    assert_eq!(reply["revision"], 1, "{reply}");
    server.kill().expect("kill");
    server.wait().expect("reap");
}
