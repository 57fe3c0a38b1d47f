//! Schema steps of event bodies (`format-spec/events.md`, "Schema changes"): one function per
//! event type and step, each the exact rule of the spec. Pure: no I/O.
//!
//! An *upcast* reads an older schema as the newer one; a *downcast* writes the newer one in the
//! older schema, for a log of a segment format whose readers know only that schema. A step
//! never guesses: a body it cannot map exactly is refused with a [`Refusal`] that says why.
//!
//! Invariants, checked by `tests/harness_upcast.rs`: for every schema-2 body `b` that
//! downcasts, `tool_result_1_to_2(tool_result_2_to_1(&b)?) == b`; for every schema-1 body `a`
//! that upcasts, the downcast of its upcast is `a` with an absent `status` written as `"ok"`
//! (the meaning schema 1 gives an absent `status`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::harness::event::{EventType, Extra, OperatorMark, ResultOutcome, ToolResult};
use crate::harness::ids::CallId;

/// The body of a `tool/result` event at schema 1: a free-text `status`. Kept so that logs of
/// segment format 1 can be read and written in it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolResultV1 {
    /// The call it answers.
    pub call_id: CallId,
    /// `ok` or `error` by convention, but free text; absent means `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// What proves the effect happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Value>,
    /// The tool's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Fields schema 1 does not know, kept in their order (an `error` text among them).
    #[serde(flatten)]
    pub extra: Extra,
}

/// Why a body cannot be moved from one schema to another without guessing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The event type.
    pub event_type: EventType,
    /// The schema the body is in.
    pub from: u16,
    /// The schema it was to be read or written in.
    pub to: u16,
    /// What in the body cannot be mapped.
    pub reason: String,
}

/// Field names schema 2 of `tool/result` gives a meaning that schema 1 did not have.
const TOOL_RESULT_2_FIELDS: [&str; 3] = ["outcome", "error", "operator"];

/// `tool/result` schema 1 → 2. The rule:
/// - `status` absent or `"ok"` gives `outcome: ok`; `"error"` gives `outcome: error`; any
///   other text is refused (schema 1 allowed free text, and `timeout` or `partial` is neither
///   `ok` nor `error` for certain);
/// - a field `error` (unknown to schema 1) that is a string becomes `error`; any other value
///   (`null` included) is refused;
/// - a field `outcome` (unknown to schema 1) is refused: schema 2 gives that name a meaning;
/// - a field `operator` (unknown to schema 1; the downcast writes a schema-2 operator mark
///   there) that is an operator mark becomes `operator`; any other value is refused;
/// - `call_id`, `receipt`, `output` and every other field are kept as they are, in order.
pub fn tool_result_1_to_2(v1: ToolResultV1) -> Result<ToolResult, Refusal> {
    let refuse =
        |reason: String| Refusal { event_type: EventType::ToolResult, from: 1, to: 2, reason };
    let outcome = match v1.status.as_deref() {
        None | Some("ok") => ResultOutcome::Ok,
        Some("error") => ResultOutcome::Error,
        Some(other) => {
            return Err(refuse(format!(
                "its status {other:?} is neither \"ok\" nor \"error\", and schema 2 has no \
                 other outcome"
            )));
        }
    };
    let mut extra = v1.extra;
    if extra.contains_key("outcome") {
        return Err(refuse(
            "it has a field \"outcome\", a name schema 2 gives another meaning".to_owned(),
        ));
    }
    let error = match extra.shift_remove("error") {
        None => None,
        Some(Value::String(text)) => Some(text),
        Some(other) => {
            return Err(refuse(format!(
                "its field \"error\" is {}, not a string",
                json_kind(&other)
            )));
        }
    };
    let operator = match extra.shift_remove("operator") {
        None => None,
        Some(value) => {
            let kind = json_kind(&value);
            match serde_json::from_value::<OperatorMark>(value) {
                Ok(mark) => Some(mark),
                Err(_) => {
                    return Err(refuse(format!(
                        "its field \"operator\" is {kind} that is not an operator mark (a \
                         \"name\" and a \"key\", an optional \"note\"), a name schema 2 \
                         gives that meaning"
                    )));
                }
            }
        }
    };
    Ok(ToolResult {
        operator,
        call_id: v1.call_id,
        outcome,
        error,
        receipt: v1.receipt,
        output: v1.output,
        extra,
    })
}

/// `tool/result` schema 2 → 1, for a log of segment format 1. The rule:
/// - `outcome` becomes `status` (`"ok"` or `"error"`, always written);
/// - `error`, when present, is written as a field `error`, which schema 1 keeps as an unknown
///   field, after the known ones; then `operator`, when present, the same way;
/// - `call_id`, `receipt`, `output` and every unknown field are kept as they are.
///
/// A body whose unknown fields include `status`, `outcome`, `error` or `operator` is refused:
/// written in schema 1, the upcast would read it as something else.
pub fn tool_result_2_to_1(v2: &ToolResult) -> Result<ToolResultV1, Refusal> {
    let refuse =
        |reason: String| Refusal { event_type: EventType::ToolResult, from: 2, to: 1, reason };
    if let Some(name) =
        ["status"].iter().chain(&TOOL_RESULT_2_FIELDS).find(|name| v2.extra.contains_key(**name))
    {
        return Err(refuse(format!(
            "it has an unknown field {name:?}, which schema 1 would read as the result's own"
        )));
    }
    let mut extra = Extra::new();
    if let Some(text) = &v2.error {
        extra.insert("error".to_owned(), Value::String(text.clone()));
    }
    if let Some(mark) = &v2.operator {
        let mark = serde_json::to_value(mark).map_err(|error| {
            refuse(format!("its operator mark cannot be written as JSON ({error})"))
        })?;
        extra.insert("operator".to_owned(), mark);
    }
    extra.extend(v2.extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    Ok(ToolResultV1 {
        call_id: v2.call_id.clone(),
        status: Some(v2.outcome.as_str().to_owned()),
        receipt: v2.receipt.clone(),
        output: v2.output.clone(),
        extra,
    })
}

/// The JSON kind of `value`, for a refusal's reason (never the value: it may be a secret).
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
