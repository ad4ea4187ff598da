//! The built-in templates validate against the built-in step catalog and behave as the seeds'
//! run lifecycle says, each checked by simulation.

use auto_swe_interpreter::{RunOptions, Script, TerminalStatus, simulate};
use auto_swe_spec::{ValidateOptions, WorkflowSpec, validate_value};
use auto_swe_worker::StepRegistry;
use auto_swe_worker::templates::{TEMPLATES, template};
use serde_json::{Value, json};

fn input() -> Value {
    json!({ "ticket": { "title": "Fix the slug", "body": "Slugs keep trailing dashes." }, "repository": "conn-1" })
}

/// Runs a template against a script; returns the status and the spec node ids dispatched, in
/// order.
fn run(name: &str, script: Value) -> (TerminalStatus, Vec<String>, Value) {
    let spec = WorkflowSpec::from_value_tolerant(template(name).unwrap().spec()).unwrap();
    let script = Script::from_value(script).unwrap();
    let simulation = simulate(&spec, input(), script, RunOptions::default());
    let dispatched = simulation
        .calls
        .iter()
        .filter_map(|call| match serde_json::to_value(call).unwrap() {
            Value::Object(map) if map["call"] == "step" => {
                Some(map["specNodeId"].as_str().unwrap().to_owned())
            }
            _ => None,
        })
        .collect();
    (
        simulation.outcome.status,
        dispatched,
        (*simulation.outcome.result).clone(),
    )
}

fn count(steps: &[String], id: &str) -> usize {
    steps.iter().filter(|s| *s == id).count()
}

fn happy_steps() -> Value {
    json!({
        "gather": [{"output": {"text": "Fix the slug", "unavailableReason": ""}}],
        "validate": [{"output": {"actionable": true, "successCriteria": ["slugs have no trailing dash"], "ambiguities": []}}],
        "gates": [{"output": {"passed": true, "results": []}}],
        "openPr": [{"output": {"number": 1, "headSha": "aaa1111"}}, {"output": {"number": 1, "headSha": "bbb2222"}}],
        "ciLogs": [{"output": {"logs": "test failed"}}],
    })
}

#[test]
fn every_template_validates_clean_against_the_built_in_steps() {
    let catalog = StepRegistry::builtin().catalog();
    for t in TEMPLATES {
        let report = validate_value(&t.spec(), &ValidateOptions::with_step_catalog(&catalog));
        assert!(report.is_valid(), "{}: {:?}", t.name, report.errors);
        assert!(
            report.warnings.is_empty(),
            "{}: {:?}",
            t.name,
            report.warnings
        );
    }
}

#[test]
fn ticket_to_merge_reviews_again_after_a_rejection_and_after_a_ci_fix_then_waits_for_the_merge() {
    let mut steps = happy_steps();
    steps["review"] = json!([
        {"output": {"approved": false, "rejectionSummary": "[DOMAIN_LOGIC] CRITICAL"}},
        {"output": {"approved": true}},
    ]);
    let script = json!({
        "steps": steps,
        "default": {"output": {}},
        "signals": {
            "ciPipelineSignal": [
                {"payload": {"status": "FAILURE", "headSha": "aaa1111"}},
                {"payload": {"status": "SUCCESS", "headSha": "bbb2222"}}
            ],
            "humanMergeSignal": [{"payload": {"merged": true}}]
        }
    });
    let (status, dispatched, result) = run("ticket-to-merge", script);
    assert_eq!(status, TerminalStatus::Success, "{dispatched:?}");
    assert_eq!(count(&dispatched, "implement"), 1);
    assert_eq!(count(&dispatched, "reviewFix"), 1);
    // Twice for the first change, once more for the CI fix.
    assert_eq!(count(&dispatched, "review"), 3);
    assert_eq!(count(&dispatched, "ciFix"), 1);
    assert_eq!(count(&dispatched, "openPr"), 2);
    assert_eq!(count(&dispatched, "lesson"), 1);
    assert_eq!(result["merge"], json!({"merged": true}));
}

#[test]
fn ticket_to_merge_fails_after_two_ci_fix_attempts() {
    let mut steps = happy_steps();
    steps["review"] = json!([{"output": {"approved": true}}]);
    steps["openPr"] = json!([{"output": {"number": 1, "headSha": "aaa1111"}}]);
    let script = json!({
        "steps": steps,
        "default": {"output": {}},
        "signals": { "ciPipelineSignal": [{"payload": {"status": "FAILURE", "headSha": "aaa1111"}}] }
    });
    let (status, dispatched, _) = run("ticket-to-merge", script);
    assert_eq!(status, TerminalStatus::Failed);
    assert_eq!(count(&dispatched, "ciFix"), 2);
    assert_eq!(count(&dispatched, "ciLesson"), 1);
    assert_eq!(count(&dispatched, "lesson"), 0);
}

