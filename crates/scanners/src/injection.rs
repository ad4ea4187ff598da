//! The prompt-injection scanners (skill content, LLM output, memory): the `INJECTION` rules run
//! over the text as written and over a normalised reading of it — case folded, look-alike
//! letters mapped to ASCII, invisible characters dropped (tag characters decoded), leetspeak
//! read as letters, letter-spaced words joined — plus base64 segments decoded and a ROT13
//! reading. Weak signals are scored per paragraph of the normalised reading: three or more
//! distinct ones add an `inj.score` finding. Role tags inside code (fenced blocks, code
//! spans, generics such as `Json<User>`) do not count. A [`Classifier`] can add findings of its
//! own; it never clears what the rules found.

use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::LazyLock;

use regex::RegexSet;

use crate::compile::{CompiledPatterns, IncompleteReason};
use crate::pattern::{PatternType, Severity};
use crate::result::{Collected, Finding, FindingType, ScanResult, Verdict};
use crate::scanners::{MemoryAccess, advisory_verdict, collect};
use crate::view::View;

/// Normalised views are built over windows of this many bytes, so memory stays bounded on
/// large inputs.
const WINDOW: usize = 1 << 20;
/// Each window reads this far past its end, so a match that starts inside it is seen whole.
const OVERLAP: usize = 4 << 10;
/// Base64 segments inside base64 are decoded this many levels deep.
const MAX_DECODE_DEPTH: usize = 2;
/// At most this many decoded bytes are scanned per window.
const MAX_DECODED_BYTES: usize = 256 << 10;
/// Distinct weak signals in one paragraph that make an `inj.score` finding.
const SIGNAL_THRESHOLD: usize = 3;
/// A classifier probability at or above this adds a finding.
const CLASSIFIER_THRESHOLD: f64 = 0.5;

/// Weak signals: none is worth a finding alone; several in one paragraph are.
const SIGNALS: [(&str, &str); 8] = [
    (
        "override",
        r"\b(?:ignore|disregard|forget|override|bypass|abandon)\b",
    ),
    (
        "instructions",
        r"\b(?:instructions|system\s+prompt|guidelines|your\s+rules)\b",
    ),
    (
        "addressee",
        r"\b(?:you\s+(?:must|will|should)|assistant|ai|llm|language\s+model)\b",
    ),
    (
        "secrets",
        r"\b(?:api\s+keys?|credentials|\.env|secrets|tokens?|passwords?|ssh\s+keys?)\b",
    ),
    (
        "egress",
        r"\b(?:send|upload|forward|post|email|exfiltrate|curl|webhook)\b|https?://",
    ),
    (
        "secrecy",
        r"\b(?:secretly|do\s+not\s+(?:tell|mention)|don'?t\s+(?:tell|mention)|without\s+telling|hide\s+this)\b",
    ),
    (
        "urgency",
        r"\b(?:important|urgent|immediately|right\s+now|at\s+once)\b|!!!",
    ),
    ("user-tag", r"<\s*/?\s*(?:user|human)\s*>"),
];

static SIGNAL_SET: LazyLock<Option<RegexSet>> =
    LazyLock::new(|| RegexSet::new(SIGNALS.iter().map(|(_, pattern)| *pattern)).ok());

/// A detector that scores text for prompt injection, for example a model run by the host.
///
/// Contract: `injection_probability` is pure with respect to the text (same text, same answer),
/// returns a value in `0.0..=1.0` (anything else is clamped; NaN counts as 0), does not panic
/// and does not block for long — it runs on the caller's thread. The regex rules always run as
/// well: a classifier can add a finding, never remove one.
pub trait Classifier: Send + Sync {
    /// A short stable name, used in the finding id (`classifier.<name>`).
    fn name(&self) -> &str;
    /// How likely `text` is an injection attempt.
    fn injection_probability(&self, text: &str) -> f64;
}

/// The default: no model, only the rules (which are the floor in any case).
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct RulesOnly;

impl Classifier for RulesOnly {
    fn name(&self) -> &'static str {
        "rules-only"
    }

    fn injection_probability(&self, _text: &str) -> f64 {
        0.0
    }
}

