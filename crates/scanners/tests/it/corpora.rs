//! Recall and false-positive rates on labelled corpora written from public sources
//! (`tests/corpora/*.tsv`, each line naming the source its shape is modelled on), with floors.
//! `cargo test -p auto-swe-scanners --test it corpora -- --nocapture` prints the table that
//! `docs/scanners.md` quotes.

use std::path::PathBuf;

use auto_swe_scanners::{
    HarnessConfig, MemoryAccess, ScanResult, Verdict, scan_content, scan_llm_output, scan_memory,
    scan_sensitive_path, scan_shell_command,
};

use crate::builtin;

/// One corpus line.
pub(crate) struct Case {
    pub(crate) positive: bool,
    pub(crate) source: String,
    pub(crate) text: String,
}

/// A small deterministic generator (`SplitMix64`), so generated secret bodies are the same on
/// every run and random enough to look like real ones.
struct Generator(u64);

impl Generator {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn body(&mut self, class: &str, length: usize) -> String {
        let alphabet: &[u8] = match class {
            "an" => b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
            "lo" => b"abcdefghijklmnopqrstuvwxyz0123456789",
            "up" => b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
            "al" => b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
            "hex" => b"0123456789abcdef",
            "HEX" => b"0123456789ABCDEF",
            "b64" => b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
            "url" => b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
            "d" => b"0123456789",
            other => panic!("unknown generator class {other}"),
        };
        (0..length)
            .map(|_| {
                let index = usize::try_from(self.next() % alphabet.len() as u64).unwrap();
                char::from(alphabet[index])
            })
            .collect()
    }
}

/// Expands `{{class:length}}`, `⏎` and `\u{…}` in a corpus line.
fn expand(line: &str, seed: u64) -> String {
    let mut generator = Generator(seed);
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find("{{") {
        let Some(end) = rest[start..].find("}}") else {
            break;
        };
        let inner = &rest[start + 2..start + end];
        out.push_str(&rest[..start]);
        match inner.split_once(':') {
            Some((class, length))
                if length.bytes().all(|b| b.is_ascii_digit()) && !length.is_empty() =>
            {
                out.push_str(&generator.body(class, length.parse().unwrap()));
            }
            _ => out.push_str(&rest[start..start + end + 2]),
        }
        rest = &rest[start + end + 2..];
    }
    out.push_str(rest);
    let out = out.replace('⏎', "\n");
    let mut decoded = String::new();
    let mut rest = out.as_str();
    while let Some(start) = rest.find("\\u{") {
        let Some(end) = rest[start..].find('}') else {
            break;
        };
        decoded.push_str(&rest[..start]);
        let hex = &rest[start + 3..start + end];
        match u32::from_str_radix(hex, 16).ok().and_then(char::from_u32) {
            Some(c) => decoded.push(c),
            None => decoded.push_str(&rest[start..=start + end]),
        }
        rest = &rest[start + end + 1..];
    }
    decoded.push_str(rest);
    decoded
}

/// Reads one corpus file.
pub(crate) fn corpus(name: &str) -> Vec<Case> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpora")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut cases = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let mut columns = line.splitn(3, '\t');
        let (Some(label), Some(source), Some(body)) =
            (columns.next(), columns.next(), columns.next())
        else {
            panic!("{name}:{}: expected label, source and text", number + 1);
        };
        assert!(
            !source.trim().is_empty(),
            "{name}:{}: no source",
            number + 1
        );
        let positive = match label {
            "pos" => true,
            "neg" => false,
            other => panic!("{name}:{}: unknown label {other}", number + 1),
        };
        cases.push(Case {
            positive,
            source: source.to_owned(),
            text: expand(body, number as u64 + 1),
        });
    }
    cases
}

/// Recall and false-positive rate of one scanner at one verdict threshold.
struct Rates {
    caught: usize,
    positives: usize,
    flagged: usize,
    negatives: usize,
    missed: Vec<String>,
    false_alarms: Vec<String>,
}

impl Rates {
    #[expect(clippy::cast_precision_loss, reason = "small counts")]
    fn recall(&self) -> f64 {
        self.caught as f64 / self.positives as f64
    }

    #[expect(clippy::cast_precision_loss, reason = "small counts")]
    fn false_positive_rate(&self) -> f64 {
        self.flagged as f64 / self.negatives as f64
    }
}

fn measure(
    cases: &[Case],
    scan: impl Fn(&str) -> ScanResult,
    caught_at: Verdict,
    flagged_at: Verdict,
) -> Rates {
    let mut rates = Rates {
        caught: 0,
        positives: 0,
        flagged: 0,
        negatives: 0,
        missed: Vec::new(),
        false_alarms: Vec::new(),
    };
    for case in cases {
        let result = scan(&case.text);
        let ids: Vec<_> = result
            .findings
            .iter()
            .map(|f| f.pattern_id.as_str())
            .collect();
        if case.positive {
            rates.positives += 1;
            if result.verdict >= caught_at {
                rates.caught += 1;
            } else {
                rates
                    .missed
                    .push(format!("[{}] {:?}", case.source, case.text));
            }
        } else {
            rates.negatives += 1;
            if result.verdict >= flagged_at {
                rates.flagged += 1;
                rates
                    .false_alarms
                    .push(format!("[{}] {:?} {ids:?}", case.source, case.text));
            }
        }
    }
    rates
}

