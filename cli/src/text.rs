//! Small pieces of the commands' text output.

/// `n` and `noun`, plural unless `n` is 1: "1 segment", "3 segments" (regular nouns only).
pub fn counted(n: u64, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_is_singular_every_other_count_plural() {
        assert_eq!(super::counted(1, "part"), "1 part");
        assert_eq!(super::counted(0, "part"), "0 parts");
        assert_eq!(super::counted(2, "segment"), "2 segments");
    }
}
