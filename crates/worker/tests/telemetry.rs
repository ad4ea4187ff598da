//! What a replay emits: an agent node's model call goes over HTTP to a mock Anthropic server
//! through the real client; the run parks on a signal and a second worker resumes it, replaying
//! the agent node from the journal. The replay must emit no span and count no metric, and the
//! run must be counted finalized once.
//!
//! A test binary of its own, because its subscriber is the process's: a thread-scoped one loses
//! a span whose last child is dropped on a database driver's thread (see
//! `auto_swe_telemetry::testing::Capture`), which made this test fail one run in three.
#![expect(
    clippy::unwrap_used,
    clippy::float_cmp,
    reason = "a test fails loudly; counters hold exact small values"
)]

#[allow(
    dead_code,
    unused_macros,
    unused_imports,
    clippy::panic,
    reason = "the integration tests' store harness; not every helper is used here"
)]
#[path = "it/support.rs"]
mod support;

#[allow(
    dead_code,
    reason = "the integration tests' services; not every helper is used here"
)]
#[path = "it/services.rs"]
mod services;

#[allow(dead_code, reason = "the scenario the telemetry tests share")]
#[path = "it/telemetry_scenario.rs"]
mod telemetry_scenario;

use std::time::Duration;

use auto_swe_telemetry::testing::Capture;

use telemetry_scenario::{MODEL, housekeeping, named, samples, scenario};

#[tokio::test]
async fn a_replayed_agent_node_emits_no_span_and_counts_nothing_twice() {
    let capture = Capture::install_global();
    let Some(scenario) = scenario().await else {
        return;
    };
    scenario.drive_to_end().await;
    // Counted when the work ended, whatever still holds a span open.
    let counted = samples(capture.metrics());
    // sqlx's SQLite connection threads drop the span of each command they run, so a drive's
    // spans may close on those threads a moment after the drive: the store is closed and every
    // handle on it dropped (workers, engines, services), and the drives' spans are waited for
    // (bounded) before they are judged.
    let run_id = scenario.run_id.clone();
    scenario.db.store.close().await;
    drop(scenario);
    let mut spans = capture.spans();
    for _ in 0..100 {
        if named(&spans, "workflow.run").len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        spans = capture.spans();
    }
    // One model call, one agent turn, one `ask` dispatch — across two drives.
    let chats = named(&spans, &format!("chat {MODEL}"));
    assert_eq!(chats.len(), 1, "{spans:#?}");
    let agents = named(&spans, "invoke_agent planner");
    assert_eq!(agents.len(), 1);
    let asks = named(&spans, "workflow.node ask");
    assert_eq!(
        asks.len(),
        1,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let runs = named(&spans, "workflow.run");
    assert_eq!(runs.len(), 2, "one per drive");
    let chat = chats[0];
    assert_eq!(chat.attr("gen_ai.provider.name"), Some("anthropic"));
    assert_eq!(chat.attr("gen_ai.request.model"), Some(MODEL));
    assert_eq!(chat.attr("gen_ai.usage.input_tokens"), Some("40"));
    assert_eq!(chat.attr("gen_ai.usage.output_tokens"), Some("9"));
    assert_eq!(chat.attr("workflow.budget_tier"), Some("STANDARD"));
    assert_eq!(
        chat.attr("workflow.budget_remaining_input"),
        Some("1999960"),
        "the STANDARD tier's 2,000,000 less the call's 40"
    );
    assert!(chat.attr("llm.cost_usd").is_some());
    // Parentage: chat → invoke_agent → workflow.node → (the step's node span) → first drive.
    assert_eq!(chat.parent_span_id, agents[0].span_id);
    let node_of_agent = spans
        .iter()
        .find(|s| s.span_id == agents[0].parent_span_id)
        .unwrap();
    let mut up = node_of_agent;
    while up.name != "workflow.node ask" {
        up = spans
            .iter()
            .find(|s| s.span_id == up.parent_span_id)
            .unwrap();
    }
    assert_eq!(asks[0].attr("workflow.outcome"), Some("success"));
    assert_eq!(asks[0].attr("workflow.run.id"), Some(run_id.as_str()));
    let drive = runs
        .iter()
        .find(|r| r.span_id == asks[0].parent_span_id)
        .expect("the dispatch is a child of the drive that made it");
    assert_eq!(drive.attr("workflow.worker"), Some("worker-a"));
    // Both drives, on two workers, are in the run's one trace.
    let trace = auto_swe_telemetry::context::run_span_context(&run_id)
        .trace_id()
        .to_string();
    // The host's own housekeeping (the sandbox's sweep of what ended owners left) belongs
    // to no run; everything else is in the run's one trace.
    assert!(
        spans
            .iter()
            .filter(|s| !housekeeping(s))
            .all(|s| s.trace_id == trace)
    );
    assert_eq!(named(&spans, "workflow.finalize").len(), 1);

    let labels = format!("agent=planner,model={MODEL}");
    assert_eq!(counted[&format!("llm_calls_total{{{labels}}}")], 1.0);
    assert_eq!(
        counted[&format!("llm_tokens_total{{agent=planner,direction=input,model={MODEL}}}")],
        40.0
    );
    assert_eq!(
        counted["workflow_runs_finalized_total{source=worker,status=SUCCESS}"],
        1.0
    );
    assert_eq!(
        samples(capture.metrics()),
        counted,
        "closing counted nothing more"
    );
}
