//! Takes a person's answer to a store (`factlog resolve`, `confirm`, `approve`, `deny`,
//! `cancel`, and the console's buttons): one function for every door, embedded or served.
//!
//! The store is opened for the answer and closed after it ([`open_or_connect`]): a served
//! store is reached through its socket (the answer lands in the holder epoch of the harness
//! connected to it), one held by a process that does not serve it is refused with a message
//! that says how to serve it, and a free store is opened here: this process becomes the task's
//! holder for the one append, with every holder rule (`format-spec/harness-recovery.md`,
//! "Holders"), so an answer that is authority of the holder (a confirmation, a `once` or `run`
//! grant, a cancel) is refused there, as it would expire when the command ends; facts (a result,
//! a call that never ran, a denial, a persistent grant) are recorded. The answer is planned on the task's folded state
//! ([`operator::plan`]) and appended with a compare-and-set on the revision it was planned on;
//! the store checks under the task's lock that there is something to answer. When the task
//! moved in between, the answer is planned again on the new state, so that a repeated command
//! finds its first answer (`Already`) and a stale one is refused for what the task holds now.

use std::fmt;
use std::path::Path;

use crate::client::Client;
use crate::client::served::{OpenError, Opened, not_served_message, open_or_connect};
use crate::error::{Error, ErrorKind};
use crate::harness::operator::{self, Answer, Operator, Planned};
use crate::harness::state::TaskState;
use crate::harness::{AppendOptions, Appended};
use crate::harness::{Body, Store};
use crate::protocol::reply::error_code;

/// How many times an answer is planned again when the task moved between reading its state
/// and appending: a task written by a live harness moves often, but rarely that fast.
pub const ANSWER_ATTEMPTS_MAX: u32 = 8;

/// What became of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// Written at `seq`; the task's revision is `revision`.
    Recorded {
        /// The event that carries the answer.
        seq: u64,
        /// The task's revision after it.
        revision: u64,
    },
    /// The same answer was recorded before, at `seq`: nothing was written.
    Already {
        /// The event that carries it.
        seq: u64,
    },
}

/// Why an answer was not taken. Nothing was written.
#[derive(Debug)]
#[non_exhaustive]
pub enum AnswerError {
    /// The store cannot be opened or reached: held by a process that does not serve it (the
    /// message says how to serve it), a socket that does not answer, or the store's own error.
    Open(OpenError),
    /// The store has no task of that id.
    NoTask {
        /// The task asked for.
        task: String,
    },
    /// The store refused the answer: nothing to answer (the call's outcome is not unknown,
    /// the approval was not requested, the task needs no confirmation), or another rule.
    Refused {
        /// The protocol code (`INVALID_EVENT` for nothing to answer).
        code: String,
        /// What happened and what to do.
        message: String,
    },
    /// The task moved under the answer [`ANSWER_ATTEMPTS_MAX`] times in a row.
    Busy {
        /// The task.
        task: String,
    },
    /// Another failure of the store or the connection (the answer may be retried: a
    /// repeated answer is never written twice).
    Failed {
        /// The protocol code.
        code: String,
        /// What happened.
        message: String,
    },
}

impl AnswerError {
    /// The protocol code of the failure (`format-spec/protocol.md`), `NOT_SERVED` for a store
    /// held by a process that does not serve it and `NO_TASK` for an unknown task.
    #[must_use]
    pub fn code(&self) -> &str {
        match self {
            AnswerError::Open(OpenError::NotServed { .. }) => "NOT_SERVED",
            AnswerError::Open(OpenError::Connect { .. }) => "DISCONNECTED",
            AnswerError::Open(OpenError::Store(error)) => error_code(error.kind()).0,
            AnswerError::NoTask { .. } => "NO_TASK",
            AnswerError::Busy { .. } => "STALE_REVISION",
            AnswerError::Refused { code, .. } | AnswerError::Failed { code, .. } => code,
        }
    }
}

