//! The command line's grammar: the commands, their arguments and their `--help` (each with
//! the shared exit-code table and an example). `main.rs` dispatches a parsed [`Cli`] to the
//! command's module; a module reads its own `...Args` from here.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::EXIT_CODE_TABLE;

/// Width the exit-code lines of `--help` are wrapped to.
pub(crate) const HELP_WIDTH: usize = 90;

/// The end of a command's `--help`: the shared exit-code table, what the codes mean for this
/// command (`details`, may be empty), and the example lines.
pub(crate) fn help_tail(details: &[(u8, &str)], example: &str) -> String {
    let mut out = exit_code_table();
    if !details.is_empty() {
        out.push_str("\nFor this command:\n");
        for &(code, meaning) in details {
            push_wrapped(&mut out, code, meaning);
        }
    }
    out.push_str("\nExample:\n");
    out.push_str(example);
    out
}

/// The shared table as `--help` prints it: a heading and one wrapped line per code.
pub(crate) fn exit_code_table() -> String {
    let mut out = String::from("Exit codes (the same for every command):\n");
    for (code, meaning) in EXIT_CODE_TABLE {
        push_wrapped(&mut out, code, meaning);
    }
    out
}

/// Appends `  CODE  meaning`, wrapped at [`HELP_WIDTH`] with continuation lines indented
/// under the meaning.
pub(crate) fn push_wrapped(out: &mut String, code: u8, meaning: &str) {
    let mut line = format!("  {code}  ");
    let indent = line.len();
    for word in meaning.split_whitespace() {
        if line.len() > indent && line.len() + 1 + word.len() > HELP_WIDTH {
            out.push_str(&line);
            out.push('\n');
            line = " ".repeat(indent);
        } else if line.len() > indent {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
}

#[derive(Debug, Parser)]
#[command(
    name = "factlog",
    version,
    about = "Inspect and feed a factlog log or store: an embedded, crash-safe, segmented record \
             log with the typed events of agent harnesses on top.",
    after_help = help_tail(&[], "  printf 'hello\\nworld\\n' | factlog append /tmp/factlog-demo\n  \
                  factlog dump /tmp/factlog-demo --json\n  \
                  echo '{\"task\":\"t1\",\"type\":\"user/message\",\"text\":\"hi\"}' | \
                  factlog emit /tmp/factlog-store")
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Append each line of standard input as one record and print its sequence number.
    ///
    /// Creates the log if needed; refuses a harness store (a raw record there is not an event:
    /// use `factlog emit`). Each line (without its "\n"; any other byte, "\r" included, is
    /// kept) becomes one record. Its sequence number is printed as a decimal line on
    /// standard output (`--json`: {"seq":N,"durability":"buffered|flushed|synced"}), flushed,
    /// once the record meets the requested durability. At the end
    /// of input everything is flushed and synced, and the command exits 0; also when standard
    /// output is closed, after syncing what was appended.
    #[command(after_help = help_tail(
        &[
            (0, "end of input reached, every record appended, flushed and synced"),
            (1, "the log could not be opened or an append failed, or DIR is a harness store or a file"),
        ],
        concat!(
            "  printf 'hello\\nworld\\n' | factlog append /tmp/factlog-demo --json",
        ),
    ))]
    Append(AppendArgs),

    /// Measure the persistence cost per token of an agent session under each policy.
    ///
    /// Runs the agent-session workload (per turn: turn/start, user/message, then per step
    /// step/start, TOKENS assistant/delta, tool/call, tool/result, step/end; then turn/end)
    /// under each policy, interleaved over --runs runs, in a scratch directory on the disk to
    /// measure: factlog (the store's default tier per type, each step closed by one batch of
    /// tool/result + step/end: 2*steps+1 fdatasyncs per turn), all-synced (every event
    /// Synced), all-buffered (the same encoded records through the raw Log, Buffered, one
    /// final sync: the store itself refuses Buffered for its Synced-default types),
    /// jsonl-every and jsonl-critical (a JSONL file synced after every line, or only after
    /// tool/call, tool/result and turn/end) and floor, the raw write+fdatasync floor: measured
    /// right after each run's factlog session, it replays that session's fdatasyncs, each
    /// after one pwrite of the bytes written before it, into a preallocated file. It has the
    /// same number of syncs the factlog policy performed in the same run (with --tasks above
    /// 1 the group commit merges some, differently from run to run). all-synced and
    /// jsonl-every run only --every-turns turns and are reported per token like the others.
    ///
    /// Reports per policy: ns per token (median, min-max over runs), bytes on disk per token,
    /// fsyncs per turn, p50/p99 latency of the synced appends, and the ratio to the floor of
    /// the same run. --json prints one object: {"workload":{"turns","steps","tokens",
    /// "delta_bytes","result_bytes","tasks","runs","every_turns","events_per_session"},
    /// "policies":[{"name","note","turns","tokens","ns_per_token":{"median","min","max"},
    /// "bytes_per_token","fsyncs_per_turn","fsyncs_per_turn_by_flusher",
    /// "mark_fsyncs_per_run" (fdatasyncs of the log mark, not in fsyncs_per_turn),
    /// "synced_appends_per_run","synced_latency_us":{"p50","p99"} (null without synced
    /// appends),"ratio_to_floor":{"median","min","max"}}]}. --svg FILE writes a chart: the
    /// time per token of each policy (log scale) and the cumulative distribution of its
    /// synced-append latencies (log scale). A progress line goes to standard error when it is
    /// a terminal and the bench takes over a second.
    #[command(after_help = help_tail(
        &[
            (0, "every policy measured, the report printed and the SVG written"),
            (1, "a policy could not run, or the scratch directory, the report or (after the report is printed) the SVG could not be written"),
            (2, "also an --svg FILE that cannot be created (checked before measuring)"),
        ],
        concat!(
            "  factlog bench --runs 3\n",
            "  factlog bench --turns 2 --steps 2 --tokens 10 --runs 1 --json --svg /tmp/bench.svg",
        ),
    ))]
    Bench(factlog_bench::compare::BenchArgs),

    /// Print every record from a sequence number on, one line per record (read-only).
    ///
    /// A record holding a typed event (written by `factlog emit` or the library's `Store`) is
    /// decoded. text: `SEQ<TAB>TIME<TAB>TYPE<TAB>TASK<TAB>REVISION<TAB>body as compact JSON`
    /// (TIME in RFC 3339 UTC, the task escaped like a payload). --json: one object per line,
    /// `{"seq":N,"task":"..","revision":N,"timestamp_us":N,"time":"2026-12-03T14:42:26.123456Z",
    /// "type":"tool/call", ..body fields}`; a body field named like an envelope field is
    /// written as `body.NAME`. `--format json|text` is a deprecated alias (of --json, and of
    /// the default text), still accepted.
    ///
    /// Any other record (a raw `factlog append` record), and every record with `--raw`:
    /// text: `SEQ<TAB>payload`, where backslash, control characters and bytes that are not
    /// UTF-8 are escaped (`\\`, `\t`, `\n`, `\r`, `\xNN`, `\u{NN}`).
    /// --json: `{"seq":N,"payload":"..."}`; when the payload is not valid UTF-8, "payload" holds
    /// a lossy string and `payload_b64` the exact bytes in standard base64. A record that
    /// starts like an event but does not decode is printed raw; with --json with a
    /// `corrupt_event` field saying why.
    ///
    /// `--task` and `--type` keep only the events of that task and of that type (by their
    /// envelope; records that are not events are left out); a --task the store has no events
    /// of is refused (exit 1). `--to` ends the range, inclusive. `--since` (inclusive) and
    /// `--until` (exclusive) keep the events whose timestamp_us is in the range, each event
    /// checked on its own (clocks may jump back); records that are not events are left out.
    ///
    /// On a damaged log every selected record before the damage is printed, then one line on
    /// standard error names the damage (segment, offset, reason) and points to `factlog
    /// salvage DIR --to NEWDIR`; a range that ends before the damage (`--to`) is printed whole.
    #[command(after_help = help_tail(
        &[
            (0, "every selected record was printed"),
            (1, "also an unknown --task"),
            (2, "also an unknown --type, --to before --from, --until before --since"),
            (3, "the log is damaged within the range: every selected record before the damage was printed, standard error names it and points to `factlog salvage`"),
        ],
        concat!(
            "  factlog dump /tmp/factlog-demo --from 2 --json\n",
            "  factlog dump /tmp/factlog-store --since 2026-12-03T14:00:00Z --until 2026-12-04\n",
            "  factlog dump /tmp/factlog-store --task t1 --type tool/call --to 40",
        ),
    ))]
    Dump(DumpArgs),

    /// Check every segment of a log, record by record (read-only).
    ///
    /// Reports each segment and what was found: a clean log, a torn tail (the bytes an open
    /// would cut: segment, offset, length), or corruption (segment, offset, reason).
    ///
    /// With `--deep`, the store's events are then folded from scratch and compared with the
    /// newest snapshot and with the state an open builds.
    ///
    /// On corruption the segments before it are still reported, and one line on standard error
    /// names the damage and points to `factlog salvage DIR --to NEWDIR`.
    #[command(after_help = help_tail(
        &[
            (0, "clean, or only a torn tail (which an open cuts; the report says torn_tail)"),
            (3, "corruption (standard error then points to `factlog salvage`) or an unsupported format version; with --deep also a record that is not an event, or a snapshot or state that differs from the fold of the events"),
        ],
        concat!(
            "  factlog verify /tmp/factlog-demo --json\n",
            "  factlog verify /tmp/factlog-store --deep",
        ),
    ))]
    Verify(VerifyArgs),

    /// Show the segments, sequence range and durable sequence number of a log (read-only).
    ///
    /// For a store also its snapshot files (covered seq, size, valid or why not), its tasks
    /// (id, revision, last seq), the total sizes and the seqs removed by a purge. A log of raw
    /// records has no tasks: they are skipped with a note.
    #[command(after_help = help_tail(
        &[
            (0, "information printed"),
            (3, "the log is damaged so that it cannot be opened, or the report was printed \
                 but the store cannot be folded because it is damaged"),
        ],
        concat!(
            "  factlog info /tmp/factlog-demo --json",
        ),
    ))]
    Info(InfoArgs),

    /// Print the records of a log like `dump`; with --follow keep printing new ones (read-only).
    ///
    /// Lines as `dump` prints them (`--json`: as `dump --json`); `--task` keeps one task's
    /// events, as in `dump`, checked against the store once at the start. With `-f` the command
    /// runs beside a live writer as a second process: every 100 ms it opens the log again
    /// read-only (no lock) and prints the records written since the last one printed, until it
    /// is interrupted or its reader goes away. A record shows once it is at least flushed.
    #[command(after_help = help_tail(
        &[
            (0, "every record printed (without -f), or the reader of standard output went away"),
            (1, "also an unknown --task; with -f, the log unreadable for 5 s in a row"),
            (3, "the log is damaged: the records before the damage were printed"),
        ],
        concat!(
            "  factlog tail /tmp/factlog-store -f --json",
        ),
    ))]
    Tail(TailArgs),

    /// Export every event of a store as JSON Lines, one object per event (read-only).
    ///
    /// Each line is the typed JSON of `dump --json` plus the body schema: `seq`, `task`,
    /// `revision`, `timestamp_us`, `time` (RFC 3339 UTC), `type`, `schema`, then the body
    /// fields (one named like an envelope field as `body.NAME`). JSON Lines is the only format
    /// and the default: `--json` may be given, `--jsonl` is a deprecated alias. A store holds
    /// only events: a record that is not one (a raw `factlog append` record, a damaged event)
    /// stops the export with exit 3, naming the record, after the lines before it.
    ///
    /// `--task` keeps one task's events (a task the store has no events of: exit 1);
    /// `--since` (inclusive) and `--until` (exclusive) keep the events whose timestamp_us is
    /// in the range, each event checked on its own (clocks may jump back).
    ///
    /// On a damaged store every event before the damage is exported, then one line on
    /// standard error names the damage and points to `factlog salvage DIR --to NEWDIR`.
    #[command(after_help = help_tail(
        &[
            (0, "every event exported"),
            (1, "also an unknown --task"),
            (2, "also --until before --since"),
            (3, "the store is damaged, or holds a record that is not an event: every event before it was exported and standard error names it"),
        ],
        concat!(
            "  factlog export /tmp/factlog-store --task t1 > t1.jsonl\n",
            "  factlog export /tmp/factlog-store --since 2026-12-03T14:00:00+01:00 --json",
        ),
    ))]
    Export(ExportArgs),

    /// Reclaim disk space: delete the log segments the oldest valid snapshot covers.
    ///
    /// Its one mode (`--before-snapshot`, the default): deletes the sealed segments whose every
    /// event the oldest valid snapshot covers, never the active one, and prints them. Full
    /// replay from the first event and the history before the first kept event are no longer
    /// possible afterwards (`verify --deep` then rebuilds from that snapshot). Without a valid
    /// snapshot nothing is removed.
    /// `--dry-run` opens the store read-only and only prints what would be removed.
    #[command(after_help = help_tail(
        &[
            (0, "done (also when nothing was to be removed)"),
            (1, "also a segment that could not be removed"),
        ],
        concat!(
            "  factlog checkpoint /tmp/factlog-store\n",
            "  factlog purge /tmp/factlog-store --dry-run\n",
            "  factlog purge /tmp/factlog-store --json",
        ),
    ))]
    Purge(PurgeArgs),

    /// Append typed events, one JSON object per line of standard input, and reply to each.
    ///
    /// Protocol version 1, specified in format-spec/protocol.md. Creates the store if needed.
    /// Each line is an object with "task", "type" (an event type such as "tool/call") and the
    /// body fields of that type; optional "id" (a string or number: echoed as the first key of
    /// the reply, never stored), "expected_revision" (compare-and-set on the task's revision)
    /// and "durability" (buffered, flushed or synced; never less than the type's default for a
    /// high-risk type). A value written as {"$secret": "..."} is replaced on disk by a
    /// reference and never printed.
    ///
    /// Every non-empty line gets one JSON reply, in order, once its event meets its
    /// durability; blank lines get none. Written: {"seq":N,"task":"..","revision":N,
    /// "durability":"buffered|flushed|synced"} (what the append waited for; buffered is not
    /// durable yet). A tool/call whose request was already answered: {"seq":RESULT_SEQ,
    /// "task":"..","revision":N,"durability":"synced","duplicate":true,"call_id":"..",
    /// "receipt":..} (nothing written: do not run the tool again). A refusal:
    /// {"error":"CODE","message":".."} with CODE one of INVALID_EVENT, STALE_REVISION (plus
    /// "expected" and "actual"), NEEDS_CONFIRMATION, APPROVAL_REFUSED, LIMIT_EXCEEDED,
    /// NEEDS_RECOVERY (plus "task" and "calls": [{"call_id","tool","plan"}]) or CALL_ID_REUSED
    /// (plus "task", "call_id" and "earlier": {"seq","tool","args_digest"}) or
    /// UNMARKED_SECRET (plus "task", "path", "shape"; only with --refuse-unmarked-secrets).
    /// Nothing is written for a refused line and the stream goes on. A written event holding
    /// a value shaped like a credential (an API key, a bearer token, a private key) that is
    /// not marked {"$secret": ..} gets "warnings": [{"path","shape","message"}] in its reply
    /// (never the value). An I/O failure of the store is
    /// replied to the same way (code IO, DISK_FULL or POISONED) and ends the command. At the
    /// end of input the store is synced and closed. A closed standard output ends the command
    /// quietly (exit 0) after the store is closed: nobody reads the replies.
    ///
    /// --ack durable-only: no reply for an event that met only buffered durability; every
    /// printed reply carries "covers":N, the lines it answers (the skipped ones since the
    /// previous reply and its own); before an error or duplicate reply the store is synced
    /// and {"covers":N,"durability":"synced"} covers the skipped lines; the end of input gives
    /// {"end":true,"covers":N,"durability":"synced"}.
    ///
    /// A store held by a process that shares it (factlog serve, Store::serve) is written
    /// through its socket DIR/factlog.sock, with the same replies (--ack durable-only
    /// included); held by one that does not share it, the error names its pid.
    ///
    /// Each emit process is a holder: the first line for a task that an earlier process wrote
    /// (crashed, killed, or ended at the end of its input) takes the task over, as `recover`
    /// would: calls left in flight get an unknown outcome, once and run approvals and pending
    /// cancels expire, the open turn and step close, and a high-risk task asks for a
    /// control/resume again. A side-effecting call is refused with NEEDS_RECOVERY until each
    /// unknown outcome that is not read-only has a tool/result or a retry of the same request.
    #[command(after_help = help_tail(
        &[
            (0, "end of input reached (refused lines included), the store synced and closed; a closed standard output also exits 0"),
            (1, "also a failed write to the store"),
        ],
        concat!(
            "  echo '{\"id\":1,\"task\":\"t1\",\"type\":\"task/contract\",\"goal\":\"publish\",\"risk\":\"high\"}' | factlog emit /tmp/factlog-store\n",
            "  factlog emit /tmp/factlog-store --ack durable-only < events.jsonl",
        ),
    ))]
    Emit(EmitArgs),

    /// Share a store with other processes over DIR/factlog.sock until SIGTERM or SIGINT.
    ///
    /// Runs in the foreground and logs connections to standard error. Clients (the Rust
    /// client, or any program speaking format-spec/server.md) send the request lines of
    /// format-spec/protocol.md after a hello line and get the same replies as from emit;
    /// compare-and-set and group commit work across them. Only the same user (or the
    /// group given by --allow-group) may connect. On SIGTERM/SIGINT it stops taking
    /// connections, answers the requests in progress, syncs and closes the store.
    #[command(after_help = help_tail(
        &[
            (0, "stopped by SIGTERM or SIGINT, the store synced and closed"),
            (1, "the store cannot be opened or its socket created (locked by another process, a directory writable by others)"),
        ],
        "  factlog serve /tmp/factlog-store &",
    ))]
    Serve(ServeArgs),

    /// Serve a local web console of a store until SIGTERM or SIGINT: the tasks that wait for
    /// a person, every task's timeline, live updates, the store's health, and the operator's
    /// answers as buttons.
    ///
    /// Prints the URL to open, with a random token every request must carry. Reads the store
    /// without holding it (read-only opens, or a client of the process that serves it) and
    /// records answers as `factlog resolve`, `confirm`, `approve`, `deny` and `cancel` do.
    /// Listens on 127.0.0.1 with a port the system chooses unless --addr says otherwise; an
    /// address that is not loopback needs --allow-remote. docs/console.md has the details.
    #[command(after_help = help_tail(
        &[
            (0, "stopped by SIGTERM or SIGINT"),
            (1, "the store cannot be read, or the address cannot be listened on"),
            (2, "bad arguments, or an address that is not loopback without --allow-remote"),
        ],
        "  factlog ui /tmp/factlog-store --addr 127.0.0.1:8484",
    ))]
    Ui(UiArgs),

    /// Ship a store to a replica (file:///DIR, s3://, gs://, az://) beside its writer.
    ///
    /// Reads the store's files only (the writer never waits for it) and ships their complete
    /// frames and snapshot files as self-checking objects (format-spec/replication.md), at
    /// once when the store grows (it looks every 100 ms) and at least every --interval-ms.
    /// One run per replica at a time: a lease object, given back on a clean stop; --takeover
    /// ends the lease of a run known to be gone, and is recorded. Runs until SIGTERM or
    /// SIGINT (then ships what is left), or one round with --once.
    #[command(after_help = help_tail(
        &[
            (0, "stopped (or --once done) with everything found shipped and the lease given back"),
            (1, "the replica cannot be reached or its lease is held by another run"),
            (3, "the replica is damaged or differs from the store (it was rebuilt or restored)"),
        ],
        "  factlog replicate /tmp/factlog-store --to file:///mnt/backup/agent-1 --once",
    ))]
    Replicate(ReplicateArgs),

    /// Remove a replica's objects that a newer remote snapshot makes unnecessary.
    ///
    /// Keeps the newest three snapshot objects and removes older ones, and removes the
    /// segments whose every record the oldest kept snapshot covers (once it is checked to
    /// load), as purge does locally; the newest segment is never removed; and the lease
    /// objects of superseded epochs. A self-checking retention record, created first, says
    /// where the history now begins and which snapshot stands for what was removed, so that
    /// replicators do not ship those segments again and restores know the gap is on purpose.
    /// --dry-run prints the plan and removes nothing.
    #[command(after_help = help_tail(
        &[
            (0, "removed (or, with --dry-run, planned) what the plan names"),
            (1, "the replica cannot be reached or is not one"),
            (3, "a retention record of the replica is damaged or not its own (nothing removed)"),
        ],
        "  factlog retain file:///mnt/backup/agent-1 --dry-run",
    ))]
    Retain(RetainArgs),

    /// Inspect a replica: what it holds (list), or a scrub of every object (verify).
    ///
    /// `list` prints the replica's identity, its leases, its retention record, its log range
    /// and segments, its snapshots and the names that are none of its objects; with --store
    /// DIR also how many records the local store holds that the replica does not. `verify`
    /// reads every object a restore of all of it would use and checks it as the restore does
    /// (format-spec/replication.md, "Inspecting a replica"), and every snapshot object, writing
    /// nothing; a gap or damage is named. --json prints one object
    /// (format-spec/schema/replicas-list.json, replicas-verify.json).
    #[command(after_help = help_tail(
        &[
            (0, "listed, or verified without a problem"),
            (1, "the replica cannot be reached, is not one, or the store cannot be read"),
            (3, "damage, a gap, a foreign object or an old format in the replica (verify also: an unusable snapshot object)"),
        ],
        concat!(
            "  factlog replicas list file:///mnt/backup/agent-1 --store /tmp/factlog-store\n",
            "  factlog replicas verify file:///mnt/backup/agent-1 --json",
        ),
    ))]
    Replicas(crate::replicas::ReplicasArgs),

    /// Restore every task after a restart: classify open tool calls, expire approvals.
    ///
    /// Runs the library's recovery (writing its repair events, synced) and prints, per task,
    /// each tool call that needed a decision with its outcome (not_started, completed,
    /// outcome_unknown) and plan (reschedule, reuse_receipt, retry, retry_same_key, verify,
    /// ask_user), the approvals and cancel signals that expired, the step and turn closed as
    /// interrupted, and whether the task may resume by itself (ready) or needs a recorded
    /// control/resume first (needs_confirmation). Running it again writes nothing.
    /// `--dry-run` opens the store read-only and writes nothing at all.
    #[command(after_help = help_tail(
        &[
            (0, "report printed"),
            (1, "also a repair that could not be written"),
        ],
        concat!(
            "  factlog recover /tmp/factlog-store --dry-run --json",
        ),
    ))]
    Recover(RecoverArgs),

    /// Show the folded state of every task, or of one (read-only).
    ///
    /// Text: per task its goal, risk, phase, turn and step, tool calls with their status,
    /// side effects by request key, approvals and whether it needs a resume confirmation.
    /// JSON, with or without --task: {"last_seq":N,"tasks":{ID: state}}, with --task holding
    /// only that task. An approval's "expires_at_us" is followed by "expires_at" (RFC 3339).
    #[command(after_help = help_tail(
        &[
            (0, "state printed"),
            (1, "also an unknown --task"),
        ],
        concat!(
            "  factlog state /tmp/factlog-store --task t1 --json",
        ),
    ))]
    State(StateArgs),

    /// Show the model-visible history of a task (read-only).
    ///
    /// Messages, assembled streamed text, and every tool call paired with its result or an
    /// explicit unknown outcome; a context summary replaces what came before it. Text: one
    /// entry per line (`user: ..`, `assistant: ..`, `tool CALL TOOL -> OUTCOME ..`,
    /// `summary: ..`). JSON: one object per line with a "role" field and the "seq" of the
    /// event it came from; a tool entry also has "result_seq", the seq of its tool/result or
    /// recorded unknown outcome, once it has one.
    #[command(after_help = help_tail(
        &[
            (0, "history printed"),
            (1, "also an unknown --task"),
        ],
        concat!(
            "  factlog history /tmp/factlog-store --task t1",
        ),
    ))]
    History(HistoryArgs),

    /// List the tasks with what each waits for, from the folded state (read-only).
    ///
    /// Per task: its phase, last event seq and time, and what it waits for a person for:
    /// needs_confirmation (a restarted high-risk task waits for a control/resume),
    /// outcome_unknown (a call that may or may not have run blocks side effects: its call,
    /// tool and recovery plan), approval_pending (an approval requested and not answered),
    /// paused. Text starts with the store's holder. --attention lists only the tasks that
    /// wait, the oldest wait first. --json prints one object per task: {"task","phase",
    /// "revision","last_seq","last_time","attention":[{"reason","since_seq",..}]}
    /// (format-spec/schema/tasks-line.json). Answer with resolve, confirm, approve, deny.
    #[command(after_help = help_tail(
        &[(0, "tasks listed (also when none waits)")],
        concat!(
            "  factlog tasks /tmp/factlog-store --attention",
        ),
    ))]
    Tasks(crate::operator::TasksArgs),

    /// Say what happened to a call whose outcome is unknown, as a person who checked.
    ///
    /// --result JSON records a tool/result (outcome ok, the JSON as its output, --receipt as
    /// its receipt) marked as given by an operator; --not-run records a tool/not_run: the
    /// call never ran, so it may be dispatched again. Refused when the call's outcome is not
    /// unknown. Like every answer: recorded with who gave it (--as, default the user running
    /// the command) and --note, through the holder's rules (embedded, or through the socket
    /// of a served store; refused, saying how to serve it, on a store another process holds
    /// without serving it), with a compare-and-set on the task's revision; the same command
    /// run again writes nothing and says where the answer is. Shows in history.
    #[command(after_help = help_tail(
        &[
            (0, "answer recorded, or already recorded"),
            (1, "nothing to answer, an unknown task, or the store held without being served"),
        ],
        concat!(
            "  factlog resolve /tmp/factlog-store --task t1 --call c1 --result '{\"sent\":true}' --as alice\n",
            "  factlog resolve /tmp/factlog-store --task t1 --call c2 --not-run --note 'outbox empty'",
        ),
    ))]
    Resolve(crate::operator::ResolveArgs),

    /// Confirm that a task may resume: the control/resume a restarted high-risk task (or a
    /// paused one) waits for.
    ///
    /// Refused when the task waits for no confirmation and is not paused. Recorded as resolve
    /// says (who, note, served or embedded, once).
    #[command(after_help = help_tail(
        &[
            (0, "answer recorded, or already recorded"),
            (1, "nothing to answer, an unknown task, or the store held without being served"),
        ],
        "  factlog confirm /tmp/factlog-store --task t1 --as alice",
    ))]
    Confirm(crate::operator::TaskAnswerArgs),

    /// Grant a requested approval, with a scope (once, run, persistent).
    ///
    /// Refused when the approval was not requested or was answered. Recorded as resolve says.
    #[command(after_help = help_tail(
        &[
            (0, "answer recorded, or already recorded"),
            (1, "nothing to answer, an unknown task, or the store held without being served"),
        ],
        "  factlog approve /tmp/factlog-store --task t1 --approval a1 --scope once",
    ))]
    Approve(crate::operator::ApprovalArgs),

    /// Deny a requested approval.
    ///
    /// Refused when the approval was not requested or was answered. Recorded as resolve says.
    #[command(after_help = help_tail(
        &[
            (0, "answer recorded, or already recorded"),
            (1, "nothing to answer, an unknown task, or the store held without being served"),
        ],
        "  factlog deny /tmp/factlog-store --task t1 --approval a1 --note 'not this week'",
    ))]
    Deny(crate::operator::ApprovalArgs),

    /// Cancel a task's running turn: a control/cancel the harness answers by ending the turn.
    ///
    /// Refused while a cancel is already pending. Recorded as resolve says.
    #[command(after_help = help_tail(
        &[
            (0, "answer recorded, or already recorded"),
            (1, "a cancel already pending, an unknown task, or the store held without being served"),
        ],
        "  factlog cancel /tmp/factlog-store --task t1 --as alice",
    ))]
    Cancel(crate::operator::TaskAnswerArgs),

    /// Write a snapshot of every task's state now and print its path and covered seq.
    ///
    /// The snapshot is folded from the events (never taken from memory) and written
    /// atomically; the newest few are kept. It only speeds up the next open.
    #[command(after_help = help_tail(
        &[
            (0, "snapshot written"),
            (1, "also a snapshot that could not be written"),
        ],
        concat!(
            "  factlog checkpoint /tmp/factlog-store --json",
        ),
    ))]
    Checkpoint(CheckpointArgs),

    /// Run a simulated agent harness whose writer is killed mid tool call, then recover it.
    ///
    /// A child process (this binary again) runs a high-risk task: streamed deltas, a
    /// read-only search, approvals, then a side-effecting publish call with a request key
    /// into a simulated service (`external/articles.json` in the store), and is killed with
    /// SIGKILL once that call is synced and publishing started. The demo then reopens the
    /// store, runs recovery and prints its report (completed and unknown calls with their
    /// plans, expired approvals, why resuming needs confirmation), confirms, resolves the
    /// unknown call by its plan without publishing twice, finishes the task and prints what
    /// persistence cost. The seed picks the service (queryable: verify; idempotent:
    /// retry_same_key) and whether the article landed before the crash. Without DIR it runs
    /// in a temporary directory and leaves nothing behind.
    #[command(after_help = help_tail(
        &[
            (0, "the demo ran as described, with exactly one side effect"),
            (1, "it could not run or did not go as designed"),
        ],
        concat!(
            "  factlog demo\n",
            "  factlog demo /tmp/factlog-demo-store --seed 3 --json",
        ),
    ))]
    Demo(factlog_bench::demo::DemoArgs),

    /// Rewrite a store into a newer format version, checked, backed up and switched atomically.
    ///
    /// Opens the store read-only and checks that every event reads the same once rewritten
    /// (same events per task, same folded-state digest, same recovery plan), so that a refusal
    /// writes nothing; then opens it for writing, copies a backup
    /// (default: DIR.backup-vFROM beside it), rewrites the segments into staged files, reads
    /// them back and checks again, then switches with one atomic rename and appends a
    /// state/migrated audit event to every task. A crash at any point leaves the old or the
    /// new store, never a mix. Running it again is a no-op; `--dry-run` writes nothing.
    /// An event that cannot be rewritten without guessing stops it, naming the event. A
    /// failed check of the staged files removes them and the backup again.
    #[command(after_help = help_tail(
        &[
            (0, "migrated, already at the version, or dry run printed"),
            (1, "not migrated, the store unchanged; or the switch was committed but not finished (the next writable open finishes it)"),
            (2, "also a --to this build cannot write"),
            (3, "the data refused the migration (an event that cannot be rewritten without guessing, a check that differs) or is damaged; nothing changed"),
        ],
        concat!(
            "  factlog migrate /tmp/factlog-store --dry-run\n",
            "  factlog migrate /tmp/factlog-store --to 2 --json",
        ),
    ))]
    Migrate(MigrateArgs),

    /// Copy every intact record of a damaged log into a new store, with the same seqs.
    ///
    /// Reads DIR without writing anything to it (no lock, no preallocation), copies every
    /// valid record before and after each damaged range into NEWDIR (which must not exist or
    /// be empty, and must lie outside DIR) with its sequence number, and declares each range
    /// of lost seqs in NEWDIR's GAPS file, at a segment boundary (format-spec/salvage.md).
    /// When the records are events it then opens the new store and runs the harness recovery
    /// on it, so a tool call whose tool/result was lost comes back as outcome_unknown, never
    /// as completed; after a loss every task asks for a control/resume confirmation. The valid
    /// snapshots of DIR are copied, so a store whose early segments were purged salvages to
    /// one that opens. A salvage that fails removes what it wrote; if one is killed, remove
    /// NEWDIR and run it again.
    ///
    /// Prints each kept range, each gap (file, segment, offset and length of the damage, why,
    /// and the seqs lost when the records around it tell) and the recovery. --json prints one
    /// object: {"source","target","dry_run","format_version","records_kept","seqs_lost",
    /// "last_seq","kept":[{"source","segment","first_seq","last_seq","records"}],
    /// "gaps":[{"path","segment","offset","bytes","reason","lost":{"known","first_seq",
    /// "last_seq","to_end"}}],"declared_gaps":[{"first_seq","end_seq"}],"store",
    /// "snapshots":[covered seq],"recovery": the object of `recover --json`, or null (dry run, or records that are not
    /// events)}. --dry-run scans and reports, and writes nothing anywhere.
    #[command(after_help = help_tail(
        &[
            (0, "the new store was written and recovered (or, with --dry-run, the report printed); also when DIR had no damage"),
            (1, "also NEWDIR not empty or inside DIR, or the new store could not be written, opened or recovered"),
        ],
        concat!(
            "  factlog verify /tmp/factlog-store\n",
            "  factlog salvage /tmp/factlog-store --to /tmp/factlog-saved --dry-run\n",
            "  factlog salvage /tmp/factlog-store --to /tmp/factlog-saved --json",
        ),
    ))]
    Salvage(SalvageArgs),

    /// Build a store from a replica: every object checked, damage and gaps refused.
    ///
    /// Reads the replica at URL (file:///absolute/dir, s3://BUCKET/PREFIX, ...), checks its identity, every part of
    /// every segment (its checksums, its place in the segment, the segment header) and every
    /// frame (valid, seqs following each other within and across segments), and writes the
    /// segments, the snapshots covering at most the restored last seq and RESTORED.json into
    /// a staging directory beside DIR (which must not exist or be empty) that only this
    /// restore writes (format-spec/replication.md, "Restore"); it opens the result read-only
    /// as a check and moves it into place as DIR with one rename. A second restore into the
    /// same DIR is refused, naming the first one's pid. Every object must be this replica's,
    /// and the history must begin at seq 1 or where the newest retention record says.
    /// --dry-run checks the same and writes nothing. A replica with a damaged object or a gap is refused,
    /// naming the object, the missing byte range or the missing seqs, and nothing is written;
    /// a replica whose oldest segments were removed restores only from a snapshot covering
    /// them. --seq N keeps the frames whose records all have seqs up to N: the restored log
    /// ends there or, when a batch crosses N, before the batch; damage after it does not
    /// matter. --time T (RFC 3339, a date or microseconds since 1970; not with --seq) ends the
    /// restored log before the first frame holding an event appended after T, even if a clock
    /// that stepped back gave later events earlier times; nothing after that frame is fetched.
    ///
    /// Prints the restored seqs, segments and parts, where --seq or --time ended, the
    /// snapshots copied or skipped, the names ignored and the source device. --json prints one
    /// object: {"location","target","requested_seq","requested_time_us","requested_time",
    /// "first_after_time":{"seq","timestamp_us","time"},"first_seq","through_seq",
    /// "segments":[{"first_seq",
    /// "last_seq","parts","bytes","cut"}],"segments_left_out","parts","bytes","snapshots":[covered
    /// seq],"snapshots_skipped":[{"object","reason"}],"ignored","source_device","device",
    /// "restored_us"} (format-spec/schema/restore.json).
    #[command(after_help = help_tail(
        &[
            (0, "the store was written into DIR and opens"),
            (1, "also DIR not empty, another restore of DIR running, a location that holds no replica or cannot be read, or a restored store that cannot be written or opened (DIR is left as it was)"),
            (3, "a damaged or foreign object or a gap in the replica (nothing written), a replica of the old format 1, or a replica, part or segment of a newer format"),
        ],
        concat!(
            "  factlog restore file:///srv/replicas/agent-1 /tmp/factlog-restored\n",
            "  factlog restore file:///srv/replicas/agent-1 /tmp/factlog-at-120 --seq 120 --json\n",
            "  factlog restore file:///srv/replicas/agent-1 /tmp/factlog-at-ten --time 2026-12-03T10:00:00Z\n",
            "  factlog restore file:///srv/replicas/agent-1 /tmp/factlog-check --dry-run",
        ),
    ))]
    Restore(crate::restore::RestoreArgs),

    /// Print the request key of a logical request: the documented derivation, for any language.
    ///
    /// request_key = "rk1_" + the lowercase hex of the first 16 bytes of SHA-256 over the
    /// domain, the task id, the operation and the source revision (format-spec/events.md,
    /// "Request keys"; vector 024). The same TASK, OPERATION and REVISION always give the same
    /// key; a real change of content (a new revision) gives a new one. Prints the key as one
    /// line, or with --json {"task","operation","revision","request_key"}.
    #[command(after_help = help_tail(
        &[
            (0, "the key was printed"),
            (2, "also a task id that is empty or over 128 bytes, a revision that is not a non-negative integer"),
        ],
        concat!(
            "  factlog request-key session-1 publish_article:weekly 6\n",
            "  factlog request-key t1 send_email:draft-7 12 --json",
        ),
    ))]
    RequestKey(RequestKeyArgs),

    /// Print a shell completion script for bash, zsh or fish to standard output.
    #[command(after_help = help_tail(
        &[
            (0, "the script was printed"),
        ],
        concat!(
            "  factlog completions bash > ~/.local/share/bash-completion/completions/factlog\n",
            "  factlog completions zsh > ~/.zfunc/_factlog\n",
            "  factlog completions fish > ~/.config/fish/completions/factlog.fish",
        ),
    ))]
    Completions(CompletionsArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct RequestKeyArgs {
    /// The task id (1 to 128 bytes of UTF-8).
    pub(crate) task: String,
    /// The operation: what the request does to what, e.g. "publish_article:weekly".
    pub(crate) operation: String,
    /// The task revision the request was based on (its source revision).
    pub(crate) revision: u64,
    /// Print one JSON object instead of the key alone.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub(crate) shell: ShellArg,
}

/// The shells `factlog completions` writes for.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ShellArg {
    /// GNU Bash.
    Bash,
    /// Z shell.
    Zsh,
    /// The friendly interactive shell.
    Fish,
}

