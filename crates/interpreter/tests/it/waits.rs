//! Signals and human nodes.

use auto_swe_interpreter::{
    HumanStepEnd, ScriptedCall, SignalWait, TerminalStatus, WaitKind, patches,
};
use serde_json::json;

use crate::support::{error_code, sim, status, steps};

fn signal_spec(on_timeout: bool) -> serde_json::Value {
    let mut wait = json!({"id": "ci", "type": "signal", "name": "ciPipelineSignal", "timeout": "4h",
        "onReceive": "done", "storeAs": "context.ci"});
    if on_timeout {
        wait["onTimeout"] = json!("late");
    }
    json!({"entry": "ci", "nodes": [
        wait,
        {"id": "done", "type": "terminate", "status": "SUCCESS", "result": "$.context.ci.conclusion"},
        {"id": "late", "type": "terminate", "status": "FAILED", "result": "no verdict"}
    ]})
}

fn waits(run: &auto_swe_interpreter::Simulation) -> Vec<SignalWait> {
    run.calls
        .iter()
        .filter_map(|c| match c {
            ScriptedCall::Wait(w) => Some(w.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn signal_delivers_its_payload_to_store_as_and_on_receive() {
    let run = sim(
        signal_spec(true),
        json!({}),
        json!({"signals": {"ciPipelineSignal": [{"payload": {"conclusion": "success"}}]}}),
    );
    assert_eq!(
        (status(&run), (*run.outcome.result).clone()),
        ("SUCCESS".into(), json!("success"))
    );
    assert_eq!(
        run.outcome.context,
        json!({"ci": {"conclusion": "success"}})
    );
    assert_eq!(steps(&run.records), ["ci COMPLETED 1"]);
    assert_eq!(
        waits(&run),
        [SignalWait {
            recording_id: "ci".into(),
            spec_node_id: "ci".into(),
            name: "ciPipelineSignal".into(),
            kind: WaitKind::Signal,
            timeout_ms: Some(4 * 3_600_000),
        }]
    );
}

#[test]
fn signal_timeout_routes_to_on_timeout_or_ends_timed_out() {
    let routed = sim(
        signal_spec(true),
        json!({}),
        json!({"signals": {"ciPipelineSignal": ["timeout"]}}),
    );
    assert_eq!(
        (status(&routed), (*routed.outcome.result).clone()),
        ("FAILED".into(), json!("no verdict"))
    );
    assert_eq!(steps(&routed.records), ["ci TIMED_OUT 1"]);
    let ended = sim(
        signal_spec(false),
        json!({}),
        json!({"signals": {"ciPipelineSignal": ["timeout"]}}),
    );
    assert_eq!(ended.outcome.status, TerminalStatus::TimedOut);
    assert_eq!(error_code(&ended).as_deref(), Some("TIMED_OUT"));
}

#[test]
fn a_payload_after_the_timeout_is_a_timeout() {
    let run = sim(
        signal_spec(true),
        json!({}),
        json!({"signals": {"ciPipelineSignal": [{"payload": 1, "afterMs": 14_400_000}]}}),
    );
    assert_eq!(*run.outcome.result, json!("no verdict"));
}

#[test]
fn an_empty_slot_rewaits_for_the_rest_of_the_timeout() {
    let spec = json!({"entry": "a", "nodes": [
        {"id": "a", "type": "signal", "name": "go", "timeout": 5000, "onTimeout": "t"},
        {"id": "t", "type": "terminate", "status": "TIMED_OUT", "result": "late"}
    ]});
    let script = json!({"clockStartMs": 1000, "signals": {"go": [{"slotEmpty": true, "afterMs": 1500}, {"payload": 2}]}});
    let run = sim(spec.clone(), json!({}), script.clone());
    assert_eq!(
        (status(&run), (*run.outcome.result).clone()),
        ("SUCCESS".into(), json!(2))
    );
    let timeouts: Vec<_> = waits(&run).iter().map(|w| w.timeout_ms).collect();
    assert_eq!(timeouts, [Some(5000), Some(3500)]);

    let mut unpatched = script;
    unpatched["patches"] = json!({patches::SHARED_SIGNAL_WAIT_REWAITS_ON_EMPTY_SLOT: false});
    let run = sim(spec.clone(), json!({}), unpatched);
    assert_eq!(*run.outcome.result, json!("late"));
    assert_eq!(waits(&run).len(), 1);

    let spent = sim(
        spec,
        json!({}),
        json!({"signals": {"go": [{"slotEmpty": true, "afterMs": 5000}]}}),
    );
    assert_eq!(*spent.outcome.result, json!("late"));
}

fn approval_spec(request_changes: bool) -> serde_json::Value {
    let mut node = json!({"id": "approve", "type": "humanApproval", "title": "Ship it?",
        "description": "Check the diff", "timeout": "2d", "approverCount": 2,
        "contextFrom": ["$.input.pr"], "onApprove": "yes", "onReject": "no", "onTimeout": "late"});
    if request_changes {
        node["onRequestChanges"] = json!("fix");
    }
    json!({"entry": "approve", "nodes": [
        node,
        {"id": "yes", "type": "terminate", "status": "SUCCESS", "result": "approved"},
        {"id": "no", "type": "terminate", "status": "FAILED", "result": "rejected"},
        {"id": "fix", "type": "terminate", "status": "FAILED", "result": "$.nodes.approve.output.comment"},
        {"id": "late", "type": "terminate", "status": "TIMED_OUT", "result": "late"}
    ]})
}

#[test]
fn human_approval_notifies_waits_on_hitl_and_routes_the_decision() {
    let run = sim(
        approval_spec(true),
        json!({"pr": 7}),
        json!({"human": {"approve": [{"decision": "approve"}]}}),
    );
    assert_eq!(*run.outcome.result, json!("approved"));
    assert_eq!(steps(&run.records), ["approve COMPLETED 1"]);
    let [
        ScriptedCall::NotifyHuman(notice),
        ScriptedCall::Wait(wait),
        ScriptedCall::ResolveHuman(done),
    ] = run.calls.as_slice()
    else {
        panic!("{:?}", run.calls)
    };
    assert_eq!(notice.signal, "hitl_approve");
    assert_eq!(notice.title, "Ship it?");
    assert_eq!(notice.timeout_ms, Some(172_800_000));
    assert_eq!(notice.context, json!([7]));
    assert_eq!(
        notice.details,
        json!({"approverCount": 2, "answers": ["approve", "reject", "request_changes"]})
    );
    assert_eq!(
        (wait.name.as_str(), wait.kind),
        ("hitl_approve", WaitKind::Human)
    );
    assert_eq!(done.status, HumanStepEnd::Resolved);

    let rejected = sim(
        approval_spec(true),
        json!({}),
        json!({"human": {"approve": [{"decision": "reject"}]}}),
    );
    assert_eq!(*rejected.outcome.result, json!("rejected"));
    let changes = sim(
        approval_spec(true),
        json!({}),
        json!({"human": {"approve": [{"decision": "request_changes", "comment": "rename it"}]}}),
    );
    assert_eq!(*changes.outcome.result, json!("rename it"));
}

#[test]
fn an_answer_the_node_does_not_offer_fails_the_run() {
    let run = sim(
        approval_spec(false),
        json!({}),
        json!({"human": {"approve": [{"decision": "request_changes"}]}}),
    );
    assert_eq!(error_code(&run).as_deref(), Some("WORKFLOW_SPEC_FAILED"));
    assert_eq!(steps(&run.records), ["approve FAILED 1"]);
}

#[test]
fn human_timeout_routes_to_on_timeout_and_resolves_the_step_timed_out() {
    let run = sim(
        approval_spec(false),
        json!({}),
        json!({"human": {"approve": ["timeout"]}}),
    );
    assert_eq!(
        (status(&run), (*run.outcome.result).clone()),
        ("TIMED_OUT".into(), json!("late"))
    );
    assert!(
        run.calls.iter().any(
            |c| matches!(c, ScriptedCall::ResolveHuman(r) if r.status == HumanStepEnd::TimedOut)
        )
    );
    assert_eq!(steps(&run.records), ["approve TIMED_OUT 1"]);
}

#[test]
fn human_decision_routes_by_option_and_stores_the_answer() {
    let spec = json!({"entry": "pick", "nodes": [
        {"id": "pick", "type": "humanDecision", "title": "Which?", "storeAs": "context.choice",
         "options": [{"id": "a", "next": "ta"}, {"id": "b", "label": "Bee", "next": "tb"}]},
        {"id": "ta", "type": "terminate", "status": "SUCCESS", "result": "A"},
        {"id": "tb", "type": "terminate", "status": "SUCCESS", "result": "B"}
    ]});
    let run = sim(
        spec.clone(),
        json!({}),
        json!({"human": {"pick": [{"option": "b"}]}}),
    );
    assert_eq!(*run.outcome.result, json!("B"));
    assert_eq!(run.outcome.context, json!({"choice": {"option": "b"}}));
    let bad = sim(
        spec.clone(),
        json!({}),
        json!({"human": {"pick": [{"option": "z"}]}}),
    );
    assert_eq!(error_code(&bad).as_deref(), Some("WORKFLOW_SPEC_FAILED"));
    let no_timeout = sim(spec, json!({}), json!({"human": {"pick": ["timeout"]}}));
    assert_eq!(no_timeout.outcome.status, TerminalStatus::TimedOut);
}

#[test]
fn human_input_checks_required_fields_and_stores_values() {
    let spec = json!({"entry": "form", "nodes": [
        {"id": "form", "type": "humanInput", "title": "Details", "storeAs": "context.form",
         "fields": [{"name": "reason", "type": "text", "required": true}, {"name": "n", "type": "number"}]}
    ]});
    let run = sim(
        spec.clone(),
        json!({}),
        json!({"human": {"form": [{"values": {"reason": "because", "n": 2}}]}}),
    );
    assert_eq!(status(&run), "SUCCESS");
    assert_eq!(*run.outcome.result, json!({"reason": "because", "n": 2}));
    assert_eq!(
        run.outcome.context,
        json!({"form": {"reason": "because", "n": 2}})
    );
    let missing = sim(
        spec,
        json!({}),
        json!({"human": {"form": [{"values": {"n": 2}}]}}),
    );
    assert_eq!(
        error_code(&missing).as_deref(),
        Some("WORKFLOW_SPEC_FAILED")
    );
    assert!(
        missing
            .outcome
            .error
            .unwrap()
            .to_string()
            .contains("\"reason\"")
    );
}

#[test]
fn human_review_shows_content_and_stores_the_review() {
    let spec = json!({"entry": "rev", "nodes": [
        {"id": "rev", "type": "humanReview", "title": "Review", "contentFrom": "$.input.doc",
         "storeAs": "context.review", "onSubmit": "end"},
        {"id": "end", "type": "terminate", "status": "SUCCESS", "result": "$.context.review.verdict"}
    ]});
    let run = sim(
        spec,
        json!({"doc": "text"}),
        json!({"human": {"rev": [{"verdict": "ok", "comments": []}]}}),
    );
    assert_eq!(*run.outcome.result, json!("ok"));
    let ScriptedCall::NotifyHuman(notice) = &run.calls[0] else {
        panic!()
    };
    assert_eq!(notice.context, json!("text"));
}

#[test]
fn a_wait_nothing_will_answer_stalls_the_simulation_and_cancels_the_run() {
    let run = sim(
        signal_spec(true),
        json!({}),
        json!({"signals": {"ciPipelineSignal": ["pending"]}}),
    );
    assert!(run.stalled);
    assert_eq!(run.outcome.status, TerminalStatus::Cancelled);
    assert_eq!(steps(&run.records), ["ci CANCELLED 1"]);
}
