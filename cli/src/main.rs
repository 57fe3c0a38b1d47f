//! `factlog`: the command-line tool over the factlog library.
//!
//! This crate only parses arguments, calls the library and formats its answers; every decision
//! about the log lives in the library. The grammar (commands, arguments, `--help`) is
//! `args.rs`; each command has its own module; this file dispatches, and holds the exit codes,
//! the failures and the buffered output every command shares. The output contract
//! (formats and exit codes) is used by tests outside the crate and must not drift: see
//! `docs/cli.md`.
//!
//! Errors are one line `factlog: <message>` on standard error and a non-zero exit code, never
//! a panic. Every command uses one exit-code table ([`EXIT_CODE_TABLE`], printed in each
//! `--help` by [`args::help_tail`]): 1 operational error, 2 usage (like clap's own), 3 damaged or
//! refused data; library errors are sorted by [`exit_code_of`]. A standard output whose reader went
//! away (`factlog info DIR | head -1`) is not an error: the command stops writing, closes what
//! it opened and exits 0 without a message ([`Output`], [`Failure::closed_output`]).

mod append;
mod args;
mod base64;
mod bench;
mod checkpoint;
mod dump;
mod emit;
mod export;
mod history;
mod info;
mod migrate;
mod operator;
mod progress;
mod purge;
mod recover;
mod replicas;
mod replicate;
mod request_key;
mod restore;
mod retain;
mod salvage;
mod serve;
mod signals;
mod state;
mod tail;
mod tasks;
mod ui;
mod verify;

use std::fmt;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use args::*;
use clap::Parser;

/// Exit code for an operational error: the store or log cannot be opened (missing, not a
/// directory, locked), an I/O failure, an unknown task, a failed write.
const EXIT_FAILURE: u8 = 1;

/// Exit code for a usage error (bad arguments), the same as clap's.
const EXIT_USAGE: u8 = 2;

/// Exit code for damaged or refused data: corruption, an unsupported format version, a record
/// that is not an event where one is required, a migration or check the data refuses. A
/// command that reads up to damage prints what precedes it first.
const EXIT_DAMAGED: u8 = 3;

/// The exit-code table every command shares, printed in each `--help` and stated in the
/// README: one text, so the commands cannot drift apart.
const EXIT_CODE_TABLE: [(u8, &str); 4] = [
    (0, "done"),
    (
        EXIT_FAILURE,
        "operational error: the store or log cannot be opened (missing, not a directory, \
         locked), an I/O failure, an unknown task, a failed write",
    ),
    (EXIT_USAGE, "usage: bad arguments"),
    (
        EXIT_DAMAGED,
        "damaged or refused data: corruption, an unsupported format version, a record that is \
         not an event where one is required, a migration or check refused by the data",
    ),
];

/// A failed command: the one-line message for standard error and the exit code.
#[derive(Debug)]
struct Failure {
    message: String,
    exit_code: u8,
    /// End without a message: standard output was closed by its reader.
    quiet: bool,
}

impl Failure {
    fn new(exit_code: u8, message: impl fmt::Display) -> Self {
        Failure { message: message.to_string(), exit_code, quiet: false }
    }

    /// The reader of standard output went away: the command ends early, with exit 0 and no
    /// message, after its destructors (and a store's close) have run.
    fn closed_output() -> Self {
        Failure { message: String::new(), exit_code: 0, quiet: true }
    }

    /// Whether this is [`Failure::closed_output`].
    fn is_quiet(&self) -> bool {
        self.quiet
    }
}

/// What a failed write to standard output means: a closed pipe ends the command quietly;
/// anything else is a failure with exit 1.
fn output_failed(error: &io::Error) -> Failure {
    if is_broken_pipe(error) {
        Failure::closed_output()
    } else {
        Failure::new(1, format_args!("writing stdout: {error}"))
    }
}

/// Buffered standard output for a command's report, written with `write!` and `writeln!`.
/// The first write error is kept and every later write skipped, so report code needs no error
/// handling on each line; [`Output::finish`] flushes and turns the error into a [`Failure`]
/// ([`output_failed`]: quiet when the reader went away).
struct Output {
    writer: BufWriter<io::Stdout>,
    error: Option<io::Error>,
}

impl Output {
    fn new() -> Output {
        Output { writer: BufWriter::new(io::stdout()), error: None }
    }