#[test]
fn ticket_to_merge_stops_after_a_review_budget_of_three() {
    let mut steps = happy_steps();
    steps["review"] = json!([{"output": {"approved": false, "rejectionSummary": "no"}}]);
    let script = json!({ "steps": steps, "default": {"output": {}} });
    let (status, dispatched, result) = run("ticket-to-merge", script);
    assert_eq!(status, TerminalStatus::Failed);
    assert_eq!(count(&dispatched, "review"), 3);
    assert_eq!(count(&dispatched, "reviewFix"), 2);
    assert_eq!(count(&dispatched, "openPr"), 0);
    assert!(
        result["message"]
            .as_str()
            .unwrap()
            .contains("three reviews")
    );
}

#[test]
fn ticket_to_merge_stops_a_request_that_is_not_actionable_before_implementing() {
    let script = json!({
        "steps": {
            "gather": [{"output": {"text": "do the thing", "unavailableReason": ""}}],
            "validate": [{"output": {"actionable": false, "successCriteria": ["AMBIGUOUS: which thing"], "ambiguities": ["which thing"]}}]
        },
        "default": {"output": {}}
    });
    let (status, dispatched, result) = run("ticket-to-merge", script);
    assert_eq!(status, TerminalStatus::Failed);
    assert_eq!(count(&dispatched, "implement"), 0);
    assert_eq!(result["ambiguities"], json!(["which thing"]));
}

#[test]
fn a_ci_verdict_about_an_older_head_is_ignored() {
    let mut steps = happy_steps();
    steps["review"] = json!([{"output": {"approved": true}}]);
    steps["openPr"] = json!([{"output": {"number": 1, "headSha": "bbb2222"}}]);
    let script = json!({
        "steps": steps,
        "default": {"output": {}},
        "signals": {
            "ciPipelineSignal": [
                {"payload": {"status": "FAILURE", "headSha": "aaa1111"}},
                {"payload": {"status": "SUCCESS", "headSha": "bbb2222"}}
            ],
            "humanMergeSignal": [{"payload": {"merged": true}}]
        }
    });
    let (status, dispatched, _) = run("ticket-to-merge", script);
    assert_eq!(status, TerminalStatus::Success);
    assert_eq!(count(&dispatched, "ciFix"), 0);
}

#[test]
fn gate_failures_get_two_fixes_then_fail_the_run() {
    let mut steps = happy_steps();
    steps["review"] = json!([{"output": {"approved": true}}]);
    steps["gates"] = json!([{"output": {"passed": false, "results": [{"gate": "lint"}]}}]);
    let script = json!({ "steps": steps, "default": {"output": {}} });
    let (status, dispatched, _) = run("ticket-to-merge", script);
    assert_eq!(status, TerminalStatus::Failed);
    assert_eq!(count(&dispatched, "gateFix"), 2);
    assert_eq!(count(&dispatched, "gates"), 3);
}

#[test]
fn the_other_templates_run_to_their_ends() {
    let mut steps = happy_steps();
    steps["review"] = json!([{"output": {"approved": true}}]);
    let signals =
        json!({ "ciPipelineSignal": [{"payload": {"status": "SUCCESS", "headSha": "aaa1111"}}] });
    for name in ["code-and-ci", "agent-reviewed-pr"] {
        let script = json!({ "steps": steps, "default": {"output": {}}, "signals": signals });
        let (status, dispatched, _) = run(name, script);
        assert_eq!(status, TerminalStatus::Success, "{name}: {dispatched:?}");
        assert_eq!(count(&dispatched, "openPr"), 1, "{name}");
    }
    let script = json!({
        "steps": steps, "default": {"output": {}}, "signals": signals,
        "human": { "approve": [{"decision": "approve"}] }
    });
    let (status, dispatched, _) = run("approve-before-pr", script);
    assert_eq!(status, TerminalStatus::Success, "{dispatched:?}");
    let script = json!({
        "steps": steps, "default": {"output": {}},
        "human": { "approve": [{"decision": "reject"}] }
    });
    let (status, dispatched, _) = run("approve-before-pr", script);
    assert_eq!(status, TerminalStatus::Cancelled);
    assert_eq!(count(&dispatched, "openPr"), 0);
}
