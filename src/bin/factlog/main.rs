//! `factlog`: the command-line tool over the factlog library.
//!
//! This crate only parses arguments, calls the library and formats its answers; every decision
//! about the log lives in the library. Each command has its own module. The output contract
//! (formats and exit codes) is used by tests outside the crate and must not drift: see the
//! `CLI` section of the README.
//!
//! Errors are one line `factlog: <message>` on standard error and a non-zero exit code, never
//! a panic. Usage errors exit with 2, like clap's own.

mod append;
mod base64;
mod dump;
mod info;
mod verify;

use std::fmt;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Exit code for a usage error (bad arguments), the same as clap's.
const EXIT_USAGE: u8 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "factlog",
    version,
    about = "Inspect and feed a factlog log: an embedded, crash-safe, segmented record log.",
    after_help = "Example:\n  printf 'hello\\nworld\\n' | factlog append /tmp/factlog-demo\n  \
                  factlog dump /tmp/factlog-demo --format json"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Append each line of standard input as one record and print its sequence number.
    ///
    /// Creates the log if needed. Each line (without its "\n"; any other byte, "\r" included,
    /// is kept) becomes one record. Its sequence number is printed as a decimal line on
    /// standard output, flushed, once the record meets the requested durability. At the end
    /// of input everything is flushed and synced, and the command exits 0.
    #[command(after_help = "Exit codes:\n  0  end of input reached, every record appended, \
                            flushed and synced\n  1  the log could not be opened or an append \
                            failed (the message says why)\n  2  bad arguments\n\n\
                            Example:\n  printf 'hello\\nworld\\n' | factlog append \
                            /tmp/factlog-demo --durability synced")]
    Append(AppendArgs),

    /// Print every record from a sequence number on, one line per record (read-only).
    ///
    /// text: `SEQ<TAB>payload`, where backslash, control characters and bytes that are not
    /// UTF-8 are escaped (`\\`, `\t`, `\n`, `\r`, `\xNN`, `\u{NN}`).
    /// json: `{"seq":N,"payload":"..."}`; when the payload is not valid UTF-8, "payload" holds
    /// a lossy string and `payload_b64` the exact bytes in standard base64.
    #[command(after_help = "Exit codes:\n  0  every record was printed\n  1  the log could not \
                            be opened or read (the message says why)\n  2  bad arguments\n\n\
                            Example:\n  factlog dump /tmp/factlog-demo --from 2 --format json")]
    Dump(DumpArgs),

    /// Check every segment of a log, record by record (read-only).
    ///
    /// Reports each segment and what was found: a clean log, a torn tail (the bytes an open
    /// would cut: segment, offset, length), or corruption (segment, offset, reason).
    #[command(after_help = "Exit codes:\n  0  clean\n  1  only a torn tail, which an open would \
                            cut\n  2  corruption, an unsupported format version, or the log \
                            could not be read; also bad arguments\n\n\
                            Example:\n  factlog verify /tmp/factlog-demo --json")]
    Verify(VerifyArgs),

    /// Show the segments, sequence range and durable sequence number of a log (read-only).
    #[command(after_help = "Exit codes:\n  0  information printed\n  1  the log could not be \
                            opened (the message says why)\n  2  bad arguments\n\n\
                            Example:\n  factlog info /tmp/factlog-demo --json")]
    Info(InfoArgs),
}

#[derive(Debug, clap::Args)]
struct AppendArgs {
    /// Log directory (created if missing).
    dir: PathBuf,
    /// What each append waits for before its sequence number is printed.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Synced)]
    durability: DurabilityArg,
}

#[derive(Debug, clap::Args)]
struct DumpArgs {
    /// Log directory.
    dir: PathBuf,
    /// First sequence number to print (sequence numbers start at 1).
    #[arg(long, value_name = "SEQ", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    from: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = DumpFormat::Text)]
    format: DumpFormat,
}

#[derive(Debug, clap::Args)]
struct VerifyArgs {
    /// Log directory.
    dir: PathBuf,
    /// Print a single JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct InfoArgs {
    /// Log directory.
    dir: PathBuf,
    /// Print a single JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// The `--durability` values; each maps to one `factlog::Durability` tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DurabilityArg {
    /// Return at once; the background flusher writes and syncs the record within a few ms.
    Buffered,
    /// Wait until the record is in the kernel (one write): survives a process crash.
    Flushed,
    /// Wait until the record is on stable storage (fdatasync): survives a power loss.
    Synced,
}

impl From<DurabilityArg> for factlog::Durability {
    fn from(value: DurabilityArg) -> Self {
        match value {
            DurabilityArg::Buffered => factlog::Durability::Buffered,
            DurabilityArg::Flushed => factlog::Durability::Flushed,
            DurabilityArg::Synced => factlog::Durability::Synced,
        }
    }
}

/// The `--format` values of `dump`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DumpFormat {
    /// `SEQ<TAB>payload`, payload escaped.
    Text,
    /// One JSON object per line.
    Json,
}

/// A failed command: the one-line message for standard error and the exit code.
#[derive(Debug)]
struct Failure {
    message: String,
    exit_code: u8,
}

impl Failure {
    fn new(exit_code: u8, message: impl fmt::Display) -> Self {
        Failure { message: message.to_string(), exit_code }
    }
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
        Command::Dump(args) => dump::run(&args),
        Command::Verify(args) => verify::run(&args),
        Command::Info(args) => info::run(&args),
    };
    match outcome {
        Ok(code) => code,
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
            report_failure("a command is required: append, dump, verify or info (see --help)");
            ExitCode::from(EXIT_USAGE)
        }
        _ => {
            report_failure(&one_line(&error.render().to_string()));
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Joins clap's multi-line message into one line, dropping the usage block and the hint.
fn one_line(rendered: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for line in rendered.lines() {
        let line = line.trim();
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if !line.is_empty() {
            parts.push(line.strip_prefix("error: ").unwrap_or(line));
        }
    }
    let mut message = parts.join(" ");
    message.push_str(" (see --help)");
    message
}

/// Writes `factlog: <message>` as a single line on standard error.
fn report_failure(message: &str) {
    let single: String =
        message.chars().map(|c| if c == '\n' || c == '\r' { ' ' } else { c }).collect();
    // Standard error is the last channel left; if it is closed there is nobody to tell.
    let _ = writeln!(std::io::stderr().lock(), "factlog: {single}");
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
            assert!(help.contains("Exit codes:"), "{} --help has no exit codes", sub.get_name());
        }
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
}
