//! Replay safety: recorded histories replay against the current code; a history the code would
//! not make again is `REPLAY_DIVERGED`.

use std::path::PathBuf;

use auto_swe_engine_temporal::{TemporalError, replay_history};
use auto_swe_spec::TerminalStatus;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::support::{Cluster, Steps, run_id, spec, temporal_address};

fn histories() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/histories")
}

/// The spec of the recorded fixture: a chain, a fan-out, a wait that times out, a retry.
pub(crate) fn fixture_spec() -> Value {
    spec(
        "start",
        &json!([
            {"id": "start", "type": "step", "step": "work", "next": "fan"},
            {"id": "fan", "type": "fanOut", "over": "$.input.items", "concurrency": 2,
             "subgraph": {"entry": "build", "nodes": [
                {"id": "build", "type": "step", "step": "work", "inputs": {"item": "$.item"}}
             ]},
             "next": "wait"},
            {"id": "wait", "type": "signal", "name": "go", "timeout": 500, "onTimeout": "flaky",
             "onReceive": "flaky"},
            {"id": "flaky", "type": "step", "step": "flaky", "onFail": {"retry": 1}, "next": "end"},
            {"id": "end", "type": "terminate", "status": "SUCCESS", "result": "$.nodes.fan.output"}
        ]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recorded_history_replays_against_this_code() {
    let mut replayed = 0;
    for entry in std::fs::read_dir(histories()).expect("the histories directory") {
        let path = entry.expect("a directory entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let json = std::fs::read(&path).expect("the history reads");
        let id = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("history")
            .to_owned();
        replay_history(&id, &json)
            .await
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        replayed += 1;
    }
    assert!(replayed > 0, "at least one recorded history");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_whose_spec_was_changed_diverges_naming_the_recording_id() {
    let path = histories().join("fan-out-wait-retry.json");
    let text = std::fs::read_to_string(&path).expect("the fixture reads");
    let mut history: Value = serde_json::from_str(&text).expect("the fixture is JSON");
    // Rewrite the run's input as if the spec had named its first node differently: the code
    // would now schedule `begin` where the history holds `start`.
    let started =
        &mut history["events"][0]["attributes"]["WorkflowExecutionStartedEventAttributes"];
    let payload = &mut started["input"]["payloads"][0]["data"];
    let data = payload.as_str().expect("a base64 payload");
    let mut start: Value =
        serde_json::from_slice(&STANDARD.decode(data).expect("base64")).expect("the input is JSON");
    start["spec"]["entry"] = json!("begin");
    start["spec"]["nodes"][0]["id"] = json!("begin");
    *payload = json!(STANDARD.encode(serde_json::to_vec(&start).expect("JSON")));
    let changed = serde_json::to_vec(&history).expect("JSON");
    let error = replay_history("diverged", &changed)
        .await
        .expect_err("the spec changed");
    assert_eq!(error.code(), "REPLAY_DIVERGED", "{error}");
    let TemporalError::ReplayDiverged { recording_id, .. } = &error else {
        panic!("not a divergence: {error}");
    };
    assert_eq!(recording_id.as_deref(), Some("start"), "{error}");
}

/// Records the fixture from a live run: `cargo test -p auto-swe-engine-temporal --test it --
/// record_the_fixture --ignored`, with a dev server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes the replay fixture; run by hand when the workflow changes on purpose"]
async fn record_the_fixture() {
    let Some(address) = temporal_address() else {
        return;
    };
    let cluster = Cluster::start(&address, "record", Steps::default()).await;
    let run = run_id("record");
    cluster
        .engine
        .launch(&run, fixture_spec(), json!({"items": ["x", "y"]}))
        .await
        .expect("the run starts");
    let end = cluster.end(&run).await;
    assert_eq!(end.status, TerminalStatus::Success, "{end:?}");
    let json = cluster
        .engine
        .history_json(&run)
        .await
        .expect("the history reads");
    std::fs::write(histories().join("fan-out-wait-retry.json"), json).expect("the fixture writes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_history_replays_against_the_code_that_made_it() {
    let Some(address) = temporal_address() else {
        return;
    };
    let cluster = Cluster::start(&address, "live-replay", Steps::default()).await;
    let run = run_id("live-replay");
    cluster
        .engine
        .launch(&run, fixture_spec(), json!({"items": ["x", "y", "z"]}))
        .await
        .expect("the run starts");
    let end = cluster.end(&run).await;
    assert_eq!(end.status, TerminalStatus::Success, "{end:?}");
    let json = cluster
        .engine
        .history_json(&run)
        .await
        .expect("the history reads");
    replay_history(&run, &json)
        .await
        .expect("the history replays");
}
