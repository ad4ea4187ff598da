//! Compiling patterns into per-type `RegexSet`s: validate each pattern, leave out the bad ones
//! with a coded problem, and remember which types lost a rule so scans can say they are
//! incomplete.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use regex::bytes::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};
use regex_automata::Input;
use serde::Serialize;

use crate::pattern::{Pattern, PatternError, PatternType, Severity};

/// Largest compiled program one pattern may produce; a pattern past it is `INVALID_REGEX`.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;
/// Lazy-DFA cache of one rule's own regex (used to locate its matches); the default is small
/// enough that a case-insensitive rule with long alternations keeps clearing it and falls back
/// to a slower engine.
const PATTERN_DFA_LIMIT: usize = 8 << 20;
/// Largest compiled program for a whole set.
const SET_SIZE_LIMIT: usize = 64 << 20;
/// Lazy-DFA cache per set; larger than the default so a big set does not thrash it.
const SET_DFA_LIMIT: usize = 16 << 20;
/// Up to this many rules of a type without literals are searched one by one instead of behind a
/// `RegexSet` (measured: two rules alone cost less than one set pass plus the matching rule).
const DIRECT_RESIDUAL: usize = 2;
/// Inputs are located chunk by chunk past twice this size.
const CHUNK: usize = 64 << 10;
/// How far a chunk's hint pass reads past its end.
const OVERLAP: usize = 4 << 10;

/// Why a scan did not run every rule it should have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum IncompleteReason {
    /// The host's pattern source could not be read; only the built-in patterns ran.
    LoadFailed,
    /// At least one pattern of a scanned type failed to compile and was left out.
    Partial,
}

impl Pattern {
    /// The expression as compiled: the flags become an inline group in front of the pattern.
    /// Fails with `UNSAFE_FLAGS` for `g`, `y` or an unknown letter.
    pub fn expression(&self) -> Result<String, PatternError> {
        let mut on = String::new();
        let mut unicode = false;
        for flag in self.flags.chars() {
            match flag {
                'i' | 'm' | 's' | 'x' => {
                    if !on.contains(flag) {
                        on.push(flag);
                    }
                }
                'u' => unicode = true,
                other => {
                    return Err(PatternError::UnsafeFlags {
                        id: self.id.clone(),
                        flag: other,
                    });
                }
            }
        }
        if !unicode {
            on.push_str("-u");
        }
        // The flag group has no closing part, so a trailing `x`-mode comment cannot swallow it.
        if on.is_empty() {
            Ok(self.pattern.clone())
        } else {
            Ok(format!("(?{on}){}", self.pattern))
        }
    }

    /// Validates and compiles this one pattern on its own.
    pub fn compile(&self) -> Result<Regex, PatternError> {
        let expression = self.expression()?;
        let regex = RegexBuilder::new(&expression)
            .size_limit(PATTERN_SIZE_LIMIT)
            .dfa_size_limit(PATTERN_DFA_LIMIT)
            .build()
            .map_err(|error| PatternError::InvalidRegex {
                id: self.id.clone(),
                message: error.to_string(),
            })?;
        if regex.is_match(b"") {
            return Err(PatternError::InvalidRegex {
                id: self.id.clone(),
                message: "the pattern matches the empty string, so it would match every input"
                    .to_owned(),
            });
        }
        Ok(regex)
    }
}

/// One compiled rule.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) id: String,
    pub(crate) pattern_type: PatternType,
    pub(crate) severity: Severity,
    /// The rule's own regex (one compilation, used by every way of locating it).
    matcher: regex_automata::meta::Regex,
    locate: Locate,
}

/// How a rule's matches are found.
#[derive(Debug, Clone)]
enum Locate {
    /// Anchored where one of the literals every match begins with occurs (see `prefilter`).
    Prefix(Vec<Vec<u8>>),
    /// Inside runs around a literal every match contains (see `inner`).
    Inner(Vec<crate::inner::Branch>),
    /// No literal: inside long runs of the bytes every match is made of (see `runs`).
    Runs(crate::runs::Runs),
    /// Behind the type's `RegexSet` (the expression as compiled): no literal is known to be
    /// in every match.
    Residual(String),
}

