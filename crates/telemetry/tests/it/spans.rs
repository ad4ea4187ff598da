//! Spans exported through the in-memory exporter: names, attributes, parentage, and what the
//! metrics layer counts from them.

use auto_swe_telemetry::spans::{self, ChatRecord, FinalizedBy, NodeOutcome};
use auto_swe_telemetry::testing::{Capture, CapturedSpan};

fn find<'a>(spans: &'a [CapturedSpan], name: &str) -> &'a CapturedSpan {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span `{name}` in {spans:#?}"))
}

#[test]
fn a_turn_exports_genai_spans_with_their_attributes_and_parents() {
    let capture = Capture::install();
    let run = spans::workflow_run("run-1", "worker-a");
    {
        let _run = run.enter();
        let node = spans::workflow_node("run-1", "impl", "impl", "agentNode", 1);
        let _node = node.enter();
        let agent = spans::invoke_agent("implementer", "run-1:impl", "anthropic");
        let _agent = agent.enter();
        let chat = spans::chat("anthropic", "claude-sonnet-5-5");
        spans::record_chat(
            &chat,
            &ChatRecord {
                input_tokens: 120,
                output_tokens: 30,
                cache_read_tokens: 100,
                cost_usd: 0.25,
                price_source: "builtin",
                tier: Some("STANDARD"),
                remaining_input: Some(1_999_000),
                remaining_output: Some(499_970),
                ..ChatRecord::default()
            },
        );
        drop(chat);
        let tool = spans::execute_tool("readFile", Some("toolu_1"));
        drop(tool);
        spans::record_outcome(&node, NodeOutcome::Success, None);
    }
    drop(run);
    let exported = capture.spans();
    let chat = find(&exported, "chat claude-sonnet-5-5");
    assert_eq!(chat.attr("gen_ai.operation.name"), Some("chat"));
    assert_eq!(chat.attr("gen_ai.provider.name"), Some("anthropic"));
    assert_eq!(chat.attr("gen_ai.request.model"), Some("claude-sonnet-5-5"));
    assert_eq!(chat.attr("gen_ai.usage.input_tokens"), Some("120"));
    assert_eq!(chat.attr("gen_ai.usage.output_tokens"), Some("30"));
    assert_eq!(
        chat.attr("gen_ai.usage.cache_read.input_tokens"),
        Some("100")
    );
    assert_eq!(chat.attr("llm.cost_usd"), Some("0.25"));
    assert_eq!(
        chat.attr("workflow.budget_remaining_input"),
        Some("1999000")
    );
    let agent = find(&exported, "invoke_agent implementer");
    assert_eq!(agent.attr("gen_ai.agent.name"), Some("implementer"));
    assert_eq!(agent.attr("gen_ai.conversation.id"), Some("run-1:impl"));
    let tool = find(&exported, "execute_tool readFile");
    assert_eq!(tool.attr("gen_ai.tool.name"), Some("readFile"));
    assert_eq!(tool.attr("gen_ai.tool.call.id"), Some("toolu_1"));
    let node = find(&exported, "workflow.node impl");
    assert_eq!(node.attr("workflow.outcome"), Some("success"));
    let run = find(&exported, "workflow.run");
    assert_eq!(run.attr("workflow.run.id"), Some("run-1"));
    // Parentage: run → node → agent → chat and tool; all in the run's derived trace.
    assert_eq!(chat.parent_span_id, agent.span_id);
    assert_eq!(tool.parent_span_id, agent.span_id);
    assert_eq!(agent.parent_span_id, node.span_id);
    assert_eq!(node.parent_span_id, run.span_id);
    let root = auto_swe_telemetry::context::run_span_context("run-1");
    assert_eq!(run.parent_span_id, root.span_id().to_string());
    for span in &exported {
        assert_eq!(span.trace_id, root.trace_id().to_string(), "{span:?}");
    }
    // The metrics layer counted the call under the enclosing agent.
    let text = capture.metrics().render().unwrap();
    assert!(
        text.contains(r#"llm_calls_total{model="claude-sonnet-5-5",agent="implementer"} 1"#),
        "{text}"
    );
}

#[test]
fn two_drives_of_one_run_share_its_trace_and_other_runs_do_not() {
    let capture = Capture::install();
    drop(spans::workflow_run("run-a", "worker-1"));
    drop(spans::workflow_run("run-a", "worker-2"));
    drop(spans::workflow_run("run-b", "worker-1"));
    spans::run_finalized("run-a", "SUCCESS", FinalizedBy::Reaper);
    let exported = capture.spans();
    let traces: Vec<&str> = exported.iter().map(|s| s.trace_id.as_str()).collect();
    assert_eq!(traces[0], traces[1]);
    assert_ne!(traces[0], traces[2]);
    // The reaper's finalize, outside any drive, is still in the run's trace.
    assert_eq!(traces[3], traces[0]);
}

#[test]
fn no_span_carries_message_text_fields() {
    // Every field any of our spans declares: none is a prompt, an answer or tool arguments.
    let capture = Capture::install();
    let chat = spans::chat("openai", "gpt-6");
    spans::record_chat(&chat, &ChatRecord::default());
    drop(chat);
    drop(spans::invoke_agent("a", "c", "openai"));
    drop(spans::execute_tool("bash", None));
    for span in capture.spans() {
        for key in span.attributes.keys() {
            assert!(
                ![
                    "prompt",
                    "message",
                    "content",
                    "arguments",
                    "completion",
                    "text"
                ]
                .iter()
                .any(|word| key.contains(word)),
                "{key} on {}",
                span.name
            );
        }
    }
}
