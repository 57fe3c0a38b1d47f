//! The local web console (feature `console`; `factlog ui`): a small HTTP server that shows a
//! store to a person and records their answers. A front end like the command: it reads the
//! store through the doors every reader uses and answers through
//! [`crate::harness::operator`], the rules every writer follows; it decides nothing itself.
//!
//! - [`mirror`]: the picture of the store (every task's folded state) and its live updates,
//!   kept by one reader thread that never holds the store (read-only opens of its files, or a
//!   client of the process that serves it).
//! - [`reads`]: bounded pages of one task's events.
//! - [`health`]: segments, snapshots, holder, replication lag.
//! - [`api`]: the JSON API; [`live`]: its server-sent events; [`assets`]: the embedded
//!   pages; [`routes`]: the routes; [`guard`]: what every request passes first (host,
//!   origin, token) and the security headers of every reply.
//! - [`token`]: the random token in the URL the console prints.
//!
//! [`serve`] binds, starts the reader and the server on threads of their own and returns at
//! once; it prints nothing. The console listens on loopback unless
//! [`ConsoleOptions::allow_remote`] says otherwise; with [`ConsoleOptions::read_only`] it
//! records no answer. `docs/console.md` describes the pages and the security model.
//!
//! ```no_run
//! let console = factlog::console::serve("/tmp/store", factlog::console::ConsoleOptions::new())?;
//! println!("{}", console.url());
//! console.shutdown();
//! # Ok::<(), factlog::console::ConsoleError>(())
//! ```

pub mod api;
pub mod assets;
pub mod guard;
pub mod health;
pub mod live;
pub mod mirror;
pub mod reads;
pub mod routes;
pub mod token;

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::sync::watch;

use mirror::Mirror;
use routes::App;
use token::Token;

/// How [`serve`] listens.
#[derive(Debug, Clone)]
pub struct ConsoleOptions {
    addr: SocketAddr,
    read_only: bool,
    allow_remote: bool,
}

impl Default for ConsoleOptions {
    fn default() -> ConsoleOptions {
        ConsoleOptions::new()
    }
}

impl ConsoleOptions {
    /// The defaults below.
    #[must_use]
    pub fn new() -> ConsoleOptions {
        ConsoleOptions {
            addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            read_only: false,
            allow_remote: false,
        }
    }

    /// The address to listen on; port 0 lets the system choose one. Default:
    /// `127.0.0.1:0`. An address that is not loopback needs [`ConsoleOptions::allow_remote`].
    #[must_use]
    pub fn addr(mut self, addr: SocketAddr) -> ConsoleOptions {
        self.addr = addr;
        self
    }

    /// Serve the pages without the operator's actions (every answer refused). Default: false.
    #[must_use]
    pub fn read_only(mut self, read_only: bool) -> ConsoleOptions {
        self.read_only = read_only;
        self
    }

    /// Accept an address that is not loopback: anyone who can reach it and has the token
    /// can read the store and, unless read-only, answer for its tasks (over plain HTTP).
    /// Default: false.
    #[must_use]
    pub fn allow_remote(mut self, allow_remote: bool) -> ConsoleOptions {
        self.allow_remote = allow_remote;
        self
    }
}

/// Why [`serve`] did not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConsoleError {
    /// The directory holds no store.
    NotAStore {
        /// The directory.
        dir: PathBuf,
    },
    /// The store could not be read.
    Store {
        /// The directory.
        dir: PathBuf,
        /// The library's error.
        source: crate::Error,
    },
    /// The address is not loopback and [`ConsoleOptions::allow_remote`] was not given.
    NotLoopback {
        /// The address.
        addr: SocketAddr,
    },
    /// Listening on the address failed (in use, not this machine's, not permitted).
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The system's error.
        source: std::io::Error,
    },
    /// The token or the server's runtime could not be made.
    Start {
        /// What failed.
        what: &'static str,
        /// The system's error.
        source: std::io::Error,
    },
}

impl fmt::Display for ConsoleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConsoleError::NotAStore { dir } => write!(
                f,
                "{} holds no factlog store (no segment files); check the directory",
                dir.display()
            ),
            ConsoleError::Store { dir, source } => {
                write!(f, "cannot read the store in {}: {source}", dir.display())
            }
            ConsoleError::NotLoopback { addr } => write!(
                f,
                "{addr} is not a loopback address: the console would be reachable from other \
                 machines; give --allow-remote to mean it, or listen on 127.0.0.1"
            ),
            ConsoleError::Bind { addr, source } => write!(
                f,
                "cannot listen on {addr}: {source}; choose another port (or port 0 for any)"
            ),
            ConsoleError::Start { what, source } => {
                write!(f, "cannot start the console: {what}: {source}")
            }
        }
    }
}

impl std::error::Error for ConsoleError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConsoleError::Store { source, .. } => Some(source),
            ConsoleError::Bind { source, .. } | ConsoleError::Start { source, .. } => Some(source),
            ConsoleError::NotAStore { .. } | ConsoleError::NotLoopback { .. } => None,
        }
    }
}

