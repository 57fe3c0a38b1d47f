//! Secrets (R16): a value written as `{"$secret": "..."}` anywhere in a JSON body (any object
//! with a `$secret` key, whole) is replaced,
//! before the event is encoded, by `{"$secret_ref": "sec_<32 hex digits>"}`, a random
//! reference that is not derived from the secret, so nothing on disk can reveal it.
//! The harness keeps the secret itself in memory (or in its own vault) under that reference.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value};

/// The key that marks a secret in a caller's JSON.
pub const SECRET_KEY: &str = "$secret";
/// The key of the reference that replaces it on disk.
pub const SECRET_REF_KEY: &str = "$secret_ref";

/// [`SECRET_KEY`] as it appears in JSON text that `serde_json` wrote: quoted, unescaped.
const SECRET_KEY_JSON: &[u8] = b"\"$secret\"";

/// Whether JSON text written by `serde_json` may hold a secret: it has the string
/// `"$secret"` somewhere. Compares only where a `"` starts, so it is linear in the text and
/// cheap for the bodies that hold no secret (nearly all), which it lets skip the tree walk.
#[must_use]
pub fn json_mentions_secret(json: &[u8]) -> bool {
    // `contains` on bytes is a `memchr`: nearly every body has no `$` at all.
    if !json.contains(&b'$') {
        return false;
    }
    json.iter()
        .enumerate()
        .filter(|&(_, &byte)| byte == b'"')
        .any(|(at, _)| json.get(at..).is_some_and(|rest| rest.starts_with(SECRET_KEY_JSON)))
}

/// Replaces every secret in `value` by a fresh reference; returns how many were replaced.
pub fn redact(value: &mut Value) -> usize {
    match value {
        Value::Object(map) if is_secret(map) => {
            let mut reference = Map::new();
            reference.insert(SECRET_REF_KEY.to_owned(), Value::String(new_reference()));
            *map = reference;
            1
        }
        Value::Object(map) => map.values_mut().map(redact).sum(),
        Value::Array(items) => items.iter_mut().map(redact).sum(),
        _ => 0,
    }
}

/// Replaces every secret in `value` by `{"$secret_ref": "masked"}`: the form argument digests
/// are computed over, so that a digest neither changes with the fresh references nor reveals
/// anything about a secret.
pub fn mask(value: &mut Value) {
    match value {
        Value::Object(map) if is_secret(map) => {
            let mut masked = Map::new();
            masked.insert(SECRET_REF_KEY.to_owned(), Value::String("masked".to_owned()));
            *map = masked;
        }
        Value::Object(map) => map.values_mut().for_each(mask),
        Value::Array(items) => items.iter_mut().for_each(mask),
        _ => {}
    }
}

/// True if `value` still holds a secret (used to assert that redaction ran).
#[must_use]
pub fn contains_secret(value: &Value) -> bool {
    match value {
        Value::Object(map) => is_secret(map) || map.values().any(contains_secret),
        Value::Array(items) => items.iter().any(contains_secret),
        _ => false,
    }
}

fn is_secret(map: &Map<String, Value>) -> bool {
    map.contains_key(SECRET_KEY)
}

/// A reference with 128 random bits: independent of the secret, unique in practice.
fn new_reference() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut bits = [0u64; 2];
    for part in &mut bits {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        *part = hasher.finish();
    }
    format!("sec_{:016x}{:016x}", bits[0], bits[1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_json_scan_finds_the_secret_key_wherever_serde_json_writes_it() {
        assert_eq!(SECRET_KEY_JSON, format!("\"{SECRET_KEY}\"").as_bytes());
        for (value, mentions) in [
            (json!({"a": {"$secret": "x"}}), true),
            (json!({"list": [1, {"$secret": 2}]}), true),
            (json!({"text": "$secret"}), true),
            (json!({"$secret_ref": "sec_1"}), false),
            (json!({"text": "no secret here \"quoted\""}), false),
            (json!({"secret": 1, "$": 2}), false),
            (json!({}), false),
        ] {
            let text = serde_json::to_vec(&value).unwrap();
            assert_eq!(json_mentions_secret(&text), mentions, "{value}");
        }
        assert!(!json_mentions_secret(b"\"$secre"), "a marker cut short at the end");
    }

    #[test]
    fn nested_secrets_are_replaced_by_distinct_references() {
        let mut v = json!({"auth": {"$secret": "hunter2"}, "list": [{"$secret": "hunter2"}, 1]});
        assert_eq!(redact(&mut v), 2);
        assert!(!contains_secret(&v));
        let text = v.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert_ne!(v["auth"], v["list"][0]);
        assert!(v["auth"][SECRET_REF_KEY].as_str().unwrap().starts_with("sec_"));
    }

    #[test]
    fn an_object_with_other_keys_is_still_a_secret_whole() {
        let mut v = json!({"k": {"$secret": "x-secret", "note": "y"}});
        assert_eq!(redact(&mut v), 1);
        assert!(!v.to_string().contains("x-secret") && !v.to_string().contains("note"));
    }
}
