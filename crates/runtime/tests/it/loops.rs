//! Full turns of the native loop against the Anthropic mock server and a real `local`
//! workspace: metering, budget stops, cancellation, step budgets and cached tokens.

use std::sync::Arc;

use async_trait::async_trait;
use auto_swe_models::testing::{MockError, MockReply, MockTurn};
use auto_swe_models::{
    FinishReason, ModelClient, ModelError, ModelRequest, ModelSpec, ModelStream, Part, StreamEvent,
    ToolCall, Usage,
};
use auto_swe_runtime::{
    LoopConfig, MemoryAudit, Session, StepBudget, TraceKind, Tracer, TurnError, TurnRuntime,
    TurnStop,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{client, meter, mock, native, toolset, workspace};

pub(crate) fn tool_reply(
    calls: &[(&str, serde_json::Value)],
    input: u64,
    cache_read: u64,
) -> MockTurn {
    MockTurn::Reply(MockReply {
        parts: calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| {
                Part::ToolCall(ToolCall {
                    id: format!("toolu_{i}_{name}"),
                    name: (*name).to_owned(),
                    arguments: args.to_string(),
                    thought_signature: None,
                    item_id: None,
                })
            })
            .collect(),
        finish: FinishReason::ToolCalls,
        usage: Usage {
            input,
            output: 20,
            cache_read,
            cache_reported: true,
            ..Usage::default()
        },
        chunk: 7,
    })
}

