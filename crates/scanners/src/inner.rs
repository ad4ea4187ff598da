//! Locating a rule's matches from a literal every match contains, when no literal begins them.
//!
//! A rule such as `\b[\w.-]*(?:secret|token)[\w.-]*\s*=\s*…` has no literal at its start, but
//! every match contains `secret` or `token`. Each top-level branch of such a rule gets two facts
//! from its syntax tree: a few literals of which every match of the branch contains one, and the
//! bytes a match of the branch can consist of (its alphabet). A match is then a run of alphabet
//! bytes around a literal occurrence, so it lies inside the maximal such run. The rule's own
//! leftmost-first search runs only inside those runs (with the whole input as context, so `\b`
//! and `^` read as in one search), which reports exactly the matches of one search over the
//! whole input: every match lies inside one run, and a search confined to a run finds the same
//! leftmost start and the same preferred match there.
//!
//! A branch whose alphabet holds every byte gains nothing from runs; such a rule is searched
//! over the whole input, but only when one of its literals occurs at all.

use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::hir::{Class, Hir, HirKind};

use crate::pattern::Pattern;
use crate::prefilter::{few_and_at_least, few_and_long};

/// The bytes a match can consist of.
pub(crate) type Alphabet = [bool; 256];

/// What every match of one top-level branch contains, and what it is made of around it.
///
/// A branch is read as `lead · before · literal… · trail`: `lead` and `trail` are short parts
/// (at most [`EDGE`] bytes, such as `(?:^|[^\w<])`) whose bytes are not counted in the
/// alphabets, `before` is what precedes the literal and `after` the literal and what follows it.
#[derive(Debug, Clone)]
pub(crate) struct Branch {
    /// Lower-cased literals; every match of the branch contains one (ASCII case ignored).
    pub(crate) literals: Vec<Vec<u8>>,
    /// Every byte a match can hold before its literal (after the lead).
    pub(crate) before: Box<Alphabet>,
    /// Every byte a match can hold from its literal on (before the trail).
    pub(crate) after: Box<Alphabet>,
    /// Whether the alphabets hold every byte (a run is then the rest of the input).
    before_full: bool,
    after_full: bool,
    /// Most bytes the lead and the trail can take.
    lead: usize,
    trail: usize,
    /// Whether the branch ends with `$` read as the end of the input (no `m` flag), as the path
    /// rules do: a run that stops short of the end holds no match.
    ends_input: bool,
    /// The fewest bytes a match of the branch takes: a shorter window holds none.
    pub(crate) shortest: usize,
}

/// The longest part read as a branch's lead or trail.
const EDGE: usize = 4;

/// Where a literal set sits in a branch's parts.
struct Placed {
    literals: Vec<Vec<u8>>,
    /// Index of the part the literals begin in.
    part: usize,
    /// Whether they begin inside that part (not at its start), so its bytes may precede them.
    inside: bool,
}

/// The branches of `pattern` with their inner literals, or `None` when some branch has no
/// literal that all its matches contain: three bytes or more, or one or two punctuation bytes
/// (`|` for a fork bomb, `$(`) when no longer literal keeps the branch's windows bounded, the
/// rarest preferred (see [`RARE_PUNCTUATION`]).
pub(crate) fn branches(pattern: &Pattern) -> Option<Vec<Branch>> {
    let mut reading = pattern.clone();
    let folded = !reading.flags.contains('u') && reading.flags.contains('i');
    if folded {
        // As for prefixes: the literal search ignores ASCII case, so read the rule as written
        // and add each letter's other case to the alphabets.
        reading.flags = reading.flags.replace('i', "");
    }
    let expression = reading.expression().ok()?;
    let hir = regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(&expression)
        .ok()?;
    tops(&hir).iter().map(|top| branch(top, folded)).collect()
}

/// Which literals a branch may be found from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// At least three bytes.
    Long,
    /// At least three bytes, or one or two ASCII punctuation bytes.
    Punctuation,
}