impl fmt::Display for AnswerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnswerError::Open(error) => write!(f, "{error}"),
            AnswerError::NoTask { task } => {
                write!(f, "no task {task:?} in this store: check the task id (`factlog tasks`)")
            }
            AnswerError::Refused { message, .. } | AnswerError::Failed { message, .. } => {
                f.write_str(message)
            }
            AnswerError::Busy { task } => write!(
                f,
                "task {task:?} changed {ANSWER_ATTEMPTS_MAX} times while the answer was \
                 taken: nothing was written; run the command again"
            ),
        }
    }
}

impl std::error::Error for AnswerError {}

/// Gives `answer` by `operator` to task `task` of the store in `dir`, opened or reached for it
/// and released after it.
///
/// # Errors
///
/// [`AnswerError`]: nothing was written.
pub fn answer(
    dir: &Path,
    task: &str,
    answer: &Answer,
    operator: &Operator,
) -> Result<Answered, AnswerError> {
    let opened = open_or_connect(dir).map_err(|error| match error {
        OpenError::NotServed { error, pid, .. } => {
            let then = "answer again: the answer then goes through its socket";
            let message = not_served_message(dir, &error, pid, then);
            AnswerError::Open(OpenError::NotServed { error, pid, message })
        }
        other => AnswerError::Open(other),
    })?;
    match opened {
        Opened::Store(store) => {
            let answered = attempt(task, answer, operator, Some(dir), store_steps(&store, task));
            let closed = store.close();
            let answered = answered?;
            closed.map_err(|e| store_error(&e))?;
            Ok(answered)
        }
        Opened::Client(mut client) => answer_client(&mut client, task, answer, operator),
    }
}

/// [`answer`] through an open store.
///
/// # Errors
///
/// As [`answer`].
pub fn answer_store(
    store: &Store,
    task: &str,
    answer: &Answer,
    operator: &Operator,
) -> Result<Answered, AnswerError> {
    attempt(task, answer, operator, None, store_steps(store, task))
}

/// The steps of an answer through an open store.
fn store_steps<'a>(
    store: &'a Store,
    task: &'a str,
) -> impl FnMut(Step) -> Result<Read, AnswerError> + 'a {
    move |op| match op {
        Step::Read => Ok(Read::State(store.task_state(task))),
        Step::Append(body, revision) => {
            let handle = store.task(task).map_err(|e| store_error(&e))?;
            match handle.append_with(body, AppendOptions::expecting(revision)) {
                Ok(Appended::Written { seq, revision }) => {
                    Ok(Read::Written(Answered::Recorded { seq: seq.0, revision }))
                }
                Ok(Appended::Duplicate { .. }) => Err(AnswerError::Failed {
                    code: "INVALID_EVENT".to_owned(),
                    message: "an answer is never a dispatch".to_owned(),
                }),
                Err(e) if matches!(e.kind(), ErrorKind::StaleRevision { .. }) => Ok(Read::Moved),
                Err(e) => Err(store_error(&e)),
            }
        }
    }
}

/// [`answer`] through a client of a served store.
///
/// # Errors
///
/// As [`answer`].
pub fn answer_client(
    client: &mut Client,
    task: &str,
    answer: &Answer,
    operator: &Operator,
) -> Result<Answered, AnswerError> {
    attempt(task, answer, operator, None, |op| match op {
        Step::Read => client.state(task).map(Read::State).map_err(client_error),
        Step::Append(body, revision) => {
            match client.append(task, &body, AppendOptions::expecting(revision)) {
                Ok(Appended::Written { seq, revision }) => {
                    Ok(Read::Written(Answered::Recorded { seq: seq.0, revision }))
                }
                Ok(Appended::Duplicate { .. }) => Err(AnswerError::Failed {
                    code: "INVALID_EVENT".to_owned(),
                    message: "an answer is never a dispatch".to_owned(),
                }),
                Err(e) if e.code() == Some("STALE_REVISION") => Ok(Read::Moved),
                Err(e) => Err(client_error(e)),
            }
        }
    })
}

/// One step of an answer, run by a door.
#[expect(clippy::large_enum_variant, reason = "a few per answer, never stored")]
enum Step {
    /// Read the task's state.
    Read,
    /// Append the event with a compare-and-set on the revision.
    Append(Body, u64),
}