    /// The target of `write!(out, ..)` and `writeln!(out, ..)`.
    fn write_fmt(&mut self, args: fmt::Arguments<'_>) {
        if self.error.is_none()
            && let Err(error) = self.writer.write_fmt(args)
        {
            self.error = Some(error);
        }
    }

    /// Flushes what was written; reports the first error.
    fn finish(mut self) -> Result<(), Failure> {
        if self.error.is_none()
            && let Err(error) = self.writer.flush()
        {
            self.error = Some(error);
        }
        match self.error.take() {
            None => Ok(()),
            Some(error) => Err(output_failed(&error)),
        }
    }
}

/// Writes `text` to standard output, as [`Output`] does.
/// Now, in microseconds since the Unix epoch.
fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

fn print_out(text: &str) -> Result<(), Failure> {
    let mut out = Output::new();
    write!(out, "{text}");
    out.finish()
}

/// `factlog completions SHELL`: the script clap_complete generates from the command tree.
fn completions(shell: ShellArg) -> Outcome {
    use clap::CommandFactory;
    let shell = match shell {
        ShellArg::Bash => clap_complete::Shell::Bash,
        ShellArg::Zsh => clap_complete::Shell::Zsh,
        ShellArg::Fish => clap_complete::Shell::Fish,
    };
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "factlog", &mut script);
    print_out(&String::from_utf8_lossy(&script))?;
    Ok(ExitCode::SUCCESS)
}

/// What a command returns: its exit code on success (verify has several), or a failure.
type Outcome = Result<ExitCode, Failure>;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return usage_error(&error),
    };
    let outcome = match cli.command {
        Command::Append(args) => append::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Dump(args) => dump::run(&args),
        Command::Verify(args) => verify::run(&args),
        Command::Info(args) => info::run(&args),
        Command::Tail(args) => tail::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Purge(args) => purge::run(&args),
        Command::Emit(args) => emit::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Ui(args) => ui::run(&args),
        Command::Replicate(args) => replicate::run(&args),
        Command::Retain(args) => retain::run(&args),
        Command::Replicas(args) => replicas::run(&args),
        Command::Recover(args) => recover::run(&args),
        Command::State(args) => state::run(&args),
        Command::History(args) => history::run(&args),
        Command::Tasks(args) => operator::tasks(&args),
        Command::Resolve(args) => operator::resolve(&args),
        Command::Confirm(args) => operator::confirm(&args),
        Command::Approve(args) => operator::approve(&args),
        Command::Deny(args) => operator::deny(&args),
        Command::Cancel(args) => operator::cancel(&args),
        Command::Checkpoint(args) => checkpoint::run(&args),
        Command::Demo(args) => bench::demo(&args),
        Command::Migrate(args) => migrate::run(&args),
        Command::Salvage(args) => salvage::run(&args),
        Command::Restore(args) => restore::run(&args),
        Command::RequestKey(args) => request_key::run(&args),
        Command::Completions(args) => completions(args.shell),
    };
    match outcome {
        Ok(code) => code,
        Err(failure) if failure.is_quiet() => ExitCode::from(failure.exit_code),
        Err(failure) => {
            report_failure(&failure.message);
            ExitCode::from(failure.exit_code)
        }
    }
}

/// Prints `--help` and `--version` as clap does; folds any other clap error into one line.
fn usage_error(error: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            // Help and version go to standard output and exit 0; a failure to print them
            // leaves nothing more useful to do.
            let _ = error.print();
            ExitCode::SUCCESS
        }
        // Without arguments clap would print the whole help as its "error".
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            report_failure(&format!("a command is required: {} (see --help)", command_list()));
            ExitCode::from(EXIT_USAGE)
        }
        _ => {
            report_failure(&one_line(&error.render().to_string()));
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Every visible command, from the clap definition: `append, bench, .. or demo`.
fn command_list() -> String {
    use clap::CommandFactory;
    let command = Cli::command();
    let names: Vec<&str> = command
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set() && sub.get_name() != "help")
        .map(clap::Command::get_name)
        .collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => (*last).to_owned(),
        None => String::new(),
    }
}

