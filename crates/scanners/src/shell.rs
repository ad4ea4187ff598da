//! The shell command scanner: de-obfuscates a command the way a shell would read it, runs the
//! `SHELL_COMMAND` and `EXFILTRATION` rules over every view, decodes base64/hex payloads that are
//! piped into a decoder, checks every file the command writes against the sensitive-path rules,
//! and runs the pre-write `SECRET` rules over a command that writes (echo/printf redirects and
//! here-docs carry their content in the command text).
//!
//! Content that reaches a file through a pipe, a variable or another process is not in the
//! command text and cannot be scanned here.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::{Captures, Regex};

use crate::compile::CompiledPatterns;
use crate::pattern::{PatternType, Severity};
use crate::result::{Collected, Finding, FindingType, ScanResult};
use crate::scanners::{HarnessConfig, blocking_verdict, collect, sensitive_path_findings};
use crate::url_policy::{RequestKind, UrlPolicy};
use crate::view::View;

/// How deep encoded payloads are unwrapped (base64 inside base64 …).
const MAX_DECODE_DEPTH: usize = 3;
/// Longest command the scanner reads; a longer one is refused unread. Every view of a command
/// carries an offset map, so reading one costs several times its size in memory, and no command
/// an agent needs to run is this long (a script belongs in a file).
pub const MAX_COMMAND_BYTES: usize = 1 << 20;

