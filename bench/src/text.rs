//! Small pieces of the reports' text.

/// `n` and `noun`, plural unless `n` is 1: "1 segment", "3 segments" (regular nouns only).
pub(crate) fn counted(n: u64, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}
