//! `auto-swe agents` and `auto-swe skills` through the real binary.

use std::process::{Command, Output, Stdio};

fn auto_swe(args: &[&str]) -> Output {
    #[expect(clippy::disallowed_methods, reason = "the test runs the real binary")]
    let mut command = Command::new(env!("CARGO_BIN_EXE_auto-swe"));
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command.output().unwrap()
}

fn json(args: &[&str]) -> serde_json::Value {
    let output = auto_swe(args);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn text(args: &[&str]) -> String {
    let output = auto_swe(args);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn agents_list_names_all_thirty_three() {
    let value = json(&["agents", "list", "--format", "json"]);
    let agents = value["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 33);
    let personas = agents.iter().filter(|a| a["kind"] == "persona").count();
    assert_eq!(personas, 14);
    insta::assert_json_snapshot!(agents[0], @r#"
    {
      "key": "implementer",
      "kind": "model-backed",
      "model": "anthropic/claude-opus-5-5",
      "usedBy": "implementation sessions",
      "origin": "swe-starter",
      "skills": [
        "scope-conservatism",
        "follow-existing-patterns",
        "test-first",
        "incremental-commits",
        "no-new-dependencies",
        "shell-command-safety",
        "security-aware-implementation",
        "error-path-coverage",
        "acceptance-criteria-first",
        "idempotency",
        "graceful-degradation",
        "async-safety",
        "observability-first",
        "minimal-surface-area",
        "configuration-over-hardcoding",
        "rollback-first-planning",
        "design-fidelity"
      ],
      "toolKeys": null
    }
    "#);
    let listing = text(&["agents", "list"]);
    assert_eq!(listing.lines().count(), 33);
    assert!(
        listing.contains(
            "ciFixer                  persona       anthropic/claude-opus-5-5 (via implementer)"
        ),
        "{listing}"
    );
}

#[test]
fn agents_show_a_persona_with_its_parents_model_and_prompt() {
    let value = json(&["agents", "show", "securityReviewer", "--format", "json"]);
    assert_eq!(value["model"], "anthropic/claude-opus-5-5");
    assert_eq!(value["inheritsModelFrom"], "reviewer");
    assert_eq!(
        value["skills"],
        serde_json::json!(["security-review-depth"])
    );
    assert!(
        value["systemPrompt"]
            .as_str()
            .unwrap()
            .starts_with("You review a code change for security.")
    );
    let shown = text(&["agents", "show", "assistantTitler"]);
    insta::assert_snapshot!(shown, @r"
    key:       assistantTitler
    kind:      model-backed
    model:     anthropic/claude-haiku-4-5-20251001
    used by:   naming assistant conversations
    origin:    swe-starter
    skills:    
    tool keys: []

    Name a conversation from its first messages. Reply with a title of at most six words that says what the user is trying to do, in plain words, with no quotes and no trailing punctuation.
    ");
}

#[test]
fn unknown_names_exit_two() {
    for args in [["agents", "show", "nobody"], ["skills", "show", "nothing"]] {
        let output = auto_swe(&args);
        assert_eq!(output.status.code(), Some(2));
        assert!(output.stdout.is_empty());
        assert!(String::from_utf8_lossy(&output.stderr).contains("no "));
    }
}

#[test]
fn skills_list_and_show() {
    let value = json(&["skills", "list", "--format", "json"]);
    let skills = value["skills"].as_array().unwrap();
    assert_eq!(skills.len(), 36);
    let qodo = skills.iter().find(|s| s["name"] == "qodo-context").unwrap();
    assert_eq!(qodo["usedBy"], serde_json::json!([]));
    let value = json(&["skills", "show", "test-first", "--format", "json"]);
    insta::assert_json_snapshot!(value, {".promptText" => "[text]"}, @r#"
    {
      "name": "test-first",
      "category": "implementer",
      "description": "Write or extend a failing test before changing behaviour.",
      "builtIn": true,
      "verified": true,
      "revision": 1,
      "usedBy": [
        "implementer"
      ],
      "promptText": "[text]"
    }
    "#);
    let shown = text(&["skills", "show", "support-kb-retrieval"]);
    assert!(
        shown.starts_with("name:        support-kb-retrieval\n"),
        "{shown}"
    );
    assert!(shown.contains("used by:     supportResponder\n"));
    assert_eq!(text(&["skills", "list"]).lines().count(), 36);
}
