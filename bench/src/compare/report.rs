//! The figures of a bench run, and their three forms: the terminal table, the JSON object and
//! the standalone SVG chart.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::policies::Measured;
use factlog::error::counted;

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
    pub(super) fn of(values: &[f64]) -> Spread {
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

    pub(super) fn json(self) -> Value {
        json!({ "median": self.median, "min": self.min, "max": self.max })
    }
}

/// The nearest-rank percentile `p` (0-100) of sorted `values`.
pub(super) fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
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
    pub mark_fsyncs_per_run: f64,
    pub synced_appends_per_run: f64,
    pub synced_p50_us: Option<f64>,
    pub synced_p99_us: Option<f64>,
}

impl PolicyReport {
    /// The latency of every synced append of every run, in nanoseconds, sorted.
    pub fn pooled_latencies(&self) -> Vec<u64> {
        let mut latencies: Vec<u64> =
            self.runs.iter().flat_map(|m| m.synced_latencies_ns.iter().copied()).collect();
        latencies.sort_unstable();
        latencies
    }

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
        let latencies = self.pooled_latencies();
        let us = |ns: u64| ns as f64 / 1e3;
        Figures {
            ns_per_token: Spread::of(&ns),
            ratio_to_floor: Spread::of(&ratios),
            bytes_per_token: median_of(|m| m.bytes as f64) / tokens,
            fsyncs_per_turn: median_of(|m| m.syncs as f64) / turns,
            fsyncs_per_turn_by_flusher: median_of(|m| m.syncs_by_flusher as f64) / turns,
            mark_fsyncs_per_run: median_of(|m| m.mark_syncs as f64),
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
        "workload: {} x {} x {} x {} ({} events/session; deltas {} B, tool/result ~{} B); {}",
        counted(workload.tasks as u64, "task"),
        counted(workload.turns as u64, "turn"),
        counted(workload.steps as u64, "step"),
        counted(workload.tokens as u64, "token"),
        workload.events_per_session,
        workload.delta_bytes,
        workload.result_bytes,
        counted(workload.runs as u64, "interleaved run")
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
                "mark_fsyncs_per_run": f.mark_fsyncs_per_run,
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
pub(super) fn xml(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Width of the chart.
const SVG_WIDTH: f64 = 860.0;
/// Left margin of the cost panel, where the policy names are.
const SVG_LABEL_WIDTH: f64 = 130.0;
/// Width of the cost panel's plot; right of it is room for the value of the longest bar.
const SVG_COST_PLOT: f64 = 500.0;
/// Height of one policy's row in the cost panel.
const SVG_ROW: f64 = 26.0;
/// Left edge of the latency panel's plot, right of its percent labels.
const SVG_CDF_LEFT: f64 = 60.0;
/// Width of the latency panel's plot; its legend is right of it.
const SVG_CDF_PLOT: f64 = 500.0;
/// Least height of the latency panel's plot (more when the legend needs it).
const SVG_CDF_HEIGHT: f64 = 220.0;
/// Height of one policy's entry in the latency panel's legend.
const SVG_LEGEND_ROW: f64 = 36.0;
/// The most steps drawn of one distribution: enough to show its shape, and few enough to keep
/// the file small however many appends a long bench timed.
const SVG_CDF_STEPS: usize = 200;
/// The least distance between two labelled gridlines, so that their labels do not overlap.
const SVG_GRID_LABEL_GAP: f64 = 48.0;
/// One colour per policy, in report order: the Okabe-Ito palette, which readers with the
/// common colour-vision deficiencies can still tell apart.
const SVG_COLOURS: [&str; 6] = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#000000"];

/// The colour of the `index`th policy.
pub(super) fn colour(index: usize) -> &'static str {
    SVG_COLOURS[index % SVG_COLOURS.len()]
}

/// Whether `value` can be placed on a logarithmic axis.
pub(super) fn plottable(value: f64) -> bool {
    value.is_finite() && value > 0.0
}

/// `ns` nanoseconds with three significant digits, in the largest unit it reaches.
pub(super) fn duration(ns: f64) -> String {
    if !(ns.is_finite() && ns >= 0.0) {
        return "-".to_owned();
    }
    let (value, unit) = if ns >= 1e9 {
        (ns / 1e9, "s")
    } else if ns >= 1e6 {
        (ns / 1e6, "ms")
    } else if ns >= 1e3 {
        (ns / 1e3, "µs")
    } else {
        (ns, "ns")
    };
    let decimals = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.decimals$} {unit}")
}

/// The label of the gridline at 10^`exponent` nanoseconds: "100 ns", "1 µs", "10 ms"...
pub(super) fn decade_label(exponent: i32) -> String {
    let unit = exponent.div_euclid(3).clamp(0, 3);
    let value = 10f64.powi(exponent - 3 * unit);
    let name = ["ns", "µs", "ms", "s"][unit.unsigned_abs() as usize];
    format!("{value} {name}")
}

/// A logarithmic axis of nanoseconds over whole decades, drawn from `left` over `width`.
#[derive(Debug, Clone, Copy)]
pub(super) struct LogScale {
    /// Exponent of the decade at the start of the axis.
    low: i32,
    /// Exponent of the decade at its end; above `low`.
    high: i32,
    left: f64,
    width: f64,
}

impl LogScale {
    /// The whole decades around every plottable value of `values`; 1 ns to 10 ns when there
    /// is none, so that an empty chart still has an axis.
    pub(super) fn over(values: impl IntoIterator<Item = f64>, left: f64, width: f64) -> LogScale {
        let (mut min, mut max) = (f64::INFINITY, 0.0_f64);
        for value in values.into_iter().filter(|&v| plottable(v)) {
            min = min.min(value);
            max = max.max(value);
        }
        if max == 0.0 {
            return LogScale { low: 0, high: 1, left, width };
        }
        let low = min.log10().floor() as i32;
        let high = (max.log10().ceil() as i32).max(low + 1);
        LogScale { low, high, left, width }
    }