fn report(name: &str, rates: &Rates) {
    eprintln!(
        "corpus {name}: recall {}/{} = {:.1}%, false positives {}/{} = {:.1}%",
        rates.caught,
        rates.positives,
        rates.recall() * 100.0,
        rates.flagged,
        rates.negatives,
        rates.false_positive_rate() * 100.0
    );
    for missed in &rates.missed {
        eprintln!("  missed {missed}");
    }
    for alarm in &rates.false_alarms {
        eprintln!("  false alarm {alarm}");
    }
}

fn check(name: &str, rates: &Rates, min_recall: f64, max_false_positives: f64) {
    report(name, rates);
    assert!(
        rates.recall() >= min_recall,
        "{name}: recall {:.3} under the floor {min_recall}",
        rates.recall()
    );
    assert!(
        rates.false_positive_rate() <= max_false_positives,
        "{name}: false-positive rate {:.3} over the ceiling {max_false_positives}",
        rates.false_positive_rate()
    );
}

/// The tuning corpus and the held-out one (written after the rules and measured as it came),
/// reported apart and together; the floors hold on the union.
fn both(name: &str) -> (Vec<Case>, Vec<Case>) {
    let tuning = corpus(&format!("{name}.tsv"));
    let holdout = corpus(&format!("{name}-holdout.tsv"));
    assert!(tuning.len() >= 200, "{name} corpus too small");
    assert!(holdout.len() >= 60, "{name} held-out corpus too small");
    (tuning, holdout)
}

#[test]
fn secrets_corpus_meets_its_floors() {
    let (tuning, holdout) = both("secrets");
    let scan = |text: &str| scan_content(builtin(), text);
    // Caught: warned or blocked; false alarm: warned or blocked (a warning goes back to the
    // model, so it is a cost too).
    report(
        "secrets, held out (warn or block)",
        &measure(&holdout, scan, Verdict::Warn, Verdict::Warn),
    );
    let all: Vec<Case> = tuning.into_iter().chain(holdout).collect();
    check(
        "secrets, all (warn or block)",
        &measure(&all, scan, Verdict::Warn, Verdict::Warn),
        0.90,
        0.02,
    );
    report(
        "secrets, all (block)",
        &measure(&all, scan, Verdict::Block, Verdict::Block),
    );
}

#[test]
fn injection_corpus_meets_its_floors() {
    let (tuning, holdout) = both("injection");
    report(
        "injection, held out, LLM output (warn)",
        &measure(
            &holdout,
            |text| scan_llm_output(builtin(), text),
            Verdict::Warn,
            Verdict::Warn,
        ),
    );
    let cases: Vec<Case> = tuning.into_iter().chain(holdout).collect();
    check(
        "injection, all, LLM output (warn)",
        &measure(
            &cases,
            |text| scan_llm_output(builtin(), text),
            Verdict::Warn,
            Verdict::Warn,
        ),
        0.60,
        0.01,
    );
    check(
        "injection, all, memory write (block)",
        &measure(
            &cases,
            |text| scan_memory(builtin(), text, MemoryAccess::Write),
            Verdict::Block,
            Verdict::Block,
        ),
        0.60,
        0.01,
    );
}

#[test]
fn shell_corpus_meets_its_floors() {
    let (tuning, holdout) = both("shell");
    let scan = |text: &str| scan_shell_command(builtin(), text, HarnessConfig::Loaded);
    // The gate's job is to refuse: recall and false positives are both counted on blocks.
    report(
        "shell, held out (block)",
        &measure(&holdout, scan, Verdict::Block, Verdict::Block),
    );
    let cases: Vec<Case> = tuning.into_iter().chain(holdout).collect();
    check(
        "shell, all (block)",
        &measure(&cases, scan, Verdict::Block, Verdict::Block),
        0.90,
        0.02,
    );
    report(
        "shell, all (warn or block)",
        &measure(&cases, scan, Verdict::Warn, Verdict::Warn),
    );
}

#[test]
fn paths_corpus_meets_its_floors() {
    let cases = corpus("paths.tsv");
    assert!(cases.len() >= 80, "corpus too small");
    check(
        "sensitive paths (block)",
        &measure(
            &cases,
            |text| scan_sensitive_path(builtin(), text, HarnessConfig::Loaded),
            Verdict::Block,
            Verdict::Block,
        ),
        0.90,
        0.02,
    );
}

#[test]
fn generated_bodies_are_deterministic_and_of_the_asked_shape() {
    let first = expand("k={{hex:8}} {{up:4}}⏎\\u{200B}", 7);
    assert_eq!(first, expand("k={{hex:8}} {{up:4}}⏎\\u{200B}", 7));
    assert_ne!(first, expand("k={{hex:8}} {{up:4}}⏎\\u{200B}", 8));
    let (body, tail) = first.split_once('\n').unwrap();
    assert_eq!(tail, "\u{200B}");
    let value = body.strip_prefix("k=").unwrap();
    let (hex, upper) = value.split_once(' ').unwrap();
    assert!(hex.len() == 8 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(upper.len() == 4 && upper.bytes().all(|b| b.is_ascii_alphanumeric()));
    assert_eq!(expand("{{ .Values.key }}", 1), "{{ .Values.key }}");
}
