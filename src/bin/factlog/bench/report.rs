//! The figures of a bench run, and their three forms: the terminal table, the JSON object and
//! the standalone SVG chart.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::policies::Measured;

/// The figures of one policy over every run.
#[derive(Debug, Clone)]
pub struct PolicyReport {
    /// The policy's name.
    pub name: &'static str,
    /// What it does, in one line.
    pub note: String,
    /// Turns of each session it ran (fewer than the workload's for the every-event policies).
    pub turns: u32,
    /// Deltas (tokens) written per run, over every task.
    pub tokens: u64,
    /// Turns per run, over every task.
    pub turns_total: u64,
    /// One measurement per run.
    pub runs: Vec<Measured>,
    /// The floor's ns per token in the same run, one per run.
    pub floor_ns_per_token: Vec<f64>,
}

/// The minimum, median and maximum of some values.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    fn of(values: &[f64]) -> Spread {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        assert!(n > 0, "a spread of nothing");
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            f64::midpoint(sorted[n / 2 - 1], sorted[n / 2])
        };
        Spread { min: sorted[0], median, max: sorted[n - 1] }
    }

    fn json(self) -> Value {
        json!({ "median": self.median, "min": self.min, "max": self.max })
    }
}

/// The nearest-rank percentile `p` (0-100) of sorted `values`.
fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The derived figures of one policy.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    pub ns_per_token: Spread,
    pub ratio_to_floor: Spread,
    pub bytes_per_token: f64,
    pub fsyncs_per_turn: f64,
    pub fsyncs_per_turn_by_flusher: f64,
    pub synced_appends_per_run: f64,
    pub synced_p50_us: Option<f64>,
    pub synced_p99_us: Option<f64>,
}

impl PolicyReport {
    /// The figures over every run.
    pub fn figures(&self) -> Figures {
        let tokens = self.tokens as f64;
        let turns = self.turns_total as f64;
        let ns: Vec<f64> = self.runs.iter().map(|m| m.elapsed.as_nanos() as f64 / tokens).collect();
        let ratios: Vec<f64> =
            ns.iter().zip(&self.floor_ns_per_token).map(|(ns, floor)| ns / floor).collect();
        let median_of = |f: fn(&Measured) -> f64| {
            Spread::of(&self.runs.iter().map(f).collect::<Vec<_>>()).median
        };
        let mut latencies: Vec<u64> =
            self.runs.iter().flat_map(|m| m.synced_latencies_ns.iter().copied()).collect();
        latencies.sort_unstable();
        let us = |ns: u64| ns as f64 / 1e3;
        Figures {
            ns_per_token: Spread::of(&ns),
            ratio_to_floor: Spread::of(&ratios),
            bytes_per_token: median_of(|m| m.bytes as f64) / tokens,
            fsyncs_per_turn: median_of(|m| m.syncs as f64) / turns,
            fsyncs_per_turn_by_flusher: median_of(|m| m.syncs_by_flusher as f64) / turns,
            synced_appends_per_run: median_of(|m| m.synced_latencies_ns.len() as f64),
            synced_p50_us: percentile(&latencies, 50.0).map(us),
            synced_p99_us: percentile(&latencies, 99.0).map(us),
        }
    }
}

/// The workload a run used, for the header and the JSON.
#[derive(Debug, Clone)]
pub struct Workload {
    pub turns: u32,
    pub steps: u32,
    pub tokens: u32,
    pub delta_bytes: usize,
    pub result_bytes: usize,
    pub tasks: usize,
    pub runs: usize,
    pub every_turns: u32,
    pub events_per_session: u64,
}

fn optional(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.decimals$}"))
}

/// The terminal table.
pub fn table(workload: &Workload, policies: &[PolicyReport]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "workload: {} task(s) x {} turns x {} steps x {} tokens ({} events/session; deltas {} B, \
         tool/result ~{} B); {} interleaved run(s)",
        workload.tasks,
        workload.turns,
        workload.steps,
        workload.tokens,
        workload.events_per_session,
        workload.delta_bytes,
        workload.result_bytes,
        workload.runs
    );
    let _ = writeln!(
        out,
        "{:<15} {:>9} {:>19} {:>11} {:>11} {:>10} {:>10} {:>9}",
        "policy",
        "ns/token",
        "(min-max)",
        "bytes/token",
        "fsyncs/turn",
        "p50 us",
        "p99 us",
        "x floor"
    );
    for policy in policies {
        let f = policy.figures();
        let _ = writeln!(
            out,
            "{:<15} {:>9.0} {:>19} {:>11.1} {:>11.2} {:>10} {:>10} {:>9.2}",
            policy.name,
            f.ns_per_token.median,
            format!("({:.0}-{:.0})", f.ns_per_token.min, f.ns_per_token.max),
            f.bytes_per_token,
            f.fsyncs_per_turn,
            optional(f.synced_p50_us, 1),
            optional(f.synced_p99_us, 1),
            f.ratio_to_floor.median,
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "ns/token: session wall time / tokens, median (min-max) over runs; p50/p99: latency of \
         each synced append (pooled over runs); x floor: ns/token / the floor's in the same run \
         (median)."
    );
    for policy in policies {
        let _ =
            writeln!(out, "  {:<15} {} turns/session: {}", policy.name, policy.turns, policy.note);
    }
    out
}