pub(crate) fn text_reply(text: &str, input: u64) -> MockTurn {
    let mut reply = MockReply::text(text);
    reply.usage.input = input;
    reply.usage.output = 9;
    MockTurn::Reply(reply)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_reads_edits_runs_the_tests_and_answers() {
    let Some(ws) = workspace().await else { return };
    let server = mock(vec![
        tool_reply(&[("readFile", json!({"path": "src/lib.rs"}))], 100, 0),
        tool_reply(
            &[(
                "writeFile",
                json!({"path": "src/lib.rs", "content": "fn add(a: i32, b: i32) -> i32 { a + b }\n"}),
            )],
            140,
            90,
        ),
        tool_reply(&[("bash", json!({"command": "sh test.sh"}))], 180, 130),
        text_reply("Fixed add: it subtracted. The test passes.", 220),
    ])
    .await;
    let (tracer, _sink) = Tracer::in_memory();
    let tracer = Arc::new(tracer);
    let meter = meter(1_000_000);
    let tools = toolset(&ws, tracer.clone(), Arc::new(MemoryAudit::default()));
    let runtime = native(
        client(&server),
        meter.clone(),
        tools,
        tracer.clone(),
        LoopConfig::new("You fix bugs.".to_owned()),
    );
    let mut session = Session::new("session-1");
    let outcome = runtime
        .run_turn(&mut session, "Fix add.", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.text, "Fixed add: it subtracted. The test passes.");
    assert_eq!(outcome.stop, TurnStop::Answered);
    assert_eq!((outcome.tool_calls, outcome.model_calls), (3, 4));
    assert_eq!(outcome.usage.input, 100 + 140 + 180 + 220);
    assert_eq!(outcome.usage.cache_read, 90 + 130);
    assert_eq!(meter.totals().raw_input, 640);
    assert_eq!(meter.totals().calls, 4);
    assert_eq!(
        ws.sh("cat /workspace/target-repo/src/lib.rs")
            .await
            .stdout_text(),
        "fn add(a: i32, b: i32) -> i32 { a + b }\n"
    );
    // The model saw the passing test run.
    let last_result = session.history.iter().rev().find_map(|m| {
        m.parts.iter().find_map(|p| match p {
            Part::ToolResult(r) => Some(r.content.clone()),
            _ => None,
        })
    });
    assert!(last_result.unwrap().contains("test add ... ok"));
    // Every request carried the session's cache key, the tools first and the same system.
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for r in &requests {
        assert_eq!(r.body["tools"].as_array().unwrap().len(), 4);
    }
    let rows = tracer.pending();
    let kinds: Vec<TraceKind> = rows.iter().map(|r| r.kind).collect();
    let (l, t) = (TraceKind::LlmResponse, TraceKind::ToolCall);
    assert_eq!(kinds, vec![l, t, l, t, l, t, l]);
    assert_eq!(rows[2].call.as_ref().unwrap().cached_input_tokens, 90);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_stop_mid_turn_leaves_the_ledger_at_what_the_provider_reported() {
    let Some(ws) = workspace().await else { return };
    let server = mock(vec![tool_reply(
        &[("bash", json!({"command": "true"}))],
        12,
        0,
    )])
    .await;
    let (tracer, _sink) = Tracer::in_memory();
    let tracer = Arc::new(tracer);
    let meter = meter(30);
    let runtime = native(
        client(&server),
        meter.clone(),
        toolset(&ws, tracer.clone(), Arc::new(MemoryAudit::default())),
        tracer.clone(),
        LoopConfig::default(),
    );
    let mut session = Session::new("s");
    let err = runtime
        .run_turn(&mut session, "loop", &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "BUDGET_EXCEEDED", "{err}");
    assert_eq!(err.spent().input, 36);
    assert_eq!(
        meter.totals().raw_input,
        36,
        "the ledger holds every reported token"
    );
    assert_eq!(server.requests().len(), 3);
    // The history never keeps a call without its result.
    assert_history_valid(&session);
    // The next turn is refused before any request.
    let again = runtime
        .run_turn(&mut session, "more", &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(again.code(), "BUDGET_EXCEEDED");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_fails_is_debited_what_it_reported() {
    let Some(ws) = workspace().await else { return };
    let mut reply = MockReply::text("partial answer that never completes");
    reply.usage.input = 77;
    let server = mock(vec![MockTurn::MidStreamError(reply, MockError::Overloaded)]).await;
    let (tracer, _sink) = Tracer::in_memory();
    let tracer = Arc::new(tracer);
    let meter = meter(1_000_000);
    let runtime = native(
        client(&server),
        meter.clone(),
        toolset(&ws, tracer.clone(), Arc::new(MemoryAudit::default())),
        tracer.clone(),
        LoopConfig::default(),
    );
    let err = runtime
        .run_turn(&mut Session::new("s"), "hi", &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, TurnError::Model { .. }), "{err}");
    assert_eq!(err.spent().input, 77);
    assert_eq!(meter.totals().raw_input, 77);
    let row = tracer.pending().pop().unwrap();
    assert_eq!(row.kind, TraceKind::LlmResponse);
    assert!(row.error.is_some());
}

/// Cancels its token once a stream has reported usage (the opening frames of a stalled reply).
#[derive(Debug)]
struct CancelOnFirstEvent {
    inner: Arc<dyn ModelClient>,
    cancel: CancellationToken,
}

#[async_trait]
impl ModelClient for CancelOnFirstEvent {
    fn spec(&self) -> &ModelSpec {
        self.inner.spec()
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        use futures_util::StreamExt as _;
        let cancel = self.cancel.clone();
        let inner = self.inner.stream(request).await?;
        Ok(Box::pin(inner.inspect(move |event| {
            if matches!(event, Ok(StreamEvent::Usage(_))) {
                cancel.cancel();
            }
        })))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_a_stalled_stream_and_debits_what_it_reported() {
    let Some(ws) = workspace().await else { return };
    let mut reply = MockReply::text("never finishes");
    reply.usage.input = 55;
    let server = mock(vec![MockTurn::Stall(reply)]).await;
    let cancel = CancellationToken::new();
    let (tracer, _sink) = Tracer::in_memory();
    let tracer = Arc::new(tracer);
    let meter = meter(1_000_000);
    let runtime = native(
        Arc::new(CancelOnFirstEvent {
            inner: client(&server),
            cancel: cancel.clone(),
        }),
        meter.clone(),
        toolset(&ws, tracer.clone(), Arc::new(MemoryAudit::default())),
        tracer,
        LoopConfig::default(),
    );
    let mut session = Session::new("s");
    let err = runtime
        .run_turn(&mut session, "hi", &cancel)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "TURN_CANCELLED");
    assert_eq!(
        err.spent().input,
        55,
        "the interrupted call's reported usage"
    );
    assert_eq!(meter.totals().raw_input, 55);
    server.disconnected().await;
    assert_history_valid(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_past_the_step_budget_are_not_run() {
    let Some(ws) = workspace().await else { return };
    let server = mock(vec![tool_reply(
        &[
            ("bash", json!({"command": "echo run >> /workspace/count"})),
            ("bash", json!({"command": "echo run >> /workspace/count"})),
        ],
        10,
        0,
    )])
    .await;
    let (tracer, _sink) = Tracer::in_memory();
    let tracer = Arc::new(tracer);
    let runtime = native(
        client(&server),
        meter(1_000_000),
        toolset(&ws, tracer.clone(), Arc::new(MemoryAudit::default())),
        tracer,
        LoopConfig::default().with_max_steps(StepBudget::new(1)),
    );
    let mut session = Session::new("s");
    let outcome = runtime
        .run_turn(&mut session, "go", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.stop, TurnStop::StepBudget);
    assert_eq!(outcome.tool_calls, 5, "the budget is clamped to at least 5");
    assert_eq!(outcome.model_calls, 3);
    let counted = ws.sh("wc -l < /workspace/count").await;
    assert_eq!(
        counted.stdout_text().trim(),
        "5",
        "stderr: {}\nthe tool results: {:#?}",
        String::from_utf8_lossy(&counted.stderr),
        session.history
    );
    let refused = session.history.last().unwrap();
    assert!(
        matches!(&refused.parts[1], Part::ToolResult(r) if r.is_error && r.content.contains("step budget"))
    );
    assert_history_valid(&session);
}

pub(crate) fn assert_history_valid(session: &Session) {
    use std::collections::BTreeSet;
    let mut calls = BTreeSet::new();
    let mut results = BTreeSet::new();
    for m in &session.history {
        for p in &m.parts {
            match p {
                Part::ToolCall(c) => {
                    calls.insert(c.id.clone());
                }
                Part::ToolResult(r) => {
                    results.insert(r.call_id.clone());
                }
                _ => {}
            }
        }
    }
    assert_eq!(calls, results, "every call has its result");
}

/// A provider-like model with a prompt cache: a request reads from cache the longest prefix
/// (tools, system, then whole messages) it shares with the previous request. Replies follow
/// a script: one tool call, then an answer, per turn.
#[derive(Debug)]
struct PrefixCachingModel {
    spec: ModelSpec,
    previous: std::sync::Mutex<Vec<String>>,
    calls: std::sync::atomic::AtomicUsize,
}

fn units(request: &ModelRequest) -> Vec<String> {
    let mut out = vec![
        serde_json::to_string(&request.tools).unwrap(),
        request.system.clone().unwrap_or_default(),
    ];
    out.extend(
        request
            .messages
            .iter()
            .map(|m| serde_json::to_string(m).unwrap()),
    );
    out
}

#[async_trait]
impl ModelClient for PrefixCachingModel {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        assert_eq!(
            request.cache.as_ref().and_then(|c| c.key.as_deref()),
            Some("twenty")
        );
        let now = units(request);
        let mut previous = self.previous.lock().unwrap();
        let shared: usize = now
            .iter()
            .zip(previous.iter())
            .take_while(|(a, b)| a == b)
            .map(|(a, _)| a.len())
            .sum();
        let total: usize = now.iter().map(String::len).sum();
        *previous = now;
        let n = self
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let usage = Usage {
            input: (total / 3) as u64,
            cache_read: (shared / 3) as u64,
            output: 10,
            cache_reported: true,
            ..Usage::default()
        };
        let mut events = vec![Ok(StreamEvent::Usage(usage))];
        if n.is_multiple_of(2) {
            events.push(Ok(StreamEvent::ToolCallStart {
                index: 0,
                id: format!("call-{n}"),
                name: "bash".to_owned(),
                thought_signature: None,
                item_id: None,
            }));
            events.push(Ok(StreamEvent::ToolCallDelta {
                index: 0,
                arguments: json!({"command": format!("seq 1 {}", 200 + n)}).to_string(),
            }));
            events.push(Ok(StreamEvent::Finish(FinishReason::ToolCalls)));
        } else {
            events.push(Ok(StreamEvent::TextDelta(format!("done with step {n}"))));
            events.push(Ok(StreamEvent::Finish(FinishReason::Stop)));
        }
        Ok(Box::pin(futures_util::stream::iter(events)))
    }
}

/// Runs 20 turns in one session; returns the input and cached input tokens. With `every_later`,
/// each turn after the first must read from the cache.
async fn twenty_turns(
    runtime: &impl TurnRuntime,
    session_id: &str,
    every_later: bool,
) -> (u64, u64) {
    let mut session = Session::new(session_id);
    let (mut input, mut cached) = (0, 0);
    for turn in 0..20 {
        let outcome = runtime
            .run_turn(
                &mut session,
                &format!("step {turn}"),
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        if every_later && turn > 0 {
            assert!(
                outcome.usage.cache_read > 0,
                "turn {turn} read nothing from the cache"
            );
        }
        input += outcome.usage.input;
        cached += outcome.usage.cache_read;
    }
    (input, cached)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_turns_read_most_of_their_input_from_the_cache() {
    let Some(ws) = workspace().await else { return };
    let (tracer, _sink) = Tracer::in_memory();
    let tracer = Arc::new(tracer);
    let runtime = native(
        Arc::new(PrefixCachingModel {
            spec: ModelSpec::parse("anthropic/claude-sonnet-4-5").unwrap(),
            previous: std::sync::Mutex::new(Vec::new()),
            calls: std::sync::atomic::AtomicUsize::new(0),
        }),
        meter(100_000_000),
        toolset(&ws, tracer.clone(), Arc::new(MemoryAudit::default())),
        tracer,
        LoopConfig::new("You are a careful engineer. ".repeat(40)),
    );
    let (input, cached) = twenty_turns(&runtime, "twenty", false).await;
    let share = cached as f64 / input as f64;
    eprintln!(
        "20-turn session: {cached} of {input} input tokens read from cache ({:.1} %)",
        share * 100.0
    );
    assert!(share > 0.85, "{share}");
}

/// The same 20-turn session through the real Anthropic client against the mock server's
/// prompt cache: the breakpoints the client places (tools, system, newest message) are all that
/// makes a later request read from the cache, so this measures the loop's stable prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_turns_on_the_anthropic_wire_read_from_the_cache_after_the_first() {
    let Some(ws) = workspace().await else { return };
    let mut script = Vec::new();
    for n in 0..20 {
        // Usage figures of a scripted reply are replaced by the cache simulation's.
        script.push(tool_reply(
            &[("bash", json!({"command": format!("seq 1 {}", 200 + n)}))],
            0,
            0,
        ));
        script.push(text_reply(&format!("done with step {n}"), 0));
    }
    let server = mock(script).await;
    server.simulate_prompt_cache();
    let (tracer, _sink) = Tracer::in_memory();
    let tracer = Arc::new(tracer);
    let runtime = native(
        client(&server),
        meter(100_000_000),
        toolset(&ws, tracer.clone(), Arc::new(MemoryAudit::default())),
        tracer,
        LoopConfig::new("You are a careful engineer. ".repeat(40)),
    );
    let (input, cached) = twenty_turns(&runtime, "twenty-wire", true).await;
    let share = cached as f64 / input as f64;
    eprintln!(
        "20-turn session on the Anthropic wire: {cached} of {input} input tokens read from \
         cache ({:.1} %)",
        share * 100.0
    );
    assert!(share > 0.8, "{share}");
}
