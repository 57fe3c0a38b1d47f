//! `factlog demo`: a simulated agent harness whose writer really crashes in the middle of a
//! side-effecting tool call, and the recovery that follows.
//!
//! The parent re-executes the running binary as the writer (`demo DIR --seed N --child`, see
//! [`child`]): a binary that offers the demo routes that command line back to [`run`] through
//! [`DemoArgs`]. The writer runs a high-risk task up to the `publish` call, starts publishing
//! into a simulated service ([`external`]) and is then killed with SIGKILL. The parent reopens the
//! store, runs [`Store::recover`], prints the report for a person, confirms the resume,
//! resolves the unknown outcome by its plan (asking the service, never publishing twice),
//! finishes the task, and sums up what persistence cost. Without DIR everything happens in a
//! temporary directory that is removed at the end, whatever happens.

mod child;
mod external;
mod scenario;

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use factlog::harness::event::{
    ApprovalGrant, ApprovalRequest, AssistantMessage, Effect, Phase, Scope, Signal, StepEnd,
    StepStart, ToolCall, ToolResult, TurnEnd, TurnStart,
};
use factlog::harness::recovery::TaskRecovery;
use factlog::harness::state::{CallStatus, TaskState};
use factlog::harness::{Body, Outcome as CallOutcome, Plan, Resume};
use factlog::{Appended, ErrorKind, Options, Store, Task, VerifyOutcome};
use serde_json::{Value, json};

pub use scenario::DEFAULT_SEED;

use crate::{Failure, print};
use external::{Dedup, Service};
use factlog::error::counted;
use scenario::{APPROVAL_NOTIFY_AGAIN, CALL_NOTIFY, CALL_PUBLISH, Scenario, TASK, store_options};

/// Arguments of `factlog demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Store directory to keep (new or empty); default: a temporary one, removed at the end.
    dir: Option<PathBuf>,
    /// Decides the publish service's kind, whether the crash comes after the article landed,
    /// and the topic.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Print a single JSON summary instead of text.
    #[arg(long)]
    json: bool,
    /// Run as the writer process that the demo kills (internal).
    #[arg(long, hide = true)]
    child: bool,
}

/// Runs `factlog demo` (or, with `--child`, its writer): prints the recovery report and the
/// cost on standard output.
pub fn run(args: &DemoArgs) -> Result<(), Failure> {
    let scenario = Scenario::new(args.seed);
    if args.child {
        let dir = args
            .dir
            .as_deref()
            .ok_or_else(|| Failure::usage("--child needs the store directory"))?;
        child::run(dir, &scenario).map_err(Failure::failed)?;
        return Ok(());
    }
    let started = Instant::now();
    let workspace = Workspace::new(args.dir.as_deref())?;
    let summary = run_demo(workspace.dir(), &scenario, args.dir.is_some(), started)?;
    drop(workspace);
    if args.json { print(&format!("{}\n", summary.json)) } else { print(&summary.text) }
}

/// The store directory: the one given (which must be new or empty), or a temporary one that
/// is removed when this is dropped, on success and on failure alike.
struct Workspace {
    dir: PathBuf,
    temporary: bool,
}

impl Workspace {
    fn new(given: Option<&Path>) -> Result<Workspace, Failure> {
        if let Some(dir) = given {
            let empty = match std::fs::read_dir(dir) {
                Ok(mut entries) => entries.next().is_none(),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => true,
                Err(error) => {
                    return Err(Failure::failed(format_args!(
                        "cannot read {}: {error}",
                        dir.display()
                    )));
                }
            };
            if !empty {
                return Err(Failure::failed(format_args!(
                    "{} is not empty: the demo writes a new store (give a new directory)",
                    dir.display()
                )));
            }
            std::fs::create_dir_all(dir).map_err(|error| {
                Failure::failed(format_args!("cannot create {}: {error}", dir.display()))
            })?;
            return Ok(Workspace { dir: dir.to_path_buf(), temporary: false });
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("factlog-demo-{}-{nanos:09}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|error| {
            Failure::failed(format_args!(
                "cannot create a temporary directory {}: {error}",
                dir.display()
            ))
        })?;
        Ok(Workspace { dir, temporary: true })
    }

    fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        if self.temporary {
            // Nothing else can be done about a temporary directory that cannot be removed.
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The finished run, in both output forms.
struct Summary {
    text: String,
    json: Value,
}

fn fail(context: &str) -> impl Fn(factlog::Error) -> Failure + '_ {
    move |error| Failure::failed(format_args!("{context}: {error}"))
}

fn io_fail(context: &str) -> impl Fn(std::io::Error) -> Failure + '_ {
    move |error| Failure::failed(format_args!("{context}: {error}"))
}

/// What the writer told before it was killed.
struct Crash {
    pid: u32,
    acknowledged_seq: u64,
    landed: bool,
    events: u64,
    syncs: u64,
    signal: Option<i32>,
}

#[expect(clippy::too_many_lines, reason = "one narrated scenario, section by section")]
fn run_demo(
    dir: &Path,
    scenario: &Scenario,
    keep: bool,
    started: Instant,
) -> Result<Summary, Failure> {
    let mut out = String::new();
    let service = Service::new(dir);
    let _ = writeln!(
        out,
        "factlog demo, seed {}: an agent publishes an article and its writer is killed \
         in the middle of the publish call\n",
        scenario.seed
    );
    let where_ = if keep { "kept" } else { "temporary, removed at the end" };
    let _ = writeln!(out, "store: {} ({where_})", dir.display());
    let _ = writeln!(out, "publishing service: {}\n", service.path().display());

    // 1. The writer, until it is killed.
    let crash = run_writer(dir, scenario)?;
    let (options, counters) = store_options();
    let store = Store::open(dir, options).map_err(fail("cannot reopen the store"))?;
    let before = store
        .task_state(TASK)
        .ok_or_else(|| Failure::failed("the killed writer left no events of the demo task"))?;
    let publish_before = before.session.calls.get(CALL_PUBLISH).cloned().unwrap_or_default();
    let publish_key = publish_before
        .request_key
        .clone()
        .ok_or_else(|| Failure::failed("the publish call has no request key in the log"))?;
    let effects_at_crash =
        service.count(publish_key.as_str()).map_err(io_fail("cannot query the service"))?;
    let killed = crash.signal == Some(9);
    let _ = writeln!(out, "== 1. The run, until the crash ==");
    let _ = writeln!(
        out,
        "writer process {} wrote {}: a high-risk task/contract, two turns with {}, a read-only \
         search and its result, once approvals for publish and notify",
        crash.pid,
        counted(crash.events, "event"),
        counted(before.execution.deltas, "streamed delta")
    );
    let _ = writeln!(
        out,
        "tool/call {CALL_PUBLISH} (publish, {}, request key {publish_key}) acknowledged at seq \
         {} after it was synced",
        publish_before.effect.map_or("?", Effect::as_str),
        crash.acknowledged_seq
    );
    let _ = writeln!(
        out,
        "the writer started publishing; {}",
        if crash.landed {
            "the article reached the service before the crash"
        } else {
            "the crash came before the request reached the service"
        }
    );
    let _ = writeln!(
        out,
        "the parent sent SIGKILL: the writer {}",
        match crash.signal {
            Some(signal) => format!("died by signal {signal}"),
            None => "exited without a signal".to_owned(),
        }
    );
    let has_result = publish_before.status == CallStatus::Completed;
    let _ = writeln!(
        out,
        "the log ends with that tool/call: {} (status {}); the service shows {} under the \
         key\n",
        if has_result { "a tool/result exists" } else { "no tool/result" },
        publish_before.status.as_str(),
        counted(effects_at_crash as u64, "article")
    );

    // 2. Recovery.
    let report = store.recover().map_err(fail("recovery could not be written"))?;
    let recovery = report
        .tasks
        .iter()
        .find(|t| t.task.as_str() == TASK)
        .cloned()
        .ok_or_else(|| Failure::failed("recovery did not report the demo task"))?;
    let _ = writeln!(out, "== 2. Recovery: Store::open, then Store::recover ==");
    recovery_text(&mut out, &recovery);

    // 3. Resume: confirm, resolve the unknown call, finish the task.
    let task = store.task(TASK).map_err(fail("task"))?;
    let _ = writeln!(out, "\n== 3. Resuming ==");
    let refused = task.append(Body::ToolCall(ToolCall {
        call_id: CALL_NOTIFY.into(),
        tool: "notify".into(),
        effect: Effect::Unsafe,
        ..Default::default()
    }));
    let refused_before_confirmation = match refused {
        Err(error) if matches!(error.kind(), ErrorKind::NeedsConfirmation { .. }) => true,
        Err(error) => return Err(fail("an unexpected refusal")(error)),
        Ok(_) => false,
    };
    let _ = writeln!(
        out,
        "before confirmation, dispatching notify is refused by the store: {}",
        if refused_before_confirmation { "NeedsConfirmation" } else { "it was NOT refused" }
    );
    append(
        &task,
        Body::Resume(Signal {
            reason: Some("the user read the recovery report and confirmed".into()),
            ..Default::default()
        }),
    )?;
    let _ = writeln!(out, "control/resume recorded: the user confirmed");
    append(&task, Body::TurnStart(TurnStart::default()))?;
    append(&task, Body::StepStart(StepStart::default()))?;
    let unknown = recovery
        .calls
        .iter()
        .find(|c| c.call_id.as_str() == CALL_PUBLISH)
        .ok_or_else(|| Failure::failed("recovery did not report the publish call"))?;
    let resolution = resolve_publish(&task, &service, scenario, unknown.plan, &publish_key)?;
    let _ = writeln!(out, "{CALL_PUBLISH} ({}): {}", unknown.plan.as_str(), resolution.action);
    let _ = writeln!(out, "  tool/result recorded with receipt {}", resolution.receipt);
    finish(&task, &resolution.receipt)?;
    let _ = writeln!(
        out,
        "notify: the expired approval was asked for again ({APPROVAL_NOTIFY_AGAIN}, once), \
         granted and used; #newsroom got the link"
    );
    let after = task.state();
    let finished = task_finished(&after);
    let _ = writeln!(
        out,
        "task {}: phase {}, {}, last turn completed\n",
        if finished { "finished" } else { "NOT finished" },
        after.task.phase.as_deref().unwrap_or("none"),
        counted(after.execution.turns, "turn")
    );
    let events = store.log().last_seq().map_or(0, |s| s.0);
    let parent_syncs = counters.read().record_and_dir_syncs();
    store.close().map_err(fail("close"))?;

    // 4. What persistence cost.
    let external_effects =
        service.count(publish_key.as_str()).map_err(io_fail("cannot query the service"))?;
    let bytes_on_disk = log_bytes(dir)?;
    let tokens = after.execution.deltas;
    let syncs = crash.syncs + parent_syncs;
    let wall_ms = started.elapsed().as_millis();
    let _ = writeln!(out, "== 4. Persistence cost ==");
    let _ = writeln!(
        out,
        "articles published under the key: {external_effects} (the demo fails if it is not 1)"
    );
    let _ = writeln!(
        out,
        "{} ({}), {bytes_on_disk} bytes of log on disk, {:.1} bytes per token",
        counted(events, "event"),
        counted(tokens, "streamed token"),
        per(bytes_on_disk, tokens)
    );
    let _ = writeln!(
        out,
        "{syncs} fsyncs in all ({} by the writer before the crash, {parent_syncs} for recovery \
         and the rest of the run); {wall_ms} ms wall time, two processes",
        crash.syncs
    );

    let unknown_calls: Vec<Value> = recovery
        .calls
        .iter()
        .filter(|c| c.outcome == CallOutcome::OutcomeUnknown)
        .map(|c| json!({ "call_id": c.call_id, "tool": c.tool, "plan": c.plan, "request_key": c.request_key }))
        .collect();
    let completed_calls: Vec<Value> = recovery
        .calls
        .iter()
        .filter(|c| c.outcome == CallOutcome::Completed)
        .map(|c| json!({ "call_id": c.call_id, "tool": c.tool, "receipt": c.receipt }))
        .collect();
    let not_started_calls: Vec<Value> = recovery
        .calls
        .iter()
        .filter(|c| c.outcome == CallOutcome::NotStarted)
        .map(|c| json!({ "call_id": c.call_id, "tool": c.tool, "plan": c.plan }))
        .collect();
    let json = json!({
        "seed": scenario.seed,
        "dir": if keep { Value::from(dir.display().to_string()) } else { Value::Null },
        "task": TASK,
        "publish_effect": scenario.publish_effect,
        "crash": {
            "writer_pid": crash.pid,
            "signal": crash.signal,
            "killed": killed,
            "acknowledged_seq": crash.acknowledged_seq,
            "external_effect_landed": crash.landed,
            "events": crash.events,
        },
        "before_recovery": {
            "publish_status": publish_before.status.as_str(),
            "publish_has_result": has_result,
            "external_effects": effects_at_crash,
        },
        "unknown_calls": unknown_calls,
        "completed_calls": completed_calls,
        "not_started_calls": not_started_calls,
        "expired_approvals": recovery.expired,
        "interrupted_step": recovery.interrupted_step,
        "interrupted_turn": recovery.interrupted_turn,
        "resume": recovery.resume,
        "refused_before_confirmation": refused_before_confirmation,
        "resolution": {
            "call_id": CALL_PUBLISH,
            "plan": unknown.plan,
            "action": resolution.action,
            "redispatched": resolution.redispatched,
            "service_deduplicated": resolution.deduplicated,
            "receipt": resolution.receipt,
        },
        "external_effects": external_effects,
        "task_finished": finished,
        "events": events,
        "tokens": tokens,
        "bytes_on_disk": bytes_on_disk,
        "bytes_per_token": per(bytes_on_disk, tokens),
        "fsyncs": syncs,
        "wall_ms": u64::try_from(wall_ms).unwrap_or(u64::MAX),
    });
    if !killed || external_effects != 1 || !finished {
        return Err(Failure::failed(format_args!(
            "the demo did not go as designed (killed: {killed}, articles published: \
                 {external_effects}, task finished: {finished})"
        )));
    }
    Ok(Summary { text: out, json })
}

