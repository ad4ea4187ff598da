//! The metrics as Prometheus text, read back by a Prometheus text-format parser.

use std::collections::BTreeMap;

use auto_swe_telemetry::spans::{self, ChatRecord, FinalizedBy, NodeOutcome};
use auto_swe_telemetry::testing::Capture;

/// Every sample of `text`: `name{sorted labels}` → value. Fails on text the parser refuses.
pub(crate) fn samples(text: &str) -> BTreeMap<String, f64> {
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
    let mut out = BTreeMap::new();
    for sample in scrape.samples {
        let mut labels: Vec<String> = sample
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        labels.sort();
        let value = match sample.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            prometheus_parse::Value::Histogram(buckets) => buckets.last().map_or(0.0, |b| b.count),
            prometheus_parse::Value::Summary(_) => continue,
        };
        out.insert(format!("{}{{{}}}", sample.metric, labels.join(",")), value);
    }
    out
}

#[test]
fn counters_render_as_prometheus_text_with_the_seeds_names() {
    let capture = Capture::install();
    let text = capture.metrics().render().unwrap();
    let before = samples(&text);
    // Seeded with zero from the start, so a rate has a baseline.
    assert_eq!(
        before["workflow_runs_finalized_total{source=worker,status=SUCCESS}"],
        0.0
    );
    assert_eq!(before["workflow_budget_exceeded_total{tier=STANDARD}"], 0.0);
    {
        let agent = spans::invoke_agent("reviewer", "s", "anthropic");
        let _agent = agent.enter();
        for _ in 0..3 {
            let chat = spans::chat("anthropic", "claude-haiku-4-5");
            spans::record_chat(
                &chat,
                &ChatRecord {
                    input_tokens: 10,
                    output_tokens: 4,
                    cache_read_tokens: 2,
                    cost_usd: 0.5,
                    ..ChatRecord::default()
                },
            );
        }
        let over = spans::chat("anthropic", "claude-haiku-4-5");
        spans::record_chat(
            &over,
            &ChatRecord {
                tier: Some("LARGE"),
                budget_exceeded: true,
                error: Some("BUDGET_EXCEEDED"),
                ..ChatRecord::default()
            },
        );
    }
    let outside = spans::chat("openai", "gpt-6");
    drop(outside);
    let node = spans::workflow_node("r", "n", "n", "implement", 1);
    spans::record_outcome(&node, NodeOutcome::Failure, Some("X"));
    drop(node);
    spans::run_finalized("r", "FAILED", FinalizedBy::Worker);
    let after = samples(&capture.metrics().render().unwrap());
    let labels = "agent=reviewer,model=claude-haiku-4-5";
    assert_eq!(after[&format!("llm_calls_total{{{labels}}}")], 4.0);
    assert_eq!(after[&format!("llm_cost_usd_total{{{labels}}}")], 1.5);
    assert_eq!(
        after["llm_tokens_total{agent=reviewer,direction=input,model=claude-haiku-4-5}"],
        30.0
    );
    assert_eq!(
        after["llm_tokens_total{agent=reviewer,direction=cache_read,model=claude-haiku-4-5}"],
        6.0
    );
    assert_eq!(after["llm_calls_total{agent=none,model=gpt-6}"], 1.0);
    assert_eq!(after["workflow_budget_exceeded_total{tier=LARGE}"], 1.0);
    assert_eq!(
        after["workflow_runs_finalized_total{source=worker,status=FAILED}"],
        1.0
    );
    assert_eq!(
        after["activity_duration_seconds_count{activity=implement,outcome=failure}"],
        1.0
    );
}

#[test]
fn a_span_of_the_same_name_from_another_library_is_not_counted() {
    let capture = Capture::install();
    let foreign = tracing::info_span!("chat", gen_ai.request.model = "m");
    drop(foreign);
    let text = capture.metrics().render().unwrap();
    assert!(!text.contains("llm_calls_total{"), "{text}");
}
