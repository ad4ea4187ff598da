//! The review network's findings as a pull-request comment a person reads.
//!
//! Everything a reviewer model wrote (categories, descriptions, files, suggested fixes) is hostile
//! text: it could mention people (`@org/team` pings a team), embed images that call out to a
//! tracker, hide instructions in HTML comments, close a code block and render markdown, or
//! reorder what a reader sees with bidirectional controls. So model text is only ever shown
//! inside one fenced code block whose fence is longer than any run of backticks in it (nothing
//! inside can close it, and a code block renders no mention, link, image or HTML), with control
//! and bidirectional characters removed. Outside the fence the comment holds only what this
//! module writes: reviewer labels and severities it recognises, counts, and a commit id that is
//! hexadecimal.

use std::fmt::Write as _;

use auto_swe_agents::ReviewPersona;
use auto_swe_runtime::structured::reviewer_label;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// Longest comment body (GitHub refuses bodies over 65,536 characters).
pub(crate) const COMMENT_CHARS: usize = 60_000;
/// Characters of one finding's text field.
const FIELD_CHARS: usize = 2_000;
/// Findings shown; the rest are counted.
const MAX_FINDINGS: usize = 50;

/// Verdict rows shown in the summary table.
const MAX_VERDICTS: usize = 10;

/// The reviewers' wire labels, as the review network writes them.
fn reviewers() -> [&'static str; 3] {
    [
        ReviewPersona::Security,
        ReviewPersona::DomainLogic,
        ReviewPersona::Performance,
    ]
    .map(reviewer_label)
}

/// A verdict's severities, as the review network writes them.
const SEVERITIES: [&str; 4] = ["PASS", "INFO", "WARNING", "CRITICAL"];

/// A rendered comment and the digest of its findings (the same findings are posted once per
/// run, whatever head they were found on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReviewComment {
    pub(crate) body: String,
    pub(crate) digest: String,
}

/// `text` with controls (other than newline and tab), bidirectional overrides and isolates,
/// and zero-width characters removed, cut to `max` characters.
fn plain(text: &str, max: usize) -> String {
    let kept: String = text
        .chars()
        .filter(|c| {
            (!c.is_control() || *c == '\n' || *c == '\t')
                && !matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
        })
        .collect();
    if kept.chars().count() <= max {
        kept
    } else {
        let mut cut: String = kept.chars().take(max).collect();
        cut.push('…');
        cut
    }
}

fn field<'a>(value: &'a Value, name: &str) -> &'a str {
    value.get(name).and_then(Value::as_str).unwrap_or("")
}

/// A known label, or `fallback`: only recognised words are written outside the fence.
fn known(text: &str, allowed: &[&'static str], fallback: &'static str) -> &'static str {
    allowed
        .iter()
        .find(|known| **known == text)
        .copied()
        .unwrap_or(fallback)
}

/// A fence longer than every run of backticks in `text` (at least three).
fn fence_for(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}

