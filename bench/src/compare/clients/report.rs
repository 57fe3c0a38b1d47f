//! The figures of a `bench --clients` run, one row per N and policy and one comparison per N,
//! as the terminal table and as the JSON object (`format-spec/schema/bench-clients.json`).

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::super::report::{Spread, percentile};
use super::{Measured, POLICIES, Policy};
use crate::workload::Shape;
use factlog::error::counted;

/// The workload of a run, for the header and the JSON.
#[derive(Debug, Clone)]
pub struct ClientsWorkload {
    /// The session of every client.
    pub shape: Shape,
    /// Interleaved runs.
    pub runs: usize,
    /// The N measured, ascending.
    pub clients: Vec<usize>,
    /// The policies measured, in report order.
    pub policies: Vec<Policy>,
}

impl ClientsWorkload {
    /// The workload of `runs` runs of sessions of `shape` at each N of `clients` under
    /// `policies`.
    pub fn new(
        shape: Shape,
        runs: usize,
        clients: Vec<usize>,
        policies: Vec<Policy>,
    ) -> ClientsWorkload {
        ClientsWorkload { shape, runs, clients, policies }
    }
}

/// One policy at one N, over every run.
#[derive(Debug, Clone)]
pub struct Row {
    /// N: client processes (or threads) at once.
    pub clients: usize,
    /// The policy.
    pub policy: Policy,
    /// One measurement per run, in run order.
    pub runs: Vec<Measured>,
}

/// The derived figures of one row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Figures {
    /// Wall time of a run, in milliseconds.
    pub wall_ms: Spread,
    /// Events of the N sessions per second of wall time.
    pub events_per_s: Spread,
    /// Record `fdatasync`s per critical event (median over runs), where they are counted.
    pub syncs_per_critical: Option<f64>,
    /// Those of the background flusher.
    pub syncs_per_critical_by_flusher: Option<f64>,
    /// Synced appends timed per run (median).
    pub synced_appends_per_run: f64,
    /// Latency of the synced appends, every session and run pooled, in microseconds.
    pub synced_p50_us: Option<f64>,
    /// The 99th percentile.
    pub synced_p99_us: Option<f64>,
    /// The longest.
    pub synced_max_us: Option<f64>,
    /// Processor time of every process of the policy per event (median over runs), in
    /// microseconds.
    pub cpu_us_per_event: f64,
    /// Context switches of every process of the policy per event (median over runs).
    pub switches_per_event: f64,
    /// Processor time of the serving process alone per event (median over runs), in
    /// microseconds; `None` without one.
    pub server_cpu_us_per_event: Option<f64>,
    /// Events found stored afterwards, the fewest of any run.
    pub stored_per_run: u64,
}

impl Row {
    /// The figures over every run.
    pub(crate) fn figures(&self, workload: &ClientsWorkload) -> Figures {
        let events = (workload.shape.events() * self.clients as u64) as f64;
        let critical = (workload.shape.critical_events() * self.clients as u64) as f64;
        let spread =
            |f: &dyn Fn(&Measured) -> f64| Spread::of(&self.runs.iter().map(f).collect::<Vec<_>>());
        let counted_median = |f: fn(&Measured) -> Option<u64>| {
            let values: Option<Vec<f64>> =
                self.runs.iter().map(|m| f(m).map(|v| v as f64)).collect();
            values.map(|v| Spread::of(&v).median / critical)
        };
        let mut latencies: Vec<u64> =
            self.runs.iter().flat_map(|m| m.synced_ns.iter().copied()).collect();
        latencies.sort_unstable();
        let us = |ns: u64| ns as f64 / 1e3;
        Figures {
            wall_ms: spread(&|m| m.elapsed.as_secs_f64() * 1e3),
            events_per_s: spread(&|m| events / m.elapsed.as_secs_f64().max(1e-9)),
            syncs_per_critical: counted_median(|m| m.syncs),
            syncs_per_critical_by_flusher: counted_median(|m| m.syncs_by_flusher),
            synced_appends_per_run: spread(&|m| m.synced_ns.len() as f64).median,
            synced_p50_us: percentile(&latencies, 50.0).map(us),
            synced_p99_us: percentile(&latencies, 99.0).map(us),
            synced_max_us: latencies.last().copied().map(us),
            cpu_us_per_event: spread(&|m| m.usage.cpu_ns as f64 / 1e3 / events).median,
            switches_per_event: spread(&|m| m.usage.switches as f64 / events).median,
            server_cpu_us_per_event: self
                .runs
                .iter()
                .map(|m| m.server_usage.map(|u| u.cpu_ns as f64 / 1e3 / events))
                .collect::<Option<Vec<f64>>>()
                .map(|values| Spread::of(&values).median),
            stored_per_run: self.runs.iter().map(|m| m.stored).min().unwrap_or(0),
        }
    }
}