/// Maps one character to what it reads as: `None` drops it.
fn fold_char(c: char) -> Option<char> {
    let folded = match c {
        // Tag characters spell ASCII invisibly ("ASCII smuggling"): read them.
        '\u{E0020}'..='\u{E007E}' => char::from_u32(c as u32 - 0xE0000)?,
        '\u{E0000}'..='\u{E007F}'
        | '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{2069}'
        | '\u{FEFF}'
        | '\u{00AD}'
        | '\u{180E}' => return None,
        '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' | '\t' => ' ',
        '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0)?,
        'а' | 'А' | 'α' | 'Α' => 'a',
        'в' | 'В' | 'β' | 'Β' => 'b',
        'с' | 'С' | 'ϲ' => 'c',
        'ԁ' => 'd',
        'е' | 'Е' | 'ε' | 'Ε' | 'ё' => 'e',
        'ɡ' => 'g',
        'һ' | 'Н' | 'Η' => 'h',
        'і' | 'І' | 'ι' | 'Ι' | 'ӏ' => 'i',
        'ј' | 'Ј' => 'j',
        'к' | 'К' | 'κ' | 'Κ' => 'k',
        'м' | 'М' | 'Μ' => 'm',
        'п' | 'η' | 'Ν' => 'n',
        'о' | 'О' | 'ο' | 'Ο' | 'σ' => 'o',
        'р' | 'Р' | 'ρ' | 'Ρ' => 'p',
        'ѕ' | 'Ѕ' => 's',
        'т' | 'Т' | 'τ' | 'Τ' => 't',
        'υ' | 'Υ' => 'u',
        'ν' => 'v',
        'ѡ' | 'ω' => 'w',
        'х' | 'Х' | 'χ' | 'Χ' => 'x',
        'у' | 'У' | 'γ' => 'y',
        'Ζ' => 'z',
        other => other,
    };
    Some(if folded.is_ascii() {
        folded.to_ascii_lowercase()
    } else {
        folded.to_lowercase().next().unwrap_or(folded)
    })
}

fn leet(c: char) -> char {
    match c {
        '0' => 'o',
        '1' | '!' => 'i',
        '3' => 'e',
        '4' | '@' => 'a',
        '5' | '$' => 's',
        '7' => 't',
        other => other,
    }
}

/// The normalised reading of `text` (whose bytes start at `base` in the original).
fn normalise(text: &str, base: usize, original_len: usize) -> View {
    let mut chars: Vec<(char, usize)> = text
        .char_indices()
        .filter_map(|(i, c)| fold_char(c).map(|f| (f, base + i)))
        .collect();
    // Leetspeak: inside a word that has letters, digits and `@$!` read as letters.
    let mut start = 0;
    while start < chars.len() {
        let end = chars[start..]
            .iter()
            .position(|(c, _)| c.is_whitespace())
            .map_or(chars.len(), |p| start + p);
        let word = &chars[start..end];
        let letters = word.iter().filter(|(c, _)| c.is_ascii_alphabetic()).count();
        if letters >= 2 && letters < word.len() {
            for entry in &mut chars[start..end] {
                entry.0 = leet(entry.0);
            }
        }
        start = end + 1;
    }
    // Letter-spaced words: drop a single space between two one-character words.
    let single = |i: usize, chars: &[(char, usize)]| {
        chars.get(i).is_some_and(|(c, _)| c.is_alphanumeric())
            && (i == 0 || chars.get(i - 1).is_some_and(|(c, _)| *c == ' '))
            && chars.get(i + 1).is_none_or(|(c, _)| *c == ' ')
    };
    let mut joined = Vec::with_capacity(chars.len());
    for i in 0..chars.len() {
        let (c, origin) = chars[i];
        if c == ' ' && i > 0 && single(i - 1, &chars) && single(i + 1, &chars) {
            continue;
        }
        // Runs of spaces read as one.
        if c == ' '
            && joined
                .last()
                .is_some_and(|(p, _): &(char, usize)| *p == ' ')
        {
            continue;
        }
        joined.push((c, origin));
    }
    View::from_chars(joined, original_len)
}

fn rot13(view: &View) -> String {
    view.text
        .chars()
        .map(|c| match c {
            'a'..='m' | 'A'..='M' => char::from(c as u8 + 13),
            'n'..='z' | 'N'..='Z' => char::from(c as u8 - 13),
            other => other,
        })
        .collect()
}

/// Base64 segments of `text` that decode to readable text, with their original offsets.
fn decoded_segments(text: &str, base: usize, budget: &mut usize) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let is_b64 = |b: u8| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=';
        if !is_b64(bytes[i]) || (i > 0 && is_b64(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let end = bytes[i..]
            .iter()
            .position(|&b| !is_b64(b))
            .map_or(bytes.len(), |p| i + p);
        let token = &text[i..end];
        if token.len() >= 16
            && *budget > 0
            && let Some(decoded) = crate::shell::decode_base64(token)
            && let Ok(readable) = String::from_utf8(decoded)
        {
            let letters = readable
                .chars()
                .filter(|c| c.is_alphabetic() || *c == ' ')
                .count();
            if letters * 10 >= readable.chars().count() * 7 && readable.contains(' ') {
                *budget = budget.saturating_sub(readable.len());
                out.push((readable, base + i));
            }
        }
        i = end.max(i + 1);
    }
    out
}

