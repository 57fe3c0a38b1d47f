//! Synced appends from N client processes through a served store, against the same appends
//! from N threads of the process that holds the store, interleaved over several runs.
//!
//! `cargo run --release --example served_clients -- [CLIENTS] [APPENDS] [RUNS]`
//! (defaults 8, 200, 5). Each client appends APPENDS `user/message` events, each waiting for
//! `synced`, to a task of its own. Prints, per form, the median wall time and aggregate
//! events/s over the runs, and the ratio of the medians (processes / threads).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use factlog::client::Client;
use factlog::harness::Body;
use factlog::harness::event::UserMessage;
use factlog::server::ServeOptions;
use factlog::{AppendOptions, Durability, Store, StoreOptions};

const ROLE: &str = "FACTLOG_SERVED_CLIENTS_ROLE";

fn body() -> Body {
    Body::UserMessage(UserMessage { text: "a message".to_owned(), extra: Default::default() })
}

fn synced() -> AppendOptions {
    AppendOptions { durability: Some(Durability::Synced), ..AppendOptions::default() }
}

/// A client process: connect and append `appends` synced events to `task`.
fn client(dir: &str, task: &str, appends: u64) {
    let mut client = Client::connect(dir).expect("connect");
    for _ in 0..appends {
        client.append(task, &body(), synced()).expect("append");
    }
}

fn processes(dir: &Path, run: usize, clients: usize, appends: u64) -> f64 {
    let store = Store::open(dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let exe = std::env::current_exe().expect("this executable");
    let start = Instant::now();
    let children: Vec<_> = (0..clients)
        .map(|i| {
            Command::new(&exe)
                .env(ROLE, format!("{} p{run}-{i} {appends}", dir.display()))
                .stdout(Stdio::null())
                .spawn()
                .expect("spawn a client")
        })
        .collect();
    for mut child in children {
        assert!(child.wait().expect("wait").success(), "a client failed");
    }
    let seconds = start.elapsed().as_secs_f64();
    drop(server);
    store.close().expect("close");
    seconds
}

fn threads(dir: &Path, run: usize, clients: usize, appends: u64) -> f64 {
    let store = Store::open(dir, StoreOptions::new()).expect("open");
    let start = Instant::now();
    std::thread::scope(|scope| {
        for i in 0..clients {
            let task = store.task(&format!("t{run}-{i}")).expect("task");
            scope.spawn(move || {
                for _ in 0..appends {
                    task.append_with(body(), synced()).expect("append");
                }
            });
        }
    });
    let seconds = start.elapsed().as_secs_f64();
    store.close().expect("close");
    seconds
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    if let Ok(role) = std::env::var(ROLE) {
        let parts: Vec<&str> = role.split(' ').collect();
        client(parts[0], parts[1], parts[2].parse().expect("appends"));
        return;
    }
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().expect("a number")).collect();
    let clients = args.first().copied().unwrap_or(8);
    let appends = args.get(1).copied().unwrap_or(200) as u64;
    let runs = args.get(2).copied().unwrap_or(5);
    let temp = tempfile::tempdir().expect("temporary directory");
    let (mut served, mut local) = (Vec::new(), Vec::new());
    for run in 0..runs {
        // Interleaved, each form in a fresh store.
        served.push(processes(&temp.path().join(format!("p{run}")), run, clients, appends));
        local.push(threads(&temp.path().join(format!("t{run}")), run, clients, appends));
    }
    let events = (clients as u64 * appends) as f64;
    let (served, local) = (median(&mut served), median(&mut local));
    println!("{clients} clients x {appends} synced appends, median of {runs} interleaved runs:");
    println!("  processes via the socket: {served:.3} s, {:.0} events/s", events / served);
    println!("  threads in one process:   {local:.3} s, {:.0} events/s", events / local);
    println!("  ratio (processes / threads): {:.2}", served / local);
}