/// A running console: its address and token; [`Console::shutdown`] (or dropping it) stops it.
#[derive(Debug)]
pub struct Console {
    addr: SocketAddr,
    token: Arc<Token>,
    read_only: bool,
    mirror: Arc<Mirror>,
    stopping: watch::Sender<bool>,
    server: Option<JoinHandle<std::io::Result<()>>>,
    reader: Option<JoinHandle<()>>,
}

impl Console {
    /// The address it listens on (with the port the system chose).
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL to open, with the token.
    #[must_use]
    pub fn url(&self) -> String {
        let host = match self.addr.ip() {
            IpAddr::V6(ip) => format!("[{ip}]"),
            IpAddr::V4(ip) => ip.to_string(),
        };
        format!("http://{host}:{}/?token={}", self.addr.port(), self.token.as_str())
    }

    /// The token every API request carries.
    #[must_use]
    pub fn token(&self) -> &str {
        self.token.as_str()
    }

    /// Whether it listens on a loopback address only.
    #[must_use]
    pub fn is_loopback(&self) -> bool {
        self.addr.ip().is_loopback()
    }

    /// Whether it refuses the operator's actions.
    #[must_use]
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Whether the server is still running (it stops by itself only when it fails).
    #[must_use]
    pub fn is_running(&self) -> bool {
        self.server.as_ref().is_some_and(|server| !server.is_finished())
    }

    /// Stops the server (open live streams end) and the reader, and waits for both.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let _ = self.stopping.send(true);
        self.mirror.stop();
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts a console for the store in `dir` (module docs).
///
/// # Errors
///
/// [`ConsoleError`]: no store in `dir`, a store that cannot be read, an address refused or
/// in use, a system without a random device.
pub fn serve(dir: impl AsRef<Path>, options: ConsoleOptions) -> Result<Console, ConsoleError> {
    let dir = dir.as_ref();
    if !options.addr.ip().is_loopback() && !options.allow_remote {
        return Err(ConsoleError::NotLoopback { addr: options.addr });
    }
    if !holds_segments(dir) {
        return Err(ConsoleError::NotAStore { dir: dir.to_path_buf() });
    }
    let mirror = Arc::new(
        Mirror::open(dir)
            .map_err(|source| ConsoleError::Store { dir: dir.to_path_buf(), source })?,
    );
    let token = Arc::new(
        Token::generate()
            .map_err(|source| ConsoleError::Start { what: "reading /dev/urandom", source })?,
    );
    let bind = |source| ConsoleError::Bind { addr: options.addr, source };
    let listener = TcpListener::bind(options.addr).map_err(bind)?;
    listener.set_nonblocking(true).map_err(bind)?;
    let addr = listener.local_addr().map_err(bind)?;
    let hosts = if addr.ip().is_loopback() {
        // The address itself (`SocketAddr` writes an IPv6 one in brackets, as `Host` does),
        // and the names of loopback a browser may use for it.
        let port = addr.port();
        let mut hosts = vec![addr.to_string(), format!("localhost:{port}")];
        for name in [format!("127.0.0.1:{port}"), format!("[::1]:{port}")] {
            if !hosts.contains(&name) {
                hosts.push(name);
            }
        }
        hosts
    } else {
        Vec::new()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .thread_name("factlog-console")
        .build()
        .map_err(|source| ConsoleError::Start { what: "the server's runtime", source })?;
    let (stopping, stopping_receiver) = watch::channel(false);
    let app = App {
        mirror: Arc::clone(&mirror),
        token: Arc::clone(&token),
        read_only: options.read_only,
        hosts: Arc::new(hosts),
        stopping: stopping_receiver.clone(),
        live_streams: Arc::default(),
    };
    let reader = {
        let mirror = Arc::clone(&mirror);
        std::thread::Builder::new()
            .name("factlog-console-reader".to_owned())
            .spawn(move || mirror::run(&mirror))
            .map_err(|source| ConsoleError::Start { what: "the reader thread", source })?
    };
    let server = std::thread::Builder::new()
        .name("factlog-console".to_owned())
        .spawn(move || {
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                let mut stopped = stopping_receiver;
                axum::serve(listener, routes::router(app))
                    .with_graceful_shutdown(async move {
                        let _ = stopped.wait_for(|stopping| *stopping).await;
                    })
                    .await
            })
        })
        .map_err(|source| {
            mirror.stop();
            ConsoleError::Start { what: "the server thread", source }
        })?;
    Ok(Console {
        addr,
        token,
        read_only: options.read_only,
        mirror,
        stopping,
        server: Some(server),
        reader: Some(reader),
    })
}

/// Whether `dir` holds at least one segment file (what every command asks of a store it
/// reads).
fn holds_segments(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.filter_map(Result::ok).any(|entry| {
            entry.file_name().to_str().and_then(crate::engine::segment::parse_file_name).is_some()
        })
    })
}
