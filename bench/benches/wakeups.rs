//! What one awaited round trip costs on this machine before any storage work: the floor under
//! a served store's awaited requests (`docs/performance.md`, "What an awaited request costs").
//!
//! `cargo bench -p factlog-bench --bench wakeups` (`-- --test`: a smoke run of 200 round trips,
//! one run). A requester sends 64 bytes and waits for a 64-byte answer, `ROUND_TRIPS` times, in
//! four forms, interleaved over `FACTLOG_RUNS` runs (default 5), with `FACTLOG_PAIRS`
//! requester/answerer pairs at once (default `1,8`):
//! - `processes, socket`: the answerer is another process, on a Unix stream socket (what a
//!   client of a served store and the server do for each awaited request);
//! - `processes, poll`: as `processes, socket`, the requester waiting for its answer with
//!   `poll` before its read (what `factlog::client::Client` does);
//! - `threads, socket`: the answerer is a thread of the same process, on a Unix stream socket;
//! - `threads, condvar`: the answerer is a thread of the same process, waking the requester
//!   through a mutex and condition variable (what a thread waiting for a group commit does).
//!
//! Prints, per form and pair count, the medians over the runs of the wall time per round trip
//! and the processor time per round trip (requester and answerer, user and system), and the
//! ratios of the processes' figures to the threads'.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::time::Instant;

use factlog_bench::events::median;
use factlog_bench::many::{self, Usage};
use parking_lot::{Condvar, Mutex};

/// Round trips per pair and run.
const ROUND_TRIPS: u64 = 20_000;
/// Round trips per pair of the smoke run (`--test`).
const SMOKE_ROUND_TRIPS: u64 = 200;
/// The environment variable that makes this executable an answering process (the socket's
/// path).
const ANSWER_ENV: &str = "FACTLOG_WAKEUPS_ANSWER";
/// Bytes of each message.
const MESSAGE: usize = 64;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Form {
    Processes,
    ProcessesPoll,
    ThreadsSocket,
    ThreadsCondvar,
}

impl Form {
    const ALL: [Form; 4] =
        [Form::Processes, Form::ProcessesPoll, Form::ThreadsSocket, Form::ThreadsCondvar];

    fn name(self) -> &'static str {
        match self {
            Form::Processes => "processes, socket",
            Form::ProcessesPoll => "processes, poll",
            Form::ThreadsSocket => "threads, socket",
            Form::ThreadsCondvar => "threads, condvar",
        }
    }
}

/// One run's figures: wall and processor nanoseconds per round trip.
#[derive(Clone, Copy, Debug)]
struct Figures {
    wall_ns: f64,
    cpu_ns: f64,
}

fn main() {
    if let Ok(path) = std::env::var(ANSWER_ENV) {
        answer_process(&path);
        return;
    }
    let smoke = std::env::args().any(|arg| arg == "--test");
    if !smoke && !std::env::args().any(|arg| arg == "--bench") {
        // `cargo test --benches` runs this with no `--bench`: nothing to measure.
        return;
    }
    let trips = if smoke { SMOKE_ROUND_TRIPS } else { ROUND_TRIPS };
    let runs: usize = if smoke { 1 } else { many::env_number("FACTLOG_RUNS", 5) };
    let pairs: Vec<usize> = std::env::var("FACTLOG_PAIRS")
        .unwrap_or_else(|_| if smoke { "1,2" } else { "1,8" }.to_owned())
        .split(',')
        .map(|word| word.trim().parse().expect("FACTLOG_PAIRS: a list of whole numbers"))
        .collect();
    let mut figures: Vec<(usize, Form, Vec<Figures>)> = Vec::new();
    for &n in &pairs {
        for form in Form::ALL {
            figures.push((n, form, Vec::new()));
        }
    }
    for run in 0..runs {
        // Rotated order, so that no form always runs first.
        let count = figures.len();
        for k in 0..count {
            let (n, form, list) = &mut figures[(k + run) % count];
            list.push(measure(*form, *n, trips));
        }
        eprintln!("run {}/{runs} done", run + 1);
    }
    println!("{trips} round trips of {MESSAGE} bytes per pair, medians of {runs} interleaved runs");
    println!("{:>5} {:<20} {:>14} {:>14}", "pairs", "form", "wall us/rt", "cpu us/rt");
    let mut by_key = std::collections::HashMap::new();
    for (n, form, list) in &figures {
        let wall = median(list.iter().map(|f| f.wall_ns).collect()) / 1e3;
        let cpu = median(list.iter().map(|f| f.cpu_ns).collect()) / 1e3;
        by_key.insert((*n, *form), (wall, cpu));
        println!("{n:>5} {:<20} {wall:>14.2} {cpu:>14.2}", form.name());
    }
    for &n in &pairs {
        let (pw, pc) = by_key[&(n, Form::Processes)];
        let (sw, sc) = by_key[&(n, Form::ThreadsSocket)];
        let (cw, cc) = by_key[&(n, Form::ThreadsCondvar)];
        println!(
            "{n:>5} processes / threads, socket: wall {:.2}x, cpu {:.2}x; processes / threads, \
             condvar: wall {:.2}x, cpu {:.2}x",
            pw / sw,
            pc / sc,
            pw / cw,
            pc / cc
        );
    }
}

