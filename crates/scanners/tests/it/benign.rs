//! False positives on a corpus of benign source files, shell scripts, docs, commands and paths
//! (tests/fixtures/benign). Prints the rate per scanner and holds the blocking scanners to it.

use std::path::PathBuf;

use auto_swe_scanners::{
    HarnessConfig, MemoryAccess, ScanResult, Verdict, scan_code_diff, scan_content,
    scan_llm_output, scan_memory, scan_sensitive_path, scan_shell_command, scan_skill_content,
};

use crate::builtin;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/benign")
}

/// The corpus documents (everything but the command and path lists), sorted by name.
fn documents() -> Vec<(String, String)> {
    let mut documents: Vec<_> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let name = path.file_name().unwrap().to_str().unwrap();
            name != "commands.txt" && name != "paths.txt"
        })
        .map(|path| {
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            (name, std::fs::read_to_string(&path).unwrap())
        })
        .collect();
    documents.sort();
    documents
}

fn lines(name: &str) -> Vec<String> {
    std::fs::read_to_string(corpus_dir().join(name))
        .unwrap()
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// Counts inputs at or above `at`, returning (flagged, total, flagged names).
fn rate<'a>(
    inputs: impl IntoIterator<Item = (&'a str, ScanResult)>,
    at: Verdict,
) -> (usize, usize, Vec<String>) {
    let mut flagged = Vec::new();
    let mut total = 0;
    for (name, result) in inputs {
        total += 1;
        if result.verdict >= at {
            let ids: Vec<_> = result
                .findings
                .iter()
                .map(|f| f.pattern_id.clone())
                .collect();
            flagged.push(format!("{name} {ids:?}"));
        }
    }
    (flagged.len(), total, flagged)
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one table row per scanner reads best in one place"
)]
fn benign_corpus_false_positive_rates() {
    let patterns = builtin();
    let documents = documents();
    assert!(documents.len() >= 10, "corpus too small");
    let commands = lines("commands.txt");
    let paths = lines("paths.txt");
    let doc_lines: Vec<String> = documents
        .iter()
        .filter(|(name, _)| {
            std::path::Path::new(name)
                .extension()
                .is_some_and(|ext| ext.eq_ignore_ascii_case("md"))
        })
        .flat_map(|(_, text)| {
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();

    let report = [
        (
            "shell (block)",
            rate(
                commands.iter().map(|c| {
                    (
                        c.as_str(),
                        scan_shell_command(patterns, c, HarnessConfig::Loaded),
                    )
                }),
                Verdict::Block,
            ),
        ),
        (
            "shell (warn or block)",
            rate(
                commands.iter().map(|c| {
                    (
                        c.as_str(),
                        scan_shell_command(patterns, c, HarnessConfig::Loaded),
                    )
                }),
                Verdict::Warn,
            ),
        ),
        (
            "path (block)",
            rate(
                paths.iter().map(|p| {
                    (
                        p.as_str(),
                        scan_sensitive_path(patterns, p, HarnessConfig::Loaded),
                    )
                }),
                Verdict::Block,
            ),
        ),
        (
            "content (block)",
            rate(
                documents
                    .iter()
                    .map(|(n, t)| (n.as_str(), scan_content(patterns, t))),
                Verdict::Block,
            ),
        ),
        (
            "content (warn or block)",
            rate(
                documents
                    .iter()
                    .map(|(n, t)| (n.as_str(), scan_content(patterns, t))),
                Verdict::Warn,
            ),
        ),
        (
            "code (warn)",
            rate(
                documents
                    .iter()
                    .map(|(n, t)| (n.as_str(), scan_code_diff(patterns, t))),
                Verdict::Warn,
            ),
        ),
        (
            "skill (warn)",
            rate(
                documents
                    .iter()
                    .map(|(n, t)| (n.as_str(), scan_skill_content(patterns, t))),
                Verdict::Warn,
            ),
        ),
        (
            "output (warn)",
            rate(
                doc_lines
                    .iter()
                    .map(|l| (l.as_str(), scan_llm_output(patterns, l))),
                Verdict::Warn,
            ),
        ),
        (
            "memory write (block)",
            rate(
                doc_lines
                    .iter()
                    .map(|l| (l.as_str(), scan_memory(patterns, l, MemoryAccess::Write))),
                Verdict::Block,
            ),
        ),
    ];
    for (scanner, (flagged, total, names)) in &report {
        #[expect(clippy::cast_precision_loss, reason = "small counts")]
        let percent = *flagged as f64 * 100.0 / *total as f64;
        eprintln!("benign false positives, {scanner}: {flagged}/{total} = {percent:.1}% {names:?}");
    }
    let get = |name: &str| {
        report
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, r)| r.0)
            .unwrap()
    };
    // The blocking scanners must not block benign work.
    assert_eq!(get("shell (block)"), 0);
    assert_eq!(get("path (block)"), 0);
    assert_eq!(get("content (block)"), 0);
    assert_eq!(get("memory write (block)"), 0);
    // Advisory scanners may warn, but rarely on prose.
    assert_eq!(get("output (warn)"), 0);
    assert_eq!(get("skill (warn)"), 0);
}
