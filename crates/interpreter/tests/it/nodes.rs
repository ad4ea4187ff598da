//! One test per node type, asserting status, result, step records and context.

use auto_swe_interpreter::{ScriptedCall, StepDispatch};
use serde_json::json;

use crate::support::{error_code, sim, status, steps};

#[test]
fn step_dispatches_with_bound_inputs_and_stores_output() {
    let run = sim(
        json!({
            "entry": "plan",
            "nodes": [
                {"id": "plan", "type": "step", "step": "planDecomposition",
                 "inputs": {"ticket": "$.input.ticket", "n": 3}, "config": {"depth": 2},
                 "storeAs": "context.plan", "next": "done"},
                {"id": "done", "type": "terminate", "status": "SUCCESS",
                 "result": {"steps": "$.nodes.plan.output.steps", "stored": "$.context.plan"}}
            ]
        }),
        json!({"ticket": "T-1"}),
        json!({"steps": {"plan": [{"output": {"steps": ["a", "b"]}}]}}),
    );
    assert_eq!(status(&run), "SUCCESS");
    assert_eq!(
        *run.outcome.result,
        json!({"steps": ["a", "b"], "stored": {"steps": ["a", "b"]}})
    );
    assert_eq!(run.outcome.context, json!({"plan": {"steps": ["a", "b"]}}));
    assert_eq!(steps(&run.records), ["plan COMPLETED 1"]);
    let [ScriptedCall::Step(call)] = run.calls.as_slice() else {
        panic!("one dispatch expected: {:?}", run.calls)
    };
    assert_eq!(
        call,
        &StepDispatch {
            recording_id: "plan".into(),
            spec_node_id: "plan".into(),
            attempt: 1,
            step: "planDecomposition".into(),
            config: json!({"depth": 2}),
            inputs: json!({"ticket": "T-1", "n": 3}),
            context: json!({}).into(),
        }
    );
}

#[test]
fn agent_mcp_container_and_shell_dispatch_with_their_own_settings() {
    let run = sim(
        json!({
            "entry": "a",
            "nodes": [
                {"id": "a", "type": "agent", "agentRef": "reviewer@2", "userMessage": "$.input.msg",
                 "workspace": true, "next": "m"},
                {"id": "m", "type": "mcp", "connectionRef": "conn-1", "tool": "search",
                 "inputs": {"q": "x"}, "next": "c"},
                {"id": "c", "type": "containerStep", "image": "img:1", "transport": "ndjson", "next": "s"},
                {"id": "s", "type": "shell", "image": "alpine", "command": "make test"}
            ]
        }),
        json!({"msg": "hello"}),
        json!({"default": {"output": {"ok": true}}}),
    );
    assert_eq!(status(&run), "SUCCESS");
    assert_eq!(*run.outcome.result, json!({"ok": true}));
    let summary: Vec<_> = run
        .calls
        .iter()
        .map(|call| match call {
            ScriptedCall::Step(r) => ("step", r.step.clone(), r.config.clone(), r.inputs.clone()),
            ScriptedCall::Shell(r) => ("shell", r.step.clone(), r.config.clone(), r.inputs.clone()),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "step",
                "agent".into(),
                json!({"agentRef": "reviewer@2", "workspace": true}),
                json!({"userMessage": "hello"})
            ),
            (
                "step",
                "mcp".into(),
                json!({"connectionRef": "conn-1", "tool": "search"}),
                json!({"q": "x"})
            ),
            (
                "step",
                "containerStep".into(),
                json!({"image": "img:1", "transport": "ndjson"}),
                json!({})
            ),
            (
                "shell",
                "shell".into(),
                json!({"image": "alpine", "command": "make test"}),
                json!({})
            ),
        ]
    );
    assert_eq!(
        steps(&run.records),
        [
            "a COMPLETED 1",
            "m COMPLETED 1",
            "c COMPLETED 1",
            "s COMPLETED 1"
        ]
    );
}

