//! The documents of `format-spec/schema/` are valid JSON Schema 2020-12 (checked against the
//! meta-schema and compiled with their cross-file references resolved from the directory),
//! each with its stable `$id`, a title and a description; `protocol.md` and the format
//! README list every one; and every one is exercised by a test of `tests/schema_*.rs`, so a
//! new schema without a test fails here.

use crate::common;

use common::schema;

#[test]
fn every_schema_is_a_valid_2020_12_document_with_its_id_title_and_description() {
    let names = schema::schema_names();
    assert!(names.len() >= 17, "the schemas: {names:?}");
    for name in &names {
        let document = schema::load(name);
        assert_eq!(
            document["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{name}: $schema"
        );
        assert_eq!(document["$id"], schema::expected_id(name), "{name}: $id");
        for key in ["title", "description"] {
            let text = document[key].as_str().unwrap_or_default();
            assert!(!text.is_empty(), "{name}: a {key}");
        }
        assert!(jsonschema::draft202012::meta::is_valid(&document), "{name}: meta-schema");
    }
    // Compiles every file, resolving the references between them.
    assert_eq!(schema::validators().len(), names.len());
}

#[test]
fn a_broken_schema_fails_the_meta_check() {
    // The check above would catch a typo such as a `type` that is no JSON type.
    let broken = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "strnig"
    });
    assert!(!jsonschema::draft202012::meta::is_valid(&broken));
}

#[test]
fn protocol_md_and_the_format_readme_list_every_schema() {
    let spec = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("format-spec");
    for doc in ["protocol.md", "README.md"] {
        let text = std::fs::read_to_string(spec.join(doc)).expect("read the spec");
        for name in schema::schema_names() {
            assert!(text.contains(&format!("schema/{name}")), "{doc} does not list {name}");
        }
    }
}

#[test]
fn every_schema_is_exercised_by_a_test() {
    let tests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut sources = String::new();
    for entry in std::fs::read_dir(&tests).expect("tests/") {
        let path = entry.expect("entry").path();
        let file = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        if file.starts_with("schema_") && file.ends_with(".rs") && file != "schema_files.rs" {
            sources.push_str(&std::fs::read_to_string(&path).expect("read a test"));
        }
    }
    for name in schema::schema_names() {
        // Validation helpers take the file name as their first argument.
        assert!(
            sources.contains(&format!("\"{name}\"")),
            "no test of tests/schema_*.rs validates anything against {name}"
        );
    }
}
