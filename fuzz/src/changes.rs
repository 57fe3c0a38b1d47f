//! The check the damage sweep (`tests/mark_damage_sweep.rs`) and the `damaged_tail` target
//! share: an open changed nothing but the torn tail it reports cut, and created nothing but
//! the kept copy of that tail (`format-spec/mark.md`, "Kept tails") and the preallocation.

use std::collections::BTreeMap;
use std::path::PathBuf;

use factlog::TailCut;

/// Checks that an open changed nothing but the tail it reports cut (and created nothing but
/// the kept copy of that tail and the preallocation).
pub fn check_changes(
    before: &BTreeMap<PathBuf, Vec<u8>>,
    after: &BTreeMap<PathBuf, Vec<u8>>,
    cut: Option<&TailCut>,
) -> Result<(), String> {
    for (path, old) in before {
        let Some(new) = after.get(path) else {
            return Err(format!("the open removed {}", path.display()));
        };
        if new == old {
            continue;
        }
        let Some(cut) = cut.filter(|c| c.path == *path) else {
            return Err(format!("the open changed {} and reported no cut of it", path.display()));
        };
        let range = cut.offset as usize..(cut.offset + cut.bytes) as usize;
        let outside = old
            .iter()
            .zip(new)
            .enumerate()
            .find(|(i, (a, b))| a != b && !(range.contains(i) && **b == 0));
        if let Some((i, _)) = outside {
            let path = path.display();
            return Err(format!("the open changed byte {i} of {path}, outside its cut {cut:?}"));
        }
        if new.len() < old.len() || new[old.len()..].iter().any(|&b| b != 0) {
            return Err(format!("the open changed the length of {}", path.display()));
        }
    }
    for path in after.keys().filter(|p| !before.contains_key(*p)) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let kept = cut.is_some_and(|c| c.kept.as_ref() == Some(path));
        if !kept && name != factlog::engine::segments::PREALLOC_FILE_NAME {
            return Err(format!("the open created {}", path.display()));
        }
    }
    if let Some(cut) = cut {
        match (&cut.kept, cut.frames) {
            (None, 0) => {}
            (Some(kept), frames) if frames > 0 => {
                let bytes = after.get(kept).ok_or("the kept tail is missing")?;
                let tail = factlog::engine::torn::decode(bytes, kept).map_err(|e| e.to_string())?;
                let old = before.get(&cut.path).ok_or("the cut segment is missing")?;
                let range = cut.offset as usize..(cut.offset + cut.bytes) as usize;
                if tail.offset != cut.offset || old.get(range) != Some(tail.bytes) {
                    return Err(format!("the kept tail does not hold the cut bytes: {cut:?}"));
                }
            }
            _ => return Err(format!("a cut with frames after its hole is kept exactly: {cut:?}")),
        }
    }
    Ok(())
}