/// ASCII punctuation too common in source code and prose to find a rule from on its own
/// (counted on the throughput benchmark's mixed 1 MiB: `(` 17,348 times, `.` 12,993, `>`
/// 3,659). Measured: `secret.discord-bot-token` found from its `.` cost three times a search of
/// the rule over the whole input.
const COMMON_PUNCTUATION: &[u8] = b"()_:,./\";=}{>";
/// The rest of ASCII punctuation, from the most to the least common (`&` 3,475 times in the
/// same MiB, `|` 1,294, `$` 140, `^` 30).
const RARE_PUNCTUATION: &[u8] = b"&[]-`!<#*|'+\\?~$@%^";

/// How rare a short literal set is: the rank in [`RARE_PUNCTUATION`] of its most common
/// literal, each literal as rare as its rarest byte; `None` when a literal holds a byte that is
/// not punctuation, or only common punctuation.
fn rarity(literals: &[Vec<u8>]) -> Option<usize> {
    literals
        .iter()
        .map(|literal| {
            if !literal
                .iter()
                .all(|byte| COMMON_PUNCTUATION.contains(byte) || RARE_PUNCTUATION.contains(byte))
            {
                return None;
            }
            literal
                .iter()
                .filter_map(|byte| RARE_PUNCTUATION.iter().position(|p| p == byte))
                .max()
        })
        .collect::<Option<Vec<usize>>>()?
        .into_iter()
        .min()
}

/// The top-level alternatives of `hir`. The parser factors a common `\b` out of alternatives
/// (`\b(?:a…|b…)`), and path rules put one alternation between short edges
/// (`(?:^|/)(?:a|b)$`): an alternation whose neighbours are all short goes out into one branch
/// per alternative, each with those neighbours.
fn tops(hir: &Hir) -> Vec<Hir> {
    match hir.kind() {
        HirKind::Alternation(alternatives) => alternatives.clone(),
        HirKind::Capture(capture) => tops(&capture.sub),
        HirKind::Concat(parts) => {
            let short = |part: &Hir| part.properties().maximum_len().is_some_and(|l| l <= EDGE);
            let widest = parts
                .iter()
                .enumerate()
                .filter(|(_, part)| matches!(part.kind(), HirKind::Alternation(_)))
                .max_by_key(|(_, part)| part.properties().maximum_len().unwrap_or(usize::MAX));
            match widest {
                Some((index, alternation))
                    if parts
                        .iter()
                        .enumerate()
                        .all(|(at, part)| at == index || short(part)) =>
                {
                    let HirKind::Alternation(alternatives) = alternation.kind() else {
                        return vec![hir.clone()];
                    };
                    alternatives
                        .iter()
                        .map(|alternative| {
                            let mut with = parts.clone();
                            with[index] = alternative.clone();
                            Hir::concat(with)
                        })
                        .collect()
                }
                _ => vec![hir.clone()],
            }
        }
        _ => vec![hir.clone()],
    }
}

