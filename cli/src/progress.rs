//! A progress line on standard error for the long scans of the operator commands and `bench`.
//!
//! The rule: the line appears only when standard error is a terminal, only once the operation
//! has run for [`SHOW_AFTER`], and it is redrawn at most once per [`REDRAW_EVERY`]. It never
//! goes to standard output, and it is erased (`\r` then erase-line) when the operation ends,
//! also on an early return, so the command's own output and its one-line errors start on a
//! clean line. A command that streams its records to standard output (`dump`, `export`) also
//! shows no line when standard output is the same terminal: the records scrolling by are the
//! progress, and a line drawn between them would garble them.
//!
//! The decisions are pure functions ([`enabled`], [`due`], [`line`]) and [`State`] takes the
//! time as an argument, so they are tested without a terminal and without waiting.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use factlog::engine::segment::SEGMENT_SUFFIX;
use parking_lot::Mutex;

/// How long an operation runs before its progress line appears.
pub const SHOW_AFTER: Duration = Duration::from_secs(1);

/// The shortest time between two redraws of the line (at most 10 a second).
pub const REDRAW_EVERY: Duration = Duration::from_millis(100);

/// Characters of the bar between its brackets.
const BAR_WIDTH: usize = 20;

/// The longest label shown; a longer one is cut, so the line fits an 80-column terminal.
const LABEL_CHARS_MAX: usize = 32;

/// The control sequence that returns to the start of the line and erases it.
const ERASE_LINE: &str = "\r\x1b[K";

/// What the position and the total of a [`Progress`] count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes, shown as B, KiB, MiB or GiB.
    Bytes,
    /// Things named by the plural noun (`records`, `measurements`).
    Count(&'static str),
}

/// Whether a progress line may be shown at all: standard error is a terminal and, for a
/// command that streams to standard output, standard output is not one.
pub fn enabled(stderr_is_terminal: bool, stdout_is_terminal: bool, streams_stdout: bool) -> bool {
    stderr_is_terminal && !(streams_stdout && stdout_is_terminal)
}

/// Whether the line is to be drawn now: after [`SHOW_AFTER`] from the start, and
/// [`REDRAW_EVERY`] after the previous draw (`None`: not drawn yet).
pub fn due(elapsed: Duration, since_drawn: Option<Duration>) -> bool {
    elapsed >= SHOW_AFTER && since_drawn.is_none_or(|since| since >= REDRAW_EVERY)
}

/// The text of the line (without the erase sequence): `factlog LABEL: [####    ] 42% 1.2 MiB
/// of 2.9 MiB, 3 s`, or without a total `factlog LABEL: 1.2 MiB, 3 s`.
pub fn line(
    label: &str,
    position: u64,
    total: Option<u64>,
    unit: Unit,
    elapsed: Duration,
) -> String {
    let label: String = label.chars().take(LABEL_CHARS_MAX).collect();
    let seconds = elapsed.as_secs();
    match total {
        Some(total) if total > 0 => {
            let position = position.min(total);
            let filled =
                usize::try_from(u128::from(position) * BAR_WIDTH as u128 / u128::from(total))
                    .unwrap_or(BAR_WIDTH);
            let percent = u128::from(position) * 100 / u128::from(total);
            format!(
                "factlog {label}: [{}{}] {percent:>3}% {} of {}, {seconds} s",
                "#".repeat(filled),
                " ".repeat(BAR_WIDTH - filled),
                amount(position, unit, false),
                amount(total, unit, true),
            )
        }
        _ => format!("factlog {label}: {}, {seconds} s", amount(position, unit, true)),
    }
}

/// `1.5 MiB`, or `1234` (`with_noun`: `1234 records`).
fn amount(value: u64, unit: Unit, with_noun: bool) -> String {
    match unit {
        Unit::Bytes => {
            const STEPS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
            STEPS.iter().find(|(_, size)| value >= *size).map_or_else(
                || format!("{value} B"),
                |(name, size)| format!("{:.1} {name}", value as f64 / *size as f64),
            )
        }
        Unit::Count(noun) if with_noun => format!("{value} {noun}"),
        Unit::Count(_) => value.to_string(),
    }
}

/// The state of one progress line, with the clock passed in.
#[derive(Debug)]
pub struct State {
    label: String,
    total: Option<u64>,
    unit: Unit,
    position: u64,
    started: Instant,
    drawn_at: Option<Instant>,
}

impl State {
    /// A line for an operation that started at `started`.
    pub fn new(label: &str, total: Option<u64>, unit: Unit, started: Instant) -> State {
        State { label: label.to_owned(), total, unit, position: 0, started, drawn_at: None }
    }

    /// Records the position; returns what to write to the terminal at `now`, if anything.
    pub fn update(&mut self, position: u64, now: Instant) -> Option<String> {
        self.position = position;
        self.redraw(now)
    }

    /// What to write at `now` to show the current position, if the line is due.
    pub fn redraw(&mut self, now: Instant) -> Option<String> {
        let elapsed = now.saturating_duration_since(self.started);
        let since = self.drawn_at.map(|at| now.saturating_duration_since(at));
        if !due(elapsed, since) {
            return None;
        }
        self.drawn_at = Some(now);
        let text = line(&self.label, self.position, self.total, self.unit, elapsed);
        Some(format!("{ERASE_LINE}{text}"))
    }

    /// Changes the label and the total (a new phase); the timing goes on.
    pub fn restart(&mut self, label: &str, total: Option<u64>) {
        label.clone_into(&mut self.label);
        self.total = total;
        self.position = 0;
    }

    /// Changes the label only.
    pub fn relabel(&mut self, label: &str) {
        label.clone_into(&mut self.label);
    }