#[derive(Debug, clap::Args)]
pub(crate) struct AppendArgs {
    /// Log directory (created if missing).
    pub(crate) dir: PathBuf,
    /// What each append waits for before its sequence number is printed.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Synced)]
    pub(crate) durability: DurabilityArg,
    /// Print `{"seq":N,"durability":".."}` per record instead of the bare sequence number.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct DumpArgs {
    /// Log directory.
    pub(crate) dir: PathBuf,
    /// First sequence number to print (sequence numbers start at 1).
    #[arg(long, value_name = "SEQ", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) from: u64,
    /// Print one JSON object per line (JSON Lines) instead of text.
    #[arg(long, conflicts_with = "format")]
    pub(crate) json: bool,
    /// Deprecated alias: `--format json` is `--json`, `--format text` the default.
    #[arg(long, value_enum, hide = true)]
    pub(crate) format: Option<DumpFormat>,
    /// Print every record raw (as `factlog append` records), without decoding events.
    #[arg(long)]
    pub(crate) raw: bool,
    /// Only the events of this task.
    #[arg(long, value_name = "TASK")]
    pub(crate) task: Option<String>,
    /// Only the events of this type (e.g. `tool/call`).
    #[arg(long = "type", value_name = "TYPE")]
    pub(crate) event_type: Option<String>,
    /// Last sequence number to print (inclusive).
    #[arg(long, value_name = "SEQ")]
    pub(crate) to: Option<u64>,
    #[command(flatten)]
    pub(crate) time: TimeArgs,
}

