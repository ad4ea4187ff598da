//! Fan-out: output shape, item keys, exports, pluck, concurrency, join, onBranchFail, shared
//! signal slots, abandoned waits, nested prefixes and cancellation.

use auto_swe_interpreter::{HumanStepEnd, ScriptedCall, TerminalStatus};
use serde_json::{Value, json};

use crate::support::{error_code, sim, status, steps};

#[expect(
    clippy::needless_pass_by_value,
    reason = "callers build the values inline"
)]
fn fan(extra: Value, subgraph: Value) -> Value {
    let mut node = json!({"id": "fan", "type": "fanOut", "over": "$.input.items",
        "subgraph": subgraph, "next": "end"});
    for (k, v) in extra.as_object().unwrap() {
        node[k] = v.clone();
    }
    json!({"entry": "fan", "nodes": [
        node,
        {"id": "end", "type": "terminate", "status": "SUCCESS", "result": "$.nodes.fan.output"}
    ]})
}

fn impl_subgraph() -> Value {
    json!({"entry": "impl", "nodes": [
        {"id": "impl", "type": "step", "step": "implement", "inputs": {"item": "$.item", "i": "$.index"},
         "next": "note"},
        {"id": "note", "type": "set", "values": {"context.done": "$.nodes.impl.output.sum"}}
    ]})
}

#[test]
fn over_must_be_an_array() {
    let run = sim(
        fan(json!({}), impl_subgraph()),
        json!({"items": {"a": 1}}),
        json!({}),
    );
    assert_eq!(error_code(&run).as_deref(), Some("WORKFLOW_SPEC_FAILED"));
    assert_eq!(
        run.outcome.error.unwrap().to_string(),
        "fan-out fan: over must be an array, got object"
    );
}

#[test]
fn branches_see_item_index_and_parent_context_and_results_keep_item_order() {
    let run = sim(
        fan(
            json!({"concurrency": 3, "exports": ["context.done"], "pluck": "$.sum"}),
            impl_subgraph(),
        ),
        json!({"items": [10, 20, 30, 40]}),
        json!({
            "steps": {"fan[2]/impl": [{"output": {"sum": 32}}]},
            "default": {"output": {"sum": 0}}
        }),
    );
    assert_eq!(status(&run), "SUCCESS");
    let output = &run.outcome.result;
    // A branch ending on `set` has a null output, so pluck reads nothing.
    assert_eq!(output["results"], json!([null, null, null, null]));
    assert_eq!(output["succeeded"], json!(4));
    assert_eq!(output["branches"][2]["exports"], json!({"done": 32}));
    assert_eq!(output["branches"][1]["exports"], json!({"done": 0}));
    assert_eq!(output["branches"][2]["key"], json!("2"));
    let mut inputs: Vec<_> = run
        .calls
        .iter()
        .filter_map(|c| match c {
            ScriptedCall::Step(r) => Some((r.recording_id.clone(), r.inputs.clone())),
            _ => None,
        })
        .collect();
    inputs.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        inputs,
        [
            ("fan[0]/impl".to_owned(), json!({"item": 10, "i": 0})),
            ("fan[1]/impl".to_owned(), json!({"item": 20, "i": 1})),
            ("fan[2]/impl".to_owned(), json!({"item": 30, "i": 2})),
            ("fan[3]/impl".to_owned(), json!({"item": 40, "i": 3})),
        ]
    );
    // Branch writes stay in the branch; the parent context is untouched.
    assert_eq!(run.outcome.context, json!({}));
}

#[test]
fn pluck_reads_each_branch_output_and_item_key_names_branches() {
    let subgraph =
        json!({"entry": "impl", "nodes": [{"id": "impl", "type": "step", "step": "implement"}]});
    let run = sim(
        fan(
            json!({"itemKey": "id", "pluck": "$.pr.url", "concurrency": 2}),
            subgraph,
        ),
        json!({"items": [{"id": "api"}, {"id": "web/ui"}]}),
        json!({"steps": {"fan[api]/impl": [{"output": {"pr": {"url": "u1"}}}]}, "default": {"output": {"pr": {"url": "u2"}}}}),
    );
    assert_eq!(run.outcome.result["results"], json!(["u1", "u2"]));
    let mut ids: Vec<_> = run.records.iter().map(|r| r.recording_id.clone()).collect();
    ids.sort();
    assert_eq!(ids, ["fan", "fan[api]/impl", "fan[web%2Fui]/impl"]);
    let duplicate = sim(
        fan(
            json!({"itemKey": "id"}),
            json!({"entry": "s", "nodes": [{"id": "s", "type": "set", "values": {}}]}),
        ),
        json!({"items": [{"id": "a"}, {"id": "a"}]}),
        json!({}),
    );
    assert_eq!(
        error_code(&duplicate).as_deref(),
        Some("WORKFLOW_SPEC_FAILED")
    );
}