    /// What erases the line: the erase sequence if it was drawn, nothing otherwise.
    pub fn finish(&mut self) -> Option<&'static str> {
        self.drawn_at.take().map(|_| ERASE_LINE)
    }
}

/// A progress line on standard error, erased when it is finished or dropped. Shared by
/// reference: a ticker thread can redraw it while the work updates it.
#[derive(Debug)]
pub struct Progress {
    state: Mutex<State>,
    enabled: bool,
}

impl Progress {
    /// A line for an operation starting now over `total` (`None`: unknown) of `unit`, shown
    /// under the rule of this module; `streams_stdout` for a command whose output is records.
    pub fn new(label: &str, total: Option<u64>, unit: Unit, streams_stdout: bool) -> Progress {
        let enabled = enabled(
            std::io::stderr().is_terminal(),
            std::io::stdout().is_terminal(),
            streams_stdout,
        );
        Progress { state: Mutex::new(State::new(label, total, unit, Instant::now())), enabled }
    }

    /// Sets the position, redrawing the line if it is due.
    pub fn set(&self, position: u64) {
        if self.enabled {
            let text = self.state.lock().update(position, Instant::now());
            draw(text.as_deref());
        }
    }

    /// Starts a new phase: a new label and total, the position back at 0.
    pub fn restart(&self, label: &str, total: Option<u64>) {
        if self.enabled {
            self.state.lock().restart(label, total);
        }
    }

    /// Changes the label; the total and the position stay.
    pub fn relabel(&self, label: &str) {
        if self.enabled {
            self.state.lock().relabel(label);
        }
    }

    /// Runs `work` while a thread redraws the line every [`REDRAW_EVERY`] with the position
    /// `probe` returns: for a library call that reports no progress of its own.
    pub fn while_running<T>(&self, probe: impl Fn() -> u64 + Sync, work: impl FnOnce() -> T) -> T {
        if !self.enabled {
            return work();
        }
        let (stop, stopped) = mpsc::channel::<()>();
        let probe = &probe;
        std::thread::scope(|scope| {
            scope.spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(REDRAW_EVERY)
                {
                    self.set(probe());
                }
            });
            let outcome = work();
            drop(stop);
            outcome
        })
    }

    /// Erases the line if it was drawn.
    pub fn finish(&self) {
        if self.enabled {
            let text = self.state.lock().finish();
            draw(text);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The bytes of the segment files in `dir`: the total of a scan of every segment (0 when the
/// directory cannot be listed; the scan itself then says why).
pub fn segment_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(SEGMENT_SUFFIX))
        .filter_map(|entry| entry.metadata().ok())
        .map(|metadata| metadata.len())
        .sum()
}

fn draw(text: Option<&str>) {
    if let Some(text) = text {
        let mut stderr = std::io::stderr().lock();
        // A progress line that cannot be written is not worth failing the command for.
        let _ = stderr.write_all(text.as_bytes());
        let _ = stderr.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn only_on_a_terminal_and_never_between_streamed_records() {
        assert!(enabled(true, false, false));
        assert!(enabled(true, true, false));
        assert!(enabled(true, false, true));
        assert!(!enabled(true, true, true));
        assert!(!enabled(false, false, false));
        assert!(!enabled(false, true, true));
    }

    #[test]
    fn nothing_before_a_second_then_at_most_ten_a_second() {
        assert!(!due(999 * MS, None));
        assert!(due(1000 * MS, None));
        assert!(!due(1050 * MS, Some(50 * MS)));
        assert!(due(1100 * MS, Some(100 * MS)));
    }

    #[test]
    fn state_draws_on_schedule_and_erases_only_what_it_drew() {
        let t0 = Instant::now();
        let mut state = State::new("dump", Some(200), Unit::Count("records"), t0);
        assert_eq!(state.update(10, t0 + 500 * MS), None);
        assert_eq!(state.finish(), None, "nothing drawn, nothing to erase");
        let drawn = state.update(50, t0 + 1200 * MS).expect("due after a second");
        assert_eq!(
            drawn,
            "\r\x1b[Kfactlog dump: [#####               ]  25% 50 of 200 records, 1 s"
        );
        assert_eq!(state.update(60, t0 + 1250 * MS), None, "throttled");
        assert!(state.redraw(t0 + 1300 * MS).is_some_and(|text| text.contains(" 30% 60 of")));
        assert_eq!(state.finish(), Some("\r\x1b[K"));
        assert_eq!(state.finish(), None);
    }

    #[test]
    fn lines_with_and_without_a_total() {
        let bytes = line("verify", 3 << 20, Some(12 << 20), Unit::Bytes, 2500 * MS);
        assert_eq!(bytes, "factlog verify: [#####               ]  25% 3.0 MiB of 12.0 MiB, 2 s");
        let open = line("info: opening the store", 1536, None, Unit::Bytes, 4 * SHOW_AFTER);
        assert_eq!(open, "factlog info: opening the store: 1.5 KiB, 4 s");
        let full = line("x", 9, Some(9), Unit::Count("runs"), SHOW_AFTER);
        assert!(full.contains("[####################] 100% 9 of 9 runs"), "{full}");
        // A position past the total, or a total of 0, never breaks the bar.
        assert!(line("x", 10, Some(9), Unit::Bytes, SHOW_AFTER).contains("100%"));
        assert_eq!(line("x", 7, Some(0), Unit::Bytes, SHOW_AFTER), "factlog x: 7 B, 1 s");
        let long = line(&"l".repeat(100), 0, None, Unit::Bytes, SHOW_AFTER);
        assert!(long.len() < 80, "{long}");
    }
}