impl DumpArgs {
    /// Whether lines are JSON: `--json`, or the deprecated `--format json`.
    pub(crate) fn json(&self) -> bool {
        self.json || self.format == Some(DumpFormat::Json)
    }
}

/// `--since` and `--until`, shared by `dump` and `export`.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct TimeArgs {
    /// Only events appended at or after TIME (inclusive): RFC 3339 (2026-12-03T14:00:00Z,
    /// +01:00 offsets), a date (midnight UTC) or microseconds since 1970.
    #[arg(long, value_name = "TIME", value_parser = factlog::protocol::time::parse_time)]
    pub(crate) since: Option<u64>,
    /// Only events appended before TIME (exclusive), in the forms of --since.
    #[arg(long, value_name = "TIME", value_parser = factlog::protocol::time::parse_time)]
    pub(crate) until: Option<u64>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    /// Log directory.
    pub(crate) dir: PathBuf,
    /// Print a single JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also fold the store's events and compare them with the snapshot and the open state.
    #[arg(long)]
    pub(crate) deep: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct InfoArgs {
    /// Log directory.
    pub(crate) dir: PathBuf,
    /// Print a single JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct TailArgs {
    /// Log directory.
    pub(crate) dir: PathBuf,
    /// Keep printing the records appended after the last one printed.
    #[arg(long, short = 'f')]
    pub(crate) follow: bool,
    /// First sequence number to print (sequence numbers start at 1).
    #[arg(long, value_name = "SEQ", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) from: u64,
    /// Print one JSON object per record instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Only the events of this task (a task the store has no events of: exit 1).
    #[arg(long, value_name = "TASK")]
    pub(crate) task: Option<String>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// Store directory.
    pub(crate) dir: PathBuf,
    /// JSON Lines, one object per event: the only format and the default (may be left out).
    #[arg(long)]
    pub(crate) json: bool,
    /// Deprecated alias of --json, accepted for scripts written when it was required.
    #[arg(long, hide = true)]
    pub(crate) jsonl: bool,
    /// Only the events of this task.
    #[arg(long, value_name = "TASK")]
    pub(crate) task: Option<String>,
    #[command(flatten)]
    pub(crate) time: TimeArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct PurgeArgs {
    /// Store directory.
    pub(crate) dir: PathBuf,
    /// Delete the segments the oldest valid snapshot covers: the only mode, and the default
    /// (the flag is accepted for scripts written when it was required).
    #[arg(long)]
    pub(crate) before_snapshot: bool,
    /// Open read-only and only print what would be removed.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Print a single JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct EmitArgs {
    /// Store directory (created if missing).
    pub(crate) dir: PathBuf,
    /// Which lines get a reply of their own (format-spec/protocol.md).
    #[arg(long, value_enum, default_value_t = AckArg::Every)]
    pub(crate) ack: AckArg,
    /// Refuse (UNMARKED_SECRET, nothing written) an event holding a value shaped like a
    /// credential that is not marked {"$secret": ..}, instead of writing it with a warning.
    #[arg(long)]
    pub(crate) refuse_unmarked_secrets: bool,
    /// Replicate the store to this location while emitting (file:///DIR, s3://, gs://, az://),
    /// so that lines with "durability":"replicated" are acknowledged once the replica holds
    /// them. Not with a store another process serves (that process replicates).
    #[arg(long, value_name = "URL")]
    pub(crate) replicate_to: Option<String>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ReplicateArgs {
    /// Store directory.
    pub(crate) dir: PathBuf,
    /// The replica's location: file:///DIR (an absolute path), s3://BUCKET/PREFIX,
    /// gs://BUCKET/PREFIX or az://CONTAINER/PREFIX (credentials from the environment).
    #[arg(long)]
    pub(crate) to: String,
    /// Take the replica's lease even if another run holds it: only for a run known to be
    /// gone for good. Recorded in the new lease.
    #[arg(long)]
    pub(crate) takeover: bool,
    /// Ship once and stop (give the lease back) instead of running until a signal.
    #[arg(long)]
    pub(crate) once: bool,
    /// Run a round at least this often even when the store seems unchanged.
    #[arg(long, default_value_t = 1000)]
    pub(crate) interval_ms: u64,
    /// Print the final status as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RetainArgs {
    /// The replica's location: file:///DIR (an absolute path), s3://BUCKET/PREFIX,
    /// gs://BUCKET/PREFIX or az://CONTAINER/PREFIX (credentials from the environment).
    pub(crate) url: String,
    /// Print what would be removed, remove nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Print the plan as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct UiArgs {
    /// Store directory.
    pub(crate) dir: PathBuf,
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub(crate) addr: std::net::SocketAddr,
    /// Serve the pages without the operator's actions.
    #[arg(long)]
    pub(crate) read_only: bool,
    /// Accept an --addr that is not loopback (anyone who can reach it and has the token can
    /// read the store and, unless --read-only, answer for its tasks, over plain HTTP).
    #[arg(long)]
    pub(crate) allow_remote: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Store directory (created if missing; must not be writable by group or others).
    pub(crate) dir: PathBuf,
    /// Also accept clients whose primary group is this group id (the socket is then 0660).
    #[arg(long)]
    pub(crate) allow_group: Option<u32>,
    /// Most clients served at once (1 to 128); the next is refused with SERVER_BUSY.
    #[arg(long, default_value_t = factlog::limits::SERVER_CLIENTS_MAX,
          value_parser = clients_max_arg)]
    pub(crate) clients_max: usize,
    /// Disconnect a client that has not taken a reply for this many milliseconds (it
    /// stopped reading).
    #[arg(long, default_value_t = factlog::limits::SERVER_WRITE_TIMEOUT_MS_DEFAULT)]
    pub(crate) write_timeout_ms: u64,
    /// Close a new connection that has not sent its hello within this many milliseconds.
    #[arg(long, default_value_t = factlog::limits::SERVER_HELLO_TIMEOUT_MS_DEFAULT)]
    pub(crate) hello_timeout_ms: u64,
    /// Close a connection that has sent no request for this many milliseconds (its tasks are
    /// handed over, as when it leaves).
    #[arg(long, default_value_t = factlog::limits::SERVER_IDLE_TIMEOUT_MS_DEFAULT)]
    pub(crate) idle_timeout_ms: u64,
    /// As emit --refuse-unmarked-secrets, for every client.
    #[arg(long)]
    pub(crate) refuse_unmarked_secrets: bool,
    /// Replicate the store to this location while serving it (file:///DIR, s3://, gs://,
    /// az://), so that clients' lines with "durability":"replicated" are acknowledged once
    /// the replica holds them.
    #[arg(long, value_name = "URL")]
    pub(crate) replicate_to: Option<String>,
}

