//! The toy harness through the seam on a real `local` workspace: allowed calls run, refused
//! ones do not, every model call is metered, and the registry refuses what it must.

#![expect(clippy::unwrap_used, reason = "tests fail loudly")]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_agents::{Capability, StaticPatterns};
use auto_swe_example_toy_harness::ToyAdapter;
use auto_swe_models::{Meter, MeterConfig, ModelSpec, PriceCatalog, Tier, TokenCaps, Usage};
use auto_swe_runtime::{
    CanonicalCall, CanonicalPolicy, DECISION_DEADLINE, HarnessAdapter, HarnessCapabilities,
    HarnessError, HarnessRegistry, HarnessReport, HarnessRuntime, HarnessRuntimeConfig,
    HarnessTurn, MemoryAudit, NativeCall, PolicyRequirement, Session, StepBudget, ToolWorkspace,
    TraceKind, Tracer, TurnRuntime, WorkspaceLayout,
};
use auto_swe_sandbox::{
    ExecRequest, LocalBackend, LocalConfig, LocalRoot, WorkspaceBackend, WorkspaceHandle,
    WorkspaceSpec,
};
use auto_swe_scanners::HarnessConfig;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

struct Ws {
    backend: Arc<LocalBackend>,
    handle: WorkspaceHandle,
    _state: tempfile::TempDir,
}

async fn workspace() -> Option<Ws> {
    let state = tempfile::tempdir().unwrap();
    let dir = std::env::var_os("AUTO_SWE_ROOTFS").map_or_else(
        || PathBuf::from("/var/cache/auto-swe/rootfs/bookworm"),
        PathBuf::from,
    );
    let root = if dir.join(".auto-swe-rootfs-v1").exists() {
        LocalRoot::Rootfs(dir)
    } else {
        LocalRoot::HostSystem
    };
    let mut config = LocalConfig::new(root.clone());
    config.state_dir = state.path().to_path_buf();
    let backend = match LocalBackend::new(config) {
        Ok(b) => Arc::new(b),
        Err(e) => {
            assert!(
                std::env::var("AUTO_SWE_REQUIRE_BWRAP").as_deref() != Ok("1"),
                "bubblewrap required: {e}"
            );
            return None;
        }
    };
    let handle = backend
        .create(&WorkspaceSpec::new("unused", root))
        .await
        .unwrap();
    let ws = Ws {
        backend,
        handle,
        _state: state,
    };
    ws.sh("mkdir -p /workspace/target-repo").await;
    Some(ws)
}

impl Ws {
    async fn sh(&self, script: &str) -> String {
        self.backend
            .exec(&self.handle, &ExecRequest::shell(script))
            .await
            .unwrap()
            .stdout_text()
    }

    fn runtime(
        &self,
        adapter: Arc<dyn HarnessAdapter>,
        meter: Arc<Meter>,
        tracer: Arc<Tracer>,
    ) -> Result<HarnessRuntime, HarnessError> {
        HarnessRuntime::new(
            adapter,
            ToolWorkspace::new(
                self.backend.clone(),
                self.handle.clone(),
                WorkspaceLayout::default(),
            ),
            meter,
            tracer,
            Arc::new(MemoryAudit::default()),
            StaticPatterns::builtin().0,
            CanonicalPolicy {
                capabilities: [Capability::Read, Capability::Write, Capability::Shell].into(),
                patterns: StaticPatterns::builtin().0,
                harness: HarnessConfig::NotLoaded,
                checkout: "/workspace/target-repo".to_owned(),
            },
            HarnessRuntimeConfig {
                spec: ModelSpec::parse("anthropic/claude-sonnet-4-5").unwrap(),
                max_steps: StepBudget::DEFAULT,
                turn_deadline: Duration::from_secs(120),
                decision_deadline: DECISION_DEADLINE,
                requirement: PolicyRequirement::Required,
            },
        )
    }
}

