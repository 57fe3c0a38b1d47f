//! Every import of the library points down the layers `ARCHITECTURE.md` draws: `error` and
//! `limits` at the bottom, then `fs`, `engine`, `harness`, `protocol`, and the doors
//! (`replica`, `client`, `server`) at the top, which never import one another.
//!
//! How: every file under `src/` (the library; front ends live in packages of their own) is
//! read, comments and `#[cfg(test)]` modules left out, and each path it names through the
//! crate root (`crate::engine::..`, `crate::{Store, Seq}`, `use crate::{harness::X, ..}`) is
//! mapped to the wing that defines it; a name re-exported by `src/lib.rs` counts as the wing
//! it comes from. A `super::` chain that climbs to the crate root counts as `crate::`, and a
//! statement whose braces span several lines (rustfmt's long `use` groups) is read whole. A reference from a wing to a higher one, or from one door to another, fails
//! the test naming the file, the line and the rule it breaks. The test checks itself on
//! made-up lines, so it cannot pass by finding nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The wings, bottom to top, with their rank. Doors share the top rank and may not import
/// each other.
const WINGS: &[(&str, u32)] = &[
    ("error", 0),
    ("limits", 0),
    ("types", 0),
    ("fs", 1),
    ("engine", 2),
    ("harness", 3),
    ("protocol", 4),
    ("replica", 5),
    ("client", 5),
    ("server", 5),
    // A front end in the library (feature `console`): above the doors it reads through.
    ("console", 6),
];

const DOOR_RANK: u32 = 5;

fn rank(wing: &str) -> Option<u32> {
    WINGS.iter().find(|(name, _)| *name == wing).map(|(_, rank)| *rank)
}

/// The wing of a source file: its first path component under `src/` (`src/error.rs` is
/// `error`); `None` for the crate root, which may name every wing.
fn wing_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).expect("a file under src");
    let first = relative.components().next()?.as_os_str().to_str()?.to_owned();
    let wing = first.strip_suffix(".rs").map_or(first.clone(), str::to_owned);
    (wing != "lib").then_some(wing)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// How many `super::` a file's code must climb to reach the crate root: its module's depth
/// (`src/error.rs` 1, `src/harness/store/open.rs` 3, `src/harness/store/mod.rs` 2).
fn module_depth(src: &Path, file: &Path) -> usize {
    let relative = file.strip_prefix(src).expect("a file under src");
    let components = relative.components().count();
    if relative.file_name().is_some_and(|name| name == "mod.rs") {
        components - 1
    } else {
        components
    }
}

/// `line` with every `super::` chain of `depth` or more links (one that reaches the crate
/// root) written as `crate::`.
fn rooted(line: &str, depth: usize) -> String {
    let root = "super::".repeat(depth);
    line.replace(&root, "crate::")
}

/// The code lines joined into statements where a `crate::{` group is still open at the end of
/// a line (rustfmt breaks a long `use` group over several lines); each keeps the number of its
/// first line.
fn statements(lines: Vec<(usize, String)>) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (number, line) in lines {
        let (number, text) = match open.take() {
            Some((first, mut text)) => {
                text.push(' ');
                text.push_str(line.trim());
                (first, text)
            }
            None => (number, line),
        };
        let unclosed = text
            .match_indices("crate::{")
            .any(|(at, _)| matching_brace(&text[at + "crate::{".len()..]).is_none());
        if unclosed {
            open = Some((number, text));
        } else {
            out.push((number, text));
        }
    }
    out.extend(open);
    out
}

/// The code of a file without comments, string-free enough for this check, and without its
/// `#[cfg(test)]` modules (a unit test may build a store through a door).
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut skip_depth: Option<i64> = None;
    let mut depth: i64 = 0;
    let mut pending_cfg_test = false;
    for (index, raw) in text.lines().enumerate() {
        let line = raw.split("//").next().unwrap_or("").to_owned();
        let trimmed = line.trim();
        let opens = i64::try_from(line.matches('{').count()).expect("count");
        let closes = i64::try_from(line.matches('}').count()).expect("count");
        if skip_depth.is_none() && trimmed.starts_with("#[cfg(test)]") {
            pending_cfg_test = true;
            continue;
        }
        if pending_cfg_test && skip_depth.is_none() {
            pending_cfg_test = false;
            if trimmed.starts_with("mod ") && opens > closes {
                skip_depth = Some(depth);
                depth += opens - closes;
                continue;
            }
        }
        depth += opens - closes;
        if let Some(start) = skip_depth {
            if depth <= start {
                skip_depth = None;
            }
            continue;
        }
        lines.push((index + 1, line));
    }
    lines
}

/// The names `src/lib.rs` re-exports, each with the wing it comes from.
fn root_exports(lib: &str) -> BTreeMap<String, String> {
    let mut exports = BTreeMap::new();
    let text = lib.replace('\n', " ");
    for statement in text.split(';') {
        let Some(rest) = statement.trim().strip_prefix("pub use crate::") else { continue };
        let wing = rest.split("::").next().expect("a wing").trim().to_owned();
        let names = match (rest.find('{'), rest.rfind('}')) {
            (Some(open), Some(close)) => rest[open + 1..close].to_owned(),
            _ => rest.rsplit("::").next().expect("a name").to_owned(),
        };
        for name in names.split(',') {
            let name = name.split(" as ").last().expect("a name").trim();
            if !name.is_empty() {
                exports.insert(name.to_owned(), wing.clone());
            }
        }
    }
    exports
}

