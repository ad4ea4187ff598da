//! Locating a rule's matches from the literals every match must begin with.
//!
//! Most rules begin with text of their own (`ghp_`, `AKIA`, `-----BEGIN`, `ignore`): every match
//! of such a rule starts where one of a few literals occurs. One Aho-Corasick pass over the input
//! finds every occurrence of every such literal of every rule, and each rule's regex then runs
//! only there, anchored at the occurrence. That reports the same matches as the rule's own
//! leftmost-first search over the whole input (an anchored match at a position is the match that
//! search would report starting there; positions inside a reported match are skipped as it would
//! skip them), without a pass of every rule over every byte.
//!
//! The literals come from the regex's syntax tree (`regex-syntax`'s prefix extraction), so a
//! host's own patterns get them too. A rule whose matches can begin with too many, too short or
//! unbounded prefixes (`[A-Za-z0-9]{40}`, `\s*key`) has none and is searched the ordinary way.

use std::ops::ControlFlow;

use aho_corasick::automaton::{Automaton as _, StateID};
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind, StartKind};
use regex_automata::meta;
use regex_automata::{Anchored, Input};
use regex_syntax::hir::literal::{ExtractKind, Extractor};

use crate::pattern::{Pattern, PatternError};

/// A literal shorter than this would occur almost everywhere; such a rule is not prefiltered.
const MIN_LITERAL: usize = 3;
/// A rule whose matches can begin with more literals than this is not prefiltered.
const MAX_LITERALS: usize = 64;
/// Largest compiled program of a rule's anchored matcher.
const SIZE_LIMIT: usize = 1 << 20;
/// Lazy-DFA cache of a rule's anchored matcher.
const CACHE: usize = 2 << 20;

/// The literals every match of `pattern` begins with, lower-cased (the search ignores ASCII
/// case, which can only find more places to try), or `None` when they are not few and long.
pub(crate) fn prefixes(pattern: &Pattern) -> Option<Vec<Vec<u8>>> {
    // A rule that ignores ASCII case is read as written: its literals are then one spelling per
    // word rather than every mix of cases, and the search ignores case anyway. Unicode case
    // folding (flags `u` and `i`) can match non-ASCII spellings an ASCII-folding search would
    // miss, so such a rule keeps its flag and its literals must come out exact.
    let mut reading = pattern.clone();
    if !reading.flags.contains('u') {
        reading.flags = reading.flags.replace('i', "");
    }
    let expression = reading.expression().ok()?;
    let hir = regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(&expression)
        .ok()?;
    let mut extractor = Extractor::new();
    extractor
        .kind(ExtractKind::Prefix)
        .limit_class(16)
        .limit_total(4096);
    let seq = extractor.extract(&hir);
    let literals: Vec<Vec<u8>> = seq
        .literals()?
        .iter()
        .map(|literal| literal.as_bytes().to_ascii_lowercase())
        .collect();
    few_and_long(literals)
}

/// The literals cut to the longest length at which there are at most [`MAX_LITERALS`] of them
/// (a prefix of a prefix still begins every match), or `None` when one is shorter than
/// [`MIN_LITERAL`] even uncut.
pub(crate) fn few_and_long(literals: Vec<Vec<u8>>) -> Option<Vec<Vec<u8>>> {
    few_and_at_least(literals, MIN_LITERAL)
}

/// As [`few_and_long`], with `min` bytes as the shortest literal allowed.
pub(crate) fn few_and_at_least(mut literals: Vec<Vec<u8>>, min: usize) -> Option<Vec<Vec<u8>>> {
    if literals.is_empty() || literals.iter().any(|l| l.len() < min) {
        return None;
    }
    literals.sort();
    literals.dedup();
    let longest = literals.iter().map(Vec::len).max()?;
    for length in (min.max(1)..=longest).rev() {
        let mut cut: Vec<Vec<u8>> = literals
            .iter()
            .map(|l| l[..l.len().min(length)].to_vec())
            .collect();
        cut.sort();
        cut.dedup();
        if cut.len() <= MAX_LITERALS {
            return Some(cut);
        }
    }
    None
}

