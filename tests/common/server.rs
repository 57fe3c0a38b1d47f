//! Served-store helpers (`format-spec/server.md`): a `factlog serve DIR` child process, raw
//! socket connections that speak the line protocol byte by byte, and the test's own
//! executable re-run as a client process.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use super::FACTLOG;

/// The environment variable that makes a test executable run as a client process.
pub const CHILD_ROLE: &str = "FACTLOG_TEST_CHILD_ROLE";

/// A `factlog serve DIR` process, killed on drop if still running.
pub struct Served {
    pub child: Child,
    pub dir: PathBuf,
}

impl Served {
    /// Starts `factlog serve DIR EXTRA..` and waits until a hello is answered.
    pub fn start(dir: &Path, extra: &[&str]) -> Served {
        let child = Command::new(&*FACTLOG)
            .arg("serve")
            .arg(dir)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start factlog serve");
        let mut served = Served { child, dir: dir.to_owned() };
        served.wait_ready();
        served
    }

    /// Waits until the server answers a hello (or fails the test if it exited).
    pub fn wait_ready(&mut self) {
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                panic!("factlog serve exited before serving: {status}");
            }
            if let Ok(mut conn) = Conn::connect(&self.dir) {
                conn.hello();
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    pub fn socket(&self) -> PathBuf {
        factlog::server::socket_path(&self.dir)
    }

    /// Sends SIGTERM and waits; returns the exit code and standard error.
    pub fn terminate(mut self) -> (Option<i32>, String) {
        signal(self.child.id(), "TERM");
        let output = std::mem::replace(
            &mut self.child,
            Command::new("true").spawn().expect("a placeholder child"),
        )
        .wait_with_output()
        .expect("wait for factlog serve");
        (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
    }

    /// Sends SIGKILL and reaps the process.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap");
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends `SIG{name}` to process `pid` through kill(1).
pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill").arg(format!("-{name}")).arg(pid.to_string()).status();
    assert!(status.expect("run kill").success(), "kill -{name} {pid}");
}

/// A raw connection: lines out, lines in.
pub struct Conn {
    pub stream: UnixStream,
    pub reader: BufReader<UnixStream>,
}

impl Conn {
    pub fn connect(dir: &Path) -> std::io::Result<Conn> {
        let stream = UnixStream::connect(factlog::server::socket_path(dir))?;
        let reader = BufReader::new(stream.try_clone()?);
        Ok(Conn { stream, reader })
    }

    /// Sends the hello and returns the server's reply.
    pub fn hello(&mut self) -> Value {
        self.send(&json!({ "hello": "factlog", "version": 1 }));
        let reply = self.read().expect("a hello reply");
        assert_eq!(reply["hello"], "factlog", "{reply}");
        reply
    }

    pub fn send(&mut self, line: &Value) {
        self.send_raw(format!("{line}\n").as_bytes());
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write to the server");
    }

    /// The next reply line, `None` at the end of the connection.
    pub fn read(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(serde_json::from_str(&line).expect("a JSON reply line")),
        }
    }

    /// Sends `line` and returns its reply.
    pub fn call(&mut self, line: &Value) -> Value {
        self.send(line);
        self.read().expect("a reply")
    }
}

/// Runs this test executable again as a client process: only the test `entry` runs, with
/// `CHILD_ROLE` set to `role` and `args` in `FACTLOG_TEST_CHILD_ARGS` (space-separated).
pub fn spawn_child(entry: &str, role: &str, args: &[String]) -> Child {
    Command::new(std::env::current_exe().expect("the test executable"))
        .args([entry, "--exact", "--nocapture", "--test-threads", "1"])
        .env(CHILD_ROLE, role)
        .env("FACTLOG_TEST_CHILD_ARGS", args.join(" "))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a client process")
}

/// The role and arguments of this process when it runs as a client, else `None`.
pub fn child_role() -> Option<(String, Vec<String>)> {
    let role = std::env::var(CHILD_ROLE).ok()?;
    let args = std::env::var("FACTLOG_TEST_CHILD_ARGS").unwrap_or_default();
    Some((role, args.split(' ').filter(|a| !a.is_empty()).map(str::to_owned).collect()))
}

/// A fresh store directory, mode 0700 (a served store's directory must not be writable by
/// others).
pub fn store_dir() -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::tempdir().expect("temporary directory");
    let dir = temp.path().join("store");
    std::fs::create_dir(&dir).expect("store dir");
    (temp, dir)
}

/// The texts of `task`'s `assistant/delta` events in `store`, in log order.
pub fn delta_texts(store: &factlog::Store, task: &str) -> Vec<String> {
    store
        .events(factlog::Seq(1))
        .expect("events")
        .map(|event| event.expect("event"))
        .filter(|event| event.task.as_str() == task)
        .filter_map(|event| match event.body {
            factlog::harness::Body::AssistantDelta(delta) => Some(delta.text),
            _ => None,
        })
        .collect()
}

/// The hello reply of a fake server of an earlier release: no `texts`, no `acks`.
pub const FAKE_HELLO_REPLY: &str = r#"{"hello":"factlog","version":1,"protocol":1,"pid":1}"#;

/// A fake server on `socket`: it reads the hello and answers `hello_reply` (a line without
/// its newline), then gives each request line (parsed) to `answer`, which returns the reply
/// line (without its newline) or `None` to close the connection. The thread returns the hello
/// line it read and the request lines, without their newlines.
pub fn fake_server(
    socket: &Path,
    hello_reply: &str,
    mut answer: impl FnMut(&Value) -> Option<String> + Send + 'static,
) -> std::thread::JoinHandle<(String, Vec<String>)> {
    let listener = std::os::unix::net::UnixListener::bind(socket).expect("bind");
    let hello_reply = format!("{hello_reply}\n");
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().expect("accept");
        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
        let mut writer = stream;
        let mut hello = String::new();
        reader.read_line(&mut hello).expect("hello");
        writer.write_all(hello_reply.as_bytes()).expect("hello reply");
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).expect("read") == 0 {
                return (hello.trim_end().to_owned(), lines);
            }
            let request: Value = serde_json::from_str(&line).expect("json");
            lines.push(line.trim_end().to_owned());
            let Some(reply) = answer(&request) else {
                return (hello.trim_end().to_owned(), lines);
            };
            writer.write_all(format!("{reply}\n").as_bytes()).expect("reply");
        }
    })
}

/// A fake server's answer to a request line: the written reply of a fragment (no `id`) or a
/// `revision` reply (with one), the `n`-th line answered (from 1).
pub fn fake_written_reply(request: &Value, n: usize) -> String {
    match request.get("id") {
        Some(id) => format!("{{\"id\":{id},\"task\":\"t\",\"revision\":{n}}}"),
        None => {
            format!("{{\"seq\":{n},\"task\":\"t\",\"revision\":{n},\"durability\":\"buffered\"}}")
        }
    }
}
