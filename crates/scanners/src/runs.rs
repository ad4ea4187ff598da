//! Locating a rule with no literal from long runs of the few bytes its matches are made of.
//!
//! A token such as `\b[MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,38}\b` has
//! no literal, but every match is at least 59 bytes drawn from `[A-Za-z0-9_.-]` (its alphabet),
//! so it lies inside a run of such bytes at least that long. Any run of `L` bytes or more holds
//! one of the positions `L - 1`, `2L - 1`, `3L - 1`, …, so only those positions are read first;
//! from one inside the alphabet the run is read out to both ends, and the rule's own search runs
//! only inside the runs long enough (with the whole input as context, so `\b` reads as in one
//! search). On source code, where identifiers are short and spaces and newlines break runs, this
//! reads a fraction of the input instead of searching all of it.

use regex_syntax::hir::Hir;

use crate::inner::{Alphabet, collect_alphabet};
use crate::pattern::Pattern;

/// Rules whose matches can be shorter than this are searched the ordinary way: the grid would
/// be too dense to spare much.
const SHORTEST: usize = 24;

/// The alphabet and shortest match of a rule located from runs.
#[derive(Debug, Clone)]
pub(crate) struct Runs {
    alphabet: Box<Alphabet>,
    /// The fewest bytes a match takes.
    shortest: usize,
}

/// The runs of `pattern`, or `None` when its matches can be short, or can hold a space or a
/// newline (runs of ordinary text would then be long everywhere).
pub(crate) fn runs(pattern: &Pattern) -> Option<Runs> {
    let expression = pattern.expression().ok()?;
    let hir: Hir = regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(&expression)
        .ok()?;
    let shortest = hir.properties().minimum_len()?;
    let mut alphabet = Box::new([false; 256]);
    collect_alphabet(&hir, &mut alphabet);
    (shortest >= SHORTEST && !alphabet[usize::from(b' ')] && !alphabet[usize::from(b'\n')])
        .then_some(Runs { alphabet, shortest })
}

impl Runs {
    /// Every maximal run of alphabet bytes in `haystack` at least as long as the shortest match,
    /// in order.
    pub(crate) fn windows(&self, haystack: &[u8]) -> Vec<std::ops::Range<usize>> {
        let inside = |byte: u8| self.alphabet[usize::from(byte)];
        let mut windows = Vec::new();
        // Where the last run read ended: a position before it was read already.
        let mut read_to = 0;
        let mut probe = self.shortest - 1;
        while probe < haystack.len() {
            if probe >= read_to && inside(haystack[probe]) {
                let end = haystack[probe..]
                    .iter()
                    .position(|&byte| !inside(byte))
                    .map_or(haystack.len(), |length| probe + length);
                // A long enough run holds every byte from `end - shortest` on: reading those
                // from the far end rejects a short run after a byte or two.
                let long = end
                    .checked_sub(self.shortest)
                    .filter(|&need| need >= read_to)
                    .filter(|&need| {
                        // Past the probe, the bytes up to `end` were read already.
                        haystack[need.min(probe)..probe]
                            .iter()
                            .all(|&byte| inside(byte))
                    });
                if let Some(mut start) = long {
                    while start > read_to && inside(haystack[start - 1]) {
                        start -= 1;
                    }
                    windows.push(start..end);
                }
                read_to = end;
            }
            probe += self.shortest;
        }
        windows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::builtin_patterns;

    fn rule(expression: &str) -> Pattern {
        let mut pattern = builtin_patterns().remove(0);
        pattern.flags = String::new();
        pattern.pattern = expression.into();
        pattern
    }

    /// The windows of an input with one run.
    fn one(run: std::ops::Range<usize>) -> Vec<std::ops::Range<usize>> {
        vec![run]
    }

    #[test]
    fn only_long_matches_without_spaces_or_newlines_are_found_from_runs() {
        let discord = builtin_patterns()
            .into_iter()
            .find(|p| p.id == "secret.discord-bot-token")
            .unwrap();
        assert_eq!(runs(&discord).unwrap().shortest, 59);
        assert!(runs(&rule(r"[A-Za-z0-9]{23}")).is_none(), "too short");
        assert!(runs(&rule(r"[A-Za-z ]{30}")).is_none(), "a space");
        assert!(runs(&rule(r"\w{10}\s+\w{20}")).is_none(), "whitespace");
        assert!(runs(&rule(r"[a-f0-9]{32}")).is_some());
    }

    #[test]
    fn every_long_enough_run_is_found_wherever_it_lies_against_the_grid() {
        let found = runs(&rule(r"\b[a-f0-9]{32}\b")).unwrap();
        let run = "0123456789abcdef".repeat(2);
        for before in 0..70 {
            for after in 0..40 {
                let text = format!("{} {run} {}", "x".repeat(before), "y".repeat(after));
                let start = before + 1;
                assert_eq!(
                    found.windows(text.as_bytes()),
                    one(start..start + 32),
                    "{before} {after}"
                );
            }
        }
        // Runs of every length from one short to three times the shortest, at every offset.
        for length in 31..100 {
            for before in 0..40 {
                let text = format!("{}.{}.zz", "x".repeat(before), "a".repeat(length));
                let expected = if length >= 32 {
                    one(before + 1..before + 1 + length)
                } else {
                    Vec::new()
                };
                assert_eq!(
                    found.windows(text.as_bytes()),
                    expected,
                    "{length} {before}"
                );
            }
        }
        // One byte short anywhere is no window; runs longer than the shortest are whole.
        assert!(found.windows(&b"ab".repeat(15)).is_empty());
        let long = format!("zz {}-{} zz", "a".repeat(40), "b".repeat(31));
        assert_eq!(found.windows(long.as_bytes()), one(3..43));
        let regex = rule(r"\b[a-f0-9]{32}\b").compile().unwrap();
        assert!(regex.find(long.as_bytes()).is_none());
        // A run reaching the end of the input.
        let tail = format!("{}{}", "-".repeat(7), "f".repeat(33));
        assert_eq!(found.windows(tail.as_bytes()), one(7..40));
    }
}