/// A rule's own matcher: anchored at literal positions, or confined to windows around them.
pub(crate) fn matcher(pattern: &Pattern) -> Result<meta::Regex, PatternError> {
    let expression = pattern.expression()?;
    meta::Builder::new()
        .configure(
            meta::Config::new()
                .nfa_size_limit(Some(SIZE_LIMIT))
                .hybrid_cache_capacity(CACHE)
                .utf8_empty(false),
        )
        .syntax(regex_automata::util::syntax::Config::new().utf8(false))
        .build(&expression)
        .map_err(|error| PatternError::InvalidRegex {
            id: pattern.id.clone(),
            message: error.to_string(),
        })
}

/// Every located rule's literals in one automaton.
#[derive(Debug, Clone)]
pub(crate) struct Literals {
    automaton: Automaton,
    /// For each literal of the automaton, the rules (by index) and their branches that need it.
    owners: Vec<Vec<(usize, usize)>>,
}

/// The literal automaton: a DFA stepped here byte by byte (one table lookup a byte, no
/// prefilter: with thousands of literals none applies, and checking for one costs a branch a
/// byte), or the library's own search when the DFA does not build.
#[derive(Debug, Clone)]
enum Automaton {
    Dfa(Box<aho_corasick::dfa::DFA>),
    Other(AhoCorasick),
}

impl Literals {
    /// Builds the automaton from `(rule index, branch, literals)`; `None` when there are none.
    pub(crate) fn build(rules: &[(usize, usize, Vec<Vec<u8>>)]) -> Option<Self> {
        Self::build_as(rules, true)
    }

    /// As [`Literals::build`]; `dfa` false takes the library's own search (the fallback).
    fn build_as(rules: &[(usize, usize, Vec<Vec<u8>>)], dfa: bool) -> Option<Self> {
        let mut literals: Vec<Vec<u8>> = Vec::new();
        let mut owners: Vec<Vec<(usize, usize)>> = Vec::new();
        let mut index = std::collections::HashMap::new();
        for (rule, branch, prefixes) in rules {
            for literal in prefixes {
                let slot = *index.entry(literal.clone()).or_insert_with(|| {
                    literals.push(literal.clone());
                    owners.push(Vec::new());
                    literals.len() - 1
                });
                if !owners[slot].contains(&(*rule, *branch)) {
                    owners[slot].push((*rule, *branch));
                }
            }
        }
        if literals.is_empty() {
            return None;
        }
        let built = aho_corasick::dfa::Builder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .start_kind(StartKind::Unanchored)
            .prefilter(false)
            .build(&literals);
        let automaton = match built {
            Ok(built) if dfa => Automaton::Dfa(Box::new(built)),
            _ => Automaton::Other(
                AhoCorasickBuilder::new()
                    .ascii_case_insensitive(true)
                    .match_kind(MatchKind::Standard)
                    .build(&literals)
                    .ok()?,
            ),
        };
        Some(Self { automaton, owners })
    }