/// Byte ranges of `text` inside fenced code blocks or inline code spans.
fn code_ranges(text: &str) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let mut fence_start: Option<usize> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            match fence_start.take() {
                Some(start) => ranges.push(start..offset + line.len()),
                None => fence_start = Some(offset),
            }
        } else if fence_start.is_none() {
            let mut open: Option<usize> = None;
            for (i, byte) in line.bytes().enumerate() {
                if byte == b'`' {
                    match open.take() {
                        Some(start) => ranges.push(offset + start..offset + i + 1),
                        None => open = Some(i),
                    }
                }
            }
        }
        offset += line.len();
    }
    if let Some(start) = fence_start {
        ranges.push(start..text.len());
    }
    ranges
}

/// Rules that only count outside code.
const CODE_EXEMPT: [&str; 2] = ["inj.role-tag", "inj.role-prefix"];

/// Runs `types` over the text and its readings, window by window.
fn collect_injection(
    patterns: &CompiledPatterns,
    types: &[PatternType],
    text: &str,
    collected: &mut Collected,
) {
    collect(patterns, types, &View::identity(text), collected);
    let mut seen: BTreeSet<(String, usize)> = collected
        .findings
        .iter()
        .map(|f| (f.pattern_id.clone(), f.offset))
        .collect();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + WINDOW).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        let mut reach = (end + OVERLAP).min(text.len());
        while !text.is_char_boundary(reach) {
            reach += 1;
        }
        let window = &text[start..reach];
        let mut found = Collected::default();
        let normalised = normalise(window, start, text.len());
        collect(patterns, types, &normalised, &mut found);
        score_signals(&normalised, &mut found);
        // The ROT13 reading is built only where a rule could match it.
        if patterns.may_match_rotated(types, normalised.text.as_bytes()) {
            let rotated = View::from_chars(
                rot13(&normalised)
                    .chars()
                    .zip(normalised.text.char_indices())
                    .map(|(c, (i, _))| (c, normalised.original_offset(i))),
                text.len(),
            );
            collect(patterns, types, &rotated, &mut found);
        }
        let mut budget = MAX_DECODED_BYTES;
        let mut pending = decoded_segments(window, start, &mut budget);
        for _ in 0..MAX_DECODE_DEPTH {
            let mut next = Vec::new();
            for (decoded, origin) in pending {
                let view = normalise(&decoded, 0, text.len());
                let view = View::at(view.text, origin, text.len());
                collect(patterns, types, &view, &mut found);
                next.extend(
                    decoded_segments(&decoded, 0, &mut budget)
                        .into_iter()
                        .map(|(d, _)| (d, origin)),
                );
            }
            pending = next;
        }
        for finding in found.findings {
            // A window reports only matches that start in it; the overlap is read by the next.
            let own = finding.offset >= start && (finding.offset < end || end == text.len());
            if own && seen.insert((finding.pattern_id.clone(), finding.offset)) {
                collected.push(finding);
            }
        }
        start = end;
    }
    let code = code_ranges(text);
    collected.findings.retain(|finding| {
        !CODE_EXEMPT.contains(&finding.pattern_id.as_str())
            || !code.iter().any(|range| range.contains(&finding.offset))
    });
}

/// Adds an `inj.score` finding for each paragraph (of the normalised reading) with enough
/// distinct weak signals. One pass of a small set per paragraph.
fn score_signals(view: &View, collected: &mut Collected) {
    let Some(set) = SIGNAL_SET.as_ref() else {
        return;
    };
    let mut start = 0;
    for paragraph in view.text.split("\n\n") {
        let matched: Vec<&str> = set
            .matches(paragraph)
            .iter()
            .map(|index| SIGNALS[index].0)
            .collect();
        if matched.len() >= SIGNAL_THRESHOLD {
            collected.push(Finding::rule(
                "inj.score",
                FindingType::Injection,
                Severity::Warning,
                &format!("weak signals: {}", matched.join(", ")),
                view.original_offset(start),
            ));
        }
        start += paragraph.len() + 2;
    }
}

fn classify(classifier: &dyn Classifier, text: &str, collected: &mut Collected) {
    let probability = classifier.injection_probability(text);
    if probability.is_finite() && probability.clamp(0.0, 1.0) >= CLASSIFIER_THRESHOLD {
        let severity = if probability >= 0.9 {
            Severity::Critical
        } else {
            Severity::Warning
        };
        collected.push(Finding::rule(
            &format!("classifier.{}", classifier.name()),
            FindingType::Injection,
            severity,
            &format!("probability {probability:.2}"),
            0,
        ));
    }
}

