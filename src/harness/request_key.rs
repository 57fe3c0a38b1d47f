//! Stable idempotency keys and argument digests (R13; `format-spec/events.md`, "Request keys"
//! and "Argument digests"). Both are SHA-256 over a documented byte string, so a harness in any
//! language derives the same values; the test vectors in `format-spec/vectors/` pin them.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::harness::ids::{RequestKey, TaskId};

/// The domain separator that starts every hashed request-key input.
pub const REQUEST_KEY_DOMAIN: &[u8] = b"factlog/request-key/v1\0";
/// The prefix of every request key of this version.
pub const REQUEST_KEY_PREFIX: &str = "rk1_";

/// The request key of `operation` on task `task`, based on the task's revision
/// `source_revision`: the same three inputs always give the same key; a changed revision (the
/// content the request was derived from changed) gives a new one.
///
/// `rk1_` followed by the lower-case hex of the first 16 bytes of
/// `SHA-256(domain ‖ u32le(len task) ‖ task ‖ u32le(len operation) ‖ operation ‖
/// u64le(source_revision))`.
#[must_use]
pub fn derive(task: &TaskId, operation: &str, source_revision: u64) -> RequestKey {
    let mut hash = Sha256::new();
    hash.update(REQUEST_KEY_DOMAIN);
    hash.update((task.as_str().len() as u32).to_le_bytes());
    hash.update(task.as_str().as_bytes());
    hash.update((operation.len() as u32).to_le_bytes());
    hash.update(operation.as_bytes());
    hash.update(source_revision.to_le_bytes());
    let digest = hash.finalize();
    let mut key = String::with_capacity(REQUEST_KEY_PREFIX.len() + 32);
    key.push_str(REQUEST_KEY_PREFIX);
    push_hex(&mut key, &digest[..16]);
    RequestKey(key)
}

/// The digest of a call's arguments: the lower-case hex SHA-256 of their canonical JSON
/// (objects with keys sorted by their UTF-8 bytes, no whitespace, strings and numbers written
/// as serde_json writes them).
#[must_use]
pub fn args_digest(args: &Value) -> String {
    let mut canonical = Vec::new();
    write_canonical(&mut canonical, args);
    let digest = Sha256::digest(&canonical);
    let mut out = String::with_capacity(64);
    push_hex(&mut out, &digest);
    out
}

/// The canonical JSON of `value`, as hashed by [`args_digest`].
#[must_use]
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(&mut out, value);
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

fn write_canonical(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_scalar(out, &Value::String(key.clone()));
                out.push(b':');
                write_canonical(out, item);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(out, item);
            }
            out.push(b']');
        }
        scalar => write_scalar(out, scalar),
    }
}

fn write_scalar(out: &mut Vec<u8>, value: &Value) {
    serde_json::to_writer(out, value).expect("writing JSON into a Vec cannot fail");
}

fn push_hex(out: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 15)]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn same_request_same_key_and_new_revision_new_key() {
        let task = TaskId::from("t1");
        let a = derive(&task, "publish_article:draft-7", 12);
        assert_eq!(a, derive(&task, "publish_article:draft-7", 12));
        assert_ne!(a, derive(&task, "publish_article:draft-7", 13));
        assert_ne!(a, derive(&TaskId::from("t2"), "publish_article:draft-7", 12));
        assert_ne!(a, derive(&task, "publish_article:draft-8", 12));
        assert!(a.as_str().starts_with(REQUEST_KEY_PREFIX) && a.as_str().len() == 36);
    }

    #[test]
    fn length_prefixes_keep_fields_apart() {
        let key = |t: &str, op: &str| derive(&TaskId::from(t), op, 1);
        assert_ne!(key("ab", "c"), key("a", "bc"));
    }

    #[test]
    fn digest_ignores_key_order_and_whitespace() {
        let a = json!({"b": [1, 2, {"y": true, "x": null}], "a": "é\n"});
        let b: Value =
            serde_json::from_str("{ \"a\" : \"é\\n\", \"b\": [1,2,{\"x\":null,\"y\":true}] }")
                .unwrap();
        assert_eq!(args_digest(&a), args_digest(&b));
        assert_eq!(canonical_json(&a), r#"{"a":"é\n","b":[1,2,{"x":null,"y":true}]}"#);
    }
}