fn eval_spec(on_reject: bool) -> serde_json::Value {
    let mut eval = json!({"id": "gate", "type": "eval", "target": "$.input.diff",
        "scorers": [{"type": "floor", "metric": "coverage", "threshold": 0.8}], "next": "ok"});
    if on_reject {
        eval["onReject"] = json!("fix");
    }
    json!({
        "entry": "gate",
        "nodes": [
            eval,
            {"id": "ok", "type": "terminate", "status": "SUCCESS", "result": "passed"},
            {"id": "fix", "type": "terminate", "status": "FAILED", "result": "rejected"}
        ]
    })
}

#[test]
fn eval_passes_to_next_and_routes_rejection_to_on_reject() {
    let passed = sim(
        eval_spec(true),
        json!({"diff": "d"}),
        json!({"steps": {"gate": [{"output": {"passed": true}}]}}),
    );
    assert_eq!(
        (status(&passed), (*passed.outcome.result).clone()),
        ("SUCCESS".into(), json!("passed"))
    );
    let rejected = sim(
        eval_spec(true),
        json!({"diff": "d"}),
        json!({"steps": {"gate": [{"output": {"passed": false}}]}}),
    );
    assert_eq!(
        (status(&rejected), (*rejected.outcome.result).clone()),
        ("FAILED".into(), json!("rejected"))
    );
    assert_eq!(
        rejected.outcome.nodes.to_value()["gate"]["output"],
        json!({"passed": false})
    );
    assert_eq!(steps(&rejected.records), ["gate COMPLETED 1"]);
}

#[test]
fn eval_without_on_reject_is_a_blocking_gate() {
    let run = sim(
        eval_spec(false),
        json!({}),
        json!({"steps": {"gate": [{"output": {"passed": false, "score": 0.2}}]}}),
    );
    assert_eq!(status(&run), "FAILED");
    assert_eq!(error_code(&run).as_deref(), Some("WORKFLOW_SPEC_FAILED"));
    assert_eq!(
        run.outcome.error.as_ref().unwrap().to_string(),
        "blocking gate gate did not pass"
    );
    assert!(!run.outcome.error.as_ref().unwrap().is_retryable());
    assert_eq!(steps(&run.records), ["gate FAILED 1"]);
    assert_eq!(
        run.outcome.nodes.to_value()["gate"]["output"]["score"],
        json!(0.2)
    );
}

#[test]
fn blocking_step_fails_the_run_once_when_not_passed() {
    let spec = json!({
        "entry": "lint",
        "nodes": [
            {"id": "lint", "type": "step", "step": "runLint", "blocking": true,
             "onFail": {"retry": 3}, "onError": "continue", "next": "after"},
            {"id": "after", "type": "terminate", "status": "SUCCESS"}
        ]
    });
    let run = sim(
        spec,
        json!({}),
        json!({"steps": {"lint": [{"output": {"passed": false}}]}}),
    );
    assert_eq!(status(&run), "FAILED");
    assert_eq!(error_code(&run).as_deref(), Some("WORKFLOW_SPEC_FAILED"));
    // Neither onFail nor onError applies to a failure the interpreter raises itself.
    assert_eq!(steps(&run.records), ["lint FAILED 1"]);
    assert_eq!(run.calls.len(), 1);
}

#[test]
fn set_writes_in_order_and_cond_branches() {
    let spec = json!({
        "entry": "init",
        "nodes": [
            {"id": "init", "type": "set", "values": {
                "context.count": {"expr": "$.input.start + 1"},
                "context.meta.doubled": {"expr": "$.context.count + $.context.count"}
            }, "next": "check"},
            {"id": "check", "type": "cond", "expr": "$.context.meta.doubled > 5", "onTrue": "big", "onFalse": "small"},
            {"id": "big", "type": "terminate", "status": "SUCCESS", "result": "big"},
            {"id": "small", "type": "terminate", "status": "SUCCESS", "result": "small"}
        ]
    });
    let big = sim(spec.clone(), json!({"start": 2}), json!({}));
    assert_eq!(big.outcome.error, None);
    assert_eq!(*big.outcome.result, json!("big"));
    assert_eq!(
        big.outcome.context,
        json!({"count": 3, "meta": {"doubled": 6}})
    );
    // set, cond and terminate make records only when they fail.
    assert!(big.records.is_empty());
    assert_eq!(big.outcome.transitions, 3);
    let small = sim(spec, json!({"start": 0}), json!({}));
    assert_eq!(*small.outcome.result, json!("small"));
}

