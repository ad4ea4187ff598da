//! `four-eyes` and `consensus-review` by simulation: CI ahead of the judgement, two different
//! people (or two reviewers) required, a change back through CI with a fresh fix budget, a
//! fix that changed nothing guarded, and every budget ending the run.

use auto_swe_interpreter::{RunOptions, Script, TerminalStatus, simulate};
use auto_swe_worker::templates::template;
use serde_json::{Value, json};

fn input() -> Value {
    json!({ "ticket": { "title": "Fix the slug", "body": "Slugs keep trailing dashes." }, "repository": "conn-1" })
}

/// What a simulated run did.
struct Ran {
    status: TerminalStatus,
    /// Spec node ids dispatched, in order.
    steps: Vec<String>,
    /// Human steps opened: (node id, the context shown).
    asked: Vec<(String, Value)>,
    /// Step dispatches: (node id, config).
    configs: Vec<(String, Value)>,
    result: Value,
}

impl Ran {
    fn count(&self, id: &str) -> usize {
        self.steps.iter().filter(|s| *s == id).count()
    }

    fn asked(&self, id: &str) -> Vec<&Value> {
        self.asked
            .iter()
            .filter(|(node, _)| node == id)
            .map(|(_, context)| context)
            .collect()
    }
}

fn run(name: &str, script: Value) -> Ran {
    let spec =
        auto_swe_spec::WorkflowSpec::from_value_tolerant(template(name).unwrap().spec()).unwrap();
    let script = Script::from_value(script).unwrap();
    let simulation = simulate(&spec, input(), script, RunOptions::default());
    let mut ran = Ran {
        status: simulation.outcome.status,
        steps: Vec::new(),
        asked: Vec::new(),
        configs: Vec::new(),
        result: (*simulation.outcome.result).clone(),
    };
    for call in &simulation.calls {
        let call = serde_json::to_value(call).unwrap();
        let node = call["specNodeId"].as_str().unwrap_or_default().to_owned();
        match call["call"].as_str() {
            Some("step") => {
                ran.steps.push(node.clone());
                ran.configs.push((node, call["config"].clone()));
            }
            Some("notifyHuman") => ran.asked.push((node, call["context"].clone())),
            _ => {}
        }
    }
    ran
}

fn green_ci() -> Value {
    json!([{"payload": {"status": "SUCCESS", "headSha": "aaa1111"}}])
}

fn approve(by: &str) -> Value {
    json!({"decision": "approve", "answeredBy": by})
}

fn base_steps() -> Value {
    json!({
        "gather": [{"output": {"text": "Fix the slug", "unavailableReason": ""}}],
        "validate": [{"output": {"actionable": true, "successCriteria": ["no trailing dash"], "ambiguities": []}}],
        "review": [{"output": {"approved": true}}],
        "openPr": [{"output": {"number": 1, "headSha": "aaa1111", "url": "local://pulls/1"}}],
        "ciLogs": [{"output": {"logs": "test failed"}}],
        "ciFix": [{"output": {"changed": true}}],
        "signoffFix": [{"output": {"changed": true}}],
        "consensusFix": [{"output": {"changed": true}}],
    })
}

#[test]
fn four_eyes_needs_two_different_people_after_green_ci() {
    let script = json!({
        "steps": base_steps(), "default": {"output": {}},
        "signals": { "ciPipelineSignal": green_ci() },
        "human": { "signoffFirst": [approve("alice")], "signoffSecond": [approve("bob")] }
    });
    let ran = run("four-eyes", script);
    assert_eq!(ran.status, TerminalStatus::Success, "{:?}", ran.steps);
    assert_eq!(ran.result["approvedBy"], json!(["alice", "bob"]));
    // CI came first: the pull request was open and judged before anyone was asked.
    assert_eq!(ran.count("openPr"), 1);
    let first = ran.asked("signoffFirst");
    assert_eq!(first.len(), 1);
    // head, url, earlier change requests, changed since the last sign-off, no-op fix.
    assert_eq!(
        first[0],
        &json!(["aaa1111", "local://pulls/1", 0, false, false])
    );
}