    /// Calls `found(literal, occurrence)` for every occurrence of every literal in `haystack`
    /// (overlapping ones too), in order of end, until `found` breaks.
    fn each_literal(
        &self,
        haystack: &[u8],
        mut found: impl FnMut(usize, std::ops::Range<usize>) -> ControlFlow<()>,
    ) {
        match &self.automaton {
            Automaton::Dfa(dfa) => {
                let Ok(start) = dfa.start_state(aho_corasick::Anchored::No) else {
                    return;
                };
                if haystack.len() < SPLIT {
                    let _ = step_reporting(dfa, haystack, 0, 0, start, &mut found);
                    return;
                }
                // The input in WALKS parts, stepped in turn: each step waits on the table read
                // of the one before, and independent walks keep the processor busy meanwhile.
                // A walk begins a literal's length before its part, so every occurrence ending
                // in the part is seen from its first byte, and it reports only those.
                let part = haystack.len() / WALKS;
                let ends: [usize; WALKS] = std::array::from_fn(|walk| {
                    if walk + 1 == WALKS {
                        haystack.len()
                    } else {
                        (walk + 1) * part
                    }
                });
                let mut walks: [(usize, StateID); WALKS] = std::array::from_fn(|walk| {
                    (
                        (walk * part).saturating_sub(dfa.max_pattern_len() - 1),
                        start,
                    )
                });
                let mut later: [Vec<(usize, std::ops::Range<usize>)>; WALKS] = Default::default();
                while let Some(walk) = next_special_walks(dfa, haystack, &mut walks, &ends) {
                    let (at, state) = walks[walk];
                    if walk == 0 {
                        if report(dfa, state, at, 0, &mut found).is_break() {
                            return;
                        }
                    } else {
                        let _ = report(dfa, state, at, walk * part + 1, &mut |l, o| {
                            later[walk].push((l, o));
                            ControlFlow::Continue(())
                        });
                    }
                }
                let (at, state) = walks[0];
                if step_reporting(dfa, &haystack[..ends[0]], at, 0, state, &mut found).is_break() {
                    return;
                }
                for walk in 1..WALKS {
                    for (literal, occurrence) in std::mem::take(&mut later[walk]) {
                        if found(literal, occurrence).is_break() {
                            return;
                        }
                    }
                    let (at, state) = walks[walk];
                    let part_of = &haystack[..ends[walk]];
                    if step_reporting(dfa, part_of, at, walk * part + 1, state, &mut found)
                        .is_break()
                    {
                        return;
                    }
                }
            }
            Automaton::Other(automaton) => {
                for occurrence in automaton.find_overlapping_iter(haystack) {
                    if found(occurrence.pattern().as_usize(), occurrence.range()).is_break() {
                        return;
                    }
                }
            }
        }
    }

    /// Calls `found(rule, branch, occurrence)` for every occurrence of every literal in
    /// `haystack`, for the rules `wanted` accepts.
    pub(crate) fn occurrences(
        &self,
        haystack: &[u8],
        wanted: impl Fn(usize) -> bool,
        mut found: impl FnMut(usize, usize, std::ops::Range<usize>),
    ) {
        self.each_literal(haystack, |literal, occurrence| {
            for &(rule, branch) in &self.owners[literal] {
                if wanted(rule) {
                    found(rule, branch, occurrence.clone());
                }
            }
            ControlFlow::Continue(())
        });
    }