/// What a step gave.
#[expect(clippy::large_enum_variant, reason = "a few per answer, never stored")]
enum Read {
    State(Option<TaskState>),
    Written(Answered),
    Moved,
}

/// Plans and appends until the answer is written, found, refused, or the task moved
/// [`ANSWER_ATTEMPTS_MAX`] times.
/// With `unheld`, the store in that directory was opened for this answer (no process held
/// it): an answer that is authority of the task's holder ([`operator::holder_authority`])
/// is refused, as it would expire when this handle closes.
fn attempt(
    task: &str,
    answer: &Answer,
    operator: &Operator,
    unheld: Option<&Path>,
    mut run: impl FnMut(Step) -> Result<Read, AnswerError>,
) -> Result<Answered, AnswerError> {
    for _ in 0..ANSWER_ATTEMPTS_MAX {
        let state = match run(Step::Read)? {
            Read::State(Some(state)) if state.revision > 0 => state,
            Read::State(_) => return Err(AnswerError::NoTask { task: task.to_owned() }),
            Read::Written(_) | Read::Moved => unreachable!("a read gives a state"),
        };
        match operator::plan(task, &state, answer, operator) {
            Planned::Already { seq } => return Ok(Answered::Already { seq }),
            Planned::Append { body, .. }
                if let Some(dir) = unheld
                    && let Some(what) = operator::holder_authority(&body, &state) =>
            {
                return Err(unheld_authority(dir, what, answer));
            }
            Planned::Append { body, revision } => match run(Step::Append(body, revision)) {
                Ok(Read::Written(answered)) => return Ok(answered),
                Ok(Read::Moved) => {}
                Ok(Read::State(_)) => unreachable!("an append gives its outcome"),
                // The store checks what there is to answer before the revision: the same
                // answer written in between is refused as taken, and is this answer's.
                Err(refused @ AnswerError::Refused { .. }) => {
                    if let Read::State(Some(now)) = run(Step::Read)?
                        && let Planned::Already { seq } =
                            operator::plan(task, &now, answer, operator)
                    {
                        return Ok(Answered::Already { seq });
                    }
                    return Err(refused);
                }
                Err(other) => return Err(other),
            },
        }
    }
    Err(AnswerError::Busy { task: task.to_owned() })
}

/// The refusal of an answer that is authority of the task's holder on a store no process
/// holds.
fn unheld_authority(dir: &Path, what: &str, answer: &Answer) -> AnswerError {
    let persistent =
        if matches!(answer, Answer::Approve { .. }) { ", or grant --scope persistent" } else { "" };
    AnswerError::Refused {
        code: "NOT_SERVED".to_owned(),
        message: format!(
            "no process holds {}: {what} is authority of the task's holder, and a handle of \
             this command's own would be that holder, so it would expire when the command \
             ends (format-spec/harness-recovery.md, \"Holders\"); answer while the harness \
             holds the store and serves it (Store::serve, `share=True`, or its clients through \
             `factlog serve`){persistent}",
            dir.display()
        ),
    }
}

/// A store's refusal or failure.
fn store_error(error: &Error) -> AnswerError {
    let code = error_code(error.kind()).0.to_owned();
    let message = error.to_string();
    if matches!(error.kind(), ErrorKind::InvalidEvent { .. }) {
        AnswerError::Refused { code, message }
    } else {
        AnswerError::Failed { code, message }
    }
}

/// A served store's refusal, or a failure of the connection.
fn client_error(error: crate::client::ClientError) -> AnswerError {
    let message = error.to_string();
    match error.code() {
        Some(code) if code == "INVALID_EVENT" => {
            AnswerError::Refused { code: code.to_owned(), message }
        }
        Some(code) => AnswerError::Failed { code: code.to_owned(), message },
        None => {
            let reply = error.into_reply(None, false);
            let code =
                reply.get("error").and_then(|c| c.as_str()).unwrap_or("DISCONNECTED").to_owned();
            AnswerError::Failed { code, message }
        }
    }
}
