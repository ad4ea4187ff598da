//! Confidence for pre-write `SECRET` matches: a regex finds the shape, this module decides how
//! much the match is worth. Placeholders (`ghp_xxxx…`, `AKIAXXXXXXXXXXXXXXXX`, `<your-key>`,
//! `${TOKEN}`), published example keys (`AKIAIOSFODNN7EXAMPLE`, the jwt.io sample, the Azure
//! storage emulator key) and low-entropy values are kept as `PASS` findings, which never warn or
//! block; a secret-named setting whose value does not look random is dropped altogether.

use crate::pattern::Severity;

/// Rules whose match is `name <op> value` and whose value is only a guess: kept only when the
/// value looks random.
const CONTEXT_RULES: [&str; 2] = ["secret.generic-assignment", "secret.authorization-header"];

/// Rules whose match ends in an assigned value (the value is the trailing run).
const ASSIGNMENT_RULES: [&str; 5] = [
    "secret.aws-secret-key",
    "secret.azure-storage-key",
    "secret.heroku-key",
    "secret.npmrc-auth",
    "secret.azure-storage-connection",
];

/// Rules whose match is a URL with `user:password@`: only the password is judged.
const URL_RULES: [&str; 2] = ["secret.database-url-password", "secret.password-in-url"];

/// Keys and tokens published in vendor documentation as examples. They never worked (or are
/// public by design, like the storage emulator's key), so they never block.
const PUBLISHED_EXAMPLES: [&str; 6] = [
    // jwt.io's sample token signature.
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    // The Azure storage emulator's well-known account key.
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
    // Stripe's documentation test keys.
    "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
    "sk_test_BQokikJOvBiI2HlWgH4olfQ2",
    "pk_test_TYooMQauvdEDq54NiTphI7jx",
    // Google's documentation sample API key.
    "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
];

/// Lower-case fragments that mark a value as a placeholder.
const PLACEHOLDER_WORDS: [&str; 21] = [
    "example",
    "xxxx",
    "your",
    "placeholder",
    "changeme",
    "change_me",
    "change-me",
    "dummy",
    "redacted",
    "replace",
    "insert",
    "sample",
    "fake",
    "testkey",
    "test-key",
    "test_key",
    "...",
    "****",
    "<",
    "${",
    "{{",
];

/// Passwords that only ever appear in documentation and local defaults.
const PLACEHOLDER_PASSWORDS: [&str; 14] = [
    "password", "passw0rd", "pass", "passwd", "secret", "changeme", "admin", "root", "test", "pwd",
    "postgres", "mysql", "guest", "user",
];

/// How much a `SECRET` match is worth: its severity (`PASS` for a placeholder or a published
/// example), or `None` when a context rule's value does not look like a secret at all.
pub(crate) fn judge(id: &str, severity: Severity, matched: &str) -> Option<Severity> {
    if PUBLISHED_EXAMPLES
        .iter()
        .any(|example| matched.contains(example))
    {
        return Some(Severity::Pass);
    }
    let value = value_of(id, matched);
    if CONTEXT_RULES.contains(&id) && !looks_random(value) {
        return None;
    }
    if is_placeholder(value) || (URL_RULES.contains(&id) && is_placeholder_password(value)) {
        return Some(Severity::Pass);
    }
    Some(severity)
}

/// The part of a match that carries the secret.
fn value_of<'a>(id: &str, matched: &'a str) -> &'a str {
    if URL_RULES.contains(&id) {
        let after_scheme = matched.split_once("://").map_or(matched, |(_, rest)| rest);
        let userinfo = after_scheme.split('@').next().unwrap_or(after_scheme);
        return userinfo.split_once(':').map_or(userinfo, |(_, pass)| pass);
    }
    if CONTEXT_RULES.contains(&id) || ASSIGNMENT_RULES.contains(&id) {
        let trimmed = matched.trim_end_matches(['\'', '"', ' ', '\t', '\r', '\n']);
        let unpadded = trimmed.trim_end_matches('=');
        let start = unpadded
            .rfind(|c: char| !is_value_char(c))
            .map_or(0, |i| i + 1);
        return &unpadded[start..];
    }
    matched
}

fn is_value_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '_' | '-' | '.' | '~')
}

/// Whether a value is a placeholder: a marker word, a long run of one character, or a value
/// whose characters barely vary.
pub(crate) fn is_placeholder(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    if PLACEHOLDER_WORDS.iter().any(|word| lower.contains(word)) {
        return true;
    }
    if longest_run(value) >= 6 {
        return true;
    }
    value.len() >= 16 && entropy(value) < 2.5
}