/// The ratios of one N: one policy's wall time over another's, run by run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Comparison {
    /// N.
    pub clients: usize,
    /// `served` over `threads` (the goal: at most 1.5).
    pub served_to_threads: Option<Spread>,
    /// `served` over `own-stores` (the goal: at most 0.5).
    pub served_to_own_stores: Option<Spread>,
    /// `sqlite` over `served` (the goal: at least 10); `None` in a build without SQLite.
    pub sqlite_to_served: Option<Spread>,
    /// `served-every` over `served`: what durable-only acknowledgements save.
    pub served_every_to_served: Option<Spread>,
}

/// The wall-time ratios at each N, medians (and spreads) of the per-run ratios.
pub(crate) fn comparisons(rows: &[Row]) -> Vec<Comparison> {
    let mut clients: Vec<usize> = rows.iter().map(|r| r.clients).collect();
    clients.dedup();
    let ratio = |n: usize, over: &str, under: &str| {
        let find = |name: &str| rows.iter().find(|r| r.clients == n && r.policy.name() == name);
        let (a, b) = (find(over)?, find(under)?);
        let ratios: Vec<f64> = a
            .runs
            .iter()
            .zip(&b.runs)
            .map(|(x, y)| x.elapsed.as_secs_f64() / y.elapsed.as_secs_f64().max(1e-9))
            .collect();
        (!ratios.is_empty()).then(|| Spread::of(&ratios))
    };
    clients
        .into_iter()
        .map(|n| Comparison {
            clients: n,
            served_to_threads: ratio(n, "served", "threads"),
            served_to_own_stores: ratio(n, "served", "own-stores"),
            sqlite_to_served: ratio(n, "sqlite", "served"),
            served_every_to_served: ratio(n, "served-every", "served"),
        })
        .collect()
}

fn optional(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.decimals$}"))
}

fn ratio_text(spread: Option<Spread>) -> String {
    spread
        .map_or_else(|| "-".to_owned(), |s| format!("{:.2}x ({:.2}-{:.2})", s.median, s.min, s.max))
}

/// The terminal table.
pub fn table(workload: &ClientsWorkload, rows: &[Row]) -> String {
    let shape = workload.shape;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "workload: N sessions at once, each {} x {} x {} ({} events, {} critical; deltas {} \
         B, tool/result ~{} B); N = {:?}; {}",
        counted(u64::from(shape.turns), "turn"),
        counted(u64::from(shape.steps), "step"),
        counted(u64::from(shape.tokens), "token"),
        shape.events(),
        shape.critical_events(),
        shape.delta_bytes,
        shape.result_bytes,
        workload.clients,
        counted(workload.runs as u64, "interleaved run")
    );
    let _ = writeln!(
        out,
        "{:>4} {:<12} {:>9} {:>10} {:>21} {:>10} {:>8} {:>8} {:>9} {:>8} {:>9} {:>7}",
        "N",
        "policy",
        "wall ms",
        "events/s",
        "(min-max)",
        "fsync/crit",
        "p50 us",
        "p99 us",
        "max us",
        "cpu us/e",
        "server/e",
        "sw/e"
    );
    for row in rows {
        let f = row.figures(workload);
        let _ = writeln!(
            out,
            "{:>4} {:<12} {:>9.1} {:>10.0} {:>21} {:>10} {:>8} {:>8} {:>9} {:>8.2} {:>9} {:>7.3}",
            row.clients,
            row.policy.name(),
            f.wall_ms.median,
            f.events_per_s.median,
            format!("({:.0}-{:.0})", f.events_per_s.min, f.events_per_s.max),
            optional(f.syncs_per_critical, 3),
            optional(f.synced_p50_us, 0),
            optional(f.synced_p99_us, 0),
            optional(f.synced_max_us, 0),
            f.cpu_us_per_event,
            optional(f.server_cpu_us_per_event, 2),
            f.switches_per_event,
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:>4} {:<22} {:<22} {:<22} {:<22}",
        "N", "served / threads", "served / own-stores", "sqlite / served", "served-every / served"
    );
    for c in comparisons(rows) {
        let _ = writeln!(
            out,
            "{:>4} {:<22} {:<22} {:<22} {:<22}",
            c.clients,
            ratio_text(c.served_to_threads),
            ratio_text(c.served_to_own_stores),
            ratio_text(c.sqlite_to_served),
            ratio_text(c.served_every_to_served),
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "wall ms, events/s: N x events per session over the wall time, median (min-max) over \
         runs; fsync/crit: record fdatasyncs per critical event (tool/call, tool/result, \
         turn/end), median; p50/p99/max: latency of each synced append, every session and run \
         pooled; cpu us/e, sw/e: processor time and context switches of every process of the \
         policy per event, median; server/e: the serving process's share of cpu us/e; ratios: wall time over wall time in the same run, median \
         (min-max) of the runs."
    );
    for policy in &workload.policies {
        let _ = writeln!(out, "  {:<12} {}", policy.name(), policy.note());
    }
    if !POLICIES.iter().any(|p| p.name() == "sqlite") {
        let _ = writeln!(
            out,
            "  (sqlite: not in this build; build the command with --features bench-sqlite, or \
             run cargo bench --bench clients)"
        );
    }
    out
}

