//! The typed events of the harness model (`format-spec/events.md`): the wire tag and name of
//! every event type, its default durability, and the typed bodies.
//!
//! Bodies other than `assistant/delta` are JSON objects. Each typed body keeps the fields this
//! build does not know in `extra`, so decoding and re-encoding an event written by a newer
//! build loses nothing. An event whose type (or body schema version) this build does not know
//! decodes as [`Body::Opaque`] and re-encodes byte for byte.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::harness::ids::{ApprovalId, CallId, RequestKey, TaskId};
use crate::types::{Durability, Seq};

/// Unknown JSON fields of a body, kept in their original order.
pub type Extra = Map<String, Value>;

macro_rules! event_types {
    ($($variant:ident = $tag:literal, $name:literal, $durability:ident, $doc:literal;)*) => {
        /// An event type: its wire tag (`u16`, `format-spec/events.md`, "Event types") and
        /// its name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum EventType {
            $(#[doc = $doc] $variant,)*
        }

        impl EventType {
            /// Every event type this build knows, in tag order.
            pub const ALL: &'static [EventType] = &[$(EventType::$variant,)*];

            /// The wire tag.
            #[must_use]
            pub fn tag(self) -> u16 {
                match self { $(EventType::$variant => $tag,)* }
            }

            /// The event type with wire tag `tag`, if this build knows it.
            #[must_use]
            pub fn from_tag(tag: u16) -> Option<EventType> {
                match tag { $($tag => Some(EventType::$variant),)* _ => None }
            }

            /// The name, as written in JSON (`"tool/call"`).
            #[must_use]
            pub fn name(self) -> &'static str {
                match self { $(EventType::$variant => $name,)* }
            }

            /// The event type named `name`, if this build knows it.
            #[must_use]
            pub fn from_name(name: &str) -> Option<EventType> {
                match name { $($name => Some(EventType::$variant),)* _ => None }
            }

            /// The durability an event of this type gets when the caller asks for none
            /// (`format-spec/events.md`, "Default durability").
            #[must_use]
            pub fn default_durability(self) -> Durability {
                match self { $(EventType::$variant => Durability::$durability,)* }
            }
        }
    };
}

event_types! {
    Contract = 0x0101, "task/contract", Synced, "The task's goal, done criteria and risk level.";
    Phase = 0x0102, "task/phase", Buffered, "The task's current phase.";
    Plan = 0x0103, "task/plan", Buffered, "The task's plan, replacing the previous one.";
    Todo = 0x0104, "task/todo", Buffered, "One todo item, added or updated.";
    TurnStart = 0x0201, "turn/start", Buffered, "A turn begins.";
    TurnEnd = 0x0202, "turn/end", Synced, "The open turn ends, with a status.";
    StepStart = 0x0301, "step/start", Buffered, "A step of the open turn begins.";
    StepEnd = 0x0302, "step/end", Synced, "The open step ends, with a status.";
    UserMessage = 0x0401, "user/message", Flushed, "A message from the user.";
    AssistantDelta = 0x0402, "assistant/delta", Buffered, "A streamed fragment of model output.";
    AssistantMessage = 0x0403, "assistant/message", Flushed,
        "An assembled model message and the tool calls the model asked for.";
    ToolCall = 0x0501, "tool/call", Synced, "A tool call is dispatched (written before it runs).";
    ToolResult = 0x0502, "tool/result", Synced, "A tool call's result and receipt.";
    ToolOutcomeUnknown = 0x0503, "tool/outcome_unknown", Synced,
        "Written by recovery: a dispatched call has no result and may have run.";
    ToolNotRun = 0x0504, "tool/not_run", Synced,
        "An operator says a call whose outcome was unknown never ran: it may be dispatched again.";
    ApprovalRequest = 0x0601, "approval/request", Synced, "An approval is asked for.";
    ApprovalGrant = 0x0602, "approval/grant", Synced, "An approval is granted, with a scope.";
    ApprovalDeny = 0x0603, "approval/deny", Synced, "An approval is denied.";
    ApprovalExpired = 0x0604, "approval/expired", Synced,
        "Written by recovery: an approval that does not outlive a restart has expired.";
    Cancel = 0x0701, "control/cancel", Synced, "The user asks to cancel the running turn.";
    Pause = 0x0702, "control/pause", Synced, "The task is paused.";
    Resume = 0x0703, "control/resume", Synced,
        "The task resumes; after a restart of a high-risk task this is the confirmation.";
    SignalExpired = 0x0704, "control/expired", Synced,
        "Written by recovery: a cancel signal that was still pending has expired.";
    BudgetUsage = 0x0801, "budget/usage", Buffered, "Tokens and cost spent.";
    ContextCompacted = 0x0901, "context/compacted", Synced,
        "The model context was compacted: earlier history is replaced by a summary.";
    Restored = 0x0A01, "recovery/restored", Synced,
        "Written by recovery: the task was restored after a restart, and what was decided.";
    Migrated = 0x0B01, "state/migrated", Synced,
        "Written by `factlog migrate`: the store was rewritten into a newer format.";
    RecordPut = 0x0C01, "record/put", Flushed,
        "A framework's record the typed events do not cover, kept whole (an adapter's).";
    RecordRemoved = 0x0C02, "record/removed", Flushed,
        "Earlier events of the task no longer count for an adapter's records of one kind.";
    RecordBlob = 0x0C03, "record/blob", Flushed,
        "A framework's record as `record/put` holds it, with raw bytes beside it (an adapter's).";
}