fn is_placeholder_password(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    PLACEHOLDER_PASSWORDS.contains(&lower.as_str())
}

/// Whether a value assigned to a secret-named setting looks like a generated secret rather than
/// code, a path, words or a public identifier.
fn looks_random(value: &str) -> bool {
    if value.len() < 12
        || value.starts_with(['/', '.', '~'])
        || value.starts_with("pk_")
        || value.starts_with("pk.")
    {
        return false;
    }
    let has_digit = value.bytes().any(|b| b.is_ascii_digit());
    let has_letter = value.bytes().any(|b| b.is_ascii_alphabetic());
    if !has_digit || !has_letter {
        return false;
    }
    // Dotted or dashed words (`settings.secret_key.clone`, `django.contrib.auth`) are code.
    let words = value
        .split(['.', '_', '-', '/'])
        .filter(|part| !part.is_empty())
        .all(|part| part.bytes().all(|b| b.is_ascii_alphabetic()) || part.len() <= 2);
    if words {
        return false;
    }
    let threshold = if value.len() < 20 { 3.0 } else { 3.3 };
    entropy(value) >= threshold
}

/// The longest run of one repeated character.
fn longest_run(value: &str) -> usize {
    let mut longest = 0;
    let mut run = 0;
    let mut previous = None;
    for c in value.chars() {
        if Some(c) == previous {
            run += 1;
        } else {
            run = 1;
            previous = Some(c);
        }
        longest = longest.max(run);
    }
    longest
}

/// Shannon entropy in bits per byte.
pub(crate) fn entropy(value: &str) -> f64 {
    let mut counts = [0usize; 256];
    for byte in value.bytes() {
        counts[usize::from(byte)] += 1;
    }
    #[expect(
        clippy::cast_precision_loss,
        reason = "lengths of scanned values are far below 2^52"
    )]
    let length = value.len() as f64;
    counts
        .iter()
        .filter(|&&count| count > 0)
        .map(|&count| {
            #[expect(clippy::cast_precision_loss, reason = "as above")]
            let p = count as f64 / length;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_recognised() {
        for value in [
            "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            "AKIAXXXXXXXXXXXXXXXX",
            "AKIA0000000000000000",
            "<your-key>",
            "sk-...your-key-here...",
            "abababababababababab",
        ] {
            assert!(is_placeholder(value), "{value}");
        }
        for value in [
            "ghp_R8fK2mQ9xLp4TzW7vN3bY6cJ1hS5dG0aE2uV",
            "9f8e7d6c5b4a3f2e",
        ] {
            assert!(!is_placeholder(value), "{value}");
        }
    }

    #[test]
    fn context_values_must_look_random() {
        assert!(looks_random("R8fK2mQ9xLp4TzW7vN3bY6cJ"));
        assert!(looks_random("django-insecure-k2m9x4t7v3b6c1h5d0a2u8w"));
        for value in [
            "settings.secret_key.clone",
            "tokenizer.encode",
            "your_password_here",
            "/home/dev/projects/app1",
            "pk.eyJ1IjoiZXhhbXBsZSJ9abc",
            "aaaaaaaaaaaa1",
        ] {
            assert!(!looks_random(value), "{value}");
        }
    }

    #[test]
    fn the_judge_keeps_drops_and_downgrades() {
        let critical = Severity::Critical;
        assert_eq!(
            judge("secret.aws-access-key-id", critical, "AKIAIOSFODNN7EXAMPLE"),
            Some(Severity::Pass)
        );
        assert_eq!(
            judge(
                "secret.database-url-password",
                critical,
                "postgres://user:password@"
            ),
            Some(Severity::Pass)
        );
        assert_eq!(
            judge(
                "secret.database-url-password",
                critical,
                "postgres://app:Zq8vK2pL9mT4@"
            ),
            Some(critical)
        );
        assert_eq!(
            judge(
                "secret.generic-assignment",
                Severity::Warning,
                "password = get_password_from_vault"
            ),
            None
        );
        assert_eq!(
            judge(
                "secret.generic-assignment",
                Severity::Warning,
                "api_key = \"R8fK2mQ9xLp4TzW7vN3bY6cJ\""
            ),
            Some(Severity::Warning)
        );
        assert!((entropy("aaaa") - 0.0).abs() < f64::EPSILON);
        assert!((entropy("abcd") - 2.0).abs() < 1e-9);
    }
}
