//! `factlog bench --sessions LIST`: the many-session form of the agent-session workload
//! (`/work/shared/mission/workload.md`, "Many sessions"). For each N of the list, N threads of
//! one process run one session each, on a task of their own, under four policies: the typed
//! store shared by the N threads (`factlog`), the raw log given the same records with the same
//! durabilities (`log`), one JSONL file per session synced at its critical events
//! (`jsonl-per-session`) and the per-session-file floor (`floor`).
//!
//! Before the runs, one untimed session of N tasks through the typed store (the reference, also
//! a warm-up) gives the raw log its records and the floor its bytes, and the floor's files are
//! preallocated and synced. Each run then measures every N and every policy once: the list of
//! N in an order rotated from run to run, and within each N the policies rotated too, so that a
//! slow spell of the shared disk does not fall on one of them only. The ratio to the floor is
//! taken within each run, between measurements of the same N.

use std::fs::File;
use std::path::Path;

use super::policies::{self, JsonlFiles, JsonlSync, LoggedSession, Measured, StoreMode};
use super::sessions_report::{self, Row, SessionsWorkload};
use super::{BenchArgs, Scratch, SvgFile, failed};
use crate::workload::{self, Line, Session, Shape};
use crate::{Failure, Observer, print};

/// The most sessions one N may run: one thread each, and the floor preallocates a file each.
pub const SESSIONS_MAX: usize = 1024;

/// The most entries of a `--sessions` list: each is measured once per run under every
/// policy.
pub const SESSION_COUNTS_MAX: usize = 16;

/// Turns per session with `--sessions` unless `--turns` says otherwise: 10, as the issue's
/// own many-session measurement used, so that N = 128 stays within seconds a run.
pub const TURNS_DEFAULT: u32 = 10;

/// The N of a `--sessions` list: distinct, each 1 to [`SESSIONS_MAX`], in ascending order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCounts(Vec<usize>);

/// Parses a `--sessions` list: comma-separated counts of sessions, such as `1,8,32,128`.
pub fn parse_counts(text: &str) -> Result<SessionCounts, String> {
    let mut counts = Vec::new();
    for entry in text.split(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            return Err(format!(
                "{text:?} has an empty entry; give comma-separated counts such as 1,8,32,128"
            ));
        }
        let count: usize = entry.parse().map_err(|_| {
            format!("{entry:?} is not a count of sessions; give whole numbers such as 1,8,32,128")
        })?;
        if !(1..=SESSIONS_MAX).contains(&count) {
            return Err(format!("{count} sessions: each count must be 1 to {SESSIONS_MAX}"));
        }
        if counts.contains(&count) {
            return Err(format!("{count} is listed twice"));
        }
        counts.push(count);
    }
    if counts.len() > SESSION_COUNTS_MAX {
        return Err(format!(
            "at most {SESSION_COUNTS_MAX} counts of sessions, not {}",
            counts.len()
        ));
    }
    counts.sort_unstable();
    Ok(SessionCounts(counts))
}

/// The policies of the many-session form, in the order they are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    Factlog,
    Log,
    JsonlPerSession,
    Floor,
}

const POLICIES: [Policy; 4] =
    [Policy::Factlog, Policy::Log, Policy::JsonlPerSession, Policy::Floor];

impl Policy {
    fn name(self) -> &'static str {
        match self {
            Policy::Factlog => "factlog",
            Policy::Log => "log",
            Policy::JsonlPerSession => "jsonl-per-session",
            Policy::Floor => "floor",
        }
    }

    fn note(self) -> &'static str {
        match self {
            Policy::Factlog => {
                "one Store shared by the N threads, each type's default tier; each step closed \
                 by one batch of tool/result + step/end"
            }
            Policy::Log => {
                "one raw Log shared by the N threads: the records the store encoded, each \
                 append (a step's close as one batch) with the durability the store gave it"
            }
            Policy::JsonlPerSession => {
                "one JSONL file per session, one write per line, fdatasync after tool/call, \
                 tool/result and turn/end"
            }
            Policy::Floor => {
                "one preallocated, synced file per session: pwrite+fdatasync at each critical \
                 event of the bytes the log framed for that session since the previous one"
            }
        }
    }
}

