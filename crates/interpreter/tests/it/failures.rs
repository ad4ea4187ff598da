//! The failure rules: retries, non-retryable errors, onFail routes, onError, cancellation,
//! interpreter-raised failures, reserved paths, record cutting and patch gates.

use auto_swe_interpreter::{RECORD_STRING_LIMIT, TerminalStatus, patches};
use serde_json::json;

use crate::support::{error_code, sim, status, steps};

#[expect(
    clippy::needless_pass_by_value,
    reason = "callers build the value inline"
)]
fn retry_spec(on_fail: serde_json::Value, on_error: Option<&str>) -> serde_json::Value {
    let mut node = json!({"id": "build", "type": "step", "step": "runBuild", "onFail": on_fail, "next": "after"});
    if let Some(on_error) = on_error {
        node["onError"] = json!(on_error);
    }
    json!({"entry": "build", "nodes": [
        node,
        {"id": "after", "type": "terminate", "status": "SUCCESS", "result": "$.nodes.build"},
        {"id": "rescue", "type": "terminate", "status": "FAILED", "result": "$.nodes.build.error"}
    ]})
}

#[test]
fn retry_redispatches_with_the_next_attempt_until_success() {
    let run = sim(
        retry_spec(json!({"retry": 2}), None),
        json!({}),
        json!({"steps": {"build": [{"error": {"message": "flaky"}}, {"error": {"message": "flaky"}}, {"output": {"ok": 1}}]}}),
    );
    assert_eq!(status(&run), "SUCCESS");
    assert_eq!(
        *run.outcome.result,
        json!({"output": {"ok": 1}, "error": null})
    );
    assert_eq!(
        steps(&run.records),
        ["build FAILED 1", "build FAILED 2", "build COMPLETED 3"]
    );
}

#[test]
fn exhausted_retries_fail_the_run_as_the_dispatcher_error() {
    let run = sim(
        retry_spec(json!({"retry": 1}), None),
        json!({}),
        json!({"steps": {"build": [{"error": {"message": "disk full", "code": "BUILD_FAILED"}}]}}),
    );
    assert_eq!(status(&run), "FAILED");
    assert_eq!(error_code(&run).as_deref(), Some("BUILD_FAILED"));
    assert!(run.outcome.error.as_ref().unwrap().is_retryable());
    assert_eq!(steps(&run.records), ["build FAILED 1", "build FAILED 2"]);
    assert_eq!(
        run.outcome.nodes.to_value()["build"]["error"],
        json!({"code": "BUILD_FAILED", "message": "disk full"})
    );
}

#[test]
fn exhausted_retries_route_to_then() {
    let run = sim(
        retry_spec(json!({"retry": 1, "then": "rescue"}), None),
        json!({}),
        json!({"steps": {"build": [{"error": {"message": "boom"}}]}}),
    );
    assert_eq!(status(&run), "FAILED");
    assert_eq!(
        *run.outcome.result,
        json!({"code": "STEP_FAILED", "message": "boom"})
    );
    assert_eq!(steps(&run.records), ["build FAILED 1", "build FAILED 2"]);
}

#[test]
fn non_retryable_errors_are_not_retried() {
    let run = sim(
        retry_spec(json!({"retry": 5}), None),
        json!({}),
        json!({"steps": {"build": [{"error": {"message": "over budget", "code": "BUDGET_EXCEEDED", "nonRetryable": true}}]}}),
    );
    assert_eq!(status(&run), "FAILED");
    assert_eq!(error_code(&run).as_deref(), Some("BUDGET_EXCEEDED"));
    assert!(!run.outcome.error.as_ref().unwrap().is_retryable());
    assert_eq!(steps(&run.records), ["build FAILED 1"]);
}