/// Runs the writer as a child process and kills it once it has started publishing.
fn run_writer(dir: &Path, scenario: &Scenario) -> Result<Crash, Failure> {
    let exe = std::env::current_exe().map_err(io_fail("cannot find this executable"))?;
    let mut child = Command::new(exe)
        .arg("demo")
        .arg(dir)
        .args(["--seed", &scenario.seed.to_string(), "--child"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_fail("cannot start the writer process"))?;
    let told = listen(&mut child);
    // Killed in every case: on success this is the crash; on failure it must not linger.
    let _ = child.kill();
    let status = child.wait().map_err(io_fail("cannot wait for the writer"))?;
    let (acknowledged, publishing) = match told {
        Ok(told) => told,
        Err(message) => {
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                let _ = pipe.read_to_string(&mut stderr);
            }
            return Err(Failure::failed(format_args!(
                "the writer process failed ({status}): {message} {}",
                stderr.trim()
            )));
        }
    };
    let number = |value: &Value, key: &str| value[key].as_u64().unwrap_or(0);
    Ok(Crash {
        pid: u32::try_from(number(&acknowledged, "pid")).unwrap_or(0),
        acknowledged_seq: number(&acknowledged, "acknowledged"),
        landed: publishing["landed"].as_bool().unwrap_or(false),
        events: number(&publishing, "events"),
        syncs: number(&publishing, "syncs"),
        signal: signal_of(status),
    })
}