/// The skill content scanner: `INJECTION` and `EXFILTRATION`. Advisory: warns, never blocks.
#[must_use]
pub fn scan_skill_content(patterns: &CompiledPatterns, text: &str) -> ScanResult {
    scan_skill_content_with(patterns, &RulesOnly, text)
}

/// [`scan_skill_content`] with a classifier adding its own findings.
#[must_use]
#[tracing::instrument(level = "debug", skip_all)]
pub fn scan_skill_content_with(
    patterns: &CompiledPatterns,
    classifier: &dyn Classifier,
    text: &str,
) -> ScanResult {
    let types = [PatternType::Injection, PatternType::Exfiltration];
    let mut collected = Collected::default();
    collect_injection(patterns, &types, text, &mut collected);
    classify(classifier, text, &mut collected);
    let incomplete = patterns.incomplete_for(&types);
    ScanResult::new(advisory_verdict(&collected.findings), collected, incomplete).locate_in(text)
}

/// The LLM output scanner: `INJECTION` in what a model produced. Advisory.
#[must_use]
pub fn scan_llm_output(patterns: &CompiledPatterns, text: &str) -> ScanResult {
    scan_llm_output_with(patterns, &RulesOnly, text)
}

/// [`scan_llm_output`] with a classifier adding its own findings.
#[must_use]
#[tracing::instrument(level = "debug", skip_all)]
pub fn scan_llm_output_with(
    patterns: &CompiledPatterns,
    classifier: &dyn Classifier,
    text: &str,
) -> ScanResult {
    let types = [PatternType::Injection];
    let mut collected = Collected::default();
    collect_injection(patterns, &types, text, &mut collected);
    classify(classifier, text, &mut collected);
    let incomplete = patterns.incomplete_for(&types);
    ScanResult::new(advisory_verdict(&collected.findings), collected, incomplete).locate_in(text)
}

/// The memory gate: `INJECTION` only (`EXFILTRATION` never gates memory — lessons name URLs and
/// curl as a matter of course). A match always blocks. On write an incomplete scan blocks too;
/// on read only a pattern source that could not load does, and a partial scan keeps the item.
#[must_use]
pub fn scan_memory(patterns: &CompiledPatterns, text: &str, access: MemoryAccess) -> ScanResult {
    scan_memory_with(patterns, &RulesOnly, text, access)
}

/// [`scan_memory`] with a classifier adding its own findings.
#[must_use]
#[tracing::instrument(level = "debug", skip_all)]
pub fn scan_memory_with(
    patterns: &CompiledPatterns,
    classifier: &dyn Classifier,
    text: &str,
    access: MemoryAccess,
) -> ScanResult {
    let types = [PatternType::Injection];
    let mut collected = Collected::default();
    collect_injection(patterns, &types, text, &mut collected);
    classify(classifier, text, &mut collected);
    let incomplete = patterns.incomplete_for(&types);
    let matched = collected
        .findings
        .iter()
        .any(|f| f.severity > Severity::Pass);
    let verdict = match (matched, access, incomplete) {
        (true, _, _)
        | (false, MemoryAccess::Write, Some(_))
        | (false, MemoryAccess::Read, Some(IncompleteReason::LoadFailed)) => Verdict::Block,
        (false, MemoryAccess::Read | MemoryAccess::Write, _) => Verdict::Allow,
    };
    ScanResult::new(verdict, collected, incomplete).locate_in(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalising_reads_obfuscated_words() {
        for (input, expected) in [
            ("Ig\u{200B}nore", "ignore"),
            ("Ign\u{043E}re", "ignore"),
            ("\u{FF29}\u{FF27}\u{FF2E}", "ign"),
            ("1gn0r3 4ll", "ignore all"),
            ("I g n o r e   a l l", "ignore all"),
            ("a\u{00A0}\u{2003}b", "a b"),
            ("\u{E0049}\u{E0067}", "ig"),
        ] {
            assert_eq!(normalise(input, 0, input.len()).text, expected, "{input:?}");
        }
    }

    #[test]
    fn normalised_offsets_point_into_the_original() {
        let text = "ok Ig\u{200B}nore";
        let view = normalise(text, 0, text.len());
        let at = view.text.find("ignore").unwrap();
        assert_eq!(view.original_offset(at), 3);
    }

    #[test]
    fn code_ranges_cover_fences_and_spans() {
        let text = "a `<system>` b\n```\n<user>\n```\nc";
        let ranges = code_ranges(text);
        assert!(
            ranges
                .iter()
                .any(|r| r.contains(&text.find("<system>").unwrap()))
        );
        assert!(
            ranges
                .iter()
                .any(|r| r.contains(&text.find("<user>").unwrap()))
        );
        assert!(!ranges.iter().any(|r| r.contains(&text.find('c').unwrap())));
    }
}