type Rewrite = fn(&Captures<'_>) -> String;

struct Rules {
    steps: Vec<(Regex, Rewrite)>,
    assignment: Regex,
    variable: Regex,
    redirect: Regex,
    tee: Regex,
    dd: Regex,
    copy: Regex,
    in_place: Regex,
    touch: Regex,
    argument: Regex,
    decoder: Regex,
    base64_token: Regex,
    hex_token: Regex,
    url: Regex,
}

fn text_of(caps: &Captures<'_>, index: usize) -> String {
    caps.get(index)
        .map_or_else(String::new, |m| m.as_str().to_owned())
}

/// Decodes the escapes of a `$'…'` ANSI-C quoted string.
fn ansi_c(caps: &Captures<'_>) -> String {
    let body = text_of(caps, 1);
    let mut out = String::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('x') => {
                let hex: String = std::iter::from_fn(|| chars.next_if(char::is_ascii_hexdigit))
                    .take(2)
                    .collect();
                if let Some(decoded) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(decoded);
                }
            }
            Some(d @ '0'..='7') => {
                let mut octal = String::from(d);
                while octal.len() < 3 {
                    match chars.next_if(|c| ('0'..='7').contains(c)) {
                        Some(next) => octal.push(next),
                        None => break,
                    }
                }
                if let Some(decoded) = u32::from_str_radix(&octal, 8).ok().and_then(char::from_u32)
                {
                    out.push(decoded);
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

fn build_rules() -> Option<Rules> {
    let step = |pattern: &str, rewrite: Rewrite| Regex::new(pattern).ok().map(|r| (r, rewrite));
    let steps = vec![
        // Line continuations vanish.
        step(r"\\\r?\n", |_| String::new())?,
        // ANSI-C quoting: $'\x63url' is curl.
        step(r"\$'((?:[^'\\]|\\.)*)'", ansi_c)?,
        // $IFS and its spellings read as a space.
        step(r"\$\{IFS[^}]*\}(?:\$[0-9@*])?|\$IFS(?:\$[0-9@*])?", |_| {
            " ".to_owned()
        })?,
        // Expansions that are empty in a fresh shell: $@, $*, $1 …
        step(r"\$\{[0-9@*]\}|\$[0-9@*]", |_| String::new())?,
        // Empty quotes and empty substitutions.
        step(r#"''|""|\$\(\s*\)|``"#, |_| String::new())?,
        // Backslash escapes: c\u\r\l is curl.
        step(r"\\(.)", |caps| text_of(caps, 1))?,
        // Quotes inside words: c'u'r"l" is curl.
        step(r#"['"]"#, |_| String::new())?,
        // Brace expansion used as spaces: {curl,-s,x} is curl -s x.
        step(r"(^|[\s;&|(])\{([^{}\s]*,[^{}\s]*)\}", |caps| {
            format!("{}{}", text_of(caps, 1), text_of(caps, 2).replace(',', " "))
        })?,
    ];
    let target = r"[^\s;&|<>()]+";
    Some(Rules {
        steps,
        assignment: Regex::new(r"(?:^|[\s;&|])([A-Za-z_][A-Za-z0-9_]*)=([^\s;&|]+)").ok()?,
        variable: Regex::new(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)").ok()?,
        redirect: Regex::new(&format!(r"(?:^|[^<>&0-9])(?:\d+|&)?>>?\|?\s*({target})")).ok()?,
        tee: Regex::new(r"\btee\b([^;&|\n<>]*)").ok()?,
        dd: Regex::new(r"\bdd\b[^;&|\n]*\bof=([^\s;&|]+)").ok()?,
        copy: Regex::new(r"\b(?:cp|mv|install|ln|rsync)\b([^;&|\n<>]*)").ok()?,
        in_place: Regex::new(r"\b(?:sed|perl)\b([^;&|\n<>]*\s-i[^;&|\n<>]*)").ok()?,
        touch: Regex::new(r"\b(?:touch|truncate)\b([^;&|\n<>]*)").ok()?,
        argument: Regex::new(r"[^\s]+").ok()?,
        decoder: Regex::new(r"\bbase64\s+(?:-\w*\s+)*(?:-d|--decode|-D)\b|\bb64decode\b|\bopenssl\s+(?:base64|enc)\b[^|;\n]*-d\b|\bxxd\s+(?:-\w+\s+)*-r\b").ok()?,
        base64_token: Regex::new(r"[A-Za-z0-9+/_\-]{12,}={0,2}").ok()?,
        hex_token: Regex::new(r"\b(?:[0-9a-fA-F]{2}){6,}\b").ok()?,
        url: Regex::new(r#"\bhttps?://[^\s'"<>|;`)]+"#).ok()?,
    })
}

static RULES: LazyLock<Option<Rules>> = LazyLock::new(build_rules);

/// The de-obfuscated view of a command, plus a view with simple variable assignments
/// substituted (`a=cu; b=rl; $a$b`).
fn views(rules: &Rules, command: &str) -> Vec<View> {
    let raw = View::identity(command);
    let mut clean = raw.clone();
    for (regex, rewrite) in &rules.steps {
        clean = clean.replace(regex, rewrite);
    }
    let mut values: BTreeMap<String, String> = BTreeMap::new();
    for caps in rules.assignment.captures_iter(&clean.text) {
        values.insert(text_of(&caps, 1), text_of(&caps, 2));
    }
    let mut out = vec![raw, clean.clone()];
    if !values.is_empty() {
        let substituted = clean.replace(&rules.variable, |caps| {
            let name = caps
                .get(1)
                .or_else(|| caps.get(2))
                .map_or("", |m| m.as_str());
            values
                .get(name)
                .cloned()
                .unwrap_or_else(|| text_of(caps, 0))
        });
        out.push(substituted);
    }
    out
}

/// Every file the command writes, with its offset in the view: redirect targets, `tee`
/// arguments, `dd of=`, the destination of `cp`/`mv`/`install`/`ln`/`rsync`, files edited in
/// place by `sed -i`/`perl -i`, and `touch`/`truncate` arguments.
fn write_targets(rules: &Rules, view: &View) -> Vec<(String, usize)> {
    let text = &view.text;
    let mut targets = Vec::new();
    let mut push =
        |word: &str, at: usize| targets.push((word.to_owned(), view.original_offset(at)));
    for regex in [&rules.redirect, &rules.dd] {
        for caps in regex.captures_iter(text) {
            if let Some(m) = caps.get(1) {
                push(m.as_str(), m.start());
            }
        }
    }
    // The words of capture group 1, with their offsets in the view.
    let words = |caps: &Captures<'_>| -> Vec<(String, usize)> {
        caps.get(1)
            .map(|group| {
                rules
                    .argument
                    .find_iter(group.as_str())
                    .map(|m| (m.as_str().to_owned(), group.start() + m.start()))
                    .collect()
            })
            .unwrap_or_default()
    };
    for regex in [&rules.tee, &rules.touch] {
        for caps in regex.captures_iter(text) {
            for (word, at) in words(&caps) {
                if !word.starts_with('-') {
                    push(&word, at);
                }
            }
        }
    }
    for regex in [&rules.copy, &rules.in_place] {
        for caps in regex.captures_iter(text) {
            let list = words(&caps);
            let explicit = list
                .windows(2)
                .find(|pair| pair[0].0 == "-t" || pair[0].0 == "--target-directory")
                .map(|pair| pair[1].clone());
            let final_word = list
                .iter()
                .rev()
                .find(|(word, _)| !word.starts_with('-'))
                .cloned();
            if let Some((word, at)) = explicit.or(final_word) {
                push(&word, at);
            }
        }
    }
    targets
}

fn base64_value(byte: u8) -> Option<u32> {
    match byte {
        b'A'..=b'Z' => Some(u32::from(byte - b'A')),
        b'a'..=b'z' => Some(u32::from(byte - b'a') + 26),
        b'0'..=b'9' => Some(u32::from(byte - b'0') + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    }
}

/// Decodes standard or URL-safe base64 (padding optional); `None` when not base64.
pub(crate) fn decode_base64(token: &str) -> Option<Vec<u8>> {
    let digits = token.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    let mut buffer = 0u32;
    let mut bits = 0;
    for &byte in digits {
        buffer = (buffer << 6) | base64_value(byte)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Some(out)
}

fn decode_hex(token: &str) -> Option<Vec<u8>> {
    (0..token.len())
        .step_by(2)
        .map(|i| {
            token
                .get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
        })
        .collect()
}

/// Decoded payloads of a command that pipes text into a decoder, each with the offset of its
/// encoded form. Only text that decodes to printable UTF-8 counts.
fn decoded_payloads(rules: &Rules, command: &str) -> Vec<(String, usize)> {
    if !rules.decoder.is_match(command) {
        return Vec::new();
    }
    let printable = |bytes: Vec<u8>| {
        String::from_utf8(bytes).ok().filter(|text| {
            !text.is_empty() && text.chars().all(|c| !c.is_control() || c.is_whitespace())
        })
    };
    let mut payloads = Vec::new();
    for m in rules.base64_token.find_iter(command) {
        if let Some(text) = decode_base64(m.as_str()).and_then(printable) {
            payloads.push((text, m.start()));
        }
    }
    for m in rules.hex_token.find_iter(command) {
        if let Some(text) = decode_hex(m.as_str()).and_then(printable) {
            payloads.push((text, m.start()));
        }
    }
    payloads
}

/// URLs in the command that the outbound policy refuses whatever the opt-ins: link-local,
/// cloud metadata, unspecified and reserved addresses, in any spelling the URL parser reads
/// (`http://2852039166/` is 169.254.169.254). Loopback and private addresses are everyday
/// development targets and are left to the rules.
fn internal_urls(rules: &Rules, view: &View) -> Vec<Finding> {
    let policy = UrlPolicy::new();
    let mut found = Vec::new();
    for m in rules.url.find_iter(&view.text) {
        if let Err(refusal) = policy.check_url(m.as_str(), RequestKind::Plain) {
            let reason = refusal.reason();
            if matches!(
                reason,
                "LINK_LOCAL" | "METADATA" | "UNSPECIFIED" | "RESERVED"
            ) {
                found.push(Finding::rule(
                    &format!(
                        "guard.url-{}",
                        reason.to_ascii_lowercase().replace('_', "-")
                    ),
                    FindingType::UrlPolicy,
                    Severity::Critical,
                    m.as_str(),
                    view.original_offset(m.start()),
                ));
            }
        }
    }
    found
}

/// Whether the command names URLs and every one of them is a loopback address.
fn only_loopback_urls(rules: &Rules, command: &str) -> bool {
    let policy = UrlPolicy::new();
    let mut any = false;
    for m in rules.url.find_iter(command) {
        any = true;
        match policy.check_url(m.as_str(), RequestKind::Plain) {
            Err(refusal) if refusal.reason() == "LOOPBACK" => {}
            _ => return false,
        }
    }
    any
}

struct Scan<'a> {
    rules: &'a Rules,
    patterns: &'a CompiledPatterns,
    harness: HarnessConfig,
    findings: Vec<Finding>,
    writes: bool,
}

impl Scan<'_> {
    fn command(&mut self, command: &str, depth: usize, base: Option<usize>) {
        let types = [PatternType::ShellCommand, PatternType::Exfiltration];
        for view in views(self.rules, command) {
            let mut collected = Collected::default();
            collect(self.patterns, &types, &view, &mut collected);
            let mut found = collected.findings;
            for (target, offset) in write_targets(self.rules, &view) {
                self.writes = true;
                found.extend(sensitive_path_findings(
                    self.patterns,
                    &target,
                    self.harness,
                    offset,
                ));
            }
            found.extend(internal_urls(self.rules, &view));
            if let Some(base) = base {
                for finding in &mut found {
                    finding.offset = base;
                }
            }
            self.findings.extend(found);
        }
        if depth < MAX_DECODE_DEPTH {
            for (payload, offset) in decoded_payloads(self.rules, command) {
                self.command(&payload, depth + 1, Some(base.unwrap_or(offset)));
            }
        }
    }
}

/// The shell command scanner (soft block: the refusal goes back to the model). Blocks on any
/// `SHELL_COMMAND` or `EXFILTRATION` finding of WARNING or above, on a write into a sensitive path,
/// and on a CRITICAL secret in a command that writes; warns below that; blocks when incomplete.
#[must_use]
#[tracing::instrument(level = "debug", skip_all)]
pub fn scan_shell_command(
    patterns: &CompiledPatterns,
    command: &str,
    harness: HarnessConfig,
) -> ScanResult {
    let Some(rules) = RULES.as_ref() else {
        // The scanner's own rules failed to build: nothing can clear the command.
        return ScanResult::new(
            crate::result::Verdict::Block,
            Collected::default(),
            Some(crate::compile::IncompleteReason::Partial),
        );
    };
    if command.len() > MAX_COMMAND_BYTES {
        let mut collected = Collected::default();
        collected.push(Finding::rule(
            "guard.command-too-long",
            FindingType::ShellCommand,
            Severity::Critical,
            &format!(
                "a {} byte command is longer than the {MAX_COMMAND_BYTES} bytes the scanner reads",
                command.len()
            ),
            0,
        ));
        return ScanResult::new(crate::result::Verdict::Block, collected, None);
    }
    let mut scan = Scan {
        rules,
        patterns,
        harness,
        findings: Vec::new(),
        writes: false,
    };
    scan.command(command, 0, None);
    let mut types = vec![
        PatternType::ShellCommand,
        PatternType::Exfiltration,
        PatternType::SensitiveFile,
    ];
    if scan.writes {
        let mut secrets = Collected::default();
        collect(
            patterns,
            &[PatternType::Secret],
            &View::identity(command),
            &mut secrets,
        );
        scan.findings.extend(secrets.findings);
        types.push(PatternType::Secret);
    }
    // Data sent only to this machine is not leaving it: uploads to loopback URLs warn at most.
    if only_loopback_urls(rules, command) {
        for finding in &mut scan.findings {
            if finding.finding_type == FindingType::Exfiltration
                && finding.severity == Severity::Warning
            {
                finding.severity = Severity::Info;
            }
        }
    }
    // A match seen in several views is one finding.
    let mut findings = scan.findings;
    findings.sort_by(|a, b| (&a.pattern_id, a.offset).cmp(&(&b.pattern_id, b.offset)));
    findings.dedup_by(|a, b| a.pattern_id == b.pattern_id && a.offset == b.offset);
    let mut collected = Collected::default();
    for finding in findings {
        collected.push(finding);
    }
    let incomplete = patterns.incomplete_for(&types);
    ScanResult::new(
        blocking_verdict(&collected.findings, incomplete),
        collected,
        incomplete,
    )
    .locate_in(command)
}