impl Entry {
    /// Validates and compiles one pattern (the same checks as [`Pattern::compile`], with one
    /// compilation) and decides how its matches are found.
    fn build(pattern: &Pattern) -> Result<Self, PatternError> {
        let expression = pattern.expression()?;
        let matcher = crate::prefilter::matcher(pattern)?;
        if matcher.is_match(b"".as_slice()) {
            return Err(PatternError::InvalidRegex {
                id: pattern.id.clone(),
                message: "the pattern matches the empty string, so it would match every input"
                    .to_owned(),
            });
        }
        let prefixes = crate::prefilter::prefixes(pattern);
        let inner = crate::inner::branches(pattern);
        let locate = if let (Some(literals), Some(branches)) = (&prefixes, &inner)
            && crate::inner::rarer_inside(literals, branches)
        {
            Locate::Inner(inner.unwrap_or_default())
        } else if let Some(literals) = prefixes {
            Locate::Prefix(literals)
        } else if let Some(branches) = inner {
            Locate::Inner(branches)
        } else if let Some(runs) = crate::runs::runs(pattern) {
            Locate::Runs(runs)
        } else {
            Locate::Residual(expression)
        };
        Ok(Self {
            id: pattern.id.clone(),
            pattern_type: pattern.pattern_type,
            severity: pattern.severity,
            matcher,
            locate,
        })
    }

    /// Every `(branch, literals)` of this rule for the shared literal automaton.
    fn literals(&self) -> Vec<(usize, &[Vec<u8>])> {
        match &self.locate {
            Locate::Prefix(literals) => vec![(0, literals.as_slice())],
            Locate::Inner(branches) => branches
                .iter()
                .enumerate()
                .map(|(index, branch)| (index, branch.literals.as_slice()))
                .collect(),
            Locate::Residual(_) | Locate::Runs(_) => Vec::new(),
        }
    }
}

/// One literal occurrence: the rule (numbered across types), the branch of an inner rule (0
/// for a prefix rule) and where it is.
type Occurrence = (usize, usize, Range<usize>);

/// The rules of one type, in order. Rules without literals sit behind one `RegexSet`.
#[derive(Debug, Clone)]
struct Group {
    entries: Vec<Entry>,
    residual: Option<Residual>,
}

/// The rules of a group searched the ordinary way, behind one `RegexSet`.
#[derive(Debug, Clone)]
struct Residual {
    set: RegexSet,
    /// The group's entry index of each member of the set.
    members: Vec<usize>,
}

impl Group {
    fn build(entries: Vec<Entry>) -> Result<Self, regex::Error> {
        let members: Vec<usize> = entries
            .iter()
            .enumerate()
            .filter(|(_, entry)| matches!(entry.locate, Locate::Residual(_)))
            .map(|(index, _)| index)
            .collect();
        // A set pays off when it spares several passes; one or two rules are searched alone.
        let residual = if members.len() <= DIRECT_RESIDUAL {
            None
        } else {
            let set = RegexSetBuilder::new(members.iter().map(|&i| match &entries[i].locate {
                Locate::Residual(expression) => expression.as_str(),
                _ => "",
            }))
            .size_limit(SET_SIZE_LIMIT)
            .dfa_size_limit(SET_DFA_LIMIT)
            .build()?;
            Some(Residual { set, members })
        };
        Ok(Self { entries, residual })
    }

    /// Reports every match of every rule, rule by rule in order, each rule's matches in order.
    /// `occurrences` holds the literal occurrences of the whole input sorted by rule, branch and
    /// start; this group's rules are numbered from `offset`.
    fn each_match(
        &self,
        haystack: &[u8],
        occurrences: &[Occurrence],
        offset: usize,
        found: &mut impl FnMut(&Entry, Range<usize>),
    ) {
        let mut residual: Vec<Vec<Range<usize>>> = Vec::new();
        if let Some(set) = &self.residual {
            residual = vec![Vec::new(); self.entries.len()];
            set.each_match(&self.entries, haystack, |index, range| {
                residual[index].push(range);
            });
        }
        for (index, entry) in self.entries.iter().enumerate() {
            let rule = offset + index;
            let from = occurrences.partition_point(|(r, _, _)| *r < rule);
            let to = occurrences.partition_point(|(r, _, _)| *r <= rule);
            let own = &occurrences[from..to];
            match &entry.locate {
                Locate::Prefix(_) => {
                    if own.is_empty() {
                        continue;
                    }
                    let mut starts: Vec<usize> = own.iter().map(|(_, _, o)| o.start).collect();
                    starts.dedup();
                    crate::prefilter::matches_at(&entry.matcher, haystack, &starts, |range| {
                        found(entry, range);
                    });
                }
                Locate::Inner(branches) => {
                    if own.is_empty() {
                        continue;
                    }
                    let mut windows = Vec::with_capacity(own.len());
                    let mut current = (usize::MAX, crate::inner::Windows::default());
                    for (_, branch, occurrence) in own {
                        if current.0 != *branch {
                            current = (*branch, crate::inner::Windows::default());
                        }
                        windows.extend(current.1.around(
                            &branches[*branch],
                            haystack,
                            occurrence.clone(),
                        ));
                    }
                    crate::prefilter::matches_in(&entry.matcher, haystack, &mut windows, |range| {
                        found(entry, range);
                    });
                }
                Locate::Runs(runs) => {
                    let mut windows = runs.windows(haystack);
                    crate::prefilter::matches_in(&entry.matcher, haystack, &mut windows, |range| {
                        found(entry, range);
                    });
                }
                Locate::Residual(_) if self.residual.is_none() => {
                    for m in entry.matcher.find_iter(haystack) {
                        found(entry, m.range());
                    }
                }
                Locate::Residual(_) => {
                    for range in residual[index].drain(..) {
                        found(entry, range);
                    }
                }
            }
        }
    }
}