#[test]
fn four_eyes_does_not_count_the_same_person_twice() {
    // Alice approves the first sign-off, then tries the second one too: it is asked again
    // (a new human step), and only Carol's answer completes it.
    let script = json!({
        "steps": base_steps(), "default": {"output": {}},
        "signals": { "ciPipelineSignal": green_ci() },
        "human": {
            "signoffFirst": [approve("alice")],
            "signoffSecond": [approve("alice"), approve("carol")]
        }
    });
    let ran = run("four-eyes", script);
    assert_eq!(ran.status, TerminalStatus::Success);
    assert_eq!(ran.asked("signoffSecond").len(), 2);
    assert_eq!(ran.result["approvedBy"], json!(["alice", "carol"]));

    // The same person forever: three tries, then the run fails.
    let script = json!({
        "steps": base_steps(), "default": {"output": {}},
        "signals": { "ciPipelineSignal": green_ci() },
        "human": { "signoffFirst": [approve("alice")], "signoffSecond": [approve("alice")] }
    });
    let ran = run("four-eyes", script);
    assert_eq!(ran.status, TerminalStatus::Failed);
    assert_eq!(ran.asked("signoffSecond").len(), 3);
    assert!(
        ran.result["message"]
            .as_str()
            .unwrap()
            .contains("two people")
    );

    // An answer with no stored answerer (a bare signal) never counts as a second person.
    let script = json!({
        "steps": base_steps(), "default": {"output": {}},
        "signals": { "ciPipelineSignal": green_ci() },
        "human": {
            "signoffFirst": [{"decision": "approve"}],
            "signoffSecond": [{"decision": "approve"}]
        }
    });
    assert_eq!(run("four-eyes", script).status, TerminalStatus::Failed);
}

#[test]
fn a_change_request_goes_back_through_ci_with_a_fresh_budget_and_both_sign_offs() {
    let mut steps = base_steps();
    steps["openPr"] = json!([
        {"output": {"number": 1, "headSha": "aaa1111"}},
        {"output": {"number": 1, "headSha": "aaa1111"}},
        {"output": {"number": 1, "headSha": "aaa1111"}},
        {"output": {"number": 1, "headSha": "bbb2222"}},
        {"output": {"number": 1, "headSha": "bbb2222"}},
    ]);
    // Round one: red, red, green (both CI fixes spent). After the change request: red
    // again, which a fresh budget may still fix, then green.
    let script = json!({
        "steps": steps, "default": {"output": {}},
        "signals": { "ciPipelineSignal": [
            {"payload": {"status": "FAILURE", "headSha": "aaa1111"}},
            {"payload": {"status": "FAILURE", "headSha": "aaa1111"}},
            {"payload": {"status": "SUCCESS", "headSha": "aaa1111"}},
            {"payload": {"status": "FAILURE", "headSha": "bbb2222"}},
            {"payload": {"status": "SUCCESS", "headSha": "bbb2222"}},
        ] },
        "human": {
            "signoffFirst": [approve("alice")],
            "signoffSecond": [
                {"decision": "request_changes", "note": "name the constant", "answeredBy": "bob"},
                approve("bob")
            ]
        }
    });
    let ran = run("four-eyes", script);
    assert_eq!(ran.status, TerminalStatus::Success, "{:?}", ran.steps);
    assert_eq!(ran.count("ciFix"), 3);
    assert_eq!(ran.count("signoffFix"), 1);
    assert_eq!(ran.asked("signoffFirst").len(), 2);
    assert_eq!(ran.asked("signoffSecond").len(), 2);
    // The second round shows one earlier change request and a changed head.
    assert_eq!(ran.asked("signoffFirst")[1][2], json!(1));
    assert_eq!(ran.asked("signoffFirst")[1][3], json!(true));
}

#[test]
fn four_eyes_stops_on_a_rejection_and_fails_on_the_third_change_request() {
    let script = json!({
        "steps": base_steps(), "default": {"output": {}},
        "signals": { "ciPipelineSignal": green_ci() },
        "human": { "signoffFirst": [{"decision": "reject", "answeredBy": "alice"}] }
    });
    let ran = run("four-eyes", script);
    assert_eq!(ran.status, TerminalStatus::Cancelled);
    assert!(ran.asked("signoffSecond").is_empty());

    let mut steps = base_steps();
    steps["signoffFix"] = json!([{"output": {"changed": false}}]);
    let script = json!({
        "steps": steps, "default": {"output": {}},
        "signals": { "ciPipelineSignal": green_ci() },
        "human": { "signoffFirst": [{"decision": "request_changes", "note": "no", "answeredBy": "alice"}] }
    });
    let ran = run("four-eyes", script);
    assert_eq!(ran.status, TerminalStatus::Failed);
    assert_eq!(ran.asked("signoffFirst").len(), 3);
    assert_eq!(ran.count("signoffFix"), 2);
    // A fix that changed nothing goes straight back to the people: no new pull request head,
    // no CI, and they are told so.
    assert_eq!(ran.count("openPr"), 1);
    let second = ran.asked("signoffFirst")[1];
    assert_eq!(second[3], json!(false), "changedSinceLastSignoff");
    assert_eq!(second[4], json!(true), "noChangeMade");
    assert!(ran.result["message"].as_str().unwrap().contains("third"));
}