#[test]
fn unpatched_runs_retry_non_retryable_errors_as_they_used_to() {
    let run = sim(
        retry_spec(json!({"retry": 2}), None),
        json!({}),
        json!({
            "steps": {"build": [{"error": {"message": "x", "nonRetryable": true}}]},
            "patches": {patches::NON_RETRYABLE_SKIPS_RETRY: false}
        }),
    );
    assert_eq!(
        steps(&run.records),
        ["build FAILED 1", "build FAILED 2", "build FAILED 3"]
    );
}

#[test]
fn on_fail_route_records_the_error_and_routes() {
    let run = sim(
        retry_spec(json!("rescue"), None),
        json!({}),
        json!({"steps": {"build": [{"error": {"message": "nope"}}]}}),
    );
    assert_eq!(status(&run), "FAILED");
    assert_eq!(
        *run.outcome.result,
        json!({"code": "STEP_FAILED", "message": "nope"})
    );
    assert_eq!(run.outcome.error, None);
}

#[test]
fn on_error_continue_goes_on_to_next_with_the_error_recorded() {
    let run = sim(
        retry_spec(json!({"retry": 1}), Some("continue")),
        json!({}),
        json!({"steps": {"build": [{"error": {"message": "meh"}}]}}),
    );
    assert_eq!(status(&run), "SUCCESS");
    assert_eq!(
        run.outcome.result["error"],
        json!({"code": "STEP_FAILED", "message": "meh"})
    );
    assert_eq!(steps(&run.records), ["build FAILED 1", "build FAILED 2"]);
}

#[test]
fn cancellation_bypasses_on_fail_and_on_error() {
    let run = sim(
        retry_spec(json!({"retry": 3, "then": "rescue"}), Some("continue")),
        json!({}),
        json!({"steps": {"build": [{"cancel": true}]}}),
    );
    assert_eq!(run.outcome.status, TerminalStatus::Cancelled);
    assert_eq!(error_code(&run).as_deref(), Some("CANCELLED"));
    assert_eq!(steps(&run.records), ["build CANCELLED 1"]);
    assert_eq!(*run.outcome.result, json!(null));
}

#[test]
fn unpatched_cancellation_goes_through_handlers_but_still_ends_cancelled() {
    let run = sim(
        retry_spec(json!("rescue"), None),
        json!({}),
        json!({
            "steps": {"build": [{"cancel": true}]},
            "patches": {patches::CANCELLATION_BYPASSES_FAILURE_HANDLING: false}
        }),
    );
    assert_eq!(run.outcome.status, TerminalStatus::Cancelled);
    assert_eq!(steps(&run.records), ["build FAILED 1"]);
    assert_eq!(
        run.outcome.nodes.to_value()["build"]["error"]["code"],
        json!("CANCELLED")
    );
}

#[test]
fn unscripted_dispatch_fails_with_a_clear_message() {
    let run = sim(retry_spec(json!({"retry": 2}), None), json!({}), json!({}));
    assert_eq!(error_code(&run).as_deref(), Some("SIMULATION_UNSCRIPTED"));
    assert_eq!(
        run.outcome.error.unwrap().to_string(),
        "SIMULATION_UNSCRIPTED: no script entry for step build (node build) and no default"
    );
}

#[test]
fn expression_errors_fail_the_run_as_spec_failed() {
    let run = sim(
        json!({"entry": "c", "nodes": [
            {"id": "c", "type": "cond", "expr": "$.input.a >", "onTrue": "c", "onFalse": "c"}
        ]}),
        json!({}),
        json!({}),
    );
    assert_eq!(status(&run), "FAILED");
    assert_eq!(error_code(&run).as_deref(), Some("WORKFLOW_SPEC_FAILED"));
    // A failed cond is recorded.
    assert_eq!(steps(&run.records), ["c FAILED 1"]);
    assert_eq!(
        run.records[0].error.as_ref().unwrap().code,
        "WORKFLOW_SPEC_FAILED"
    );
}

