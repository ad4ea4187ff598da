//! Waits on Temporal: slots fed by signals, timeouts as timers, a person's stop as the
//! workflow's cancellation.

use std::time::Duration;

use auto_swe_spec::TerminalStatus;
use serde_json::json;

use crate::support::{Cluster, Steps, run_id, spec, temporal_address};

/// Polls `check` every 20 ms for at most 30 s.
async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_wakes_the_wait_and_one_sent_before_the_wait_waits_in_its_slot() {
    let Some(address) = temporal_address() else {
        return;
    };
    let cluster = Cluster::start(&address, "signals", Steps::default()).await;
    let spec = spec(
        "first",
        &json!([
            {"id": "first", "type": "signal", "name": "go", "timeout": "1h", "onReceive": "work"},
            {"id": "work", "type": "step", "step": "work", "next": "second"},
            {"id": "second", "type": "signal", "name": "go", "timeout": "1h", "onReceive": "done"},
            {"id": "done", "type": "terminate", "status": "SUCCESS",
             "result": {"first": "$.nodes.first.output", "second": "$.nodes.second.output"}}
        ]),
    );
    let run = run_id("signals");
    cluster
        .engine
        .launch(&run, spec, json!({}))
        .await
        .expect("the run starts");
    // The first payload may arrive before the run waits: it waits in the slot.
    cluster
        .engine
        .signal(&run, "go", json!({"n": 1}))
        .await
        .expect("delivered");
    let steps = cluster.effects.steps.clone();
    until("the step after the first wait", || {
        steps.calls() == ["work"]
    })
    .await;
    cluster
        .engine
        .signal(&run, "go", json!({"n": 2}))
        .await
        .expect("delivered");
    let end = cluster.end(&run).await;
    assert_eq!(end.status, TerminalStatus::Success);
    let result = &end.result.expect("a result document")["result"];
    assert_eq!(result["first"], json!({"n": 1}));
    assert_eq!(result["second"], json!({"n": 2}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_nobody_took_coalesce_and_a_wait_times_out_on_a_timer() {
    let Some(address) = temporal_address() else {
        return;
    };
    let cluster = Cluster::start(&address, "coalesce", Steps::default()).await;
    let spec = spec(
        "hold",
        &json!([
            {"id": "hold", "type": "signal", "name": "open", "timeout": "1h", "onReceive": "take"},
            {"id": "take", "type": "signal", "name": "go", "timeout": "1h", "onReceive": "again"},
            {"id": "again", "type": "signal", "name": "go", "timeout": 1500,
             "onTimeout": "late", "onReceive": "early"},
            {"id": "late", "type": "terminate", "status": "SUCCESS",
             "result": {"took": "$.nodes.take.output", "again": "timed out"}},
            {"id": "early", "type": "terminate", "status": "FAILED"}
        ]),
    );
    let run = run_id("coalesce");
    cluster
        .engine
        .launch(&run, spec, json!({}))
        .await
        .expect("the run starts");
    // Two payloads for `go` while the run waits on `open`: the later one replaces the earlier,
    // so `take` gets it and `again` finds nothing and times out.
    cluster
        .engine
        .signal(&run, "go", json!("older"))
        .await
        .expect("delivered");
    cluster
        .engine
        .signal(&run, "go", json!("newer"))
        .await
        .expect("delivered");
    cluster
        .engine
        .signal(&run, "open", json!(true))
        .await
        .expect("delivered");
    let end = cluster.end(&run).await;
    assert_eq!(end.status, TerminalStatus::Success, "{end:?}");
    let result = &end.result.expect("a result document")["result"];
    assert_eq!(result["took"], json!("newer"));
    assert_eq!(result["again"], json!("timed out"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_branches_share_one_slot_and_each_payload_goes_to_one_branch() {
    let Some(address) = temporal_address() else {
        return;
    };
    let cluster = Cluster::start(&address, "shared-slot", Steps::default()).await;
    let spec = spec(
        "fan",
        &json!([
            {"id": "fan", "type": "fanOut", "over": "$.input.items", "concurrency": 2,
             "subgraph": {"entry": "wait", "nodes": [
                {"id": "wait", "type": "signal", "name": "go", "timeout": "1h", "onReceive": "work"},
                {"id": "work", "type": "step", "step": "work", "inputs": {"got": "$.nodes.wait.output"}}
             ]},
             "next": "end"},
            {"id": "end", "type": "terminate", "status": "SUCCESS", "result": "$.nodes.fan.output"}
        ]),
    );
    let run = run_id("shared-slot");
    cluster
        .engine
        .launch(&run, spec, json!({"items": [0, 1]}))
        .await
        .expect("the run starts");
    let steps = cluster.effects.steps.clone();
    cluster
        .engine
        .signal(&run, "go", json!("a"))
        .await
        .expect("delivered");
    until("one branch past its wait", || steps.calls().len() == 1).await;
    cluster
        .engine
        .signal(&run, "go", json!("b"))
        .await
        .expect("delivered");
    let end = cluster.end(&run).await;
    assert_eq!(end.status, TerminalStatus::Success, "{end:?}");
    let mut got: Vec<String> = end.result.expect("a result document")["result"]["results"]
        .as_array()
        .expect("one result per branch")
        .iter()
        .map(|branch| {
            branch["inputs"]["got"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    got.sort();
    assert_eq!(got, ["a", "b"], "each payload went to exactly one branch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_stops_its_step_and_still_records_its_end() {
    let Some(address) = temporal_address() else {
        return;
    };
    let steps = Steps::slow(120_000);
    let cluster = Cluster::start(&address, "cancel", steps).await;
    let spec = spec(
        "slow",
        &json!([
            {"id": "slow", "type": "step", "step": "slow", "next": "after"},
            {"id": "after", "type": "step", "step": "work"}
        ]),
    );
    let run = run_id("cancel");
    cluster
        .engine
        .launch(&run, spec, json!({}))
        .await
        .expect("the run starts");
    let steps = cluster.effects.steps.clone();
    until("the slow step to start", || steps.calls() == ["slow"]).await;
    cluster
        .engine
        .cancel(&run)
        .await
        .expect("the cancellation is accepted");
    let end = cluster.end(&run).await;
    assert_eq!(end.status, TerminalStatus::Cancelled, "{end:?}");
    assert_eq!(steps.calls(), ["slow"], "nothing ran after the stop");
    assert_eq!(
        cluster.effects.ends(&run).len(),
        1,
        "the end is recorded once"
    );
}