/// `factlog emit --ack`: which lines get a reply of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum AckArg {
    /// One reply per non-empty line, in order.
    Every,
    /// No reply for an event that met only buffered durability: the next reply, or a final
    /// {"end":true,..} at the end of input, covers it ("covers": N lines, itself included).
    DurableOnly,
}

impl AckArg {
    /// The library's acknowledgement mode it names.
    pub(crate) fn mode(self) -> factlog::protocol::acks::AckMode {
        match self {
            AckArg::Every => factlog::protocol::acks::AckMode::Every,
            AckArg::DurableOnly => factlog::protocol::acks::AckMode::DurableOnly,
        }
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct MigrateArgs {
    /// Store directory.
    pub(crate) dir: PathBuf,
    /// The segment format version to migrate to (this build migrates to 2; 1 is its oldest).
    /// Default: the newest this build writes.
    #[arg(long, default_value_t = factlog::engine::segment::FORMAT_VERSION,
          value_parser = clap::value_parser!(u16).range(
        i64::from(factlog::engine::segment::FORMAT_VERSION_MIN)..=i64::from(factlog::engine::segment::FORMAT_VERSION)
    ))]
    pub(crate) to: u16,
    /// Check and report what would change; write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Where to copy the backup (a new or empty directory).
    #[arg(long)]
    pub(crate) backup: Option<PathBuf>,
    /// Print a single JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct SalvageArgs {
    /// The damaged log or store (only read).
    pub(crate) dir: PathBuf,
    /// The new store: a directory that does not exist or is empty, outside DIR.
    #[arg(long, value_name = "NEWDIR")]
    pub(crate) to: PathBuf,
    /// Only report what would be kept and lost; write nothing anywhere.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Print a single JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RecoverArgs {
    /// Store directory.
    pub(crate) dir: PathBuf,
    /// Print a single JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Only print what recovery would do, writing nothing: read-only, or on a served store
    /// asked of the serving process (the plan the run will carry out); refused, as the run is,
    /// on a store another process holds without sharing it.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct StateArgs {
    /// Store directory.
    pub(crate) dir: PathBuf,
    /// Only this task.
    #[arg(long, value_name = "TASK")]
    pub(crate) task: Option<String>,
    /// Print a single JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct HistoryArgs {
    /// Store directory.
    pub(crate) dir: PathBuf,
    /// The task.
    #[arg(long, value_name = "TASK")]
    pub(crate) task: String,
    /// Print one JSON object per entry instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct CheckpointArgs {
    /// Store directory.
    pub(crate) dir: PathBuf,
    /// Print a single JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The `--durability` values; each maps to one `factlog::Durability` tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DurabilityArg {
    /// Return at once; the background flusher writes and syncs the record within a few ms.
    Buffered,
    /// Wait until the record is in the kernel (one write): survives a process crash.
    Flushed,
    /// Wait until the record is on stable storage (fdatasync): survives a power loss.
    Synced,
}

impl DurabilityArg {
    /// The value's name, as given on the command line and printed in JSON.
    pub(crate) fn name(self) -> &'static str {
        match self {
            DurabilityArg::Buffered => "buffered",
            DurabilityArg::Flushed => "flushed",
            DurabilityArg::Synced => "synced",
        }
    }
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

/// The values of `dump --format`, the deprecated alias of `--json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DumpFormat {
    /// `SEQ<TAB>payload`, payload escaped.
    Text,
    /// One JSON object per line.
    Json,
}

/// Parses `--clients-max`: 1 to [`factlog::limits::SERVER_CLIENTS_MAX`], refused otherwise
/// (a usage error) rather than silently clamped.
pub(crate) fn clients_max_arg(text: &str) -> Result<usize, String> {
    let max = factlog::limits::SERVER_CLIENTS_MAX;
    match text.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("{text:?} is not a number of clients from 1 to {max}")),
    }
}