#[cfg(unix)]
fn signal_of(status: std::process::ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(&status)
}

#[cfg(not(unix))]
fn signal_of(_status: std::process::ExitStatus) -> Option<i32> {
    None
}

/// Reads the writer's two messages: the acknowledgement, then "publishing".
fn listen(child: &mut Child) -> Result<(Value, Value), String> {
    let stdout = child.stdout.take().ok_or("no pipe from the writer")?;
    let mut lines = BufReader::new(stdout).lines();
    let mut next = || -> Result<Value, String> {
        let line = lines
            .next()
            .ok_or("it ended before it reported the publish call")?
            .map_err(|e| e.to_string())?;
        serde_json::from_str(&line).map_err(|e| format!("it sent {line:?}: {e}"))
    };
    let acknowledged = next()?;
    let publishing = next()?;
    if acknowledged.get("acknowledged").is_none() || publishing.get("publishing").is_none() {
        return Err(format!("unexpected messages {acknowledged} {publishing}"));
    }
    Ok((acknowledged, publishing))
}

fn append(task: &Task, body: Body) -> Result<Appended, Failure> {
    let name = body.type_name();
    task.append(body)
        .map_err(|error| Failure::failed(format_args!("cannot append {name}: {error}")))
}

/// How the unknown publish call was resolved.
struct Resolution {
    action: String,
    receipt: Value,
    redispatched: bool,
    deduplicated: bool,
}