/// One top-level branch: the best literals as long as their windows are bounded on both sides;
/// when they are not (an alphabet that holds every byte makes the window run to the edge of the
/// input), the best placement whose windows are bounded, short punctuation included.
fn branch(top: &Hir, folded: bool) -> Option<Branch> {
    let parts: Vec<Hir> = match top.kind() {
        HirKind::Concat(parts) => parts.clone(),
        _ => vec![top.clone()],
    };
    let edge = |hir: &Hir| {
        hir.properties()
            .maximum_len()
            .filter(|&length| length <= EDGE)
    };
    // Short edges are left out of the alphabets when the literals lie between them; a branch
    // whose literals are in an edge keeps it.
    let lead_length = edge(&parts[0]).filter(|_| parts.len() > 1);
    let trail_length = edge(&parts[parts.len() - 1]).filter(|_| parts.len() > 2);
    let variants: Vec<(usize, usize, usize, usize)> = [(true, true), (true, false), (false, true)]
        .into_iter()
        .chain([(false, false)])
        .map(|(use_lead, use_trail)| {
            let (start, lead) = match lead_length {
                Some(length) if use_lead => (1, length),
                _ => (0, 0),
            };
            let (stop, trail) = match trail_length {
                Some(length) if use_trail => (parts.len() - 1, length),
                _ => (parts.len(), 0),
            };
            (start, stop, lead, trail)
        })
        .collect();
    // The variant with the best literals; at equal literals, the one with most edges left out.
    let long = variants
        .iter()
        .filter_map(|&(start, stop, lead, trail)| {
            let placed = place(&parts[start..stop], Reach::Long)?;
            Some((start, stop, lead, trail, placed))
        })
        .reduce(|best, next| {
            if better(&next.4.literals, &best.4.literals) {
                next
            } else {
                best
            }
        })
        .map(|(start, stop, lead, trail, placed)| {
            assemble(top, &parts, (start, stop, lead, trail), placed, folded)
        });
    if long.as_ref().is_some_and(Branch::bounded) {
        return long;
    }
    let mut bounded: Option<Branch> = None;
    for &variant in &variants {
        for placed in placements(&parts[variant.0..variant.1], Reach::Punctuation) {
            let candidate = assemble(top, &parts, variant, placed, folded);
            if candidate.bounded()
                && bounded
                    .as_ref()
                    .is_none_or(|b| better(&candidate.literals, &b.literals))
            {
                bounded = Some(candidate);
            }
        }
    }
    bounded.or(long)
}

/// The branch found from `placed` in the parts `start..stop` of `parts`, with the lead and
/// trail lengths of `variant`.
fn assemble(
    top: &Hir,
    parts: &[Hir],
    (start, stop, lead, trail): (usize, usize, usize, usize),
    placed: Placed,
    folded: bool,
) -> Branch {
    let interior = &parts[start..stop];
    let split = if placed.inside {
        placed.part + 1
    } else {
        placed.part
    };
    let mut before = Box::new([false; 256]);
    for part in &interior[..split] {
        collect_alphabet(part, &mut before);
    }
    let mut after = Box::new([false; 256]);
    for part in &interior[placed.part..] {
        collect_alphabet(part, &mut after);
    }
    if folded {
        fold_case(&mut before);
        fold_case(&mut after);
    }
    Branch {
        literals: placed.literals,
        before_full: before.iter().all(|&b| b),
        after_full: after.iter().all(|&b| b),
        before,
        after,
        lead,
        trail,
        ends_input: matches!(
            parts.last().map(Hir::kind),
            Some(HirKind::Look(regex_syntax::hir::Look::End))
        ),
        shortest: top.properties().minimum_len().unwrap_or(0),
    }
}

impl Branch {
    /// Whether a window around an occurrence ends before the edges of the input (neither
    /// alphabet holds every byte).
    pub(crate) fn bounded(&self) -> bool {
        !self.before_full && !self.after_full
    }
}

/// The best literal set of `parts`: the prefix literals of each suffix, or what a part requires.
fn place(parts: &[Hir], reach: Reach) -> Option<Placed> {
    let mut best: Option<Placed> = None;
    for placed in placements(parts, reach) {
        if best
            .as_ref()
            .is_none_or(|b| better(&placed.literals, &b.literals))
        {
            best = Some(placed);
        }
    }
    best
}

/// Every literal set of `parts` and where it sits: the prefix literals of each suffix, and what
/// each part requires.
fn placements(parts: &[Hir], reach: Reach) -> Vec<Placed> {
    let mut all = Vec::new();
    for index in 0..parts.len() {
        let candidates = [
            (
                prefix_literals(&Hir::concat(parts[index..].to_vec()), reach),
                false,
            ),
            (required(&parts[index], reach), true),
        ];
        for (literals, inside) in candidates {
            if let Some(literals) = literals {
                all.push(Placed {
                    literals,
                    part: index,
                    inside,
                });
            }
        }
    }
    all
}

