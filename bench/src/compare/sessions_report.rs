//! The figures of a `bench --sessions` run, one row per N and policy, and their three forms:
//! the terminal table, the JSON object and the standalone SVG chart.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{Value, json};

use super::policies::Measured;
use super::report::{LogScale, Spread, colour, decade_label, duration, percentile, svg_start, xml};
use factlog::error::counted;

/// The workload of a run, for the header and the JSON.
#[derive(Debug, Clone)]
pub struct SessionsWorkload {
    pub turns: u32,
    pub steps: u32,
    pub tokens: u32,
    pub delta_bytes: usize,
    pub result_bytes: usize,
    pub runs: usize,
    /// The N measured, ascending.
    pub sessions: Vec<usize>,
    pub events_per_session: u64,
    /// `tool/call`, `tool/result` and `turn/end` events of one session.
    pub critical_events_per_session: u64,
}

/// One policy at one N, over every run.
#[derive(Debug, Clone)]
pub struct Row {
    /// N: sessions at once.
    pub sessions: usize,
    /// The policy's name.
    pub policy: &'static str,
    /// What it does, in one line.
    pub note: &'static str,
    /// One measurement per run.
    pub runs: Vec<Measured>,
    /// The floor's time at the same N, one per run, in the same order.
    pub floor: Vec<Duration>,
}

/// The derived figures of one row.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    pub events_per_s: Spread,
    pub ratio_to_floor: Spread,
    pub syncs_per_critical: f64,
    pub syncs_per_critical_by_flusher: f64,
    pub mark_syncs_per_run: f64,
    pub synced_appends_per_run: f64,
    pub synced_p50_us: Option<f64>,
    pub synced_p99_us: Option<f64>,
    pub synced_max_us: Option<f64>,
}

impl Row {
    /// The latency of every synced append of every session and run, in nanoseconds, sorted.
    fn pooled_latencies(&self) -> Vec<u64> {
        let mut latencies: Vec<u64> =
            self.runs.iter().flat_map(|m| m.synced_latencies_ns.iter().copied()).collect();
        latencies.sort_unstable();
        latencies
    }

    /// The figures over every run.
    pub fn figures(&self, workload: &SessionsWorkload) -> Figures {
        let events = (workload.events_per_session * self.sessions as u64) as f64;
        let critical = (workload.critical_events_per_session * self.sessions as u64) as f64;
        let per_s: Vec<f64> =
            self.runs.iter().map(|m| events / m.elapsed.as_secs_f64().max(1e-9)).collect();
        let ratios: Vec<f64> = self
            .runs
            .iter()
            .zip(&self.floor)
            .map(|(m, floor)| m.elapsed.as_secs_f64() / floor.as_secs_f64().max(1e-9))
            .collect();
        let median_of = |f: fn(&Measured) -> f64| {
            Spread::of(&self.runs.iter().map(f).collect::<Vec<_>>()).median
        };
        let latencies = self.pooled_latencies();
        let us = |ns: u64| ns as f64 / 1e3;
        Figures {
            events_per_s: Spread::of(&per_s),
            ratio_to_floor: Spread::of(&ratios),
            syncs_per_critical: median_of(|m| m.syncs as f64) / critical,
            syncs_per_critical_by_flusher: median_of(|m| m.syncs_by_flusher as f64) / critical,
            mark_syncs_per_run: median_of(|m| m.mark_syncs as f64),
            synced_appends_per_run: median_of(|m| m.synced_latencies_ns.len() as f64),
            synced_p50_us: percentile(&latencies, 50.0).map(us),
            synced_p99_us: percentile(&latencies, 99.0).map(us),
            synced_max_us: latencies.last().copied().map(us),
        }
    }
}

fn optional(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}"))
}

