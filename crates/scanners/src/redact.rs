//! Redaction: known secret values removed exactly, then anything shaped like a credential masked.
//! Used on every sink text leaves through (lessons, commit messages, traces, excerpts).

use std::borrow::Cow;
use std::fmt;
use std::sync::LazyLock;

use regex::{Captures, Regex};

/// What replaces a secret.
pub const REDACTED: &str = "[REDACTED]";
/// What replaces the value part of a credential shape.
const MASK: &str = "***";

/// One masking rule: a regex and how to rewrite a match.
struct Shape {
    regex: Option<Regex>,
    rewrite: fn(&Captures<'_>) -> String,
}

fn shape(pattern: &str, rewrite: fn(&Captures<'_>) -> String) -> Shape {
    Shape {
        regex: Regex::new(pattern).ok(),
        rewrite,
    }
}

fn group<'c>(caps: &'c Captures<'_>, index: usize) -> &'c str {
    caps.get(index).map_or("", |m| m.as_str())
}

static SHAPES: LazyLock<Vec<Shape>> = LazyLock::new(|| {
    vec![
        // PEM private key blocks, whole.
        shape(
            r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY)-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
            |c| format!("-----BEGIN {}-----{MASK}", group(c, 1)),
        ),
        // URL userinfo: scheme://user:pass@host or scheme://token@host.
        shape(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@'\x22<>]+@", |c| {
            format!("{}{MASK}@", group(c, 1))
        }),
        // Authorization-style headers, keeping the header name and the scheme word.
        shape(
            r"(?i)\b((?:proxy-)?authorization|x-api-key|api-key|x-auth-token|private-token|x-goog-api-key|cookie|set-cookie)(\s*[:=]\s*)((?:bearer|basic|token|digest|bot)\s+)?[^\s'\x22,;]+",
            |c| format!("{}{}{}{MASK}", group(c, 1), group(c, 2), group(c, 3)),
        ),
        // --password style flags, with = or a space before the value.
        shape(
            r"(?i)(--?(?:password|passwd|pass|token|secret|api[-_]?key|access[-_]token|auth[-_]token|client[-_]secret|private[-_]key|key[-_]password)(?:=|\s+))(\x22[^\x22]*\x22|'[^']*'|[^\s'\x22]+)",
            |c| format!("{}{MASK}", group(c, 1)),
        ),
        // NAME_TOKEN=value style assignments (env files, shell exports, YAML, JSON keys).
        shape(
            r#"(?i)\b([A-Z0-9_.\-]*(?:TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIALS?|AUTH_KEY)["']?\s*[=:]\s*)("[^"\n]*"|'[^'\n]*'|[^\s'",;]+)"#,
            |c| format!("{}{MASK}", group(c, 1)),
        ),
        // Well-known token prefixes.
        shape(
            r"\b(ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|glrt-|gldt-|sk-ant-|sk-proj-|sk-|sk_live_|sk_test_|rk_live_|xox[abprse]-|xapp-|npm_|pypi-|hf_|dop_v1_|shpat_|shpss_|AKIA|ASIA|AIza|ya29\.|SG\.|EAAC|sq0csp-|atlasv1\.|doo_v1_)[A-Za-z0-9_\-./+=]{8,}",
            |c| format!("{}{MASK}", group(c, 1)),
        ),
        // JSON Web Tokens.
        shape(
            r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
            |_| format!("eyJ{MASK}"),
        ),
    ]
});

/// Masks anything shaped like a credential: URL userinfo, authorization headers, `*_TOKEN=` style
/// assignments, `--password` style flags, well-known token prefixes, JWTs and PEM private keys.
/// The name or prefix stays so a reader can tell what was there.
#[must_use]
pub fn mask_credential_shapes(text: &str) -> String {
    let mut current: Cow<'_, str> = Cow::Borrowed(text);
    for shape in SHAPES.iter() {
        let Some(regex) = &shape.regex else {
            // A rule that did not compile cannot vouch for the text: fail closed.
            return REDACTED.to_owned();
        };
        if regex.is_match(&current) {
            current = Cow::Owned(regex.replace_all(&current, shape.rewrite).into_owned());
        }
    }
    current.into_owned()
}

/// Removes known secret values exactly, then masks credential shapes. Its `Debug` output never
/// shows the values.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// A redactor that knows no values yet (it still masks shapes).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a value to remove wherever it appears. Empty values are ignored.
    pub fn add_secret(&mut self, value: &str) {
        if !value.is_empty() && !self.secrets.iter().any(|known| known == value) {
            self.secrets.push(value.to_owned());
            // Longest first, so a secret that contains another is removed whole.
            self.secrets
                .sort_by_key(|known| std::cmp::Reverse(known.len()));
        }
    }

    /// Exact-value redaction only: each known value becomes `[REDACTED]`.
    #[must_use]
    pub fn redact_values(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), REDACTED);
            }
        }
        out
    }

    /// Values first, then shapes — the order every sink uses.
    #[must_use]
    pub fn redact(&self, text: &str) -> String {
        mask_credential_shapes(&self.redact_values(text))
    }
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets.len())
            .finish()
    }
}