/// The one JSON object of `--json`: the workload, one result per N and policy, one comparison
/// per N.
pub fn json(workload: &ClientsWorkload, rows: &[Row]) -> Value {
    let shape = workload.shape;
    let results: Vec<Value> = rows
        .iter()
        .map(|row| {
            let f = row.figures(workload);
            let latency = f.synced_p50_us.map(|_| {
                json!({ "p50": f.synced_p50_us, "p99": f.synced_p99_us, "max": f.synced_max_us })
            });
            json!({
                "clients": row.clients,
                "policy": row.policy.name(),
                "note": row.policy.note(),
                "events_per_run": shape.events() * row.clients as u64,
                "critical_events_per_run": shape.critical_events() * row.clients as u64,
                "events_stored_per_run": f.stored_per_run,
                "wall_ms": f.wall_ms.json(),
                "events_per_s": f.events_per_s.json(),
                "fdatasyncs_per_critical_event": f.syncs_per_critical,
                "fdatasyncs_per_critical_event_by_flusher": f.syncs_per_critical_by_flusher,
                "synced_appends_per_run": f.synced_appends_per_run,
                "synced_latency_us": latency,
                "cpu_us_per_event": f.cpu_us_per_event,
                "server_cpu_us_per_event": f.server_cpu_us_per_event,
                "context_switches_per_event": f.switches_per_event,
            })
        })
        .collect();
    let spread = |s: Option<Spread>| s.map(Spread::json);
    let comparisons: Vec<Value> = comparisons(rows)
        .into_iter()
        .map(|c| {
            json!({
                "clients": c.clients,
                "served_to_threads": spread(c.served_to_threads),
                "served_to_own_stores": spread(c.served_to_own_stores),
                "sqlite_to_served": spread(c.sqlite_to_served),
                "served_every_to_served": spread(c.served_every_to_served),
            })
        })
        .collect();
    json!({
        "workload": {
            "turns": shape.turns,
            "steps": shape.steps,
            "tokens": shape.tokens,
            "delta_bytes": shape.delta_bytes,
            "result_bytes": shape.result_bytes,
            "runs": workload.runs,
            "clients": workload.clients,
            "events_per_session": shape.events(),
            "critical_events_per_session": shape.critical_events(),
            "policies": workload.policies.iter().map(|p| p.name()).collect::<Vec<_>>(),
        },
        "results": results,
        "comparisons": comparisons,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::many::Usage;

    fn measured(elapsed_ms: u64, syncs: Option<u64>, latencies: &[u64]) -> Measured {
        Measured {
            elapsed: Duration::from_millis(elapsed_ms),
            syncs,
            syncs_by_flusher: syncs.map(|_| 0),
            synced_ns: latencies.to_vec(),
            usage: Usage { cpu_ns: 9_000, switches: 18 },
            server_usage: syncs.map(|_| Usage { cpu_ns: 4_500, switches: 9 }),
            stored: 18,
        }
    }

    #[test]
    fn figures_and_ratios_follow_from_the_runs() {
        let shape = Shape { turns: 1, steps: 1, tokens: 2, ..Shape::DEFAULT };
        let workload = ClientsWorkload::new(shape, 2, vec![2], vec![Policy::Served]);
        let served = Row {
            clients: 2,
            policy: Policy::Served,
            runs: vec![measured(100, Some(3), &[1_000, 2_000]), measured(300, Some(6), &[3_000])],
        };
        let threads = Row {
            clients: 2,
            policy: Policy::Threads,
            runs: vec![measured(50, Some(3), &[1_000]), measured(100, Some(3), &[1_000])],
        };
        let f = served.figures(&workload);
        // 2 sessions of 9 events: 18 events, 6 critical.
        assert!((f.events_per_s.max - 180.0).abs() < 1e-6);
        assert!((f.events_per_s.min - 60.0).abs() < 1e-6);
        assert_eq!(f.syncs_per_critical, Some(0.75));
        assert_eq!(f.synced_p50_us, Some(2.0));
        assert_eq!(f.synced_max_us, Some(3.0));
        assert!((f.cpu_us_per_event - 0.5).abs() < 1e-9);
        assert!((f.switches_per_event - 1.0).abs() < 1e-9);
        assert_eq!(f.server_cpu_us_per_event, Some(0.25));
        let c = comparisons(&[served, threads]);
        assert_eq!(c.len(), 1);
        let ratio = c[0].served_to_threads.expect("both ran");
        assert!((ratio.min - 2.0).abs() < 1e-9 && (ratio.max - 3.0).abs() < 1e-9);
        assert!(c[0].served_to_own_stores.is_none());
    }
}
