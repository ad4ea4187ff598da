//! Benchmarks: the native loop's own cost per step (a scripted model that answers at once and
//! an in-process tool, `searchLessons` over an in-memory memory, so neither model nor tool time counts), against the baseline of
//! streaming the same scripted replies without the loop; and fitting a 1,000,000-character
//! history, against the baseline of cloning it.

#![expect(clippy::unwrap_used, reason = "a benchmark fails loudly")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use auto_swe_agents::StaticPatterns;
use auto_swe_models::{
    FinishReason, Message, Meter, MeterConfig, ModelClient, ModelError, ModelRequest, ModelSpec,
    ModelStream, Part, PriceCatalog, ResponseBuilder, StreamEvent, Tier, TokenCaps, ToolCall,
    ToolResult, Usage,
};
use auto_swe_runtime::{
    LessonBinding, LessonHit, LessonMemory, LoopConfig, MemoryAudit, MemoryError, NativeLoop,
    Session, StepBudget, ToolConfig, ToolSet, ToolSetConfig, ToolWorkspace, Tracer, TurnRuntime,
    WorkspaceLayout, compact,
};
use auto_swe_sandbox::{
    BackendKind, ExecOutput, ExecRequest, SandboxError, SpawnedProcess, WorkspaceBackend,
    WorkspaceHandle, WorkspaceSpec,
};
use criterion::{Criterion, criterion_group, criterion_main};
use futures_util::StreamExt as _;
use tokio_util::sync::CancellationToken;

const STEPS: usize = 20;

/// A backend no benchmarked tool reaches.
struct Unused;

fn unused() -> SandboxError {
    SandboxError::BackendUnavailable {
        backend: "bench",
        reason: "not used".to_owned(),
        remedy: String::new(),
    }
}

#[async_trait]
impl WorkspaceBackend for Unused {
    fn kind(&self) -> BackendKind {
        BackendKind::Local
    }
    async fn create(&self, _: &WorkspaceSpec) -> Result<WorkspaceHandle, SandboxError> {
        Err(unused())
    }
    async fn attach(&self, _: &str) -> Result<WorkspaceHandle, SandboxError> {
        Err(unused())
    }
    async fn exec(&self, _: &WorkspaceHandle, _: &ExecRequest) -> Result<ExecOutput, SandboxError> {
        Err(unused())
    }
    async fn spawn(
        &self,
        _: &WorkspaceHandle,
        _: &ExecRequest,
    ) -> Result<SpawnedProcess, SandboxError> {
        Err(unused())
    }
    async fn pause(&self, _: &WorkspaceHandle) -> Result<(), SandboxError> {
        Ok(())
    }
    async fn resume(&self, _: &WorkspaceHandle) -> Result<(), SandboxError> {
        Ok(())
    }
    async fn remove(&self, _: &WorkspaceHandle) -> Result<(), SandboxError> {
        Ok(())
    }
}

/// An in-process memory: the benchmarked tool costs no exec.
struct Lessons;

#[async_trait]
impl LessonMemory for Lessons {
    async fn search(&self, _: &str, query: &str, _: usize) -> Result<Vec<LessonHit>, MemoryError> {
        Ok(vec![LessonHit {
            lesson_id: "0190a8b2-7c3d-7e4f-9a1b-2c3d4e5f6a7b".to_owned(),
            summary: format!("retry {query} with a fixed seed"),
            failure_type: "test".to_owned(),
            confidence: 0.8,
            similarity: 0.9,
        }])
    }
    async fn explain(&self, _: &str, _: &str) -> Result<Option<serde_json::Value>, MemoryError> {
        Ok(None)
    }
}

/// Answers `STEPS` replies that call `searchLessons`, then one that answers.
#[derive(Debug)]
struct Instant {
    spec: ModelSpec,
    calls: AtomicUsize,
}

fn events(n: usize) -> Vec<Result<StreamEvent, ModelError>> {
    let usage = StreamEvent::Usage(Usage {
        input: 1_000,
        output: 20,
        ..Usage::default()
    });
    if n % (STEPS + 1) < STEPS {
        vec![
            Ok(usage),
            Ok(StreamEvent::ToolCallStart {
                index: 0,
                id: format!("c{n}"),
                name: "searchLessons".to_owned(),
                thought_signature: None,
                item_id: None,
            }),
            Ok(StreamEvent::ToolCallDelta {
                index: 0,
                arguments: r#"{"query":"flaky test","limit":3}"#.to_owned(),
            }),
            Ok(StreamEvent::Finish(FinishReason::ToolCalls)),
        ]
    } else {
        vec![
            Ok(usage),
            Ok(StreamEvent::TextDelta("done".to_owned())),
            Ok(StreamEvent::Finish(FinishReason::Stop)),
        ]
    }
}