/// The wings a line of code names through the crate root.
fn referenced_wings(line: &str, exports: &BTreeMap<String, String>) -> Vec<String> {
    let mut wings = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let before = &rest[..at];
        rest = &rest[at + "crate::".len()..];
        if before.ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a::X, Store}`: the first component of each item (nested braces are
            // within one wing, so a shallow split suffices).
            let end = matching_brace(group).unwrap_or(group.len());
            let mut depth = 0;
            let mut item = String::new();
            for c in group[..end].chars().chain(std::iter::once(',')) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        let first = item.trim().split("::").next().unwrap_or("").trim();
                        wings.extend(resolve(first, exports));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
        } else {
            let first: String =
                rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            wings.extend(resolve(&first, exports));
        }
    }
    wings
}

fn matching_brace(text: &str) -> Option<usize> {
    let mut depth = 0;
    for (index, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(index),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

fn resolve(first: &str, exports: &BTreeMap<String, String>) -> Option<String> {
    if first.is_empty() || first == "self" {
        return None;
    }
    if rank(first).is_some() {
        return Some(first.to_owned());
    }
    Some(exports.get(first).cloned().unwrap_or_else(|| {
        panic!("crate::{first} is neither a wing nor a name src/lib.rs re-exports")
    }))
}

/// Why `from` may not import `to`, or `None` when it may.
fn violation(from: &str, to: &str) -> Option<String> {
    if from == to {
        return None;
    }
    let (Some(from_rank), Some(to_rank)) = (rank(from), rank(to)) else {
        return Some(format!("unknown wing ({from} -> {to}): add it to ARCHITECTURE.md and WINGS"));
    };
    if to_rank > from_rank {
        return Some(format!(
            "{from} (layer {from_rank}) imports {to} (layer {to_rank}), above it"
        ));
    }
    if from_rank == DOOR_RANK && to_rank == DOOR_RANK {
        return Some(format!("the door {from} imports the door {to}; doors never call each other"));
    }
    None
}

fn violations(src: &Path) -> Vec<String> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let exports = root_exports(&lib);
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let Some(from) = wing_of(src, &file) else { continue };
        let text = std::fs::read_to_string(&file).expect("read");
        let depth = module_depth(src, &file);
        let lines = code_lines(&text).into_iter().map(|(n, line)| (n, rooted(&line, depth)));
        for (number, line) in statements(lines.collect()) {
            for to in referenced_wings(&line, &exports) {
                if let Some(why) = violation(&from, &to) {
                    found.push(format!("{}:{number}: {why}: {}", file.display(), line.trim()));
                }
            }
        }
    }
    found
}

#[test]
fn every_import_points_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = violations(&src);
    assert!(found.is_empty(), "imports pointing the wrong way:\n{}", found.join("\n"));
}

#[test]
fn every_wing_of_the_crate_is_known() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in std::fs::read_dir(&src).expect("read src") {
        let path = entry.expect("entry").path();
        if let Some(wing) = wing_of(&src, &path) {
            assert!(rank(&wing).is_some(), "{} is in no layer of ARCHITECTURE.md", path.display());
        }
    }
}

#[test]
fn the_check_finds_what_it_looks_for() {
    let exports = root_exports(
        "pub use crate::harness::{Store, StoreOptions};\npub use crate::engine::types::Seq;",
    );
    let wings = |line: &str| referenced_wings(line, &exports);
    assert_eq!(wings("use crate::server::socket_path;"), ["server"]);
    assert_eq!(wings("use crate::{Seq, Store};"), ["engine", "harness"]);
    assert_eq!(wings("use crate::{harness::{a, b}, fs::Fs};"), ["harness", "fs"]);
    assert_eq!(wings("let x = crate::replica::progress::new();"), ["replica"]);
    let src = Path::new("/s/src");
    assert_eq!(module_depth(src, Path::new("/s/src/error.rs")), 1);
    assert_eq!(module_depth(src, Path::new("/s/src/harness/store/open.rs")), 3);
    assert_eq!(module_depth(src, Path::new("/s/src/harness/store/mod.rs")), 2);
    assert_eq!(wings(&rooted("use super::super::server::X;", 2)), ["server"]);
    assert_eq!(wings(&rooted("use super::recovery::X;", 3)), Vec::<String>::new());
    let joined = statements(vec![
        (1, "use crate::{".to_owned()),
        (2, "    harness::Store,".to_owned()),
        (3, "    server::Server,".to_owned()),
        (4, "};".to_owned()),
        (5, "use crate::fs::Fs;".to_owned()),
    ]);
    assert_eq!(joined.len(), 2);
    assert_eq!(joined[0].0, 1);
    assert_eq!(wings(&joined[0].1), ["harness", "server"]);
    assert!(violation("engine", "harness").is_some());
    assert!(violation("fs", "engine").is_some());
    assert!(violation("client", "server").is_some());
    assert!(violation("server", "harness").is_none());
    assert!(violation("engine", "limits").is_none());
    let lines = code_lines(
        "use crate::a;\n// crate::b\n#[cfg(test)]\nmod tests {\n    use crate::c;\n}\nuse crate::d;\n",
    );
    let kept: Vec<&str> = lines.iter().map(|(_, l)| l.trim()).filter(|l| !l.is_empty()).collect();
    assert_eq!(kept, ["use crate::a;", "use crate::d;"]);
}