#[test]
fn continue_records_failed_branches_and_finishes_the_rest() {
    let subgraph =
        json!({"entry": "impl", "nodes": [{"id": "impl", "type": "step", "step": "implement"}]});
    let run = sim(
        fan(
            json!({"onBranchFail": "continue", "concurrency": 2}),
            subgraph,
        ),
        json!({"items": [1, 2, 3]}),
        json!({"steps": {"fan[1]/impl": [{"error": {"message": "boom", "nonRetryable": true}}]}, "default": {"output": "ok"}}),
    );
    assert_eq!(status(&run), "SUCCESS");
    let output = &run.outcome.result;
    assert_eq!(output["results"], json!(["ok", null, "ok"]));
    assert_eq!(
        (output["succeeded"].clone(), output["failed"].clone()),
        (json!(2), json!(1))
    );
    assert_eq!(output["branches"][1]["status"], json!("FAILED"));
    assert_eq!(
        output["branches"][1]["error"],
        json!({"code": "STEP_FAILED", "message": "STEP_FAILED: boom"})
    );
}

#[test]
fn block_fails_the_run_and_cancels_siblings_waiting_on_people() {
    let subgraph = json!({"entry": "which", "nodes": [
        {"id": "which", "type": "cond", "expr": "$.index == 0", "onTrue": "approve", "onFalse": "impl"},
        {"id": "approve", "type": "humanApproval", "title": "ok?", "onApprove": "impl", "onReject": "impl"},
        {"id": "impl", "type": "step", "step": "implement"}
    ]});
    let run = sim(
        fan(json!({"concurrency": 3}), subgraph),
        json!({"items": [1, 2, 3, 4]}),
        json!({
            "human": {"approve": ["pending"]},
            "steps": {"fan[1]/impl": [{"error": {"message": "broken"}}]},
            "default": {"output": "ok"}
        }),
    );
    assert_eq!(run.outcome.status, TerminalStatus::Failed);
    assert_eq!(error_code(&run).as_deref(), Some("WORKFLOW_SPEC_FAILED"));
    assert_eq!(
        run.outcome.error.as_ref().unwrap().to_string(),
        "fan-out branch fan[1] failed: STEP_FAILED: broken"
    );
    assert!(!run.stalled);
    let branches = &run.outcome.nodes.to_value()["fan"]["output"]["branches"];
    assert_eq!(branches[0]["status"], json!("CANCELLED"));
    assert_eq!(branches[1]["status"], json!("FAILED"));
    // Item 3 never started once the fan-out was blocked.
    assert_eq!(branches[3]["started"], json!(false));
    assert!(run.calls.iter().any(|c| matches!(c,
        ScriptedCall::ResolveHuman(r) if r.recording_id == "fan[0]/approve" && r.status == HumanStepEnd::Cancelled)));
    assert!(steps(&run.records).contains(&"fan[0]/approve CANCELLED 1".to_owned()));
    assert!(steps(&run.records).contains(&"fan FAILED 1".to_owned()));
}

#[test]
fn join_any_takes_the_first_success_and_an_abandoned_wait_leaves_the_next_payload() {
    let subgraph = json!({"entry": "which", "nodes": [
        {"id": "which", "type": "cond", "expr": "$.index == 0", "onTrue": "wait", "onFalse": "impl"},
        {"id": "wait", "type": "signal", "name": "go", "timeout": "1h"},
        {"id": "impl", "type": "step", "step": "implement"}
    ]});
    let mut spec = fan(json!({"concurrency": 2, "join": "any"}), subgraph);
    spec["nodes"][0]["next"] = json!("after");
    spec["nodes"].as_array_mut().unwrap().push(json!(
        {"id": "after", "type": "signal", "name": "go", "timeout": "1h", "onReceive": "end"}));
    spec["nodes"][1]["result"] =
        json!({"fan": "$.nodes.fan.output", "late": "$.nodes.after.output"});
    let run = sim(
        spec,
        json!({"items": [1, 2]}),
        json!({"signals": {"go": ["pending", {"payload": "late"}]}, "default": {"output": "won"}}),
    );
    assert_eq!(status(&run), "SUCCESS");
    assert_eq!(run.outcome.result["fan"]["results"], json!([null, "won"]));
    assert_eq!(
        run.outcome.result["fan"]["branches"][0]["status"],
        json!("CANCELLED")
    );
    assert_eq!(run.outcome.result["late"], json!("late"));
}