impl Residual {
    /// One pass of the set decides which rules match at all; only those run again to find
    /// where. Every match of a rule is reported, in order, by its group entry index.
    ///
    /// On a large input, a second pass of the set over chunks tells where each matching rule
    /// can match, and the rule's own regex searches only from those chunks on (with the whole
    /// input as context, so `\b` and `^` read as they do in one search). A match that starts in
    /// a chunk the hint did not name can only be longer than the overlap; a rule the hint loses
    /// entirely is searched over the whole input.
    fn each_match(
        &self,
        entries: &[Entry],
        haystack: &[u8],
        mut found: impl FnMut(usize, Range<usize>),
    ) {
        let matched: Vec<usize> = self.set.matches(haystack).into_iter().collect();
        if haystack.len() <= 2 * CHUNK || matched.len() <= 2 {
            for &member in &matched {
                let index = self.members[member];
                for m in entries[index].matcher.find_iter(haystack) {
                    found(index, m.range());
                }
            }
            return;
        }
        let mut windows: Vec<Vec<Range<usize>>> = vec![Vec::new(); matched.len()];
        let mut start = 0;
        while start < haystack.len() {
            let end = (start + CHUNK).min(haystack.len());
            let reach = (end + OVERLAP).min(haystack.len());
            let hits = self.set.matches(&haystack[start..reach]);
            for (slot, &member) in matched.iter().enumerate() {
                if hits.matched(member) {
                    windows[slot].push(start..end);
                }
            }
            start = end;
        }
        for (slot, &member) in matched.iter().enumerate() {
            let index = self.members[member];
            let regex = &entries[index].matcher;
            let mut reported = 0;
            let mut position = 0;
            for window in &windows[slot] {
                position = position.max(window.start);
                let limit = (window.end + OVERLAP).min(haystack.len());
                while position < window.end {
                    let Some(m) = regex.search(&Input::new(&haystack[..limit]).range(position..))
                    else {
                        break;
                    };
                    // A match cut by the limit is read again against the whole input.
                    let m = if m.end() == limit && limit < haystack.len() {
                        match regex.search(&Input::new(haystack).range(m.start()..)) {
                            Some(whole) => whole,
                            None => break,
                        }
                    } else {
                        m
                    };
                    if m.start() >= window.end {
                        break;
                    }
                    found(index, m.range());
                    reported += 1;
                    position = if m.end() > m.start() {
                        m.end()
                    } else {
                        m.end() + 1
                    };
                }
            }
            if reported == 0 {
                for m in regex.find_iter(haystack) {
                    found(index, m.range());
                }
            }
        }
    }
}

/// A validated, compiled pattern set: one `RegexSet` per type. (A single set over every type
/// was dropped: on inputs such as generated data tables its lazy DFA thrashes and one pass took
/// 0.9 s per MiB, while the six per-type sets stay at a few milliseconds each.)
/// Build it with [`CompiledPatterns::compile`]; bad patterns are left out and listed in
/// [`CompiledPatterns::problems`].
#[derive(Debug, Clone)]
pub struct CompiledPatterns {
    by_type: BTreeMap<PatternType, Group>,
    /// Every prefiltered rule's prefix literals; a rule is numbered by its type's offset in
    /// `offsets` plus its index in the group.
    literals: Option<crate::prefilter::Literals>,
    /// Where each type's rules begin in that numbering.
    offsets: BTreeMap<PatternType, usize>,
    /// The type of each rule in that numbering.
    rule_types: Vec<PatternType>,
    /// The index in [`PatternType::ALL`] of each rule's type.
    rule_kinds: Vec<usize>,
    /// Where each rule's branches begin in a numbering of every `(rule, branch)` that has
    /// literals, with one more entry for the end (a rule without literals has none).
    first_slot: Vec<usize>,
    /// Every rule's literals read through ROT13, to tell whether a ROT13 reading can match.
    rotated: Option<crate::prefilter::Literals>,
    problems: Vec<PatternError>,
    failed_types: BTreeSet<PatternType>,
    load_failed: bool,
    pattern_count: usize,
}