impl EventType {
    /// True for the types whose default durability is `Synced`: a caller may not ask for
    /// less for them.
    #[must_use]
    pub fn is_high_risk(self) -> bool {
        self.default_durability() == Durability::Synced
    }

    /// True for the types only the store writes: recovery's, and the migration's audit event.
    #[must_use]
    pub fn is_recovery_only(self) -> bool {
        matches!(
            self,
            EventType::ToolOutcomeUnknown
                | EventType::ApprovalExpired
                | EventType::SignalExpired
                | EventType::Restored
                | EventType::Migrated
        )
    }
}

/// One event: the envelope and the body.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The log sequence number of the record holding the event.
    pub seq: Seq,
    /// The task the event belongs to.
    pub task: TaskId,
    /// The task's revision after this event: the count of the task's events through it.
    pub revision: u64,
    /// When the store appended it, in microseconds since the Unix epoch.
    pub timestamp_us: u64,
    /// The schema version of the body: the one it was read as, which for a schema-1
    /// `tool/result` is 2, the schema it was upcast to (the stored schema is in the envelope,
    /// [`crate::harness::codec::peek`]). [`crate::harness::codec::encode_event`] writes the
    /// body in this schema.
    pub schema: u16,
    /// The body.
    pub body: Body,
}

/// The body of an event.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[expect(missing_docs, reason = "each variant is documented by its body type")]
pub enum Body {
    Contract(Contract),
    Phase(Phase),
    Plan(Plan),
    Todo(Todo),
    TurnStart(TurnStart),
    TurnEnd(TurnEnd),
    StepStart(StepStart),
    StepEnd(StepEnd),
    UserMessage(UserMessage),
    AssistantDelta(AssistantDelta),
    AssistantMessage(AssistantMessage),
    ToolCall(ToolCall),
    ToolResult(ToolResult),
    ToolOutcomeUnknown(ToolOutcomeUnknown),
    ToolNotRun(ToolNotRun),
    ApprovalRequest(ApprovalRequest),
    ApprovalGrant(ApprovalGrant),
    ApprovalDeny(ApprovalDeny),
    ApprovalExpired(ApprovalExpired),
    Cancel(Signal),
    Pause(Signal),
    Resume(Signal),
    SignalExpired(SignalExpired),
    BudgetUsage(BudgetUsage),
    ContextCompacted(ContextCompacted),
    Restored(Restored),
    StateMigrated(Migrated),
    RecordPut(RecordPut),
    RecordRemoved(RecordRemoved),
    RecordBlob(RecordBlob),
    /// An event of a type or body schema this build does not know: kept as it was read.
    Opaque(Opaque),
}