/// Adds each ASCII letter's other case.
fn fold_case(alphabet: &mut Alphabet) {
    for byte in b'a'..=b'z' {
        let upper = byte.to_ascii_uppercase();
        let either = alphabet[usize::from(byte)] || alphabet[usize::from(upper)];
        alphabet[usize::from(byte)] = either;
        alphabet[usize::from(upper)] = either;
    }
}

/// Finds the window around each literal occurrence of one branch. Occurrences must come in
/// ascending order of start; each byte is read at most once per direction, because a run found
/// for one occurrence is reused by the next one that reaches it.
#[derive(Debug, Default)]
pub(crate) struct Windows {
    /// The previous occurrence and where its runs ended: `(start, end, run start, run end)`
    /// (the run start is unknown when the occurrence was ruled out first).
    previous: Option<(usize, usize, Option<usize>, usize)>,
}

impl Windows {
    /// The window that holds every match of `branch` containing `occurrence`, or `None` when
    /// no match can contain it.
    pub(crate) fn around(
        &mut self,
        branch: &Branch,
        haystack: &[u8],
        occurrence: std::ops::Range<usize>,
    ) -> Option<std::ops::Range<usize>> {
        let scan = |from: usize, to: usize| {
            haystack[from..to]
                .iter()
                .position(|&b| !branch.after[usize::from(b)])
                .map(|length| from + length)
        };
        let right = match self.previous {
            _ if branch.after_full => haystack.len(),
            // The previous run reaches past this occurrence: only the bytes up to the previous
            // occurrence's end are new.
            Some((_, end, _, run_end)) if occurrence.end <= run_end => {
                scan(occurrence.end, end.max(occurrence.end)).unwrap_or(run_end)
            }
            _ => scan(occurrence.end, haystack.len()).unwrap_or(haystack.len()),
        };
        let end = right + branch.trail;
        if branch.ends_input && end < haystack.len() {
            // No match can reach the end from here; the left run is not needed (and not known
            // to the next occurrence).
            self.previous = Some((occurrence.start, occurrence.end, None, right));
            return None;
        }
        let mut left = occurrence.start;
        if branch.before_full {
            left = 0;
        }
        let mut floor = 0;
        let mut known_left = None;
        if let Some((start, _, Some(run_start), _)) = self.previous
            && start <= occurrence.start
        {
            floor = start;
            known_left = Some(run_start);
        }
        while left > floor && branch.before[usize::from(haystack[left - 1])] {
            left -= 1;
        }
        if left == floor
            && let Some(run_start) = known_left
        {
            // Every byte back to the previous occurrence is in the alphabet: its run goes on.
            left = run_start;
        }
        self.previous = Some((occurrence.start, occurrence.end, Some(left), right));
        let window = left.saturating_sub(branch.lead)..end.min(haystack.len());
        (window.len() >= branch.shortest).then_some(window)
    }
}

/// Literals of which every match of `hir` contains one: the best of the prefix literals of
/// every suffix of a concatenation and of what each part requires on its own.
fn required(hir: &Hir, reach: Reach) -> Option<Vec<Vec<u8>>> {
    let mut best = prefix_literals(hir, reach);
    let mut consider = |candidate: Option<Vec<Vec<u8>>>| {
        if let Some(candidate) = candidate
            && best.as_ref().is_none_or(|b| better(&candidate, b))
        {
            best = Some(candidate);
        }
    };
    match hir.kind() {
        HirKind::Concat(parts) => {
            for start in 1..parts.len() {
                consider(prefix_literals(
                    &Hir::concat(parts[start..].to_vec()),
                    reach,
                ));
            }
            for part in parts {
                consider(required(part, reach));
            }
        }
        HirKind::Alternation(alternatives) => {
            let mut union = Vec::new();
            for alternative in alternatives {
                union.extend(required(alternative, reach)?);
            }
            consider(allowed(union, reach));
        }
        HirKind::Capture(capture) => consider(required(&capture.sub, reach)),
        HirKind::Repetition(repetition) if repetition.min > 0 => {
            consider(required(&repetition.sub, reach));
        }
        _ => {}
    }
    best
}