#[test]
fn terminate_ends_with_its_status_and_bound_result() {
    for status_name in ["SUCCESS", "FAILED", "CANCELLED", "TIMED_OUT"] {
        let run = sim(
            json!({"entry": "end", "nodes": [{"id": "end", "type": "terminate", "status": status_name,
                   "result": {"template": "ended {{ $.input.why }}"}}]}),
            json!({"why": "here"}),
            json!({}),
        );
        assert_eq!(status(&run), status_name);
        assert_eq!(*run.outcome.result, json!("ended here"));
        assert_eq!(run.outcome.error, None);
    }
}

#[test]
fn a_path_without_terminate_succeeds_with_the_last_output() {
    let run = sim(
        json!({"entry": "a", "nodes": [
            {"id": "a", "type": "step", "step": "x", "next": "b"},
            {"id": "b", "type": "step", "step": "y"}
        ]}),
        json!({}),
        json!({"steps": {"a": [{"output": 1}], "b": [{"output": {"last": true}}]}}),
    );
    assert_eq!(status(&run), "SUCCESS");
    assert_eq!(*run.outcome.result, json!({"last": true}));
    let set_last = sim(
        json!({"entry": "s", "nodes": [{"id": "s", "type": "set", "values": {"context.a": 1}}]}),
        json!({}),
        json!({}),
    );
    assert_eq!(
        (status(&set_last), (*set_last.outcome.result).clone()),
        ("SUCCESS".into(), json!(null))
    );
}

#[test]
fn loop_revisits_get_visit_numbered_recording_ids() {
    let spec = json!({
        "entry": "review",
        "nodes": [
            {"id": "review", "type": "step", "step": "runReviewNetwork", "next": "check"},
            {"id": "check", "type": "cond", "expr": "$.nodes.review.output.approved == true",
             "onTrue": "done", "onFalse": "review"},
            {"id": "done", "type": "terminate", "status": "SUCCESS", "result": "$.nodes.review.output"}
        ]
    });
    let run = sim(
        spec,
        json!({}),
        json!({"steps": {"review": [{"output": {"approved": false}}, {"output": {"approved": false}}, {"output": {"approved": true, "round": 3}}]}}),
    );
    assert_eq!(*run.outcome.result, json!({"approved": true, "round": 3}));
    assert_eq!(
        steps(&run.records),
        [
            "review COMPLETED 1",
            "review#2 COMPLETED 1",
            "review#3 COMPLETED 1"
        ]
    );
}

#[test]
fn scripted_recording_id_keys_win_over_node_ids() {
    let spec = json!({
        "entry": "review",
        "nodes": [
            {"id": "review", "type": "step", "step": "r", "next": "check"},
            {"id": "check", "type": "cond", "expr": "$.nodes.review.output.ok", "onTrue": "end", "onFalse": "review"},
            {"id": "end", "type": "terminate", "status": "SUCCESS", "result": "$.nodes.review.output.by"}
        ]
    });
    let run = sim(
        spec,
        json!({}),
        json!({"steps": {"review": [{"output": {"ok": false, "by": "node"}}], "review#3": [{"output": {"ok": true, "by": "exact"}}]}}),
    );
    assert_eq!(*run.outcome.result, json!("exact"));
    assert_eq!(steps(&run.records).len(), 3);
}
