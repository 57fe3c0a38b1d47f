//! The command's package builds the `factlog` binary that every test of the workspace runs
//! (the library's tests find it beside their own executables), and it is this package's:
//! `factlog --version` names this package's version and `factlog --help` lists the commands.
//! Without a test of its own here, `cargo test` would not build the binary at all.

use std::process::Command;

#[test]
fn the_binary_is_this_package_and_lists_its_commands() {
    let version = Command::new(env!("CARGO_BIN_EXE_factlog"))
        .arg("--version")
        .output()
        .expect("run factlog --version");
    assert!(version.status.success(), "{version:?}");
    let text = String::from_utf8(version.stdout).expect("UTF-8");
    assert_eq!(text.trim(), format!("factlog {}", env!("CARGO_PKG_VERSION")));

    let help = Command::new(env!("CARGO_BIN_EXE_factlog"))
        .arg("--help")
        .output()
        .expect("run factlog --help");
    assert!(help.status.success(), "{help:?}");
    let text = String::from_utf8(help.stdout).expect("UTF-8");
    for command in ["emit", "serve", "recover", "verify", "salvage", "restore", "replicas", "demo"]
    {
        assert!(text.contains(command), "--help does not list {command}:\n{text}");
    }
}