/// Resolves the unknown publish call by its plan; never publishes a second article.
fn resolve_publish(
    task: &Task,
    service: &Service,
    scenario: &Scenario,
    plan: Plan,
    key: &factlog::harness::RequestKey,
) -> Result<Resolution, Failure> {
    let query_fail = io_fail("the publishing service failed");
    let redispatch = |task: &Task| {
        // The restart dropped the credential (secrets are never stored): the harness
        // supplies it again. The approval was consumed by the first dispatch; the recorded
        // control/resume is the user's go-ahead for this retry of the same call.
        append(
            task,
            Body::ToolCall(ToolCall {
                call_id: CALL_PUBLISH.into(),
                tool: "publish".into(),
                effect: scenario.publish_effect,
                request_key: Some(key.clone()),
                args: Some(json!({
                    "title": scenario.title(),
                    "api_token": { "$secret": "demo-token-reissued" },
                })),
                ..Default::default()
            }),
        )
    };
    let (action, article, redispatched, deduplicated) = match plan {
        Plan::Verify => match service.find(key.as_str()).map_err(&query_fail)? {
            Some(article) => (
                format!(
                    "asked the service for request key {key}: article {} is live, so its \
                     receipt is recorded instead of publishing again",
                    article.article_id
                ),
                article,
                false,
                false,
            ),
            None => {
                redispatch(task)?;
                let (article, _) = service
                    .publish(&scenario.title(), key.as_str(), Dedup::None)
                    .map_err(&query_fail)?;
                (
                    format!(
                        "asked the service for request key {key}: nothing there, so the call \
                         was dispatched again and published article {}",
                        article.article_id
                    ),
                    article,
                    true,
                    false,
                )
            }
        },
        Plan::RetrySameKey => {
            redispatch(task)?;
            let (article, deduplicated) = service
                .publish(&scenario.title(), key.as_str(), Dedup::ByKey)
                .map_err(&query_fail)?;
            let what = if deduplicated {
                format!(
                    "the service already had article {} under this key and returned it \
                     instead of publishing again",
                    article.article_id
                )
            } else {
                format!(
                    "the service had nothing under this key and published article {}",
                    article.article_id
                )
            };
            (
                format!("dispatched again with the same request key {key}: {what}"),
                article,
                true,
                deduplicated,
            )
        }
        other => {
            return Err(Failure::failed(format_args!(
                "the demo has no resolution for plan {}",
                other.as_str()
            )));
        }
    };
    let receipt = json!({ "article_id": article.article_id, "url": article.url });
    append(
        task,
        Body::ToolResult(ToolResult {
            call_id: CALL_PUBLISH.into(),
            receipt: Some(receipt.clone()),
            output: Some(json!({ "resolved_by": plan.as_str() })),
            ..Default::default()
        }),
    )?;
    Ok(Resolution { action, receipt, redispatched, deduplicated })
}

/// The rest of the task: notify under a fresh approval, the final message, the ends.
fn finish(task: &Task, receipt: &Value) -> Result<(), Failure> {
    append(
        task,
        Body::ApprovalRequest(ApprovalRequest {
            approval_id: APPROVAL_NOTIFY_AGAIN.into(),
            action: Some("post the link in #newsroom (asked again after the restart)".into()),
            ..Default::default()
        }),
    )?;
    append(
        task,
        Body::ApprovalGrant(ApprovalGrant {
            approval_id: APPROVAL_NOTIFY_AGAIN.into(),
            scope: Scope::Once,
            ..Default::default()
        }),
    )?;
    let url = receipt["url"].as_str().unwrap_or("?").to_owned();
    append(
        task,
        Body::ToolCall(ToolCall {
            call_id: CALL_NOTIFY.into(),
            tool: "notify".into(),
            effect: Effect::Unsafe,
            args: Some(json!({ "channel": "#newsroom", "text": format!("New article: {url}") })),
            approval_id: Some(APPROVAL_NOTIFY_AGAIN.into()),
            ..Default::default()
        }),
    )?;
    append(
        task,
        Body::ToolResult(ToolResult {
            call_id: CALL_NOTIFY.into(),
            receipt: Some(json!({ "message_id": "newsroom-1" })),
            ..Default::default()
        }),
    )?;
    append(task, Body::StepEnd(StepEnd::default()))?;
    append(task, Body::StepStart(StepStart::default()))?;
    let text = format!("Done: the article is live at {url} and #newsroom has the link.");
    child::stream(task, &text).map_err(Failure::failed)?;
    append(task, Body::AssistantMessage(AssistantMessage { text, ..Default::default() }))?;
    append(task, Body::StepEnd(StepEnd::default()))?;
    append(task, Body::Phase(Phase { phase: "done".into(), ..Default::default() }))?;
    append(task, Body::TurnEnd(TurnEnd::default()))?;
    Ok(())
}