#[test]
fn unknown_edge_targets_fail_the_run() {
    let run = sim(
        json!({"entry": "s", "nodes": [{"id": "s", "type": "set", "values": {}, "next": "ghost"}]}),
        json!({}),
        json!({}),
    );
    assert_eq!(error_code(&run).as_deref(), Some("WORKFLOW_SPEC_FAILED"));
    assert_eq!(
        run.outcome.error.unwrap().to_string(),
        "s: no node ghost in this graph"
    );
}

#[test]
fn reserved_segments_are_refused_at_run_time() {
    for path in [
        "context.__proto__.x",
        "context.a.constructor",
        "context.prototype",
    ] {
        let run = sim(
            json!({"entry": "s", "nodes": [{"id": "s", "type": "step", "step": "x", "storeAs": path}]}),
            json!({}),
            json!({"default": {"output": 1}}),
        );
        assert_eq!(
            error_code(&run).as_deref(),
            Some("WORKFLOW_SPEC_FAILED"),
            "{path}"
        );
        assert!(
            run.outcome.error.unwrap().to_string().contains("reserved"),
            "{path}"
        );
        assert_eq!(run.outcome.context, json!({}));
    }
    let node_id = sim(
        json!({"entry": "__proto__", "nodes": [{"id": "__proto__", "type": "step", "step": "x"}]}),
        json!({}),
        json!({"default": {"output": 1}}),
    );
    assert_eq!(
        error_code(&node_id).as_deref(),
        Some("WORKFLOW_SPEC_FAILED")
    );
    assert_eq!(node_id.outcome.nodes, json!({}));
}

#[test]
fn step_records_cut_strings_but_the_context_keeps_them_whole() {
    let long = "x".repeat(RECORD_STRING_LIMIT + 100);
    let run = sim(
        json!({"entry": "s", "nodes": [{"id": "s", "type": "step", "step": "x",
               "inputs": {"text": "$.input.text"}, "storeAs": "context.out"}]}),
        json!({"text": long}),
        json!({"default": {"output": {"echo": long, "n": [long]}}}),
    );
    let record = &run.records[0];
    let inputs = record.inputs.as_ref().unwrap();
    let outputs = record.outputs.as_ref().unwrap();
    assert_eq!(inputs["text"].as_str().unwrap().len(), RECORD_STRING_LIMIT);
    assert_eq!(outputs["echo"].as_str().unwrap().len(), RECORD_STRING_LIMIT);
    assert_eq!(outputs["n"][0].as_str().unwrap().len(), RECORD_STRING_LIMIT);
    assert_eq!(
        run.outcome.context["out"]["echo"].as_str().unwrap().len(),
        RECORD_STRING_LIMIT + 100
    );
    let long_error = sim(
        json!({"entry": "s", "nodes": [{"id": "s", "type": "step", "step": "x"}]}),
        json!({}),
        json!({"default": {"error": {"message": long}}}),
    );
    assert_eq!(
        long_error.records[0].error.as_ref().unwrap().message.len(),
        RECORD_STRING_LIMIT
    );
}

#[test]
fn the_transition_cap_ends_a_loop_as_spec_failed() {
    let looping = json!({"maxTransitions": 10, "entry": "a", "nodes": [
        {"id": "a", "type": "set", "values": {"context.n": {"expr": "($.context.n ?? 0) + 1"}}, "next": "a"}
    ]});
    let run = sim(looping.clone(), json!({}), json!({}));
    assert_eq!(error_code(&run).as_deref(), Some("WORKFLOW_SPEC_FAILED"));
    assert_eq!(
        run.outcome.error.unwrap().to_string(),
        "transition cap of 10 reached at a#11"
    );
    assert_eq!(run.outcome.context, json!({"n": 10}));
    let mut default_cap = looping;
    default_cap
        .as_object_mut()
        .unwrap()
        .remove("maxTransitions");
    let run = sim(default_cap, json!({}), json!({}));
    assert_eq!(run.outcome.context, json!({"n": 1000}));
}