#[test]
fn a_ci_fix_that_changed_nothing_is_a_spent_attempt() {
    let mut steps = base_steps();
    steps["ciFix"] = json!([{"output": {"changed": false}}]);
    for name in ["four-eyes", "consensus-review"] {
        let script = json!({
            "steps": steps, "default": {"output": {}},
            "signals": { "ciPipelineSignal": [{"payload": {"status": "FAILURE", "headSha": "aaa1111"}}] }
        });
        let ran = run(name, script);
        assert_eq!(ran.status, TerminalStatus::Failed, "{name}");
        assert_eq!(ran.count("ciFix"), 2, "{name}");
        assert_eq!(ran.count("ciLogs"), 2, "{name}");
        assert_eq!(
            ran.count("openPr"),
            1,
            "{name}: no re-arm for an unchanged head"
        );
        assert_eq!(ran.count("ciLesson"), 1, "{name}");
    }
}

#[test]
fn consensus_review_needs_both_reviewers_after_green_ci() {
    let mut steps = base_steps();
    steps["reviewFirst"] = json!([{"output": {"approved": true}}]);
    steps["reviewSecond"] = json!([{"output": {"approved": true}}]);
    let script = json!({
        "steps": steps, "default": {"output": {}},
        "signals": { "ciPipelineSignal": green_ci() }
    });
    let ran = run("consensus-review", script);
    assert_eq!(ran.status, TerminalStatus::Success, "{:?}", ran.steps);
    let order: Vec<&str> = ran
        .steps
        .iter()
        .map(String::as_str)
        .filter(|s| ["openPr", "reviewFirst", "reviewSecond"].contains(s))
        .collect();
    assert_eq!(order, vec!["openPr", "reviewFirst", "reviewSecond"]);
    let reviewers: Vec<&Value> = ran
        .configs
        .iter()
        .filter(|(n, _)| n.starts_with("review"))
        .map(|(_, c)| &c["reviewers"])
        .collect();
    assert_eq!(
        reviewers,
        vec![
            &json!(["domainLogicReviewer"]),
            &json!(["securityReviewer"])
        ]
    );
    assert_eq!(ran.result["reviewRounds"], json!(1));
}

#[test]
fn one_rejecting_reviewer_sends_the_change_through_a_fix_and_ci_again() {
    let mut steps = base_steps();
    steps["openPr"] = json!([
        {"output": {"number": 1, "headSha": "aaa1111"}},
        {"output": {"number": 1, "headSha": "bbb2222"}},
    ]);
    steps["reviewFirst"] = json!([{"output": {"approved": true}}]);
    steps["reviewSecond"] = json!([
        {"output": {"approved": false, "rejectionSummary": "[SECURITY] injection"}},
        {"output": {"approved": true}},
    ]);
    let script = json!({
        "steps": steps, "default": {"output": {}},
        "signals": { "ciPipelineSignal": [
            {"payload": {"status": "SUCCESS", "headSha": "aaa1111"}},
            {"payload": {"status": "SUCCESS", "headSha": "bbb2222"}},
        ] }
    });
    let ran = run("consensus-review", script);
    assert_eq!(ran.status, TerminalStatus::Success, "{:?}", ran.steps);
    assert_eq!(ran.count("consensusFix"), 1);
    assert_eq!(ran.count("openPr"), 2);
    assert_eq!(
        ran.count("reviewFirst"),
        2,
        "both reviewers judge the new code"
    );
    assert_eq!(ran.count("reviewSecond"), 2);
}

#[test]
fn consensus_review_fails_after_three_rounds_and_a_no_op_fix_goes_straight_back() {
    let mut steps = base_steps();
    steps["reviewFirst"] = json!([{"output": {"approved": false, "rejectionSummary": "no"}}]);
    steps["reviewSecond"] = json!([{"output": {"approved": true}}]);
    steps["consensusFix"] = json!([{"output": {"changed": true}}, {"output": {"changed": false}}]);
    steps["openPr"] = json!([
        {"output": {"number": 1, "headSha": "aaa1111"}},
        {"output": {"number": 1, "headSha": "bbb2222"}},
    ]);
    let script = json!({
        "steps": steps, "default": {"output": {}},
        "signals": { "ciPipelineSignal": [
            {"payload": {"status": "SUCCESS", "headSha": "aaa1111"}},
            {"payload": {"status": "SUCCESS", "headSha": "bbb2222"}},
        ] }
    });
    let ran = run("consensus-review", script);
    assert_eq!(ran.status, TerminalStatus::Failed, "{:?}", ran.steps);
    // Three rounds shared across CI rounds: one fix re-armed CI, the no-op fix did not.
    assert_eq!(ran.count("reviewFirst"), 3);
    assert_eq!(ran.count("consensusFix"), 2);
    assert_eq!(ran.count("openPr"), 2);
    assert_eq!(ran.count("reviewLesson"), 1);
    assert!(ran.result["message"].as_str().unwrap().contains("three"));
}