#[test]
fn join_any_with_no_success_fails() {
    let subgraph =
        json!({"entry": "impl", "nodes": [{"id": "impl", "type": "step", "step": "implement"}]});
    let run = sim(
        fan(json!({"join": "any", "onBranchFail": "continue"}), subgraph),
        json!({"items": [1, 2]}),
        json!({"default": {"error": {"message": "no"}}}),
    );
    assert_eq!(
        run.outcome.error.unwrap().to_string(),
        "no branch of fan-out fan succeeded"
    );
}

#[test]
fn concurrent_branches_share_one_signal_slot() {
    let subgraph = json!({"entry": "ci", "nodes": [
        {"id": "ci", "type": "signal", "name": "ciPipelineSignal", "timeout": 10_000}
    ]});
    let run = sim(
        fan(
            json!({"concurrency": 2, "onBranchFail": "continue"}),
            subgraph,
        ),
        json!({"items": [1, 2]}),
        json!({"signals": {"ciPipelineSignal": [{"payload": "first"}, {"slotEmpty": true, "afterMs": 4000}, {"payload": "second"}]}}),
    );
    let mut results: Vec<_> = run.outcome.result["results"].as_array().unwrap().clone();
    results.sort_by_key(ToString::to_string);
    assert_eq!(results, [json!("first"), json!("second")]);
    let waits: Vec<_> = run
        .calls
        .iter()
        .filter_map(|c| match c {
            ScriptedCall::Wait(w) => Some((w.name.clone(), w.timeout_ms)),
            _ => None,
        })
        .collect();
    // Both waits use the spec name; the waiter woken to an empty slot re-waits what is left.
    assert_eq!(
        waits,
        [
            ("ciPipelineSignal".into(), Some(10_000)),
            ("ciPipelineSignal".into(), Some(10_000)),
            ("ciPipelineSignal".into(), Some(6_000)),
        ]
    );
}

#[test]
fn nested_fan_outs_compose_recording_ids() {
    let inner = json!({"entry": "inner", "nodes": [
        {"id": "inner", "type": "fanOut", "over": "$.item.parts",
         "subgraph": {"entry": "build", "nodes": [{"id": "build", "type": "step", "step": "b", "inputs": {"p": "$.item"}}]}}
    ]});
    let run = sim(
        fan(json!({"concurrency": 2}), inner),
        json!({"items": [{"parts": ["x"]}, {"parts": ["y", "z"]}]}),
        json!({"steps": {"fan[1]/inner[1]/build": [{"output": "Z"}]}, "default": {"output": "d"}}),
    );
    assert_eq!(status(&run), "SUCCESS");
    assert_eq!(
        run.outcome.result["results"][1]["results"],
        json!(["d", "Z"])
    );
    let mut ids: Vec<_> = run.records.iter().map(|r| r.recording_id.clone()).collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            "fan",
            "fan[0]/inner",
            "fan[0]/inner[0]/build",
            "fan[1]/inner",
            "fan[1]/inner[0]/build",
            "fan[1]/inner[1]/build"
        ]
    );
}

#[test]
fn a_run_cancellation_inside_a_branch_cancels_the_run() {
    let subgraph =
        json!({"entry": "impl", "nodes": [{"id": "impl", "type": "step", "step": "implement"}]});
    let run = sim(
        fan(
            json!({"concurrency": 2, "onBranchFail": "continue"}),
            subgraph,
        ),
        json!({"items": [1, 2, 3]}),
        json!({"steps": {"fan[1]/impl": [{"cancel": true}]}, "default": {"output": 1}}),
    );
    assert_eq!(run.outcome.status, TerminalStatus::Cancelled);
    assert_eq!(error_code(&run).as_deref(), Some("CANCELLED"));
}

#[test]
fn an_empty_array_completes_at_once() {
    let run = sim(
        fan(json!({"join": "any"}), impl_subgraph()),
        json!({"items": []}),
        json!({}),
    );
    assert_eq!(status(&run), "SUCCESS");
    assert_eq!(
        *run.outcome.result,
        json!({"branches": [], "results": [], "succeeded": 0, "failed": 0, "cancelled": 0})
    );
}

#[test]
fn branches_read_the_run_input() {
    let subgraph = json!({"entry": "impl", "nodes": [
        {"id": "impl", "type": "step", "step": "implement", "inputs": {"t": "$.input.ticket", "i": "$.item"}}
    ]});
    let run = sim(
        fan(json!({"concurrency": 2}), subgraph),
        json!({"items": [1, 2], "ticket": "T-9"}),
        json!({"default": {"output": 0}}),
    );
    let mut inputs: Vec<_> = run
        .calls
        .iter()
        .filter_map(|c| match c {
            ScriptedCall::Step(r) => Some(r.inputs.to_string()),
            _ => None,
        })
        .collect();
    inputs.sort();
    assert_eq!(inputs, [r#"{"t":"T-9","i":1}"#, r#"{"t":"T-9","i":2}"#]);
}