/// An event this build cannot interpret, kept byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opaque {
    /// The wire tag.
    pub tag: u16,
    /// The body schema version it was written with.
    pub schema: u16,
    /// The body encoding byte.
    pub encoding: u8,
    /// The body bytes.
    pub bytes: Vec<u8>,
}

/// How risky a task is: a `high` task needs a confirmation to resume after a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// Resumes without confirmation.
    #[default]
    Low,
    /// Comes back as `needs_confirmation` after a restart.
    High,
}

/// What running a tool does to the outside world; decides how an unknown outcome is resolved.
/// The default, for a body built in code without one, is the safest: `Unsafe`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Changes nothing outside: safe to run again.
    ReadOnly,
    /// Changes the outside world, but the service deduplicates requests by key.
    Idempotent,
    /// Changes the outside world; its state can be queried to learn whether it ran.
    Queryable,
    /// Changes the outside world and cannot be checked or deduplicated.
    #[default]
    Unsafe,
}

impl Effect {
    /// All effect classes.
    pub const ALL: [Effect; 4] =
        [Effect::ReadOnly, Effect::Idempotent, Effect::Queryable, Effect::Unsafe];

    /// The name used in JSON.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::ReadOnly => "read_only",
            Effect::Idempotent => "idempotent",
            Effect::Queryable => "queryable",
            Effect::Unsafe => "unsafe",
        }
    }
}

/// Whether a tool call succeeded: the `outcome` of a `tool/result` (schema 2). The default,
/// for a body built in code without one, is `Ok`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResultOutcome {
    /// The call did what it was asked.
    #[default]
    Ok,
    /// The call failed; `error` says how, if the tool said.
    Error,
}

impl ResultOutcome {
    /// The name used in JSON: `ok` or `error`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ResultOutcome::Ok => "ok",
            ResultOutcome::Error => "error",
        }
    }
}

/// How long a granted approval authorises calls. Default (for bodies built in code): `Once`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// One call; consumed by it. Expires at a restart if unused.
    #[default]
    Once,
    /// Until the process ends: expires at every restart.
    Run,
    /// Survives restarts, until `expires_at_us` if given.
    Persistent,
}

