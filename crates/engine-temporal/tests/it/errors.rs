//! Bad input: an unreachable frontend, a namespace that does not exist, a run that does not.

use auto_swe_engine_temporal::{TemporalEngine, TemporalError, TemporalSettings};
use serde_json::json;

use crate::support::{Cluster, Steps, run_id, spec, temporal_address};

#[tokio::test]
async fn an_unreachable_frontend_is_engine_unavailable_naming_the_address() {
    // Port 1 on loopback: nothing listens there.
    let error = TemporalEngine::connect(TemporalSettings::new("127.0.0.1:1"))
        .await
        .expect_err("nothing answers on port 1");
    assert_eq!(error.code(), "ENGINE_UNAVAILABLE", "{error}");
    assert!(error.to_string().contains("127.0.0.1:1"), "{error}");
}

#[tokio::test]
async fn a_namespace_that_does_not_exist_is_refused_at_connect() {
    let Some(address) = temporal_address() else {
        return;
    };
    let settings = TemporalSettings::new(address).with_namespace("no-such-namespace-auto-swe");
    let error = TemporalEngine::connect(settings)
        .await
        .expect_err("no such namespace");
    assert!(
        matches!(error, TemporalError::NamespaceNotFound { .. }),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_for_an_unknown_run_and_a_second_launch_are_refused() {
    let Some(address) = temporal_address() else {
        return;
    };
    let cluster = Cluster::start(&address, "refusals", Steps::default()).await;
    let error = cluster
        .engine
        .signal(&run_id("never-started"), "go", json!(1))
        .await
        .expect_err("no such run");
    assert_eq!(error.code(), "RUN_NOT_FOUND", "{error}");

    let run = run_id("twice");
    let spec = spec("a", &json!([{"id": "a", "type": "step", "step": "work"}]));
    cluster
        .engine
        .launch(&run, spec.clone(), json!({}))
        .await
        .expect("the first launch");
    let again = cluster
        .engine
        .launch(&run, spec, json!({}))
        .await
        .expect_err("a second launch");
    assert_eq!(again.code(), "RUN_ALREADY_STARTED", "{again}");
    cluster.end(&run).await;
    assert_eq!(cluster.effects.ends(&run).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_spec_that_does_not_read_fails_the_run_as_on_the_embedded_engine() {
    let Some(address) = temporal_address() else {
        return;
    };
    let cluster = Cluster::start(&address, "bad-spec", Steps::default()).await;
    let run = run_id("bad-spec");
    cluster
        .engine
        .launch(
            &run,
            json!({"specVersion": 1, "name": "no nodes"}),
            json!({}),
        )
        .await
        .expect("the run starts");
    let end = cluster.end(&run).await;
    assert_eq!(end.status, auto_swe_spec::TerminalStatus::Failed, "{end:?}");
    let document = end.result.expect("a result document");
    assert_eq!(
        document["error"]["code"],
        json!("WORKFLOW_SPEC_FAILED"),
        "{document}"
    );
    assert!(cluster.effects.steps.calls().is_empty(), "nothing ran");
    assert_eq!(cluster.effects.ends(&run).len(), 1, "the end is recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_output_too_large_for_a_payload_fails_the_run_naming_its_size_and_the_limit() {
    let Some(address) = temporal_address() else {
        return;
    };
    let spec = spec(
        "under",
        &json!([
            {"id": "under", "type": "step", "step": "big", "next": "over"},
            {"id": "over", "type": "step", "step": "huge", "onFail": {"retry": 2}, "next": "end"},
            {"id": "end", "type": "terminate", "status": "SUCCESS"}
        ]),
    );
    let (cluster, _, end) = run_to_end(&address, "too-large", spec).await;
    assert_eq!(end.status, auto_swe_spec::TerminalStatus::Failed, "{end:?}");
    let document = end.result.expect("a result document");
    let error = &document["error"];
    assert_eq!(
        error["code"],
        json!("ENGINE_PAYLOAD_TOO_LARGE"),
        "{document}"
    );
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("output is 3145") && message.contains("at most 2080768"),
        "{message}"
    );
    // The output just under the ceiling went through a real server; the refusal is not retried,
    // whatever the node's policy.
    assert_eq!(
        cluster.effects.steps.calls(),
        ["under", "over"],
        "one call each"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_too_large_for_a_payload_gives_up_long_strings_until_it_fits_and_the_run_ends() {
    let Some(address) = temporal_address() else {
        return;
    };
    // Two copies of a 2 MB output: an end of 4 MB, which no payload carries.
    let spec = spec(
        "under",
        &json!([
            {"id": "under", "type": "step", "step": "big", "next": "end"},
            {"id": "end", "type": "terminate", "status": "SUCCESS",
             "result": {"a": "$.nodes.under.output", "b": "$.nodes.under.output", "n": 7}}
        ]),
    );
    let (cluster, run, end) = run_to_end(&address, "large-end", spec).await;
    assert_eq!(
        end.status,
        auto_swe_spec::TerminalStatus::Success,
        "{end:?}"
    );
    let result = &end.result.expect("a result document")["result"];
    // A host without a store keeps each string cut to a record's length, saying from what.
    for key in ["a", "b"] {
        let text = result[key]["text"].as_str().expect("a string");
        assert!(
            text.ends_with(" [cut from 2080700 bytes]"),
            "{key}: {}",
            &text[..40]
        );
        assert!(text.len() < 9_000, "{key}: {} bytes", text.len());
    }
    assert_eq!(result["n"], json!(7), "what was short is kept as it was");
    assert_eq!(cluster.effects.ends(&run).len(), 1, "the end is recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_inputs_too_large_for_a_payload_fail_the_step_before_anything_is_scheduled() {
    let Some(address) = temporal_address() else {
        return;
    };
    let spec = spec(
        "under",
        &json!([
            {"id": "under", "type": "step", "step": "big", "next": "feed"},
            {"id": "feed", "type": "step", "step": "work", "next": "end",
             "inputs": {"a": "$.nodes.under.output", "b": "$.nodes.under.output"}},
            {"id": "end", "type": "terminate", "status": "SUCCESS"}
        ]),
    );
    let (cluster, _, end) = run_to_end(&address, "large-inputs", spec).await;
    assert_eq!(end.status, auto_swe_spec::TerminalStatus::Failed, "{end:?}");
    let document = end.result.expect("a result document");
    assert_eq!(
        document["error"]["code"],
        json!("ENGINE_PAYLOAD_TOO_LARGE"),
        "{document}"
    );
    let message = document["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("the step's inputs are"), "{message}");
    assert_eq!(cluster.effects.steps.calls(), ["under"], "feed never ran");
}

/// Runs `spec` on a cluster of its own named `name` with the test steps; returns the cluster,
/// the run and its end.
async fn run_to_end(
    address: &str,
    name: &str,
    spec: serde_json::Value,
) -> (Cluster, String, auto_swe_worker::RunEnd) {
    let cluster = Cluster::start(address, name, Steps::default()).await;
    let run = run_id(name);
    cluster
        .engine
        .launch(&run, spec, json!({}))
        .await
        .expect("the run starts");
    let end = cluster.end(&run).await;
    (cluster, run, end)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_or_a_signal_too_large_for_a_payload_is_refused_before_it_is_sent() {
    let Some(address) = temporal_address() else {
        return;
    };
    let cluster = Cluster::start(&address, "large-send", Steps::default()).await;
    let run = run_id("large-send");
    let spec = spec(
        "wait",
        &json!([
            {"id": "wait", "type": "signal", "name": "go", "timeout": "1h", "onReceive": "end"},
            {"id": "end", "type": "terminate", "status": "SUCCESS"}
        ]),
    );
    let big = json!({"text": "x".repeat(3 * 1024 * 1024)});
    let error = cluster
        .engine
        .launch(&run, spec.clone(), big.clone())
        .await
        .expect_err("too large to launch");
    assert_eq!(error.code(), "ENGINE_PAYLOAD_TOO_LARGE", "{error}");
    assert!(
        error
            .to_string()
            .contains("the run's frozen spec and input is 314"),
        "{error}"
    );
    // Nothing was started: the same run launches with a small input.
    cluster
        .engine
        .launch(&run, spec, json!({}))
        .await
        .expect("nothing was started before");
    let error = cluster
        .engine
        .signal(&run, "go", big)
        .await
        .expect_err("too large to deliver");
    assert_eq!(error.code(), "ENGINE_PAYLOAD_TOO_LARGE", "{error}");
    cluster
        .engine
        .signal(&run, "go", json!("small"))
        .await
        .expect("delivered");
    let end = cluster.end(&run).await;
    assert_eq!(
        end.status,
        auto_swe_spec::TerminalStatus::Success,
        "{end:?}"
    );
}