/// One run of `form` with `pairs` pairs at once.
fn measure(form: Form, pairs: usize, trips: u64) -> Figures {
    match form {
        Form::Processes => processes(pairs, trips, false),
        Form::ProcessesPoll => processes(pairs, trips, true),
        Form::ThreadsSocket | Form::ThreadsCondvar => threads(form, pairs, trips),
    }
}

fn processes(pairs: usize, trips: u64, poll: bool) -> Figures {
    let total = trips * pairs as u64;
    let dir = tempfile::tempdir().expect("a scratch directory");
    let path = dir.path().join("answer.sock");
    let listener = UnixListener::bind(&path).expect("bind");
    let exe = std::env::current_exe().expect("this executable");
    let children: Vec<std::process::Child> = (0..pairs)
        .map(|_| {
            std::process::Command::new(&exe)
                .env(ANSWER_ENV, &path)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("an answering process")
        })
        .collect();
    let streams: Vec<UnixStream> =
        (0..pairs).map(|_| listener.accept().expect("accept").0).collect();
    let before = Usage::now();
    let start = Instant::now();
    std::thread::scope(|scope| {
        for stream in streams {
            scope.spawn(move || ask(stream, trips, poll));
        }
    });
    let wall = start.elapsed();
    let mut cpu = Usage::now().since(before).cpu_ns;
    for child in children {
        let output = child.wait_with_output().expect("the answering process");
        let said = String::from_utf8_lossy(&output.stdout);
        cpu += said.trim().parse::<u64>().expect("the answerer's processor time");
    }
    Figures { wall_ns: wall.as_nanos() as f64 / total as f64, cpu_ns: cpu as f64 / total as f64 }
}

/// Sends `trips` messages on `stream`, each after the answer to the one before (waiting for it
/// with `poll` first when `poll`), then closes it.
fn ask(mut stream: UnixStream, trips: u64, poll: bool) {
    use rustix::event::{PollFd, PollFlags};
    let mut message = [7_u8; MESSAGE];
    for _ in 0..trips {
        stream.write_all(&message).expect("send");
        if poll {
            let mut fds = [PollFd::new(&stream, PollFlags::IN)];
            while let Err(errno) = rustix::event::poll(&mut fds, None) {
                assert_eq!(errno, rustix::io::Errno::INTR, "poll");
            }
        }
        stream.read_exact(&mut message).expect("answer");
    }
}

/// Answers every message on `stream` until it closes.
fn answer(mut stream: UnixStream) {
    let mut message = [0_u8; MESSAGE];
    while stream.read_exact(&mut message).is_ok() {
        stream.write_all(&message).expect("answer");
    }
}

/// The body of an answering process: answers on the socket at `path`, then prints the processor
/// time its answering took.
fn answer_process(path: &str) {
    let stream = UnixStream::connect(path).expect("connect");
    let before = Usage::now();
    answer(stream);
    println!("{}", Usage::now().since(before).cpu_ns);
}

fn threads(form: Form, pairs: usize, trips: u64) -> Figures {
    let total = trips * pairs as u64;
    let before = Usage::now();
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..pairs {
            if form == Form::ThreadsSocket {
                let (asker, answerer) = UnixStream::pair().expect("a socket pair");
                scope.spawn(move || answer(answerer));
                scope.spawn(move || ask(asker, trips, false));
            } else {
                let slot = Arc::new((Mutex::new((0_u64, 0_u64)), Condvar::new()));
                let answering = Arc::clone(&slot);
                scope.spawn(move || {
                    let (lock, wake) = &*answering;
                    let mut state = lock.lock();
                    for i in 1..=trips {
                        while state.0 < i {
                            wake.wait(&mut state);
                        }
                        state.1 = i;
                        wake.notify_all();
                    }
                });
                scope.spawn(move || {
                    let (lock, wake) = &*slot;
                    let mut state = lock.lock();
                    for i in 1..=trips {
                        state.0 = i;
                        wake.notify_all();
                        while state.1 < i {
                            wake.wait(&mut state);
                        }
                    }
                });
            }
        }
    });
    let wall = start.elapsed();
    let cpu = Usage::now().since(before).cpu_ns;
    Figures { wall_ns: wall.as_nanos() as f64 / total as f64, cpu_ns: cpu as f64 / total as f64 }
}