    /// The x of `value`, clamped onto the axis; a value that cannot be placed (zero,
    /// negative, NaN) is at its start, so no coordinate is ever NaN or infinite.
    pub(super) fn x(&self, value: f64) -> f64 {
        if !plottable(value) {
            return self.left;
        }
        let decades = f64::from(self.high - self.low);
        let at = ((value.log10() - f64::from(self.low)) / decades).clamp(0.0, 1.0);
        self.left + at * self.width
    }

    /// Each decade's exponent and x, and whether it is labelled: with many decades only every
    /// few are, so that the labels do not run into each other.
    pub(super) fn decades(&self) -> Vec<(i32, f64, bool)> {
        let per_decade = self.width / f64::from(self.high - self.low);
        let every = (SVG_GRID_LABEL_GAP / per_decade).ceil().max(1.0) as i32;
        (self.low..=self.high)
            .map(|e| (e, self.x(10f64.powi(e)), (e - self.low) % every == 0))
            .collect()
    }

    /// Draws a vertical gridline per decade from `top` to `bottom`, labelled below.
    fn draw_grid(&self, out: &mut String, top: f64, bottom: f64) {
        for (exponent, x, labelled) in self.decades() {
            let _ = writeln!(
                out,
                "<line class=\"grid\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{top:.1}\" \
                 y2=\"{bottom:.1}\" stroke=\"#d0d0d0\"/>"
            );
            if labelled {
                let _ = writeln!(
                    out,
                    "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#555555\" \
                     font-size=\"11\">{}</text>",
                    bottom + 14.0,
                    xml(&decade_label(exponent))
                );
            }
        }
    }
}

/// The points of the empirical distribution function of `sorted` (nanoseconds, at least
/// one) as an SVG polyline: a step up at each value, to the share of values at most it.
/// Past [`SVG_CDF_STEPS`] values, the steps are taken at that many equal shares instead.
fn cdf_points(sorted: &[u64], scale: &LogScale, bottom: f64, height: f64) -> String {
    let n = sorted.len();
    let steps = n.min(SVG_CDF_STEPS);
    let y = |share: f64| bottom - share * height;
    // A zero latency cannot be placed on a logarithmic axis; a nanosecond is its floor.
    let x = |index: usize| scale.x((sorted[index] as f64).max(1.0));
    let mut points = vec![format!("{:.1},{:.1}", x(0), y(0.0))];
    let mut share = 0.0;
    for k in 1..=steps {
        // The last value of the k-th of `steps` equal shares of the sorted values.
        let index = (k * n).div_ceil(steps) - 1;
        points.push(format!("{:.1},{:.1}", x(index), y(share)));
        share = (index + 1) as f64 / n as f64;
        points.push(format!("{:.1},{:.1}", x(index), y(share)));
    }
    points.join(" ")
}

/// The start of a standalone SVG of `width` x `height`: the root element, a white
/// background and `title` in bold at the top left. The caller closes it with `</svg>`.
pub(super) fn svg_start(width: f64, height: f64, title: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(
        out,
        "<rect x=\"0\" y=\"0\" width=\"{width}\" height=\"{height}\" fill=\"white\"/>"
    );
    let _ = writeln!(
        out,
        "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>",
        xml(title)
    );
    out
}

/// A standalone SVG of two panels: `cost`, the time per token of each policy as bars on a
/// logarithmic scale; and `latency`, the distribution of the latency of the synced appends of
/// each policy (pooled over runs) as a cumulative distribution on a logarithmic scale.
pub fn svg(workload: &Workload, policies: &[PolicyReport]) -> String {
    let figures: Vec<Figures> = policies.iter().map(PolicyReport::figures).collect();
    let latencies: Vec<Vec<u64>> = policies.iter().map(PolicyReport::pooled_latencies).collect();
    let rows = policies.len() as f64;
    // The vertical layout, top to bottom: title, cost panel (heading, rows, decade labels),
    // latency panel (heading, plot beside its legend, decade labels, axis title).
    let cost_heading = 50.0;
    let cost_top = cost_heading + 10.0;
    let cost_bottom = cost_top + SVG_ROW * rows;
    let latency_heading = cost_bottom + 60.0;
    let cdf_top = latency_heading + 16.0;
    let cdf_height = SVG_CDF_HEIGHT.max(SVG_LEGEND_ROW * rows);
    let cdf_bottom = cdf_top + cdf_height;
    let height = cdf_bottom + 56.0;

    let title = format!(
        "factlog bench: {} x {} x {} x {}, {}",
        counted(workload.tasks as u64, "task"),
        counted(workload.turns as u64, "turn"),
        counted(workload.steps as u64, "step"),
        counted(workload.tokens as u64, "token"),
        counted(workload.runs as u64, "run")
    );
    let mut out = svg_start(SVG_WIDTH, height, &title);

    let _ = writeln!(out, "<g id=\"cost\">");
    let _ = writeln!(out, "<title>time per token of each policy</title>");
    let _ = writeln!(
        out,
        "<text x=\"10\" y=\"{cost_heading}\" font-weight=\"bold\">time per token (bar: \
         median; line: min-max over runs; logarithmic scale)</text>"
    );
    let scale = LogScale::over(
        figures.iter().flat_map(|f| [f.ns_per_token.min, f.ns_per_token.max]),
        SVG_LABEL_WIDTH,
        SVG_COST_PLOT,
    );
    scale.draw_grid(&mut out, cost_top, cost_bottom);
    for (i, (policy, f)) in policies.iter().zip(&figures).enumerate() {
        let top = cost_top + SVG_ROW * i as f64;
        let baseline = top + 17.0;
        let _ = writeln!(out, "<text x=\"10\" y=\"{baseline:.1}\">{}</text>", xml(policy.name));
        let ns = f.ns_per_token;
        if !plottable(ns.median) {
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{baseline:.1}\" fill=\"#555555\">-</text>",
                SVG_LABEL_WIDTH + 6.0
            );
            continue;
        }
        // A bar at the very start of the axis would vanish; its value is written beside it.
        let width = (scale.x(ns.median) - SVG_LABEL_WIDTH).max(2.0);
        let _ = writeln!(
            out,
            "<rect class=\"bar\" x=\"{SVG_LABEL_WIDTH}\" y=\"{:.1}\" width=\"{width:.1}\" \
             height=\"16\" fill=\"{}\" fill-opacity=\"0.6\"/>",
            top + 5.0,
            colour(i)
        );
        let (from, to) = (scale.x(ns.min), scale.x(ns.max));
        let _ = writeln!(
            out,
            "<line x1=\"{from:.1}\" x2=\"{to:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\" \
             stroke-width=\"1.5\"/>",
            top + 13.0,
            top + 13.0
        );
        let ratio = f.ratio_to_floor.median;
        let label = if ratio.is_finite() {
            format!("{} ({ratio:.2}x floor)", duration(ns.median))
        } else {
            duration(ns.median)
        };
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{baseline:.1}\">{}</text>",
            SVG_LABEL_WIDTH + width.max(to - SVG_LABEL_WIDTH) + 6.0,
            xml(&label)
        );
    }
    let _ = writeln!(out, "</g>");

    let _ = writeln!(out, "<g id=\"latency\">");
    let _ = writeln!(out, "<title>distribution of the latency of the synced appends</title>");
    let _ = writeln!(
        out,
        "<text x=\"10\" y=\"{latency_heading:.1}\" font-weight=\"bold\">latency of each synced \
         append: share of appends at most x (pooled over runs; logarithmic scale)</text>"
    );
    let scale = LogScale::over(
        latencies.iter().flatten().map(|&ns| (ns as f64).max(1.0)),
        SVG_CDF_LEFT,
        SVG_CDF_PLOT,
    );
    let _ = writeln!(
        out,
        "<rect x=\"{SVG_CDF_LEFT}\" y=\"{cdf_top:.1}\" width=\"{SVG_CDF_PLOT}\" \
         height=\"{cdf_height:.1}\" fill=\"none\" stroke=\"#999999\"/>"
    );
    scale.draw_grid(&mut out, cdf_top, cdf_bottom);
    for percent in [0.0, 25.0, 50.0, 75.0, 100.0] {
        let y = cdf_bottom - percent / 100.0 * cdf_height;
        let _ = writeln!(
            out,
            "<line class=\"grid\" x1=\"{SVG_CDF_LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" \
             y2=\"{y:.1}\" stroke=\"#d0d0d0\"/>",
            SVG_CDF_LEFT + SVG_CDF_PLOT
        );
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#555555\" \
             font-size=\"11\">{percent:.0} %</text>",
            SVG_CDF_LEFT - 6.0,
            y + 4.0
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#555555\">latency of one \
         synced append</text>",
        SVG_CDF_LEFT + SVG_CDF_PLOT / 2.0,
        cdf_bottom + 34.0
    );
    let legend = SVG_CDF_LEFT + SVG_CDF_PLOT + 20.0;
    for (i, (policy, sorted)) in policies.iter().zip(&latencies).enumerate() {
        // The floor is dashed: it is the reference the other curves are read against.
        let dash = if policy.name == "floor" { " stroke-dasharray=\"6 3\"" } else { "" };
        let top = cdf_top + SVG_LEGEND_ROW * i as f64;
        let summary = if sorted.is_empty() {
            "no synced appends".to_owned()
        } else {
            let at = |p: f64| percentile(sorted, p).map_or(f64::NAN, |ns| ns as f64);
            let _ = writeln!(
                out,
                "<polyline class=\"cdf\" points=\"{}\" fill=\"none\" stroke=\"{}\" \
                 stroke-width=\"1.5\"{dash}/>",
                cdf_points(sorted, &scale, cdf_bottom, cdf_height),
                colour(i)
            );
            format!(
                "p50 {} · p99 {} · max {}",
                duration(at(50.0)),
                duration(at(99.0)),
                duration(at(100.0))
            )
        };
        let _ = writeln!(
            out,
            "<line x1=\"{legend:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"{}\" \
             stroke-width=\"2\"{dash}/>",
            legend + 22.0,
            top + 8.0,
            top + 8.0,
            colour(i)
        );
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            legend + 28.0,
            top + 12.0,
            xml(policy.name)
        );
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#555555\" font-size=\"11\">{}</text>",
            legend + 28.0,
            top + 26.0,
            xml(&summary)
        );
    }
    let _ = writeln!(out, "</g>");
    let _ = writeln!(out, "</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_scale_spans_whole_decades_and_places_absent_values_at_its_start() {
        // The figures of a real run: a hundredfold between factlog and jsonl-every.
        let scale = LogScale::over([1_900.0, 190_000.0, 0.0, f64::NAN], 100.0, 300.0);
        assert_eq!((scale.low, scale.high), (3, 6));
        assert!((scale.x(1_900.0) - (100.0 + 100.0 * 1.9f64.log10())).abs() < 1e-9);
        for absent in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(scale.x(absent), 100.0);
        }
        let labels: Vec<String> = scale.decades().iter().map(|d| decade_label(d.0)).collect();
        assert_eq!(labels, ["1 µs", "10 µs", "100 µs", "1 ms"]);
        let empty = LogScale::over([], 0.0, 10.0);
        assert_eq!((empty.low, empty.high), (0, 1));
    }

    #[test]
    fn durations_have_three_significant_digits() {
        assert_eq!(duration(1_900.0), "1.90 µs");
        assert_eq!(duration(190_000.0), "190 µs");
        assert_eq!(duration(12.5e6), "12.5 ms");
        assert_eq!(duration(f64::NAN), "-");
    }

    #[test]
    fn cdf_points_are_finite_and_bounded_in_number() {
        let scale = LogScale::over([1.0, 1e6], 0.0, 100.0);
        let one = cdf_points(&[0], &scale, 50.0, 50.0);
        assert_eq!(one, "0.0,50.0 0.0,50.0 0.0,0.0");
        let many: Vec<u64> = (1..=10_000).collect();
        let points = cdf_points(&many, &scale, 50.0, 50.0);
        assert_eq!(points.split(' ').count(), 2 * SVG_CDF_STEPS + 1);
        assert!(points.ends_with(",0.0"), "{points}");
        assert!(!points.contains("NaN") && !points.contains("inf"));
    }
}