macro_rules! body {
    ($(#[$doc:meta])* $name:ident { $($(#[$fattr:meta])* $field:ident : $ty:ty,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
        pub struct $name {
            $($(#[$fattr])* pub $field: $ty,)*
            /// Fields this build does not know, kept for re-encoding.
            #[serde(flatten)]
            pub extra: Extra,
        }
    };
}

body!(
    /// `task/contract`.
    Contract {
        /// What the task must achieve.
        goal: String,
        /// When it is done.
        #[serde(default)]
        done_criteria: Vec<String>,
        /// Its risk level.
        #[serde(default)]
        risk: Risk,
    }
);
body!(
    /// `task/phase`.
    Phase {
        /// The phase's name.
        phase: String,
    }
);
body!(
    /// `task/plan`.
    Plan {
        /// The plan's steps, in order.
        #[serde(default)]
        steps: Vec<String>,
    }
);
body!(
    /// `task/todo`.
    Todo {
        /// The item's id within the task.
        todo_id: String,
        /// Its text, when set or changed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// `pending`, `in_progress`, `done` or `dropped` (free text: kept as given); absent
        /// means `pending`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<String>,
    }
);
body!(
    /// `turn/start`.
    TurnStart {}
);
body!(
    /// `turn/end`.
    TurnEnd {
        /// `completed`, `failed`, `cancelled` or `interrupted` (free text: kept as given);
        /// absent means `completed`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<String>,
        /// True when recovery wrote it to close a turn interrupted by a crash.
        #[serde(default, skip_serializing_if = "is_false")]
        repair: bool,
    }
);
body!(
    /// `step/start`.
    StepStart {}
);
body!(
    /// `step/end`.
    StepEnd {
        /// Like [`TurnEnd::status`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<String>,
        /// True when recovery wrote it.
        #[serde(default, skip_serializing_if = "is_false")]
        repair: bool,
    }
);
body!(
    /// `user/message`.
    UserMessage {
        /// The message.
        text: String,
    }
);
body!(
    /// `assistant/message`.
    AssistantMessage {
        /// The assembled text.
        #[serde(default)]
        text: String,
        /// The tool calls the model asked for.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<RequestedCall>,
    }
);
body!(
    /// A tool call the model asked for in an `assistant/message`.
    RequestedCall {
        /// The call id.
        call_id: CallId,
        /// The tool.
        tool: String,
        /// The arguments, if given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        args: Option<Value>,
    }
);
body!(
    /// `tool/call`: the dispatch of a call, written and synced before the tool runs.
    ToolCall {
        /// The call id.
        call_id: CallId,
        /// The tool.
        tool: String,
        /// What running it does to the outside world.
        effect: Effect,
        /// The idempotency key, for calls with side effects.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_key: Option<RequestKey>,
        /// The arguments (secrets replaced by references).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        args: Option<Value>,
        /// SHA-256 of the canonical JSON of the arguments, in hex (`format-spec/events.md`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        args_digest: Option<String>,
        /// The approval that authorises this call, if it needs one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        approval_id: Option<ApprovalId>,
    }
);
body!(
    /// `tool/result`, schema 2 (`format-spec/events.md`, "Schema changes"). A schema-1 body
    /// is read through [`crate::harness::upcast::tool_result_1_to_2`].
    ToolResult {
        /// The call it answers.
        call_id: CallId,
        /// Whether the call succeeded. Required in schema-2 JSON.
        outcome: ResultOutcome,
        /// What went wrong, if the tool said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// What proves the effect happened: an article id and URL, an order number.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        receipt: Option<Value>,
        /// The tool's output.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<Value>,
        /// Who gave this answer for a person, when an operator command wrote it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        operator: Option<OperatorMark>,
    }
);
body!(
    /// `tool/outcome_unknown`, written by recovery.
    ToolOutcomeUnknown {
        /// The dispatched call without a result.
        call_id: CallId,
        /// How to resolve it (`format-spec/recovery.md`, "Harness recovery").
        plan: String,
    }
);
body!(
    /// `tool/not_run`, written by an operator command (`factlog resolve --not-run`): a person
    /// says that a call whose outcome was unknown never ran.
    ToolNotRun {
        /// The call whose outcome was unknown.
        call_id: CallId,
        /// Who said so.
        operator: OperatorMark,
    }
);
body!(
    /// Who answered for a person, on an event an operator command wrote (`factlog resolve`,
    /// `confirm`, `approve`, `deny`, `cancel`, the console's buttons): `format-spec/events.md`,
    /// "Operator answers".
    OperatorMark {
        /// Who answered (`--as`; by default the user running the command).
        name: String,
        /// What they added, if anything (`--note`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        /// The answer's key: the same command gives the same key, and a task takes one answer
        /// per key, so a repeated command writes nothing.
        key: String,
    }
);
body!(
    /// `approval/request`.
    ApprovalRequest {
        /// The approval.
        approval_id: ApprovalId,
        /// What is asked for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        action: Option<String>,
    }
);
body!(
    /// `approval/grant`.
    ApprovalGrant {
        /// The approval.
        approval_id: ApprovalId,
        /// How long it authorises calls.
        scope: Scope,
        /// For `persistent`: the end of its validity, in microseconds since the Unix epoch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_at_us: Option<u64>,
        /// Who gave this answer for a person, when an operator command wrote it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        operator: Option<OperatorMark>,
    }
);
body!(
    /// `approval/deny`.
    ApprovalDeny {
        /// The approval.
        approval_id: ApprovalId,
        /// Why, if given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Who gave this answer for a person, when an operator command wrote it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        operator: Option<OperatorMark>,
    }
);
body!(
    /// `approval/expired`, written by recovery.
    ApprovalExpired {
        /// The approval.
        approval_id: ApprovalId,
        /// Why (`restart`).
        reason: String,
    }
);
body!(
    /// `control/cancel`, `control/pause` and `control/resume`.
    Signal {
        /// Why, if given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Who gave this answer for a person, when an operator command wrote it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        operator: Option<OperatorMark>,
    }
);
body!(
    /// `control/expired`, written by recovery.
    SignalExpired {
        /// The expired signal's type name (`control/cancel`).
        signal: String,
        /// The sequence number of the expired signal's event.
        signal_seq: u64,
    }
);
body!(
    /// `budget/usage`: amounts added to the task's budget counters.
    BudgetUsage {
        /// Prompt tokens.
        #[serde(default)]
        input_tokens: u64,
        /// Completion tokens.
        #[serde(default)]
        output_tokens: u64,
        /// Cost in millionths of the account currency.
        #[serde(default)]
        cost_micros: u64,
    }
);
body!(
    /// `context/compacted`.
    ContextCompacted {
        /// The summary that replaces the earlier history in the model's context.
        summary: String,
    }
);
body!(
    /// `recovery/restored`, written by recovery once per task and restart.
    Restored {
        /// `ready` or `needs_confirmation`.
        resume: String,
        /// The calls that needed a decision, with their outcome and plan.
        #[serde(default)]
        calls: Vec<CallDecision>,
        /// The approvals expired by this restart.
        #[serde(default)]
        expired: Vec<ApprovalId>,
    }
);
body!(
    /// One call's classification in a `recovery/restored` event.
    CallDecision {
        /// The call.
        call_id: CallId,
        /// `not_started`, `completed` or `outcome_unknown`.
        outcome: String,
        /// `reschedule`, `reuse_receipt`, `retry`, `retry_same_key`, `verify` or `ask_user`.
        plan: String,
    }
);

body!(
    /// `state/migrated`, written by `factlog migrate` to every task after the rewrite
    /// (`format-spec/migration.md`).
    Migrated {
        /// The segment format version before.
        from: u16,
        /// The segment format version after.
        to: u16,
        /// The task's events before the migration.
        events: u64,
        /// How many of them were re-encoded.
        rewritten: u64,
        /// SHA-256 (hex) of the task's folded state before this event: the same in both
        /// versions.
        state_digest: String,
        /// Where the backup of the old store was copied.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        backup: Option<String>,
    }
);

body!(
    /// `record/put`: a record of a framework adapter (an Agents SDK session item, a LangGraph
    /// checkpoint) that no typed event covers, kept whole. The store does not interpret it:
    /// it moves the task's revision and nothing else in the folded state.
    RecordPut {
        /// Which adapter record this is (`agents/item`, `langgraph/checkpoint`): 1 to
        /// [`crate::limits::RECORD_KIND_BYTES_MAX`] bytes.
        kind: String,
        /// The record's key within its kind, if it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        /// The record, whole (`null` when absent).
        #[serde(default)]
        value: Value,
    }
);
body!(
    /// `record/blob`: a `record/put` with raw bytes beside its value (a LangGraph checkpoint's
    /// serialized bytes), stored as they are: no base64 on disk, none through the Python
    /// package. Its JSON form (the protocol, `dump`) has the bytes in base64 under `bytes`.
    /// Only a log of segment format 2 or later holds one (`format-spec/events.md`).
    RecordBlob {
        /// Which adapter record this is: 1 to [`crate::limits::RECORD_KIND_BYTES_MAX`] bytes.
        kind: String,
        /// The record's key within its kind, if it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        /// What the record says besides its bytes (`null` when absent).
        #[serde(default)]
        value: Value,
        /// The raw bytes.
        #[serde(default, with = "blob_base64")]
        bytes: Vec<u8>,
    }
);

/// The JSON form of a `record/blob`'s bytes: standard base64 with padding.
mod blob_base64 {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], out: S) -> Result<S::Ok, S::Error> {
        out.serialize_str(&STANDARD.encode(bytes))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(input: D) -> Result<Vec<u8>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(input)?;
        STANDARD.decode(text.as_bytes()).map_err(serde::de::Error::custom)
    }
}

body!(
    /// `record/removed`: the log is append-only, so a removal is an event. Earlier events of
    /// the task stop counting for the adapter records of `kind`; the adapter's fold applies
    /// it, the store's own fold and history do not.
    RecordRemoved {
        /// The kind of records the removal applies to.
        kind: String,
        /// Sequence numbers of earlier events of the task that no longer count.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        seqs: Vec<u64>,
        /// Every event of the task up to and including this sequence number no longer counts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        through_seq: Option<u64>,
    }
);

/// `assistant/delta`: a streamed fragment. Its body is binary (the UTF-8 text), not JSON,
/// because it is the hot path.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AssistantDelta {
    /// The fragment.
    pub text: String,
}