/// The comment for the review network's output `review` on head `head_sha`, or `None` when no
/// reviewer reported a finding (or `review` is not a review's output).
pub(crate) fn render(review: &Value, head_sha: &str) -> Option<ReviewComment> {
    let verdicts = review.get("verdicts")?.as_array()?;
    let mut findings_text = String::new();
    let mut shown = 0usize;
    let mut total = 0usize;
    let mut table = String::new();
    let mut approvals = 0usize;
    let reviewers = reviewers();
    for (index, verdict) in verdicts.iter().enumerate() {
        let reviewer = known(field(verdict, "reviewer"), &reviewers, "REVIEWER");
        let severity = known(field(verdict, "severity"), &SEVERITIES, "UNKNOWN");
        let approved = verdict.get("approved").and_then(Value::as_bool) == Some(true);
        approvals += usize::from(approved);
        let findings = verdict
            .get("findings")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        if index < MAX_VERDICTS {
            let _ = writeln!(
                table,
                "| {reviewer} | {} | {severity} | {} |",
                if approved { "approved" } else { "rejected" },
                findings.len()
            );
        }
        for finding in findings {
            total += 1;
            if shown == MAX_FINDINGS {
                continue;
            }
            shown += 1;
            let line = finding
                .get("line")
                .and_then(Value::as_u64)
                .map(|line| format!(":{line}"))
                .unwrap_or_default();
            let _ = writeln!(
                findings_text,
                "[{shown}] {reviewer} · {} · {}{line}\n{}",
                plain(field(finding, "category"), 80),
                plain(field(finding, "file"), 300),
                plain(field(finding, "description"), FIELD_CHARS),
            );
            let fix = plain(field(finding, "suggestedFix"), FIELD_CHARS);
            if !fix.trim().is_empty() {
                let _ = writeln!(findings_text, "Suggested fix: {fix}");
            }
            findings_text.push('\n');
        }
    }
    if total == 0 {
        return None;
    }
    let digest = hex::encode(&Sha256::digest(findings_text.as_bytes())[..8]);
    let head =
        if (7..=64).contains(&head_sha.len()) && head_sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            format!(" at `{}`", &head_sha[..head_sha.len().min(12)])
        } else {
            String::new()
        };
    // The whole comment stays under the provider's limit: the findings are cut, never the fence.
    let room = COMMENT_CHARS - 2_000;
    let cut = shown < total || findings_text.chars().count() > room;
    let findings_text = plain(&findings_text, room);
    let mut body = format!(
        "### Review findings\n\nThe review network looked at this change{head}: {approvals} of {} reviewers approved, with {total} finding(s){}.\n\n| Reviewer | Verdict | Severity | Findings |\n|---|---|---|---|\n{table}\nThe findings below are a model's words, shown as plain text.\n\n",
        verdicts.len(),
        if cut {
            " (the list below is cut to fit)"
        } else {
            ""
        },
    );
    let fence = fence_for(&findings_text);
    let _ = write!(body, "{fence}text\n{}\n{fence}\n", findings_text.trim_end());
    Some(ReviewComment { body, digest })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn review(findings: &Value) -> Value {
        json!({
            "approved": true,
            "rejectionSummary": "",
            "verdicts": [
                { "approved": true, "reviewer": "SECURITY", "severity": "INFO", "findings": findings },
                { "approved": true, "reviewer": "PERFORMANCE", "severity": "PASS", "findings": [] },
            ]
        })
    }

    /// The text outside the one fenced block of `body`, and the block's content.
    fn split(body: &str) -> (String, String) {
        let open = body.find("text\n").expect("a fenced block");
        let fence_start = body[..open].rfind('\n').map_or(0, |i| i + 1);
        let fence = &body[fence_start..open];
        assert!(
            fence.len() >= 3 && fence.chars().all(|c| c == '`'),
            "{fence:?}"
        );
        let content_start = open + "text\n".len();
        let close = body[content_start..]
            .find(&format!("\n{fence}\n"))
            .expect("a closing fence")
            + content_start;
        let inside = body[content_start..close].to_owned();
        // Nothing inside can close the block: no line starts with the fence.
        assert!(
            !inside.lines().any(|l| l.trim_start().starts_with(fence)),
            "{inside}"
        );
        let outside = format!(
            "{}{}",
            &body[..fence_start],
            &body[close + fence.len() + 2..]
        );
        (outside, inside)
    }

    #[test]
    fn no_findings_no_comment_and_a_non_review_is_ignored() {
        assert_eq!(render(&review(&json!([])), "abc1234"), None);
        assert_eq!(render(&json!({"text": "hi"}), "abc1234"), None);
        assert_eq!(render(&json!(null), "abc1234"), None);
    }

    #[test]
    fn findings_are_listed_inside_one_fence_with_the_summary_outside() {
        let body = render(
            &review(&json!([{
                "category": "injection", "description": "User input reaches the shell.",
                "file": "src/run.rs", "line": 42, "suggestedFix": "Pass arguments as a list."
            }])),
            "0123456789abcdef0123",
        )
        .unwrap()
        .body;
        let (outside, inside) = split(&body);
        assert!(outside.contains("at `0123456789ab`"), "{outside}");
        assert!(outside.contains("2 of 2 reviewers approved"), "{outside}");
        assert!(
            outside.contains("| SECURITY | approved | INFO | 1 |"),
            "{outside}"
        );
        assert!(
            inside.contains("SECURITY · injection · src/run.rs:42"),
            "{inside}"
        );
        assert!(
            inside.contains("Suggested fix: Pass arguments as a list."),
            "{inside}"
        );
    }

    #[test]
    fn hostile_findings_cannot_leave_the_fence_ping_anyone_or_hide_text() {
        let hostile = "```\n</details> @octo-org/admins ![x](https://tracker.example/p.png) <!-- approve -->\n````````\n~~~\n\u{202E}evil\u{2066} zero\u{200B}width \u{1b}[31m";
        let comment = render(
            &json!({ "verdicts": [{
                "approved": "yes", "reviewer": "@octo-org/admins", "severity": "<img src=x>",
                "findings": [{
                    "category": hostile, "description": hostile, "file": hostile,
                    "line": "12", "suggestedFix": hostile
                }]
            }]}),
            "not-a-sha @someone",
        )
        .unwrap();
        let (outside, inside) = split(&comment.body);
        for leak in ["@", "![", "<!--", "<img", "tracker.example", "not-a-sha"] {
            assert!(
                !outside.contains(leak),
                "{leak} outside the fence: {outside}"
            );
        }
        // Unrecognised labels are not echoed; a string `approved` is not an approval.
        assert!(
            outside.contains("| REVIEWER | rejected | UNKNOWN | 1 |"),
            "{outside}"
        );
        assert!(outside.contains("0 of 1 reviewers approved"), "{outside}");
        for hidden in ['\u{202E}', '\u{2066}', '\u{200B}', '\u{1b}'] {
            assert!(!comment.body.contains(hidden), "{hidden:?} kept");
        }
        // The words are still there for a person to read, inside the block.
        assert!(inside.contains("@octo-org/admins"), "{inside}");
    }

    #[test]
    fn a_flood_of_findings_stays_under_the_limit_and_is_counted() {
        let long = "x".repeat(10_000);
        let findings: Vec<Value> = (0..80)
            .map(|i| json!({ "category": "c", "description": format!("{i} {long}"), "file": "f", "suggestedFix": long }))
            .collect();
        let comment = render(&review(&Value::Array(findings)), "abc1234").unwrap();
        assert!(
            comment.body.chars().count() <= COMMENT_CHARS,
            "{}",
            comment.body.len()
        );
        let (_, inside) = split(&comment.body);
        assert!(inside.starts_with("[1] SECURITY"), "{}", &inside[..80]);
        assert!(
            comment
                .body
                .contains("with 80 finding(s) (the list below is cut to fit)")
        );
        assert!(comment.body.ends_with('\n'), "the fence is closed");
    }

    #[test]
    fn the_cut_notice_tells_the_truth_and_lines_stay_lines() {
        let finding = |description: String| json!({ "category": "c", "description": description, "file": "f", "line": 1 });
        let notice = "(the list below is cut to fit)";
        // Few short findings: nothing cut, no notice, each finding on its own lines.
        let whole = render(
            &review(&json!([finding("first\tline\nsecond".into())])),
            "abc1234",
        )
        .unwrap();
        assert!(!whole.body.contains(notice), "{}", whole.body);
        let (_, inside) = split(&whole.body);
        assert_eq!(
            inside.lines().collect::<Vec<_>>(),
            vec!["[1] SECURITY · c · f:1", "first\tline", "second"]
        );
        // More findings than are shown, all short: cut.
        let many: Vec<Value> = (0..60).map(|i| finding(format!("{i}"))).collect();
        assert!(
            render(&review(&Value::Array(many)), "abc1234")
                .unwrap()
                .body
                .contains(notice)
        );
        // Every finding shown, but too long to fit: cut.
        let long: Vec<Value> = (0..40).map(|_| finding("y".repeat(1_990))).collect();
        assert!(
            render(&review(&Value::Array(long)), "abc1234")
                .unwrap()
                .body
                .contains(notice)
        );
        // The table shows at most ten verdicts.
        let verdicts: Vec<Value> = (0..12)
            .map(|_| json!({ "approved": true, "reviewer": "SECURITY", "severity": "INFO", "findings": [finding("d".into())] }))
            .collect();
        let body = render(&json!({ "verdicts": verdicts }), "abc1234")
            .unwrap()
            .body;
        assert_eq!(
            body.matches("| SECURITY | approved |").count(),
            MAX_VERDICTS
        );
        assert!(body.contains("12 of 12 reviewers approved"), "{body}");
    }

    #[test]
    fn the_digest_follows_the_findings_not_the_head() {
        let one = review(&json!([{ "category": "c", "description": "d", "file": "f" }]));
        let other = review(&json!([{ "category": "c", "description": "e", "file": "f" }]));
        let a = render(&one, "abc1234").unwrap();
        let b = render(&one, "def5678").unwrap();
        let c = render(&other, "abc1234").unwrap();
        assert_eq!(a.digest, b.digest);
        assert_ne!(a.digest, c.digest);
        assert_eq!(a.digest.len(), 16);
    }
}
