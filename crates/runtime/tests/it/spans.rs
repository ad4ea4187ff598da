//! The `tracing` spans of a turn carry the `OpenTelemetry` `GenAI` names: `invoke_agent native`,
//! `chat {model}` and `execute_tool {name}`, with the usage recorded on the model call's span.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use auto_swe_runtime::{LoopConfig, MemoryAudit, Session, Tracer, TurnRuntime};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use crate::support::{client, meter, mock, native, toolset, workspace};

/// A span's name and its fields as text.
type Seen = (String, BTreeMap<String, String>);

/// Keeps every span's name and fields (as text), recorded values included.
#[derive(Default)]
struct Spans {
    next: AtomicU64,
    spans: Mutex<BTreeMap<u64, Seen>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl Subscriber for Spans {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, attributes: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut fields = BTreeMap::new();
        attributes.record(&mut Fields(&mut fields));
        self.spans
            .lock()
            .unwrap()
            .insert(id, (attributes.metadata().name().to_owned(), fields));
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        if let Some((_, fields)) = self.spans.lock().unwrap().get_mut(&span.into_u64()) {
            values.record(&mut Fields(fields));
        }
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, _: &Event<'_>) {}

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

struct Shared(Arc<Spans>);

impl Subscriber for Shared {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.0.enabled(metadata)
    }
    fn new_span(&self, attributes: &Attributes<'_>) -> Id {
        self.0.new_span(attributes)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        self.0.record(span, values);
    }
    fn record_follows_from(&self, span: &Id, follows: &Id) {
        self.0.record_follows_from(span, follows);
    }
    fn event(&self, event: &Event<'_>) {
        self.0.event(event);
    }
    fn enter(&self, span: &Id) {
        self.0.enter(span);
    }
    fn exit(&self, span: &Id) {
        self.0.exit(span);
    }
}

// One thread, so the thread-local subscriber sees every span of the turn.
#[tokio::test(flavor = "current_thread")]
async fn a_turn_is_traced_with_the_genai_span_names() {
    let Some(ws) = workspace().await else { return };
    let server = mock(vec![
        crate::loops::tool_reply(&[("readFile", json!({"path": "src/lib.rs"}))], 100, 0),
        crate::loops::text_reply("Read it.", 120),
    ])
    .await;
    let spans = Arc::new(Spans::default());
    let _guard = tracing::subscriber::set_default(Shared(spans.clone()));
    // Other tests of this binary hit the same callsites on other threads with no subscriber;
    // make sure none of them is cached as uninteresting to this one.
    tracing::callsite::rebuild_interest_cache();
    let (tracer, _sink) = Tracer::in_memory();
    let tracer = Arc::new(tracer);
    let runtime = native(
        client(&server),
        meter(1_000_000),
        toolset(&ws, tracer.clone(), Arc::new(MemoryAudit::default())),
        tracer,
        LoopConfig::default(),
    );
    let mut session = Session::new("spans");
    runtime
        .run_turn(&mut session, "Read lib.rs.", &CancellationToken::new())
        .await
        .unwrap();
    let spans = spans.spans.lock().unwrap();
    let named = |otel: &str| {
        spans
            .values()
            .filter(|(_, fields)| fields.get("otel.name").map(String::as_str) == Some(otel))
            .collect::<Vec<_>>()
    };
    assert_eq!(named("invoke_agent native").len(), 1, "{spans:?}");
    let chats = named("chat claude-sonnet-4-5");
    assert_eq!(chats.len(), 2, "{spans:?}");
    assert!(chats.iter().all(|(name, _)| name == "chat"));
    assert_eq!(
        chats[0]
            .1
            .get("gen_ai.usage.input_tokens")
            .map(String::as_str),
        Some("100")
    );
    assert_eq!(
        chats[1]
            .1
            .get("gen_ai.usage.input_tokens")
            .map(String::as_str),
        Some("120")
    );
    let tools = named("execute_tool readFile");
    assert_eq!(tools.len(), 1, "{spans:?}");
    assert_eq!(
        tools[0].1.get("gen_ai.operation.name").map(String::as_str),
        Some("execute_tool")
    );
}