/// What the runs of one N share, made before the runs.
struct Prepared {
    /// The sessions, one per task.
    sessions: Vec<Session>,
    /// Their JSONL lines.
    lines: Vec<Vec<Line>>,
    /// Their records as the typed store encoded them, and the appends that wrote them.
    logged: Vec<LoggedSession>,
    /// Per session, the bytes the floor writes before each `fdatasync`.
    floor_chunks: Vec<Vec<u64>>,
    /// Per session, the floor's preallocated file.
    floor_files: Vec<File>,
}

/// Runs `factlog bench --sessions`: measures every N under every policy, prints the report,
/// then writes the chart.
pub(super) fn run(
    args: &BenchArgs,
    counts: &SessionCounts,
    shape: Shape,
    observer: &dyn Observer,
) -> Result<(), Failure> {
    let svg_file = args.svg.as_deref().map(SvgFile::open).transpose()?;
    let scratch = Scratch::new(args.dir.as_deref())?;
    let runs = args.runs as usize;
    let measurements = (counts.0.len() * (1 + runs * POLICIES.len())) as u64;
    observer.start("bench: reference runs", measurements);
    let rows = measure_all(&counts.0, runs, shape, &scratch, observer)?;
    let workload = SessionsWorkload {
        turns: shape.turns,
        steps: shape.steps,
        tokens: shape.tokens,
        delta_bytes: shape.delta_bytes,
        result_bytes: shape.result_bytes,
        runs,
        sessions: counts.0.clone(),
        events_per_session: shape.events(),
        critical_events_per_session: u64::from(shape.turns) * (2 * u64::from(shape.steps) + 1),
    };
    let text = if args.json {
        format!("{}\n", sessions_report::json(&workload, &rows))
    } else {
        sessions_report::table(&workload, &rows)
    };
    // The report goes out first, as in the single-session form: a chart that cannot be
    // written must not take the figures with it.
    let printed = print(&text);
    let charted = match svg_file {
        Some(file) => file.write(&sessions_report::svg(&workload, &rows)),
        None => Ok(()),
    };
    printed.and(charted)
}

/// Prepares every N, then measures every run; one row per N and policy, N ascending.
fn measure_all(
    counts: &[usize],
    runs: usize,
    shape: Shape,
    scratch: &Scratch,
    observer: &dyn Observer,
) -> Result<Vec<Row>, Failure> {
    let mut prepared = Vec::with_capacity(counts.len());
    for &n in counts {
        observer.relabel(&format!("bench: reference run of {n} sessions"));
        prepared.push(prepare(n, shape, &scratch.path.join(format!("n{n}"))).map_err(failed)?);
        observer.advance();
    }
    // Per N, per policy (in report order), one measurement per run.
    let mut measured: Vec<Vec<Vec<Measured>>> =
        vec![vec![Vec::with_capacity(runs); POLICIES.len()]; counts.len()];
    for run in 0..runs {
        for i in 0..counts.len() {
            let which = (i + run) % counts.len();
            let n = counts[which];
            for k in 0..POLICIES.len() {
                let index = (k + run) % POLICIES.len();
                let policy = POLICIES[index];
                observer.relabel(&format!(
                    "bench run {}/{runs}: {n} sessions, {}",
                    run + 1,
                    policy.name()
                ));
                let dir = scratch.path.join(format!("run{run}-n{n}-{}", policy.name()));
                let m = measure(policy, &dir, &prepared[which]).map_err(failed)?;
                measured[which][index].push(m);
                observer.advance();
            }
        }
    }
    let floor_index = POLICIES.iter().position(|&p| p == Policy::Floor).unwrap_or(0);
    let mut rows = Vec::with_capacity(counts.len() * POLICIES.len());
    for (&n, per_policy) in counts.iter().zip(measured) {
        let floor: Vec<_> = per_policy[floor_index].iter().map(|m| m.elapsed).collect();
        for (&policy, runs) in POLICIES.iter().zip(per_policy) {
            rows.push(Row {
                sessions: n,
                policy: policy.name(),
                note: policy.note(),
                runs,
                floor: floor.clone(),
            });
        }
    }
    Ok(rows)
}