    /// Whether any literal of a rule `wanted` accepts occurs in `haystack`; stops at the first.
    pub(crate) fn any(&self, haystack: &[u8], wanted: impl Fn(usize) -> bool) -> bool {
        let mut seen = false;
        self.each_literal(haystack, |literal, _| {
            if self.owners[literal].iter().any(|&(rule, _)| wanted(rule)) {
                seen = true;
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        seen
    }
}

/// Inputs shorter than this are stepped in one walk (several pay off only on long inputs).
const SPLIT: usize = 4 << 10;
/// How many walks step a long input.
const WALKS: usize = 4;

/// Reports every literal that ends at `at` in `state` (a match state, or none) and ends at
/// `from` or later.
fn report(
    dfa: &aho_corasick::dfa::DFA,
    state: StateID,
    at: usize,
    from: usize,
    found: &mut impl FnMut(usize, std::ops::Range<usize>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    if at < from || !dfa.is_match(state) {
        return ControlFlow::Continue(());
    }
    for index in 0..dfa.match_len(state) {
        let literal = dfa.match_pattern(state, index);
        found(literal.as_usize(), at - dfa.pattern_len(literal)..at)?;
    }
    ControlFlow::Continue(())
}

/// Steps `dfa` from `state` at `at` to the end of `haystack`, reporting every literal that ends
/// at `from` or later. Without a prefilter and unanchored, the only special states are matches
/// (the dead state cannot be reached).
fn step_reporting(
    dfa: &aho_corasick::dfa::DFA,
    haystack: &[u8],
    mut at: usize,
    from: usize,
    mut state: StateID,
    found: &mut impl FnMut(usize, std::ops::Range<usize>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    while at < haystack.len() {
        (at, state) = next_special(dfa, haystack, at, state);
        report(dfa, state, at, from, found)?;
    }
    ControlFlow::Continue(())
}

/// Steps the walks of `dfa` over `haystack` in turn, each `(position, state)` up to its end in
/// `ends`, until one enters a special state (its index) or one reaches its end (`None`).
#[inline(never)]
fn next_special_walks(
    dfa: &aho_corasick::dfa::DFA,
    haystack: &[u8],
    walks: &mut [(usize, StateID); WALKS],
    ends: &[usize; WALKS],
) -> Option<usize> {
    let mut at: [usize; WALKS] = std::array::from_fn(|walk| walks[walk].0);
    let mut state: [StateID; WALKS] = std::array::from_fn(|walk| walks[walk].1);
    let ends: [usize; WALKS] = std::array::from_fn(|walk| ends[walk].min(haystack.len()));
    let outcome = 'steps: loop {
        for walk in 0..WALKS {
            if at[walk] >= ends[walk] {
                break 'steps None;
            }
        }
        for walk in 0..WALKS {
            state[walk] =
                dfa.next_state(aho_corasick::Anchored::No, state[walk], haystack[at[walk]]);
            at[walk] += 1;
            if dfa.is_special(state[walk]) {
                break 'steps Some(walk);
            }
        }
    };
    for walk in 0..WALKS {
        walks[walk] = (at[walk], state[walk]);
    }
    outcome
}

/// Steps `dfa` from `state` over `haystack[at..]` until it enters a special state or the input
/// ends; returns where it stopped (just past the byte that led there) and the state. Kept apart
/// from the caller so the loop holds everything in registers.
#[inline(never)]
fn next_special(
    dfa: &aho_corasick::dfa::DFA,
    haystack: &[u8],
    at: usize,
    mut state: StateID,
) -> (usize, StateID) {
    let rest = haystack.get(at..).unwrap_or_default();
    // Four bytes a round: one loop check for four steps.
    let mut rounds = rest.chunks_exact(4);
    let mut read = at;
    for round in &mut rounds {
        for (offset, &byte) in round.iter().enumerate() {
            state = dfa.next_state(aho_corasick::Anchored::No, state, byte);
            if dfa.is_special(state) {
                return (read + offset + 1, state);
            }
        }
        read += 4;
    }
    for (offset, &byte) in rounds.remainder().iter().enumerate() {
        state = dfa.next_state(aho_corasick::Anchored::No, state, byte);
        if dfa.is_special(state) {
            return (read + offset + 1, state);
        }
    }
    (haystack.len(), state)
}

/// Reports `matcher`'s leftmost-first matches inside `windows` (any order, may overlap), in
/// order, searching each merged window with the whole haystack as context. When every match
/// lies inside one window, these are exactly the matches of one search over the haystack.
pub(crate) fn matches_in(
    matcher: &meta::Regex,
    haystack: &[u8],
    windows: &mut [std::ops::Range<usize>],
    mut found: impl FnMut(std::ops::Range<usize>),
) {
    windows.sort_unstable_by_key(|window| window.start);
    let mut position = 0;
    let mut index = 0;
    while index < windows.len() {
        let start = windows[index].start;
        let mut end = windows[index].end;
        index += 1;
        while index < windows.len() && windows[index].start <= end {
            end = end.max(windows[index].end);
            index += 1;
        }
        let mut at = position.max(start);
        while at < end {
            let input = Input::new(haystack).range(at..end);
            let Some(m) = matcher.search(&input) else {
                break;
            };
            found(m.range());
            at = m.end().max(m.start() + 1);
        }
        position = position.max(at);
    }
}

/// Reports `matcher`'s leftmost-first matches that begin at `starts` (ascending, deduplicated),
/// in order, skipping starts inside a match already reported.
pub(crate) fn matches_at(
    matcher: &meta::Regex,
    haystack: &[u8],
    starts: &[usize],
    mut found: impl FnMut(std::ops::Range<usize>),
) {
    // The matcher's own cache pool: creating a cache per call costs more than most searches.
    let mut reported_to = 0;
    for &start in starts {
        if start < reported_to {
            continue;
        }
        let input = Input::new(haystack).range(start..).anchored(Anchored::Yes);
        if let Some(m) = matcher.search(&input) {
            found(m.range());
            reported_to = m.end().max(start + 1);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;

    use proptest::prelude::*;

    use super::*;
    use crate::builtin::{builtin_patterns, builtin_table};
    use crate::pattern::PatternType;

    /// Every file of the crate's corpora and fixtures, plus every rule's own examples.
    pub(crate) fn texts() -> Vec<Vec<u8>> {
        fn walk(dir: &Path, out: &mut Vec<Vec<u8>>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, out);
                } else {
                    out.push(std::fs::read(&path).unwrap());
                }
            }
        }
        let mut out = Vec::new();
        walk(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
            &mut out,
        );
        let examples: Vec<u8> = builtin_table()
            .iter()
            .flat_map(|rule| {
                format!(
                    "{}\n{} {}\n",
                    rule.example_match, rule.example_miss, rule.example_match
                )
                .into_bytes()
            })
            .collect();
        out.push(examples);
        out
    }

    /// What the prefilter reports for one rule: its anchored matches at its literals.
    fn located(
        literals: &[Vec<u8>],
        matcher: &meta::Regex,
        haystack: &[u8],
    ) -> Vec<(usize, usize)> {
        let rules = vec![(0, 0, literals.to_vec())];
        let automaton = Literals::build(&rules).unwrap();
        let mut starts = Vec::new();
        automaton.occurrences(haystack, |_| true, |_, _, found| starts.push(found.start));
        starts.sort_unstable();
        starts.dedup();
        let mut out = Vec::new();
        matches_at(matcher, haystack, &starts, |range| {
            out.push((range.start, range.end));
        });
        out
    }

    fn searched(pattern: &crate::pattern::Pattern, haystack: &[u8]) -> Vec<(usize, usize)> {
        found_by(&pattern.compile().unwrap(), haystack)
    }

    fn found_by(regex: &regex::bytes::Regex, haystack: &[u8]) -> Vec<(usize, usize)> {
        regex
            .find_iter(haystack)
            .map(|m| (m.start(), m.end()))
            .collect()
    }

    /// Every prefiltered built-in rule: id, literals, anchored matcher, ordinary regex.
    type Prefiltered = (String, Vec<Vec<u8>>, meta::Regex, regex::bytes::Regex);

    fn prefiltered() -> &'static [Prefiltered] {
        static RULES: std::sync::LazyLock<Vec<Prefiltered>> = std::sync::LazyLock::new(|| {
            builtin_patterns()
                .into_iter()
                .filter_map(|pattern| {
                    let literals = prefixes(&pattern)?;
                    Some((
                        pattern.id.clone(),
                        literals,
                        matcher(&pattern).unwrap(),
                        pattern.compile().unwrap(),
                    ))
                })
                .collect()
        });
        &RULES
    }

    #[test]
    fn most_built_in_rules_have_prefix_literals() {
        let patterns = builtin_patterns();
        let with = patterns.iter().filter(|p| prefixes(p).is_some()).count();
        let secrets = patterns
            .iter()
            .filter(|p| p.pattern_type == PatternType::Secret)
            .collect::<Vec<_>>();
        let secrets_with = secrets.iter().filter(|p| prefixes(p).is_some()).count();
        // Measured floors: a change that loses most literals would put scans back on every
        // rule's full search.
        assert!(
            with * 10 >= patterns.len() * 6,
            "{with} of {}",
            patterns.len()
        );
        assert!(
            secrets_with * 10 >= secrets.len() * 7,
            "{secrets_with} of {}",
            secrets.len()
        );
    }

    #[test]
    fn prefiltered_rules_report_exactly_their_own_matches_on_every_corpus() {
        let texts = texts();
        let mut compared = 0;
        for (id, literals, matcher, regex) in prefiltered() {
            for text in &texts {
                assert_eq!(
                    located(literals, matcher, text),
                    found_by(regex, text),
                    "rule {id}"
                );
                compared += 1;
            }
        }
        assert!(compared > 1000, "{compared}");
    }

    #[test]
    fn the_stepped_dfa_finds_every_occurrence_the_library_search_finds() {
        // Every built-in rule's literals, as a full set compiles them.
        let rules: Vec<(usize, usize, Vec<Vec<u8>>)> = builtin_patterns()
            .iter()
            .enumerate()
            .filter_map(|(rule, pattern)| Some((rule, 0, prefixes(pattern)?)))
            .collect();
        let stepped = Literals::build_as(&rules, true).unwrap();
        let library = Literals::build_as(&rules, false).unwrap();
        assert!(matches!(stepped.automaton, Automaton::Dfa(_)));
        assert!(matches!(library.automaton, Automaton::Other(_)));
        let all = |literals: &Literals, text: &[u8]| {
            let mut out = Vec::new();
            literals.occurrences(
                text,
                |_| true,
                |rule, branch, found| {
                    out.push((rule, branch, found));
                },
            );
            out
        };
        let mut texts = texts();
        // Overlapping literals, case mixes and a literal at each end of the input.
        texts.push(b"IGNORE ignore-----BEGIN -----begin ghp_ghp_AKIAakia".to_vec());
        // Long inputs are stepped in two halves: lengths around the split, and middles that
        // fall at every offset inside and around the literals.
        let joined = texts.concat();
        for length in [SPLIT - 1, SPLIT, SPLIT + 1, joined.len() / 3, joined.len()] {
            texts.push(joined[..length].to_vec());
        }
        let around = SPLIT
            + joined[SPLIT..]
                .windows(7)
                .position(|w| w.eq_ignore_ascii_case(b"ignore "))
                .unwrap();
        for shift in 0..40 {
            let middle = around + shift;
            texts.push(joined[middle - SPLIT..middle + SPLIT + shift % 2].to_vec());
        }
        let mut seen = 0;
        for text in &texts {
            let expected = all(&library, text);
            seen += expected.len();
            assert_eq!(all(&stepped, text), expected);
            for wanted in [0, 7, rules.len() - 1] {
                assert_eq!(
                    stepped.any(text, |rule| rule == wanted),
                    library.any(text, |rule| rule == wanted)
                );
            }
        }
        assert!(seen > 10_000, "{seen}");
        assert_eq!(all(&stepped, b""), []);
    }

    #[test]
    fn literals_are_never_short_and_case_is_ignored_only_in_ascii() {
        let mut pattern = builtin_patterns().remove(0);
        pattern.flags = "i".into();
        pattern.pattern = r"(?:a|x)z".into();
        assert_eq!(prefixes(&pattern), None, "a two-byte literal is too common");
        pattern.pattern = r"ignore\s+previous".into();
        let literals = prefixes(&pattern).unwrap();
        // One spelling, not 64 mixes of case (the search ignores case), then each whitespace.
        assert_eq!(literals.len(), 6, "{literals:?}");
        assert!(
            literals.iter().all(|l| l.starts_with(b"ignore")),
            "{literals:?}"
        );
        pattern.pattern = r"\w+=secret".into();
        assert_eq!(prefixes(&pattern), None, "no literal begins every match");
        // Unicode case folding matches the Kelvin sign for `k`: the literals must say so.
        pattern.flags = "iu".into();
        pattern.pattern = r"key_[0-9]{4}".into();
        let literals = prefixes(&pattern).unwrap();
        assert!(literals.iter().any(|l| !l.is_ascii()), "{literals:?}");
        let matcher = matcher(&pattern).unwrap();
        let text = "\u{212A}ey_1234 KEY_5678 key_0000".as_bytes();
        assert_eq!(located(&literals, &matcher, text), searched(&pattern, text));
        assert_eq!(searched(&pattern, text).len(), 3);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Random text assembled from the rules' own examples and noise: the prefilter and the
        /// full search agree for every prefiltered rule.
        #[test]
        fn agrees_with_the_full_search_on_assembled_text(
            picks in prop::collection::vec((0..builtin_table().len(), any::<bool>(), "[ -~\n]{0,12}"), 1..40)
        ) {
            let table = builtin_table();
            let mut text = String::new();
            for (index, upper, noise) in &picks {
                let example = table[*index].example_match;
                if *upper {
                    text.push_str(&example.to_ascii_uppercase());
                } else {
                    text.push_str(example);
                }
                text.push_str(noise);
            }
            for (id, literals, matcher, regex) in prefiltered() {
                prop_assert_eq!(
                    located(literals, matcher, text.as_bytes()),
                    found_by(regex, text.as_bytes()),
                    "rule {}", id
                );
            }
        }
    }
}