impl CompiledPatterns {
    /// Compiles the enabled patterns. Later patterns with an id already seen replace the earlier
    /// one (so a host's pattern overrides a built-in of the same id). A pattern that fails
    /// validation is reported and left out; the rest still compile.
    #[must_use]
    pub fn compile<I: IntoIterator<Item = Pattern>>(patterns: I) -> Self {
        let mut by_id: BTreeMap<String, (usize, Pattern)> = BTreeMap::new();
        for (order, pattern) in patterns.into_iter().enumerate() {
            by_id.insert(pattern.id.clone(), (order, pattern));
        }
        let mut ordered: Vec<(usize, Pattern)> = by_id.into_values().collect();
        ordered.sort_by_key(|(order, _)| *order);

        let mut problems = Vec::new();
        let mut failed_types = BTreeSet::new();
        let mut entries_by_type: BTreeMap<PatternType, Vec<Entry>> = BTreeMap::new();
        for (_, pattern) in ordered {
            if !pattern.enabled {
                continue;
            }
            match Entry::build(&pattern) {
                Ok(entry) => entries_by_type
                    .entry(pattern.pattern_type)
                    .or_default()
                    .push(entry),
                Err(problem) => {
                    failed_types.insert(pattern.pattern_type);
                    problems.push(problem);
                }
            }
        }

        let mut by_type = BTreeMap::new();
        let mut pattern_count = 0;
        for (pattern_type, entries) in entries_by_type {
            let count = entries.len();
            match Group::build(entries) {
                Ok(group) => {
                    pattern_count += count;
                    by_type.insert(pattern_type, group);
                }
                // Every member compiled alone, so only the combined size can fail here.
                Err(error) => {
                    failed_types.insert(pattern_type);
                    problems.push(PatternError::InvalidRegex {
                        id: format!("{}/*", pattern_type.as_str()),
                        message: format!(
                            "the {} set does not compile: {error}",
                            pattern_type.as_str()
                        ),
                    });
                }
            }
        }
        let mut offsets = BTreeMap::new();
        let mut rule_types = Vec::new();
        let mut prefixes = Vec::new();
        let mut first_slot = vec![0];
        for (pattern_type, group) in &by_type {
            offsets.insert(*pattern_type, rule_types.len());
            for entry in &group.entries {
                let branches = entry.literals();
                first_slot.push(first_slot[first_slot.len() - 1] + branches.len());
                for (branch, literals) in branches {
                    prefixes.push((rule_types.len(), branch, literals.to_vec()));
                }
                rule_types.push(*pattern_type);
            }
        }
        let rotated: Vec<(usize, usize, Vec<Vec<u8>>)> = prefixes
            .iter()
            .map(|(rule, branch, literals)| {
                let turned = literals.iter().map(|literal| rot13(literal)).collect();
                (*rule, *branch, turned)
            })
            .collect();
        Self {
            literals: crate::prefilter::Literals::build(&prefixes),
            rotated: crate::prefilter::Literals::build(&rotated),
            offsets,
            rule_kinds: rule_types
                .iter()
                .map(|t| {
                    PatternType::ALL
                        .iter()
                        .position(|all| all == t)
                        .unwrap_or(0)
                })
                .collect(),
            rule_types,
            first_slot,
            by_type,
            problems,
            failed_types,
            load_failed: false,
            pattern_count,
        }
    }

    /// How many rules sit behind a `RegexSet` (searched the ordinary way), over every type.
    #[cfg(test)]
    pub(crate) fn residual_members(&self) -> usize {
        self.by_type
            .values()
            .filter_map(|group| group.residual.as_ref())
            .map(|residual| residual.members.len())
            .sum()
    }

    /// Marks this set as built without the host's patterns (its source failed to load), so every
    /// scan with it reports `incomplete` with reason `load-failed`.
    #[must_use]
    pub fn with_load_failure(mut self) -> Self {
        self.load_failed = true;
        self
    }

    /// The patterns left out, with their codes.
    #[must_use]
    pub fn problems(&self) -> &[PatternError] {
        &self.problems
    }

    /// How many patterns compiled.
    #[must_use]
    pub fn len(&self) -> usize {
        self.pattern_count
    }