/// The one JSON object of `--json`.
pub fn json(workload: &Workload, policies: &[PolicyReport]) -> Value {
    let rows: Vec<Value> = policies
        .iter()
        .map(|policy| {
            let f = policy.figures();
            json!({
                "name": policy.name,
                "note": policy.note,
                "turns": policy.turns,
                "tokens": policy.tokens,
                "ns_per_token": f.ns_per_token.json(),
                "bytes_per_token": f.bytes_per_token,
                "fsyncs_per_turn": f.fsyncs_per_turn,
                "fsyncs_per_turn_by_flusher": f.fsyncs_per_turn_by_flusher,
                "synced_appends_per_run": f.synced_appends_per_run,
                "synced_latency_us": { "p50": f.synced_p50_us, "p99": f.synced_p99_us },
                "ratio_to_floor": f.ratio_to_floor.json(),
            })
        })
        .collect();
    json!({
        "workload": {
            "turns": workload.turns,
            "steps": workload.steps,
            "tokens": workload.tokens,
            "delta_bytes": workload.delta_bytes,
            "result_bytes": workload.result_bytes,
            "tasks": workload.tasks,
            "runs": workload.runs,
            "every_turns": workload.every_turns,
            "events_per_session": workload.events_per_session,
        },
        "policies": rows,
    })
}

/// Escapes text for an SVG text node or attribute.
fn xml(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Width of the chart.
const SVG_WIDTH: f64 = 860.0;
/// Left margin, where the policy names are.
const SVG_LABEL_WIDTH: f64 = 130.0;
/// Room right of the longest bar for its value.
const SVG_VALUE_WIDTH: f64 = 150.0;
/// Height of one policy's row.
const SVG_ROW: f64 = 26.0;

/// A standalone SVG: a bar chart of ns per token per policy, then the p50 and p99 latency of
/// the synced appends per policy.
pub fn svg(workload: &Workload, policies: &[PolicyReport]) -> String {
    let figures: Vec<Figures> = policies.iter().map(PolicyReport::figures).collect();
    let bar_max = SVG_WIDTH - SVG_LABEL_WIDTH - SVG_VALUE_WIDTH;
    let panel = 40.0 + SVG_ROW * policies.len() as f64;
    let height = 60.0 + 2.0 * panel + 40.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{SVG_WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {SVG_WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(out, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
    let title = format!(
        "factlog bench: {} task(s) x {} turns x {} steps x {} tokens, {} run(s)",
        workload.tasks, workload.turns, workload.steps, workload.tokens, workload.runs
    );
    let _ = writeln!(
        out,
        "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>",
        xml(&title)
    );

    let mut y = 50.0;
    let _ = writeln!(
        out,
        "<text x=\"10\" y=\"{y}\" font-weight=\"bold\">ns per token (median; line: min-max over \
         runs)</text>"
    );
    let ns_max = figures.iter().map(|f| f.ns_per_token.max).fold(1.0, f64::max);
    for (policy, f) in policies.iter().zip(&figures) {
        y += SVG_ROW;
        let scale = |v: f64| v / ns_max * bar_max;
        let width = scale(f.ns_per_token.median);
        let _ = writeln!(out, "<text x=\"10\" y=\"{y}\">{}</text>", xml(policy.name));
        let _ = writeln!(
            out,
            "<rect x=\"{SVG_LABEL_WIDTH}\" y=\"{:.1}\" width=\"{width:.1}\" height=\"16\" \
             fill=\"#4878a8\"/>",
            y - 12.0
        );
        let _ = writeln!(
            out,
            "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\"/>",
            SVG_LABEL_WIDTH + scale(f.ns_per_token.min),
            SVG_LABEL_WIDTH + scale(f.ns_per_token.max),
            y - 4.0,
            y - 4.0
        );
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{y}\">{:.0} ns ({:.2}x floor)</text>",
            SVG_LABEL_WIDTH + scale(f.ns_per_token.max) + 6.0,
            f.ns_per_token.median,
            f.ratio_to_floor.median
        );
    }

    y += 40.0;
    let _ = writeln!(
        out,
        "<text x=\"10\" y=\"{y}\" font-weight=\"bold\">latency of synced appends, us (dark: \
         p50, light: p99)</text>"
    );
    let us_max =
        figures.iter().filter_map(|f| f.synced_p99_us.or(f.synced_p50_us)).fold(1.0, f64::max);
    for (policy, f) in policies.iter().zip(&figures) {
        y += SVG_ROW;
        let _ = writeln!(out, "<text x=\"10\" y=\"{y}\">{}</text>", xml(policy.name));
        let scale = |v: f64| v / us_max * bar_max;
        if let Some(p99) = f.synced_p99_us {
            let _ = writeln!(
                out,
                "<rect x=\"{SVG_LABEL_WIDTH}\" y=\"{:.1}\" width=\"{:.1}\" height=\"16\" \
                 fill=\"#a8c4e0\"/>",
                y - 12.0,
                scale(p99)
            );
        }
        if let Some(p50) = f.synced_p50_us {
            let _ = writeln!(
                out,
                "<rect x=\"{SVG_LABEL_WIDTH}\" y=\"{:.1}\" width=\"{:.1}\" height=\"16\" \
                 fill=\"#2a5a88\"/>",
                y - 12.0,
                scale(p50)
            );
        }
        let label = match (f.synced_p50_us, f.synced_p99_us) {
            (Some(p50), Some(p99)) => format!("p50 {p50:.1} / p99 {p99:.1} us"),
            _ => "no synced appends".to_owned(),
        };
        let end = f.synced_p99_us.map_or(0.0, scale);
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{y}\">{}</text>",
            SVG_LABEL_WIDTH + end + 6.0,
            xml(&label)
        );
    }
    let _ = writeln!(out, "</svg>");
    out
}