/// Joins clap's multi-line message into one line, dropping the usage block and the hint. A
/// line ending with `:` introduces the indented lines after it, which follow it as a list
/// ("not provided: --task <TASK>, --json"); other lines are separate sentences (the error,
/// then a tip), kept apart by `; `.
fn one_line(rendered: &str) -> String {
    let mut message = String::new();
    let mut listing = false;
    for line in rendered.lines() {
        let indented = line.starts_with(char::is_whitespace);
        let line = line.trim();
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if line.is_empty() {
            continue;
        }
        let part = line.strip_prefix("error: ").unwrap_or(line);
        let separator = match (message.is_empty(), indented) {
            (true, _) => "",
            (false, true) if message.ends_with(':') => " ",
            (false, true) if listing => ", ",
            (false, _) => "; ",
        };
        listing = indented && !message.is_empty();
        message.push_str(separator);
        message.push_str(part);
    }
    message.push_str(" (see --help)");
    message
}

/// Says on standard error that a deprecated flag was used and what replaces it; the command
/// goes on as if the new flag had been given.
fn warn_deprecated(flag: &str, instead: &str) {
    report_failure(&format!("warning: {flag} is deprecated and will be removed; use {instead}"));
}

/// Writes `factlog: <message>` as a single line on standard error.
fn report_failure(message: &str) {
    let single: String =
        message.chars().map(|c| if c == '\n' || c == '\r' { ' ' } else { c }).collect();
    // Standard error is the last channel left; if it is closed there is nobody to tell.
    let _ = writeln!(std::io::stderr().lock(), "factlog: {single}");
}

/// Why `path` cannot be a store's directory: it is a file (or another non-directory), or it
/// cannot be examined. `None` when it is a directory or does not exist.
fn not_a_directory(path: &Path) -> Option<Failure> {
    match std::fs::metadata(path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => Some(Failure::new(
            EXIT_FAILURE,
            format_args!("cannot read {}: {error}", path.display()),
        )),
        Ok(meta) if meta.is_dir() => None,
        Ok(_) => Some(Failure::new(
            EXIT_FAILURE,
            format_args!(
                "no store at {}: it is a file, not a directory (name the store's directory)",
                path.display()
            ),
        )),
    }
}

/// Refuses a path that exists and is not a directory, for the commands that create a store
/// or log when it is missing (`append`, `emit`).
fn refuse_file(dir: &Path) -> Result<(), Failure> {
    not_a_directory(dir).map_or(Ok(()), Err)
}

/// Checks that `dir` is a directory holding a log before a command that must not create one
/// opens it, so that a wrong path is one clear line (exit 1) instead of a new, empty store or
/// a library error about a file. Every command that reads an existing log or store calls it
/// first.
fn require_store(dir: &Path) -> Result<(), Failure> {
    if let Some(failure) = not_a_directory(dir) {
        return Err(failure);
    }
    let problem = if dir.exists() {
        let entries = std::fs::read_dir(dir).map_err(|error| {
            Failure::new(EXIT_FAILURE, format_args!("cannot list {}: {error}", dir.display()))
        })?;
        let has_segment = entries.filter_map(Result::ok).any(|entry| {
            entry.file_name().to_str().and_then(factlog::engine::segment::parse_file_name).is_some()
        });
        if has_segment {
            return Ok(());
        }
        "the directory holds no factlog segments (check the path; `factlog emit` creates a store)"
    } else {
        "the directory does not exist (check the path; `factlog emit` creates a store)"
    };
    Err(Failure::new(EXIT_FAILURE, format_args!("no store at {}: {problem}", dir.display())))
}

/// The exit code of a library error: [`EXIT_DAMAGED`] when the data is damaged or refused,
/// [`EXIT_FAILURE`] for everything else (I/O, a lock, a missing log).
fn exit_code_of(error: &factlog::Error) -> u8 {
    if error.is_damaged_or_refused_data() { EXIT_DAMAGED } else { EXIT_FAILURE }
}

/// A failure for a library error met while `doing` something, with the code of the table.
fn library_failure(doing: impl fmt::Display, error: &factlog::Error) -> Failure {
    Failure::new(exit_code_of(error), format_args!("{doing}: {error}"))
}

/// Says on standard error what the open of `dir` cut, if it cut a torn tail: every cut is
/// reported (`format-spec/mark.md`), also by commands whose standard output is for replies.
fn report_cut(command: &str, dir: &Path, report: &factlog::RecoveryReport) {
    if let Some(cut) = &report.tail_cut {
        let mark = if report.mark.is_none() {
            " (the log had no mark: its tail was judged by the frames alone)"
        } else {
            ""
        };
        eprintln!("factlog {command}: {}: {cut}{mark}", dir.display());
    }
}