    /// Whether no pattern compiled.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.pattern_count == 0
    }

    /// Why a scan over these types would be incomplete, if it would.
    #[must_use]
    pub fn incomplete_for(&self, types: &[PatternType]) -> Option<IncompleteReason> {
        if self.load_failed {
            Some(IncompleteReason::LoadFailed)
        } else if types.iter().any(|t| self.failed_types.contains(t)) {
            Some(IncompleteReason::Partial)
        } else {
            None
        }
    }

    /// Whether the ROT13 reading of `text` could hold a match of a rule of `types`: ROT13 maps
    /// letters to letters and keeps every other byte, and literals are found ignoring ASCII
    /// case, so a literal occurs in the reading exactly where its own ROT13 occurs in `text`. A
    /// type with a rule that has no literal can always match.
    pub(crate) fn may_match_rotated(&self, types: &[PatternType], text: &[u8]) -> bool {
        let residual = types.iter().any(|pattern_type| {
            self.by_type.get(pattern_type).is_some_and(|group| {
                group
                    .entries
                    .iter()
                    .any(|entry| matches!(entry.locate, Locate::Residual(_) | Locate::Runs(_)))
            })
        });
        if residual {
            return true;
        }
        let Some(rotated) = &self.rotated else {
            return false;
        };
        rotated.any(text, |rule| types.contains(&self.rule_types[rule]))
    }

    /// Runs the rules of the given types over `haystack`, calling `found` for every match of
    /// every rule with its range.
    pub(crate) fn each_match(
        &self,
        types: &[PatternType],
        haystack: &[u8],
        mut found: impl FnMut(&Entry, Range<usize>),
    ) {
        // Only the occurrences are collected, not a list per rule (most inputs are short
        // commands and paths). Real code holds about one occurrence every 32 bytes: room for
        // that up front spares the copies of a vector grown occurrence by occurrence.
        let mut occurrences: Vec<Occurrence> = Vec::with_capacity(haystack.len() / 32);
        if let Some(literals) = &self.literals {
            let wanted: [bool; PatternType::ALL.len()] =
                std::array::from_fn(|kind| types.contains(&PatternType::ALL[kind]));
            literals.occurrences(
                haystack,
                |rule| wanted[self.rule_kinds[rule]],
                |rule, branch, occurrence| occurrences.push((rule, branch, occurrence)),
            );
        }
        // By rule and branch with a counting pass, then each branch's by start: the automaton
        // reports them in order of end, so within one branch an occurrence is out of place only
        // past others that end within one literal's length of it, and an insertion sort moves
        // each by at most that many.
        let occurrences = if occurrences.is_empty() {
            occurrences
        } else {
            // `place[slot]` is where the slot's occurrences begin, then (once filled) where the
            // next slot's do.
            let mut place = vec![0usize; self.first_slot.last().map_or(0, |last| last + 1)];
            for (rule, branch, _) in &occurrences {
                place[self.first_slot[*rule] + branch + 1] += 1;
            }
            for slot in 1..place.len() {
                place[slot] += place[slot - 1];
            }
            let mut sorted: Vec<Occurrence> = vec![(0, 0, 0..0); occurrences.len()];
            for occurrence in occurrences {
                let slot = &mut place[self.first_slot[occurrence.0] + occurrence.1];
                sorted[*slot] = occurrence;
                *slot += 1;
            }
            let mut from = 0;
            for &to in &place {
                sort_by_start(&mut sorted[from..to]);
                from = to;
            }
            sorted
        };
        for pattern_type in types {
            if let (Some(group), Some(&offset)) = (
                self.by_type.get(pattern_type),
                self.offsets.get(pattern_type),
            ) {
                group.each_match(haystack, &occurrences, offset, &mut found);
            }
        }
    }
}

/// Sorts occurrences by start and end with an insertion sort: linear in their number when each
/// is out of place only past a few neighbours.
fn sort_by_start(occurrences: &mut [Occurrence]) {
    for index in 1..occurrences.len() {
        let mut at = index;
        while at > 0 && {
            let (before, here) = (&occurrences[at - 1].2, &occurrences[at].2);
            (before.start, before.end) > (here.start, here.end)
        } {
            occurrences.swap(at - 1, at);
            at -= 1;
        }
    }
}

/// ROT13 of ASCII letters; every other byte kept.
pub(crate) fn rot13(bytes: &[u8]) -> Vec<u8> {
    bytes
        .iter()
        .map(|&b| match b {
            b'a'..=b'm' | b'A'..=b'M' => b + 13,
            b'n'..=b'z' | b'N'..=b'Z' => b - 13,
            other => other,
        })
        .collect()
}
