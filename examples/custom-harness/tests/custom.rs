//! The custom adapter through the seam on a real `local` workspace.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use auto_swe_agents::{Capability, StaticPatterns};
use auto_swe_example_custom_harness::JsonRpcAdapter;
use auto_swe_models::{Meter, MeterConfig, ModelSpec, PriceCatalog, Tier, TokenCaps};
use auto_swe_runtime::{
    CanonicalPolicy, DECISION_DEADLINE, HarnessRuntime, HarnessRuntimeConfig, MemoryAudit,
    PolicyRequirement, Session, StepBudget, ToolWorkspace, TraceKind, Tracer, TurnRuntime,
    WorkspaceLayout,
};
use auto_swe_sandbox::{
    ExecRequest, LocalBackend, LocalConfig, LocalRoot, WorkspaceBackend, WorkspaceSpec,
};
use auto_swe_scanners::HarnessConfig;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_call_runs_a_refused_one_does_not_and_usage_is_metered() {
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
            eprintln!("skipped: bubblewrap cannot run here ({e})");
            return;
        }
    };
    let handle = backend
        .create(&WorkspaceSpec::new("unused", root))
        .await
        .unwrap();
    let sh = |script: &'static str| {
        let (backend, handle) = (backend.clone(), handle.clone());
        async move {
            let request = ExecRequest::shell(script);
            backend.exec(&handle, &request).await.unwrap().stdout_text()
        }
    };
    sh("mkdir -p /workspace/target-repo && touch /workspace/target-repo/a.rs").await;
    let meter = Arc::new(Meter::new(
        MeterConfig {
            tier: Tier::Standard,
            caps: TokenCaps {
                input: 1_000_000,
                output: 1_000_000,
            },
            usd_cap: None,
        },
        PriceCatalog::builtin(),
    ));
    let tracer = Arc::new(Tracer::in_memory().0);
    let runtime = HarnessRuntime::new(
        Arc::new(JsonRpcAdapter),
        ToolWorkspace::new(backend.clone(), handle.clone(), WorkspaceLayout::default()),
        meter.clone(),
        tracer.clone(),
        Arc::new(MemoryAudit::default()),
        StaticPatterns::builtin().0,
        CanonicalPolicy {
            capabilities: [Capability::Write, Capability::Shell].into(),
            patterns: StaticPatterns::builtin().0,
            harness: HarnessConfig::NotLoaded,
            checkout: "/workspace/target-repo".to_owned(),
        },
        HarnessRuntimeConfig {
            spec: ModelSpec::parse("anthropic/claude-sonnet-4-5").unwrap(),
            max_steps: StepBudget::DEFAULT,
            turn_deadline: Duration::from_secs(60),
            decision_deadline: DECISION_DEADLINE,
            requirement: PolicyRequirement::Required,
        },
    )
    .unwrap();
    let outcome = runtime
        .run_turn(&mut Session::new("s"), "tidy up", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.text, "files: a.rs  saved: no");
    assert_eq!((outcome.usage.input, outcome.usage.output), (260, 17));
    assert_eq!(meter.totals().raw_input, 260);
    assert_eq!(sh("ls -A /workspace/target-repo").await, "a.rs\n");
    let refused: Vec<_> = tracer
        .pending()
        .into_iter()
        .filter(|r| r.kind == TraceKind::ToolCall && r.error.is_some())
        .collect();
    assert_eq!(refused.len(), 1);
    assert!(
        refused[0]
            .error
            .as_ref()
            .unwrap()
            .contains("sensitive file")
    );
}