/// The failure of opening `dir`: `cannot open DIR: why`.
fn open_failure(dir: &Path, error: &factlog::Error) -> Failure {
    library_failure(format_args!("cannot open {}", dir.display()), error)
}

/// The failure of asking the process that serves `dir` to `doing` (`checkpoint`, `purge`,
/// `recover`): `cannot DOING DIR through its server: why`.
fn served_failure<'a>(
    doing: &'a str,
    dir: &'a Path,
) -> impl FnOnce(factlog::client::ClientError) -> Failure + 'a {
    move |error| {
        let dir = dir.display();
        Failure::new(EXIT_FAILURE, format_args!("cannot {doing} {dir} through its server: {error}"))
    }
}

/// Why a command that goes through a served store's socket (`recover`, `checkpoint`,
/// `purge`) cannot open `dir`: when a process that does not share the store holds it, that
/// process and how to share the store, as `emit` says it; otherwise [`open_failure`].
fn open_or_share_failure(dir: &Path, error: &factlog::Error) -> Failure {
    match factlog::client::served::held_by_another(dir, error) {
        Some(factlog::client::served::Held::NotServed { pid }) => Failure::new(
            EXIT_FAILURE,
            factlog::client::served::not_served_message(
                dir,
                error,
                pid,
                "run this command again: it goes through the socket",
            ),
        ),
        _ => open_failure(dir, error),
    }
}

/// Opens the store in `dir` read-only, or says why it cannot be.
fn open_read_only(dir: &Path) -> Result<factlog::Store, Failure> {
    require_store(dir)?;
    factlog::Store::open_read_only(dir, factlog::StoreOptions::new())
        .map_err(|error| open_failure(dir, &error))
}

/// The one line that names damage met by `dump`, `export` or `verify` and points to salvage.
fn damage_message(dir: &Path, error: &factlog::Error) -> String {
    let at = match error.kind() {
        factlog::ErrorKind::Corruption { segment, path, offset, reason } => {
            let file = match segment {
                Some(id) => format!("segment {} ({})", id.0, path.display()),
                None => path.display().to_string(),
            };
            format!("{file} at offset {offset}: {reason}")
        }
        _ => error.to_string(),
    };
    format!(
        "{} is damaged: {at}; every record before the damage was printed; copy every intact \
         record into a new store with `factlog salvage {} --to NEWDIR`",
        dir.display(),
        dir.display()
    )
}

/// Whether an output error only means the reader went away (e.g. `factlog dump | head`).
fn is_broken_pipe(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::BrokenPipe
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_command_help_has_an_example() {
        let mut command = Cli::command();
        for sub in command.get_subcommands_mut() {
            if sub.get_name() == "help" {
                continue;
            }
            let help = sub.render_long_help().to_string();
            assert!(help.contains("Example:"), "{} --help has no example", sub.get_name());
            assert!(help.contains(&exit_code_table()), "{} --help lacks the table", sub.get_name());
        }
    }

    #[test]
    fn the_missing_command_message_names_every_command() {
        let list = command_list();
        for sub in Cli::command().get_subcommands() {
            if sub.get_name() != "help" {
                assert!(list.contains(sub.get_name()), "{list} lacks {}", sub.get_name());
            }
        }
        assert!(list.contains("bench, ") && list.contains(" or "), "{list}");
        assert!(!list.contains("help"), "{list}");
    }

    #[test]
    fn clap_errors_fold_into_one_line() {
        let error = Cli::try_parse_from(["factlog", "append", "/tmp/x", "--durability", "fast"])
            .expect_err("an invalid durability must be rejected");
        let line = one_line(&error.render().to_string());
        assert!(!line.contains('\n'));
        assert!(line.contains("fast"), "{line}");
        assert!(line.contains("synced"), "{line}");
    }

    #[test]
    fn a_missing_argument_follows_the_sentence_that_names_it() {
        let error = Cli::try_parse_from(["factlog", "history", "/tmp/x"])
            .expect_err("history needs --task");
        let line = one_line(&error.render().to_string());
        assert_eq!(
            line,
            "the following required arguments were not provided: --task <TASK> (see --help)"
        );
        let rendered = "error: the following required arguments were not provided:\n  \
                        --task <TASK>\n  --json\n\ntip: one more\n\nUsage: factlog history\n";
        assert_eq!(
            one_line(rendered),
            "the following required arguments were not provided: --task <TASK>, --json; \
             tip: one more (see --help)"
        );
    }
}
