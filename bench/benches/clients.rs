//! Several processes, one store (issue 16, "Benchmark"; issue 29; `/work/shared/mission/
//! workload.md`, "Many sessions"): the machinery of `factlog bench --clients`
//! (`factlog_bench::compare::clients`, where the policies are described) run from a bench, whose
//! build has SQLite: for each N, N sessions of the agent-session workload under the policies
//! `served` (N client processes, this executable again, of one served store, durable-only
//! acknowledgements), `served-every` (the same, every line answered), `threads` (N
//! threads of one process on one store), `own-stores` (N processes with a store each) and
//! `sqlite` (N processes sharing one SQLite database in WAL mode), interleaved, on the real disk
//! (`target/tmp`). Printed: the command's table, with the ratios served / threads, served /
//! own-stores, sqlite / served and served-every / served at each N.
//!
//! Run with `cargo bench --bench clients` (N = 1, 8, 32; 10 turns a session; 3 runs).
//! Environment: `FACTLOG_CLIENTS` (a list such as `1,8`, each at most the server's client
//! bound), `FACTLOG_TURNS`, `FACTLOG_TOKENS` (fragments a step, to tell their cost from the
//! round trips'), `FACTLOG_RUNS`, and `FACTLOG_FORMS` (a list of policy names, to profile one
//! alone; a ratio is printed only when both its policies run).
//! Smoke test: `cargo bench --bench clients -- --test` (N = 1 and 3, one tiny turn, one run).

use factlog_bench::compare::clients::{self, ClientsWorkload, Launcher, POLICIES, Policy};
use factlog_bench::many;
use factlog_bench::workload::Shape;
use factlog_bench::{Failure, Observer};

const CLIENTS_DEFAULT: &str = "1,8,32";
const TURNS_DEFAULT: u32 = 10;
const RUNS_DEFAULT: usize = 3;
const TEST_CLIENTS: &str = "1,3";
const TEST_SHAPE: Shape = Shape { turns: 1, steps: 1, tokens: 2, ..Shape::DEFAULT };

/// Tells on standard error which measurement runs.
struct Said;

impl Observer for Said {
    fn start(&self, label: &str, total: u64) {
        eprintln!("{label}: {total} measurements");
    }

    fn relabel(&self, label: &str) {
        eprintln!("{label}");
    }

    fn advance(&self) {}
}

fn main() -> Result<(), Failure> {
    if std::env::var_os(clients::CLIENT_ROLE_ENV).is_some() {
        return clients::client_process();
    }
    let test = std::env::args().any(|arg| arg == "--test");
    let (list, shape, runs) = if test {
        (TEST_CLIENTS.to_owned(), TEST_SHAPE, 1)
    } else {
        let turns = many::env_number("FACTLOG_TURNS", TURNS_DEFAULT);
        let tokens = many::env_number("FACTLOG_TOKENS", Shape::DEFAULT.tokens);
        (
            std::env::var("FACTLOG_CLIENTS").unwrap_or_else(|_| CLIENTS_DEFAULT.to_owned()),
            Shape { turns, tokens, ..Shape::DEFAULT },
            many::env_number("FACTLOG_RUNS", RUNS_DEFAULT),
        )
    };
    let counts = clients::parse_counts(&list)
        .map_err(|error| Failure::usage(format_args!("FACTLOG_CLIENTS={list:?}: {error}")))?;
    let policies: Vec<Policy> = match std::env::var("FACTLOG_FORMS") {
        Ok(names) => names
            .split(',')
            .map(|name| {
                Policy::named(name.trim()).ok_or_else(|| {
                    Failure::usage(format_args!("FACTLOG_FORMS: no policy {name:?}"))
                })
            })
            .collect::<Result<_, _>>()?,
        Err(_) => POLICIES.to_vec(),
    };
    let dir = factlog_bench::temp_dir!("clients");
    let launcher = Launcher::this_executable(&[])?;
    let rows = clients::measure_all(
        counts.counts(),
        &policies,
        runs,
        shape,
        dir.path(),
        &launcher,
        &Said,
    )?;
    let workload = ClientsWorkload::new(shape, runs, counts.counts().to_vec(), policies);
    print!("{}", clients::table(&workload, &rows));
    Ok(())
}