fn meter(input: u64) -> Arc<Meter> {
    Arc::new(Meter::new(
        MeterConfig {
            tier: Tier::Standard,
            caps: TokenCaps {
                input,
                output: 1_000_000,
            },
            usd_cap: None,
        },
        PriceCatalog::builtin(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_turn_runs_and_is_metered_call_by_call() {
    let Some(ws) = workspace().await else { return };
    let (tracer, _) = Tracer::in_memory();
    let tracer = Arc::new(tracer);
    let meter = meter(1_000_000);
    let runtime = ws
        .runtime(Arc::new(ToyAdapter), meter.clone(), tracer.clone())
        .unwrap();
    let mut session = Session::new("toy");
    let outcome = runtime
        .run_turn(&mut session, "notes.txt hello", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.text, "wrote notes.txt; hello");
    assert_eq!((outcome.tool_calls, outcome.model_calls), (2, 2));
    assert_eq!((outcome.usage.input, outcome.usage.output), (300, 30));
    assert_eq!(
        meter.totals().raw_input,
        300,
        "per call, then the remainder once"
    );
    assert_eq!(
        ws.sh("cat /workspace/target-repo/notes.txt").await,
        "hello\n"
    );
    let rows = tracer.pending();
    assert_eq!(
        rows.iter()
            .filter(|r| r.kind == TraceKind::ToolCall)
            .count(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_write_never_happens() {
    let Some(ws) = workspace().await else { return };
    let (tracer, _) = Tracer::in_memory();
    let tracer = Arc::new(tracer);
    let runtime = ws
        .runtime(Arc::new(ToyAdapter), meter(1_000_000), tracer.clone())
        .unwrap();
    let outcome = runtime
        .run_turn(
            &mut Session::new("toy"),
            ".env SECRET",
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(outcome.text.starts_with("refused"), "{}", outcome.text);
    assert_eq!(ws.sh("ls -A /workspace/target-repo").await, "");
    let denied = tracer
        .pending()
        .into_iter()
        .find(|r| r.kind == TraceKind::ToolCall)
        .unwrap();
    assert!(denied.error.unwrap().contains("sensitive file"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_stop_aborts_the_turn_after_the_call_that_passed_the_cap() {
    let Some(ws) = workspace().await else { return };
    let (tracer, _) = Tracer::in_memory();
    let meter = meter(200);
    let runtime = ws
        .runtime(Arc::new(ToyAdapter), meter.clone(), Arc::new(tracer))
        .unwrap();
    let err = runtime
        .run_turn(
            &mut Session::new("toy"),
            "a.txt x",
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "BUDGET_EXCEEDED");
    assert_eq!(err.spent().input, 250);
    assert_eq!(meter.totals().raw_input, 250);
}

/// A harness that would run tools without asking.
#[derive(Debug)]
struct Unenforcing;

#[async_trait]
impl HarnessAdapter for Unenforcing {
    fn name(&self) -> &'static str {
        "yolo"
    }
    fn capabilities(&self) -> HarnessCapabilities {
        HarnessCapabilities {
            enforces_per_call_policy_in_worker: false,
        }
    }
    async fn run_turn(&self, _: &HarnessTurn) -> Result<HarnessReport, HarnessError> {
        Ok(HarnessReport::default())
    }
    async fn decide(&self, _: &NativeCall) -> Result<CanonicalCall, String> {
        Err("never".to_owned())
    }
    fn usage(&self, _: &Value) -> Option<Usage> {
        None
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registry_and_runtime_refuse_what_they_must() {
    let mut registry = HarnessRegistry::new(PolicyRequirement::Required);
    registry.register(Arc::new(ToyAdapter)).unwrap();
    let refused = registry.register(Arc::new(Unenforcing)).unwrap_err();
    assert_eq!(refused.code(), "HARNESS_POLICY_UNENFORCEABLE");
    assert!(!refused.is_retryable());
    assert_eq!(registry.select("toy").unwrap().name(), "toy");
    assert_eq!(
        registry.select("claude-code").unwrap_err().code(),
        "HARNESS_UNAVAILABLE"
    );
    assert_eq!(
        registry.select("yolo").unwrap_err().code(),
        "HARNESS_UNAVAILABLE"
    );
    let Some(ws) = workspace().await else { return };
    let (tracer, _) = Tracer::in_memory();
    let err = ws
        .runtime(Arc::new(Unenforcing), meter(1_000), Arc::new(tracer))
        .unwrap_err();
    assert_eq!(err.code(), "HARNESS_POLICY_UNENFORCEABLE");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_binary_is_reinstalled_before_the_turn() {
    let Some(ws) = workspace().await else { return };
    ws.sh(
        "mkdir -p /workspace/.toy-harness && echo 'echo pwned' > /workspace/.toy-harness/agent.sh",
    )
    .await;
    let (tracer, _) = Tracer::in_memory();
    let runtime = ws
        .runtime(Arc::new(ToyAdapter), meter(1_000_000), Arc::new(tracer))
        .unwrap();
    let outcome = runtime
        .run_turn(
            &mut Session::new("toy"),
            "b.txt ok",
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.text, "wrote b.txt; ok");
}