/// The sessions of one N, the reference run through the typed store in `dir` (removed
/// afterwards), and the floor's files under it.
fn prepare(n: usize, shape: Shape, dir: &Path) -> Result<Prepared, String> {
    let sessions: Vec<Session> = (0..n).map(|i| workload::session(shape, i as u64 + 1)).collect();
    let reference_dir = dir.join("reference");
    let reference = policies::reference(&reference_dir, sessions.clone())?;
    // The store directory holds a whole segment and its preallocation: not kept for the runs.
    let _ = std::fs::remove_dir_all(&reference_dir);
    let logged: Vec<LoggedSession> = sessions
        .iter()
        .zip(reference.records)
        .map(|(session, records)| LoggedSession::new(session, records))
        .collect::<Result<_, _>>()?;
    let floor_chunks: Vec<Vec<u64>> = logged.iter().map(LoggedSession::synced_chunks).collect();
    let floor_dir = dir.join("floor");
    std::fs::create_dir_all(&floor_dir)
        .map_err(|error| format!("cannot create {}: {error}", floor_dir.display()))?;
    let floor_files = floor_chunks
        .iter()
        .enumerate()
        .map(|(i, chunks)| {
            let bytes = chunks.iter().sum::<u64>().next_multiple_of(1 << 16);
            policies::preallocated_file(&floor_dir.join(format!("session-{i}.bin")), bytes)
        })
        .collect::<Result<_, _>>()?;
    Ok(Prepared {
        lines: sessions.iter().map(workload::jsonl_lines).collect(),
        sessions,
        logged,
        floor_chunks,
        floor_files,
    })
}

/// One timed measurement of `policy` on the N sessions of `prepared`, in the fresh directory
/// `dir` when it needs one (removed afterwards).
fn measure(policy: Policy, dir: &Path, prepared: &Prepared) -> Result<Measured, String> {
    match policy {
        Policy::Factlog => policies::store(dir, prepared.sessions.clone(), StoreMode::Tiers),
        Policy::Log => policies::raw_tiered(dir, &prepared.logged),
        Policy::JsonlPerSession => {
            std::fs::create_dir_all(dir)
                .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
            policies::jsonl(dir, &prepared.lines, JsonlSync::Critical, JsonlFiles::PerSession)
        }
        Policy::Floor => policies::floor_per_session(&prepared.floor_files, &prepared.floor_chunks),
    }
    .inspect(|_| {
        // A store directory holds a whole segment and its preallocation: removed at once, so
        // a long bench does not fill the scratch disk.
        let _ = std::fs::remove_dir_all(dir);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_sorted_distinct_and_bounded() {
        assert_eq!(parse_counts("32,1,8"), Ok(SessionCounts(vec![1, 8, 32])));
        assert_eq!(parse_counts(" 4 "), Ok(SessionCounts(vec![4])));
        assert_eq!(parse_counts("1024"), Ok(SessionCounts(vec![1024])));
        for bad in ["", "0", "1,,2", "1,", "abc", "-1", "1025", "8,8", "1.5"] {
            assert!(parse_counts(bad).is_err(), "{bad:?}");
        }
        let many: Vec<String> = (1..=SESSION_COUNTS_MAX + 1).map(|n| n.to_string()).collect();
        assert!(parse_counts(&many.join(",")).is_err());
    }
}