/// A literal set with a longer shortest literal is rarer; at the same length, fewer is better.
/// A set with a literal shorter than three bytes (punctuation only) ranks below every longer
/// one, and among such sets the rarer punctuation wins.
fn better(candidate: &[Vec<u8>], incumbent: &[Vec<u8>]) -> bool {
    let key = |set: &[Vec<u8>]| {
        let shortest = set.iter().map(Vec::len).min().unwrap_or(0).min(8);
        let (long, rare) = if shortest >= 3 {
            (shortest, 0)
        } else {
            (0, rarity(set).unwrap_or(0))
        };
        (long, rare, shortest, std::cmp::Reverse(set.len()))
    };
    key(candidate) > key(incumbent)
}

/// The longest prefix literal that still counts as a common word (`the `, `in `, `git `).
const COMMON_PREFIX: usize = 4;

/// Whether a rule whose matches begin with `prefixes` is better found from its inner
/// `branches`: when a prefix is as short as a common word and every branch has bounded windows
/// around literals at least two bytes longer (`ai ` against `must `, `cat ` against `.netrc`).
/// Measured on mixed code: an anchored check at each of 2,610 `the ` cost more than windows
/// around the rarer inner words; with a smaller margin, more rules lost than gained.
pub(crate) fn rarer_inside(prefixes: &[Vec<u8>], branches: &[Branch]) -> bool {
    let shortest = |set: &[Vec<u8>]| set.iter().map(Vec::len).min().unwrap_or(0);
    let prefix = shortest(prefixes);
    prefix <= COMMON_PREFIX
        && branches
            .iter()
            .all(|branch| branch.bounded() && shortest(&branch.literals) >= prefix + 2)
}

/// The literal set if `reach` allows it: few, and long or punctuation.
fn allowed(literals: Vec<Vec<u8>>, reach: Reach) -> Option<Vec<Vec<u8>>> {
    match reach {
        Reach::Long => few_and_long(literals),
        Reach::Punctuation => {
            let set = few_and_at_least(literals, 1)?;
            let short = set.iter().any(|literal| literal.len() < 3);
            (!short || rarity(&set).is_some()).then_some(set)
        }
    }
}

/// The literals every match of `hir` begins with, lower-cased, when few and long.
fn prefix_literals(hir: &Hir, reach: Reach) -> Option<Vec<Vec<u8>>> {
    let mut extractor = Extractor::new();
    extractor
        .kind(ExtractKind::Prefix)
        .limit_class(16)
        .limit_total(4096);
    let seq = extractor.extract(hir);
    let literals = seq
        .literals()?
        .iter()
        .map(|literal| literal.as_bytes().to_ascii_lowercase())
        .collect();
    allowed(literals, reach)
}

/// Marks every byte a match of `hir` can consume. A Unicode class reaching past ASCII marks
/// every non-ASCII byte (its UTF-8 encodings use only those).
pub(crate) fn collect_alphabet(hir: &Hir, alphabet: &mut Alphabet) {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(literal) => {
            for &byte in &literal.0 {
                alphabet[usize::from(byte)] = true;
            }
        }
        HirKind::Class(Class::Bytes(class)) => {
            for range in class.iter() {
                for byte in range.start()..=range.end() {
                    alphabet[usize::from(byte)] = true;
                }
            }
        }
        HirKind::Class(Class::Unicode(class)) => {
            for range in class.iter() {
                let (start, end) = (u32::from(range.start()), u32::from(range.end()));
                for code in start..=end.min(0x7F) {
                    alphabet[code as usize] = true;
                }
                if end > 0x7F {
                    alphabet[0x80..].fill(true);
                }
            }
        }
        HirKind::Repetition(repetition) => collect_alphabet(&repetition.sub, alphabet),
        HirKind::Capture(capture) => collect_alphabet(&capture.sub, alphabet),
        HirKind::Concat(parts) | HirKind::Alternation(parts) => {
            for part in parts {
                collect_alphabet(part, alphabet);
            }
        }
    }
}

#[cfg(test)]
mod tests;