impl Todo {
    /// The status, `pending` when absent.
    #[must_use]
    pub fn status(&self) -> &str {
        self.status.as_deref().unwrap_or("pending")
    }
}

impl TurnEnd {
    /// The status, `completed` when absent.
    #[must_use]
    pub fn status(&self) -> &str {
        self.status.as_deref().unwrap_or("completed")
    }
}

impl StepEnd {
    /// The status, `completed` when absent.
    #[must_use]
    pub fn status(&self) -> &str {
        self.status.as_deref().unwrap_or("completed")
    }
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde passes fields by reference")]
fn is_false(b: &bool) -> bool {
    !*b
}

impl Body {
    /// The event type, or `None` for an opaque event.
    #[must_use]
    pub fn event_type(&self) -> Option<EventType> {
        Some(match self {
            Body::Contract(_) => EventType::Contract,
            Body::Phase(_) => EventType::Phase,
            Body::Plan(_) => EventType::Plan,
            Body::Todo(_) => EventType::Todo,
            Body::TurnStart(_) => EventType::TurnStart,
            Body::TurnEnd(_) => EventType::TurnEnd,
            Body::StepStart(_) => EventType::StepStart,
            Body::StepEnd(_) => EventType::StepEnd,
            Body::UserMessage(_) => EventType::UserMessage,
            Body::AssistantDelta(_) => EventType::AssistantDelta,
            Body::AssistantMessage(_) => EventType::AssistantMessage,
            Body::ToolCall(_) => EventType::ToolCall,
            Body::ToolResult(_) => EventType::ToolResult,
            Body::ToolOutcomeUnknown(_) => EventType::ToolOutcomeUnknown,
            Body::ToolNotRun(_) => EventType::ToolNotRun,
            Body::ApprovalRequest(_) => EventType::ApprovalRequest,
            Body::ApprovalGrant(_) => EventType::ApprovalGrant,
            Body::ApprovalDeny(_) => EventType::ApprovalDeny,
            Body::ApprovalExpired(_) => EventType::ApprovalExpired,
            Body::Cancel(_) => EventType::Cancel,
            Body::Pause(_) => EventType::Pause,
            Body::Resume(_) => EventType::Resume,
            Body::SignalExpired(_) => EventType::SignalExpired,
            Body::BudgetUsage(_) => EventType::BudgetUsage,
            Body::ContextCompacted(_) => EventType::ContextCompacted,
            Body::Restored(_) => EventType::Restored,
            Body::StateMigrated(_) => EventType::Migrated,
            Body::RecordPut(_) => EventType::RecordPut,
            Body::RecordRemoved(_) => EventType::RecordRemoved,
            Body::RecordBlob(_) => EventType::RecordBlob,
            Body::Opaque(_) => return None,
        })
    }

    /// Who answered, for an event an operator command wrote (`format-spec/events.md`,
    /// "Operator answers").
    #[must_use]
    pub fn operator(&self) -> Option<&OperatorMark> {
        match self {
            Body::ToolResult(b) => b.operator.as_ref(),
            Body::ToolNotRun(b) => Some(&b.operator),
            Body::ApprovalGrant(b) => b.operator.as_ref(),
            Body::ApprovalDeny(b) => b.operator.as_ref(),
            Body::Cancel(b) | Body::Pause(b) | Body::Resume(b) => b.operator.as_ref(),
            _ => None,
        }
    }

    /// The type name, or `opaque/0xTAG` for an opaque event.
    #[must_use]
    pub fn type_name(&self) -> String {
        match (self.event_type(), self) {
            (Some(t), _) => t.name().to_owned(),
            (None, Body::Opaque(o)) => format!("opaque/{:#06x}", o.tag),
            (None, _) => unreachable!("only opaque bodies have no type"),
        }
    }
}
