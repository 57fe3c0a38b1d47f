//! The JSON Schemas of `format-spec/schema/` (JSON Schema 2020-12): every file loaded once,
//! checked against the 2020-12 meta-schema, and compiled with the others as its registry, so
//! that a `$ref` to another file (`https://factlog.dev/schema/v1/event.json#/$defs/body`)
//! resolves to the file in this repository and nothing is fetched. Formats (`date-time`) are
//! asserted, not only annotated.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use jsonschema::{Registry, Validator};
use serde_json::Value;

/// The directory of the schemas.
pub fn schema_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("format-spec").join("schema")
}

/// The file names of every schema (`event.json`, ...), sorted.
pub fn schema_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(schema_dir())
        .expect("format-spec/schema/ exists")
        .map(|entry| entry.expect("directory entry").file_name().into_string().expect("UTF-8"))
        .filter(|name| name.ends_with(".json"))
        .collect();
    names.sort();
    names
}

/// The schema document `name`, parsed.
pub fn load(name: &str) -> Value {
    let path = schema_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("read {}: {error}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{name} is not JSON: {error}"))
}

/// The `$id` a schema file must have: `https://factlog.dev/schema/v1/NAME`.
pub fn expected_id(name: &str) -> String {
    format!("https://factlog.dev/schema/v1/{name}")
}

/// Every schema compiled, by file name. Panics, naming the file, if one is not a valid
/// 2020-12 schema or a `$ref` does not resolve.
pub fn validators() -> &'static BTreeMap<String, Validator> {
    static VALIDATORS: OnceLock<BTreeMap<String, Validator>> = OnceLock::new();
    VALIDATORS.get_or_init(|| {
        let documents: Vec<(String, Value)> =
            schema_names().into_iter().map(|name| (name.clone(), load(&name))).collect();
        let mut builder = Registry::new();
        for (name, document) in &documents {
            if let Err(error) = jsonschema::draft202012::meta::validate(document) {
                panic!("{name} is not a valid JSON Schema 2020-12 document: {error}");
            }
            builder = builder
                .add(expected_id(name), document.clone())
                .unwrap_or_else(|error| panic!("{name}: {error}"));
        }
        let registry = builder.prepare().expect("the schemas form a registry");
        documents
            .iter()
            .map(|(name, document)| {
                let validator = jsonschema::draft202012::options()
                    .should_validate_formats(true)
                    .with_registry(&registry)
                    .build(document)
                    .unwrap_or_else(|error| panic!("{name} does not compile: {error}"));
                (name.clone(), validator)
            })
            .collect()
    })
}

/// The compiled schema `name`.
pub fn validator(name: &str) -> &'static Validator {
    validators().get(name).unwrap_or_else(|| panic!("no schema {name} in format-spec/schema/"))
}

/// The errors of `instance` against schema `name`, one line each; empty when it is valid.
pub fn errors(name: &str, instance: &Value) -> Vec<String> {
    validator(name)
        .iter_errors(instance)
        .map(|error| format!("at {}: {error}", error.instance_path()))
        .collect()
}

/// True if `instance` is valid against schema `name`.
pub fn is_valid(name: &str, instance: &Value) -> bool {
    validator(name).is_valid(instance)
}

/// Asserts that `instance` is valid against schema `name`, printing every error if not.
#[track_caller]
pub fn assert_valid(name: &str, instance: &Value) {
    let errors = errors(name, instance);
    assert!(errors.is_empty(), "{instance}\nis not valid against {name}:\n{}", errors.join("\n"));
}

/// Asserts that `instance` is refused by schema `name`.
#[track_caller]
pub fn assert_invalid(name: &str, instance: &Value) {
    assert!(!is_valid(name, instance), "{instance}\nshould be refused by {name}");
}

/// Asserts that every line is valid against schema `name`; returns how many there were.
#[track_caller]
pub fn assert_lines_valid(name: &str, lines: &[Value]) -> usize {
    for line in lines {
        assert_valid(name, line);
    }
    lines.len()
}
