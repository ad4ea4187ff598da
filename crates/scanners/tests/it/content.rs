//! Pre-write content scanning and redaction: secrets in many token formats.

use auto_swe_scanners::{
    FindingType, Redactor, Severity, Verdict, builtin_table, mask_credential_shapes, scan_content,
};

use crate::builtin;

#[test]
fn every_secret_example_blocks_or_warns_by_severity_and_is_never_echoed() {
    for row in builtin_table()
        .iter()
        .filter(|row| row.pattern_type == auto_swe_scanners::PatternType::Secret)
    {
        let content = format!("# config\nvalue: {}\n", row.example_match);
        let result = scan_content(builtin(), &content);
        let finding = result
            .findings
            .iter()
            .find(|f| f.pattern_id == row.id)
            .unwrap_or_else(|| panic!("{} not found in {result:?}", row.id));
        assert_eq!(finding.finding_type, FindingType::Secret);
        let expected = if row.severity == Severity::Critical {
            Verdict::Block
        } else {
            assert!(result.verdict >= Verdict::Warn, "{}", row.id);
            result.verdict
        };
        assert_eq!(result.verdict, expected, "{}", row.id);
        assert!(
            finding.excerpt.ends_with("[REDACTED]"),
            "{}",
            finding.excerpt
        );
        assert!(finding.excerpt.chars().count() <= 200);
        let json = serde_json::to_string(&result).unwrap();
        assert!(
            !json.contains(row.example_match),
            "{} leaked: {json}",
            row.id
        );
    }
}

#[test]
fn placeholders_and_ordinary_config_pass() {
    for content in [
        "API_KEY=${API_KEY}\nDATABASE_URL=postgres://localhost:5432/app\n",
        "password = os.environ[\"DB_PASSWORD\"]\n",
        "token: {{ secrets.GITHUB_TOKEN }}\n",
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        "See https://docs.example.com/keys for how to create a key.\n",
        "AKIA is the prefix of AWS access keys.\n",
    ] {
        let result = scan_content(builtin(), content);
        assert_eq!(result.verdict, Verdict::Allow, "{content:?}: {result:?}");
    }
}

#[test]
fn credential_shapes_are_masked() {
    let cases = [
        (
            "git clone https://x-access-token:ghs_abcdefghij0123456789@github.com/o/r.git",
            "git clone https://***@github.com/o/r.git",
        ),
        (
            "curl -H 'Authorization: Bearer abc.def.ghi' https://api.example.com",
            "curl -H 'Authorization: Bearer ***' https://api.example.com",
        ),
        (
            "curl -H \"X-Api-Key: 12345678\" x",
            "curl -H \"X-Api-Key: ***\" x",
        ),
        (
            "GITHUB_TOKEN=ghp_abc123 make release",
            "GITHUB_TOKEN=*** make release",
        ),
        (
            "export OPENAI_API_KEY='sk-abc'",
            "export OPENAI_API_KEY=***",
        ),
        (
            "mysql --password=hunter2 -u root",
            "mysql --password=*** -u root",
        ),
        (
            "tool --token s3cr3t --verbose",
            "tool --token *** --verbose",
        ),
        (
            "use ghp_0123456789abcdefghij0123456789abcdef now",
            "use ghp_*** now",
        ),
        ("key xoxb-1234567890-abcdefghij here", "key xoxb-*** here"),
        ("AKIAIOSFODNN7EXAMPLE in logs", "AKIA*** in logs"),
        (
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmnop end",
            "jwt eyJ*** end",
        ),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
            "-----BEGIN RSA PRIVATE KEY-----***",
        ),
        ("nothing to see here", "nothing to see here"),
    ];
    for (input, expected) in cases {
        assert_eq!(mask_credential_shapes(input), expected, "{input:?}");
    }
}

#[test]
fn exact_values_are_redacted_first_and_debug_hides_them() {
    let mut redactor = Redactor::new();
    redactor.add_secret("tok-123-secret");
    redactor.add_secret("tok-123");
    redactor.add_secret("");
    let text = "push with tok-123-secret and tok-123; base64 stays: dG9rLTEyMw==";
    assert_eq!(
        redactor.redact(text),
        "push with [REDACTED] and [REDACTED]; base64 stays: dG9rLTEyMw=="
    );
    assert_eq!(
        redactor.redact_values("PASSWORD=tok-123"),
        "PASSWORD=[REDACTED]"
    );
    let debug = format!("{redactor:?}");
    assert!(!debug.contains("tok-123"), "{debug}");
}
