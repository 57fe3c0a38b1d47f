//! A real S3-protocol server for tests: `s3s-fs`, installed at a pinned version by
//! `.ci/s3-server`, started on a free loopback port with a temporary data directory and
//! credentials of its own, and killed when dropped.
//!
//! The binary is `$FACTLOG_S3_SERVER`, or where `.ci/s3-server` installs it by default. When it
//! is missing a test is skipped with a message, unless `FACTLOG_S3_REQUIRED` is set (as
//! `.ci/run` sets it), which makes the missing server a failure.

use std::io::Write;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use factlog::replica::{ObjectOptions, ObjectRemote};

/// The `s3s-fs` version `.ci/s3-server` installs.
pub const S3S_FS_VERSION: &str = "0.14.1";
/// The bucket every test server has.
pub const BUCKET: &str = "factlog-test";
/// The server's access key.
pub const ACCESS_KEY: &str = "factlog-test-key";
/// The server's secret key.
pub const SECRET_KEY: &str = "factlog-test-secret";

/// Where the server binary is: `$FACTLOG_S3_SERVER`, else `.ci/s3-server`'s default place.
fn server_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("FACTLOG_S3_SERVER") {
        return Some(PathBuf::from(path)).filter(|p| p.is_file());
    }
    let cache = std::env::var_os("FACTLOG_TOOLS_DIR").map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/factlog-tools"))
    })?;
    let path = cache.join(format!("s3s-fs-{S3S_FS_VERSION}/bin/s3s-fs"));
    path.is_file().then_some(path)
}

/// A running `s3s-fs` with one bucket, [`BUCKET`].
pub struct S3Server {
    binary: PathBuf,
    port: u16,
    data: tempfile::TempDir,
    child: Option<Child>,
}

impl S3Server {
    /// Starts a server, or returns `None` (after saying why) when the binary is missing and
    /// `FACTLOG_S3_REQUIRED` is unset.
    ///
    /// # Panics
    ///
    /// When the binary is missing and `FACTLOG_S3_REQUIRED` is set, or the server does not
    /// start.
    #[must_use]
    pub fn start(test: &str) -> Option<S3Server> {
        let Some(binary) = server_binary() else {
            let missing = format!(
                "no S3 server (s3s-fs {S3S_FS_VERSION}): run `bash .ci/s3-server` to install it, \
                 or set FACTLOG_S3_SERVER to its binary"
            );
            assert!(
                std::env::var_os("FACTLOG_S3_REQUIRED").is_none(),
                "{test}: {missing} (FACTLOG_S3_REQUIRED is set, so this is a failure)"
            );
            // Written to the process's stderr, not through the test harness's capture, so
            // that the skip shows in a plain `cargo test`.
            let _ = writeln!(std::io::stderr(), "{test}: skipped: {missing}");
            return None;
        };
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|listener| listener.local_addr())
            .expect("a free loopback port")
            .port();
        let data = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(data.path().join("root").join(BUCKET)).expect("bucket dir");
        let mut server = S3Server { binary, port, data, child: None };
        server.restart();
        Some(server)
    }

    /// The endpoint URL, `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL), as a crash would; its data stays.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server (again) on the same port and data, and waits until it accepts
    /// connections.
    ///
    /// # Panics
    ///
    /// When it exits or does not accept connections within 20 s.
    pub fn restart(&mut self) {
        self.kill();
        let log = std::fs::File::create(self.data.path().join("server.log")).expect("log");
        let child = Command::new(&self.binary)
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(self.data.path().join("root"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.binary.display()));
        self.child = Some(child);
        for _ in 0..400 {
            if TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)).is_ok() {
                return;
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                let log = std::fs::read_to_string(self.data.path().join("server.log"));
                panic!("s3s-fs exited at start ({status}): {}", log.unwrap_or_default());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("s3s-fs did not accept connections on port {} within 20 s", self.port);
    }

    /// The settings that point an [`ObjectRemote`] at this server with `secret` as its secret
    /// key.
    fn settings(&self, secret: &str) -> Vec<(&'static str, String)> {
        vec![
            ("aws_endpoint", self.endpoint()),
            ("aws_allow_http", "true".to_owned()),
            ("aws_region", "us-east-1".to_owned()),
            ("aws_access_key_id", ACCESS_KEY.to_owned()),
            ("aws_secret_access_key", secret.to_owned()),
        ]
    }

    /// A remote at `s3://BUCKET/PREFIX` on this server, with the right credentials.
    #[must_use]
    pub fn remote(&self, prefix: &str, options: ObjectOptions) -> ObjectRemote {
        self.remote_with_secret(prefix, SECRET_KEY, options).expect("open the remote")
    }

    /// A remote at `s3://BUCKET/PREFIX` on this server, signing with `secret`.
    ///
    /// # Errors
    ///
    /// Those of [`ObjectRemote::open`].
    pub fn remote_with_secret(
        &self,
        prefix: &str,
        secret: &str,
        options: ObjectOptions,
    ) -> factlog::Result<ObjectRemote> {
        let settings = self.settings(secret);
        let settings: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
        ObjectRemote::open(&format!("s3://{BUCKET}/{prefix}"), &settings, options)
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Bounds small enough that a dead server fails a call (and a replication round) quickly.
#[must_use]
pub fn quick() -> ObjectOptions {
    ObjectOptions::default()
        .request_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(1))
        .retries_max(1)
        .call_timeout(Duration::from_secs(5))
}