#[async_trait]
impl ModelClient for Instant {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }
    async fn stream(&self, _: &ModelRequest) -> Result<ModelStream, ModelError> {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(Box::pin(futures_util::stream::iter(events(n))))
    }
}

fn native() -> NativeLoop {
    let (tracer, _) = Tracer::in_memory();
    let tracer = Arc::new(tracer);
    let handle = WorkspaceHandle {
        id: "bench".to_owned(),
        backend: BackendKind::Local,
        keeper_pid: 0,
        protections: Vec::new(),
        missing: std::collections::BTreeMap::new(),
    };
    let tools = ToolSet::new(ToolSetConfig {
        workspace: ToolWorkspace::new(Arc::new(Unused), handle, WorkspaceLayout::default()),
        patterns: StaticPatterns::builtin().0,
        workspace_tools: Vec::new(),
        skills: Vec::new(),
        lessons: Some(LessonBinding {
            memory: Arc::new(Lessons),
            repository: "acme/api".to_owned(),
        }),
        config: ToolConfig::default(),
        audit: Arc::new(MemoryAudit::default()),
        tracer: tracer.clone(),
    });
    NativeLoop::new(
        Arc::new(Instant {
            spec: ModelSpec::parse("anthropic/claude-sonnet-4-5").unwrap(),
            calls: AtomicUsize::new(0),
        }),
        // Uncapped: the benchmark runs far more turns than any budget allows.
        Arc::new(Meter::new(
            MeterConfig {
                tier: Tier::Epic,
                caps: TokenCaps {
                    input: u64::MAX,
                    output: u64::MAX,
                },
                usd_cap: None,
            },
            PriceCatalog::builtin(),
        )),
        Arc::new(tools),
        tracer,
        StaticPatterns::builtin().0,
        LoopConfig::new("You are a careful engineer.".to_owned())
            .with_max_steps(StepBudget::new(100)),
    )
}

fn loop_overhead(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("loop");
    group.bench_function("baseline_stream_21_replies", |b| {
        b.to_async(&rt).iter(|| async {
            let mut parts = 0;
            for n in 0..=STEPS {
                let mut stream: ModelStream = Box::pin(futures_util::stream::iter(events(n)));
                let mut builder = ResponseBuilder::new();
                while let Some(e) = stream.next().await {
                    builder.push(e.unwrap());
                }
                parts += builder.finish().parts.len();
            }
            parts
        });
    });
    let runtime = native();
    group.bench_function("turn_of_20_steps", |b| {
        b.to_async(&rt).iter(|| async {
            let mut session = Session::new("bench");
            runtime
                .run_turn(&mut session, "go", &CancellationToken::new())
                .await
                .unwrap()
        });
    });
    group.finish();
}

/// A history of about `chars` characters: exchanges of tool rounds with 2,000-character results
/// and write calls.
fn history(chars: usize) -> Vec<Message> {
    let mut out = Vec::new();
    let mut total = 0;
    let mut e = 0;
    while total < chars {
        out.push(Message::user(format!("prompt {e}")));
        for r in 0..4 {
            let id = format!("{e}-{r}");
            let args =
                serde_json::json!({"path": format!("src/f{r}.rs"), "content": "w".repeat(1_000)});
            out.push(Message::assistant(vec![Part::ToolCall(ToolCall {
                id: id.clone(),
                name: "writeFile".to_owned(),
                arguments: args.to_string(),
                thought_signature: None,
                item_id: None,
            })]));
            out.push(Message {
                role: auto_swe_models::Role::User,
                parts: vec![Part::ToolResult(ToolResult {
                    call_id: id,
                    name: "writeFile".to_owned(),
                    content: "r".repeat(2_000),
                    is_error: false,
                })],
            });
            total += 3_050;
        }
        out.push(Message::assistant(vec![Part::text("done")]));
        e += 1;
    }
    out
}

fn compaction(c: &mut Criterion) {
    let full = history(1_000_000);
    let tokens = compact::estimate_tokens(0, &full);
    let mut group = c.benchmark_group("compaction_1m_chars");
    group.bench_function("baseline_clone", |b| b.iter(|| full.clone()));
    group.bench_function("fit_to_a_quarter", |b| {
        b.iter(|| {
            let mut h = full.clone();
            compact::fit(0, &mut h, tokens / 4)
        });
    });
    group.finish();
}

criterion_group!(benches, loop_overhead, compaction);
criterion_main!(benches);