/// The terminal table.
pub fn table(workload: &SessionsWorkload, rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "workload: N sessions at once, each {} x {} x {} ({} events, {} critical; deltas {} \
         B, tool/result ~{} B); N = {:?}; {}",
        counted(workload.turns as u64, "turn"),
        counted(workload.steps as u64, "step"),
        counted(workload.tokens as u64, "token"),
        workload.events_per_session,
        workload.critical_events_per_session,
        workload.delta_bytes,
        workload.result_bytes,
        workload.sessions,
        counted(workload.runs as u64, "interleaved run")
    );
    let _ = writeln!(
        out,
        "{:>5} {:<18} {:>10} {:>21} {:>10} {:>8} {:>8} {:>9} {:>8}",
        "N",
        "policy",
        "events/s",
        "(min-max)",
        "fsync/crit",
        "p50 us",
        "p99 us",
        "max us",
        "x floor"
    );
    for row in rows {
        let f = row.figures(workload);
        let _ = writeln!(
            out,
            "{:>5} {:<18} {:>10.0} {:>21} {:>10.3} {:>8} {:>8} {:>9} {:>8.2}",
            row.sessions,
            row.policy,
            f.events_per_s.median,
            format!("({:.0}-{:.0})", f.events_per_s.min, f.events_per_s.max),
            f.syncs_per_critical,
            optional(f.synced_p50_us),
            optional(f.synced_p99_us),
            optional(f.synced_max_us),
            f.ratio_to_floor.median,
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "events/s: N x events per session / wall time, median (min-max) over runs; fsync/crit: \
         fdatasyncs per critical event (tool/call, tool/result, turn/end), median over runs; \
         p50/p99/max: latency of each synced append, every session and run pooled; x floor: \
         time / the floor's at the same N in the same run (median of the runs' ratios)."
    );
    let mut seen = Vec::new();
    for row in rows {
        if !seen.contains(&row.policy) {
            seen.push(row.policy);
            let _ = writeln!(out, "  {:<18} {}", row.policy, row.note);
        }
    }
    out
}