/// Finished: phase `done`, no open turn, every call answered, nothing awaiting confirmation.
fn task_finished(state: &TaskState) -> bool {
    state.task.phase.as_deref() == Some("done")
        && state.execution.open_turn.is_none()
        && state.session.calls.values().all(|c| c.status == CallStatus::Completed)
        && !state.control.needs_confirmation
}

/// Bytes of the log's segments that hold data (header and valid frames), as `verify` counts
/// them; the rest of each file is preallocated space.
fn log_bytes(dir: &Path) -> Result<u64, Failure> {
    let report = factlog::verify(dir, Options::new()).map_err(fail("cannot verify the log"))?;
    if !matches!(report.outcome, VerifyOutcome::Clean) {
        return Err(Failure::failed("the log is not clean after the demo"));
    }
    Ok(report.segments.iter().map(|s| s.used_bytes).sum())
}

#[expect(clippy::cast_precision_loss, reason = "a ratio for people to read")]
fn per(bytes: u64, tokens: u64) -> f64 {
    if tokens == 0 { 0.0 } else { bytes as f64 / tokens as f64 }
}

/// The recovery report for a person: what happened and what each finding means.
fn recovery_text(out: &mut String, recovery: &TaskRecovery) {
    let _ = writeln!(
        out,
        "recovery wrote {} (one atomic batch, synced) for task {}",
        counted(recovery.events_written, "repair event"),
        recovery.task
    );
    for call in &recovery.calls {
        match call.outcome {
            CallOutcome::Completed => {
                let receipt =
                    call.receipt.as_ref().map_or_else(|| "none".to_owned(), Value::to_string);
                let _ = writeln!(
                    out,
                    "  completed: {} ({}) with receipt {receipt}: plan {}, never run it again",
                    call.call_id,
                    call.tool,
                    call.plan.as_str()
                );
            }
            CallOutcome::OutcomeUnknown => {
                let why = match call.plan {
                    Plan::Verify => "the service can be asked whether it happened",
                    Plan::RetrySameKey => "the service deduplicates by the request key",
                    Plan::Retry => "it is read-only",
                    _ => "it can be neither checked nor deduplicated: ask the user",
                };
                let _ = writeln!(
                    out,
                    "  OUTCOME UNKNOWN: {} ({}) was dispatched and may or may not have run: \
                     plan {} ({why})",
                    call.call_id,
                    call.tool,
                    call.plan.as_str()
                );
            }
            CallOutcome::NotStarted => {
                let _ = writeln!(
                    out,
                    "  not started: {} ({}) was asked for, never dispatched: plan {}",
                    call.call_id,
                    call.tool,
                    call.plan.as_str()
                );
            }
        }
    }
    for approval in &recovery.expired {
        let _ = writeln!(
            out,
            "  approval expired: {approval} (a once grant not yet used does not outlive a \
             restart: ask again)"
        );
    }
    if let Some(step) = recovery.interrupted_step {
        let _ = writeln!(out, "  step {step} closed as interrupted");
    }
    if let Some(turn) = recovery.interrupted_turn {
        let _ = writeln!(out, "  turn {turn} closed as interrupted");
    }
    let _ = match recovery.resume {
        Resume::NeedsConfirmation => writeln!(
            out,
            "  resume: needs_confirmation: the contract is high-risk, so no side effect may run \
             until a person confirms (a control/resume event)"
        ),
        Resume::Ready => writeln!(out, "  resume: ready"),
    };
}