/// The one JSON object of `--json`: the workload, then one result per N and policy.
pub fn json(workload: &SessionsWorkload, rows: &[Row]) -> Value {
    let results: Vec<Value> = rows
        .iter()
        .map(|row| {
            let f = row.figures(workload);
            json!({
                "sessions": row.sessions,
                "policy": row.policy,
                "note": row.note,
                "events_per_run": workload.events_per_session * row.sessions as u64,
                "critical_events_per_run":
                    workload.critical_events_per_session * row.sessions as u64,
                "events_per_s": f.events_per_s.json(),
                "fdatasyncs_per_critical_event": f.syncs_per_critical,
                "fdatasyncs_per_critical_event_by_flusher": f.syncs_per_critical_by_flusher,
                "mark_fdatasyncs_per_run": f.mark_syncs_per_run,
                "synced_appends_per_run": f.synced_appends_per_run,
                "synced_latency_us": {
                    "p50": f.synced_p50_us,
                    "p99": f.synced_p99_us,
                    "max": f.synced_max_us,
                },
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
            "runs": workload.runs,
            "sessions": workload.sessions,
            "events_per_session": workload.events_per_session,
            "critical_events_per_session": workload.critical_events_per_session,
        },
        "results": results,
    })
}

/// Width of the chart.
const SVG_WIDTH: f64 = 900.0;
/// Left edge of each panel's plot, right of its value labels.
const SVG_PLOT_LEFT: f64 = 80.0;
/// Width of each panel's plot; the legend is right of it.
const SVG_PLOT_WIDTH: f64 = 600.0;
/// Height of each panel's plot.
const SVG_PLOT_HEIGHT: f64 = 220.0;
/// Height of one N's entry in the legend.
const SVG_LEGEND_ROW: f64 = 20.0;

/// `per_s` events per second with at most three significant digits: "950/s", "1.2k/s",
/// "2.41M/s".
fn rate(per_s: f64) -> String {
    let (value, unit) = if per_s >= 1e6 {
        (per_s / 1e6, "M")
    } else if per_s >= 1e3 {
        (per_s / 1e3, "k")
    } else {
        (per_s, "")
    };
    let decimals = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    let text = format!("{value:.decimals$}");
    let text = if decimals > 0 { text.trim_end_matches('0').trim_end_matches('.') } else { &text };
    format!("{text}{unit}/s")
}

/// One panel: a value per N and policy, on a logarithmic axis.
struct Panel {
    id: &'static str,
    title: &'static str,
    /// Per N (in the workload's order), the value of each policy (in `policies`' order), in
    /// the panel's unit; `None` where there is none.
    values: Vec<Vec<Option<f64>>>,
    /// How a value is written on the axis and beside its point.
    label: fn(f64) -> String,
}

/// A standalone SVG of two panels, `throughput` (aggregate events/s) and `latency` (synced
/// p99), each with the policies across and one line per N through its policies' values.
pub fn svg(workload: &SessionsWorkload, rows: &[Row]) -> String {
    let mut policies: Vec<&str> = Vec::new();
    for row in rows {
        if !policies.contains(&row.policy) {
            policies.push(row.policy);
        }
    }
    let value = |n: usize, policy: &str, pick: fn(&Figures) -> Option<f64>| {
        rows.iter()
            .find(|row| row.sessions == n && row.policy == policy)
            .and_then(|row| pick(&row.figures(workload)))
    };
    let per_n = |pick: fn(&Figures) -> Option<f64>| -> Vec<Vec<Option<f64>>> {
        workload
            .sessions
            .iter()
            .map(|&n| policies.iter().map(|policy| value(n, policy, pick)).collect())
            .collect()
    };
    let panels = [
        Panel {
            id: "throughput",
            title: "aggregate events/s (median over runs; logarithmic scale; higher is better)",
            values: per_n(|f| Some(f.events_per_s.median)),
            label: rate,
        },
        Panel {
            id: "latency",
            title: "p99 latency of a synced append (pooled; logarithmic scale; lower is better)",
            // In nanoseconds, for the axis of durations.
            values: per_n(|f| f.synced_p99_us.map(|us| us * 1e3)),
            label: |ns| duration(ns),
        },
    ];
    let panel_height = SVG_PLOT_HEIGHT + 90.0;
    let height = 40.0 + panel_height * panels.len() as f64;
    let title = format!(
        "factlog bench --sessions: N sessions of {} x {} x {}, {}",
        counted(workload.turns as u64, "turn"),
        counted(workload.steps as u64, "step"),
        counted(workload.tokens as u64, "token"),
        counted(workload.runs as u64, "run")
    );
    let mut out = svg_start(SVG_WIDTH, height, &title);
    for (i, panel) in panels.iter().enumerate() {
        let top = 40.0 + panel_height * i as f64;
        draw_panel(&mut out, panel, &policies, &workload.sessions, top);
    }
    let _ = writeln!(out, "</svg>");
    out
}

/// Draws `panel` with its heading at `top`.
fn draw_panel(out: &mut String, panel: &Panel, policies: &[&str], sessions: &[usize], top: f64) {
    let plot_top = top + 24.0;
    let bottom = plot_top + SVG_PLOT_HEIGHT;
    let _ = writeln!(out, "<g id=\"{}\">", panel.id);
    let _ = writeln!(out, "<title>{}</title>", xml(panel.title));
    let _ = writeln!(
        out,
        "<text x=\"10\" y=\"{:.1}\" font-weight=\"bold\">{}</text>",
        top + 12.0,
        xml(panel.title)
    );
    let _ = writeln!(
        out,
        "<rect x=\"{SVG_PLOT_LEFT}\" y=\"{plot_top:.1}\" width=\"{SVG_PLOT_WIDTH}\" \
         height=\"{SVG_PLOT_HEIGHT}\" fill=\"none\" stroke=\"#999999\"/>"
    );
    // A vertical logarithmic axis: the scale runs from the bottom of the plot upwards.
    let scale =
        LogScale::over(panel.values.iter().flatten().flatten().copied(), bottom, -SVG_PLOT_HEIGHT);
    for (exponent, y, _) in scale.decades() {
        let _ = writeln!(
            out,
            "<line class=\"grid\" x1=\"{SVG_PLOT_LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" \
             y2=\"{y:.1}\" stroke=\"#d0d0d0\"/>",
            SVG_PLOT_LEFT + SVG_PLOT_WIDTH
        );
        let value = 10f64.powi(exponent);
        let text =
            if panel.id == "latency" { decade_label(exponent) } else { (panel.label)(value) };
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#555555\" \
             font-size=\"11\">{}</text>",
            SVG_PLOT_LEFT - 6.0,
            y + 4.0,
            xml(&text)
        );
    }
    let column = SVG_PLOT_WIDTH / policies.len().max(1) as f64;
    let x = |k: usize| SVG_PLOT_LEFT + column * (k as f64 + 0.5);
    for (k, policy) in policies.iter().enumerate() {
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            x(k),
            bottom + 18.0,
            xml(policy)
        );
    }
    let legend = SVG_PLOT_LEFT + SVG_PLOT_WIDTH + 20.0;
    for (j, (&n, values)) in sessions.iter().zip(&panel.values).enumerate() {
        let points: Vec<(f64, f64)> =
            values.iter().enumerate().filter_map(|(k, v)| v.map(|v| (x(k), scale.x(v)))).collect();
        let text: Vec<String> = points.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(
            out,
            "<polyline class=\"per-n\" points=\"{}\" fill=\"none\" stroke=\"{}\" \
             stroke-width=\"2\"><title>N = {n}</title></polyline>",
            text.join(" "),
            colour(j)
        );
        for (k, value) in values.iter().enumerate() {
            if let Some(value) = value {
                let _ = writeln!(
                    out,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{}\"><title>N = {n}, {}: \
                     {}</title></circle>",
                    x(k),
                    scale.x(*value),
                    colour(j),
                    xml(policies[k]),
                    xml(&(panel.label)(*value))
                );
            }
        }
        let y = plot_top + SVG_LEGEND_ROW * j as f64;
        let _ = writeln!(
            out,
            "<line x1=\"{legend:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"{}\" \
             stroke-width=\"2\"/>",
            legend + 22.0,
            y + 8.0,
            y + 8.0,
            colour(j)
        );
        let _ =
            writeln!(out, "<text x=\"{:.1}\" y=\"{:.1}\">N = {n}</text>", legend + 28.0, y + 12.0);
    }
    let _ = writeln!(out, "</g>");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(elapsed_ms: u64, syncs: u64, latencies: &[u64]) -> Measured {
        Measured {
            elapsed: Duration::from_millis(elapsed_ms),
            syncs,
            synced_latencies_ns: latencies.to_vec(),
            ..Measured::default()
        }
    }

    #[test]
    fn figures_follow_from_the_counts() {
        let workload = SessionsWorkload {
            turns: 1,
            steps: 1,
            tokens: 2,
            delta_bytes: 24,
            result_bytes: 1024,
            runs: 2,
            sessions: vec![2],
            events_per_session: 9,
            critical_events_per_session: 3,
        };
        let row = Row {
            sessions: 2,
            policy: "factlog",
            note: "",
            runs: vec![measured(100, 3, &[1_000, 2_000]), measured(300, 6, &[3_000])],
            floor: vec![Duration::from_millis(200), Duration::from_millis(100)],
        };
        let f = row.figures(&workload);
        assert!((f.events_per_s.max - 180.0).abs() < 1e-6);
        assert!((f.events_per_s.min - 60.0).abs() < 1e-6);
        assert!((f.ratio_to_floor.min - 0.5).abs() < 1e-9);
        assert!((f.ratio_to_floor.max - 3.0).abs() < 1e-9);
        assert!((f.syncs_per_critical - 0.75).abs() < 1e-9);
        assert_eq!(f.synced_p50_us, Some(2.0));
        assert_eq!(f.synced_max_us, Some(3.0));
        let chart = svg(&workload, &[row]);
        assert_eq!(chart.matches("<polyline").count(), 2, "one line per N and panel");
        assert!(!chart.contains("NaN") && !chart.contains("inf"));
        assert_eq!(rate(950.0), "950/s");
        assert_eq!(rate(1_000.0), "1k/s");
        assert_eq!(rate(1_234.0), "1.23k/s");
        assert_eq!(rate(2_410_000.0), "2.41M/s");
        assert_eq!(rate(123_456.0), "123k/s");
    }
}
