//! Shared setup: a real `local` workspace with a small repository, tool sets and clients
//! against the mock model servers.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use auto_swe_agents::StaticPatterns;
use auto_swe_models::testing::{MockServer, MockTurn};
use auto_swe_models::{
    Api, ApiKey, ClientConfig, Endpoint, Meter, MeterConfig, ModelClient, ModelSpec, PriceCatalog,
    ProviderClient, RetryPolicy, Tier, TokenCaps,
};
use auto_swe_runtime::{
    LoopConfig, MemoryAudit, NativeLoop, ToolConfig, ToolSet, ToolSetConfig, ToolWorkspace, Tracer,
    WorkspaceLayout,
};
use auto_swe_sandbox::{
    ExecOutput, ExecRequest, LocalBackend, LocalConfig, LocalRoot, WorkspaceBackend,
    WorkspaceHandle, WorkspaceSpec,
};
use auto_swe_scanners::{CompiledPatterns, UrlPolicy};

pub(crate) const KEY: &str = "test-key-not-a-secret";

fn rootfs() -> Option<PathBuf> {
    let dir = std::env::var_os("AUTO_SWE_ROOTFS").map_or_else(
        || PathBuf::from("/var/cache/auto-swe/rootfs/bookworm"),
        PathBuf::from,
    );
    dir.join(".auto-swe-rootfs-v1").exists().then_some(dir)
}

/// A workspace with a repository at `/workspace/target-repo`.
pub(crate) struct Ws {
    pub(crate) backend: Arc<LocalBackend>,
    pub(crate) handle: WorkspaceHandle,
    _state: tempfile::TempDir,
}

impl Ws {
    pub(crate) async fn sh(&self, script: &str) -> ExecOutput {
        self.backend
            .exec(
                &self.handle,
                &ExecRequest::shell(script).timeout(Duration::from_secs(60)),
            )
            .await
            .unwrap()
    }

    pub(crate) fn tools(&self) -> ToolWorkspace {
        ToolWorkspace::new(
            self.backend.clone(),
            self.handle.clone(),
            WorkspaceLayout::default(),
        )
    }
}

impl Drop for Ws {
    fn drop(&mut self) {
        let backend = self.backend.clone();
        let handle = self.handle.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = backend.remove(&handle).await;
            });
        }
    }
}

/// A `local` workspace, or `None` when bubblewrap is missing (a failure under
/// `AUTO_SWE_REQUIRE_BWRAP=1`).
pub(crate) async fn workspace() -> Option<Ws> {
    let state = tempfile::tempdir().unwrap();
    let root = rootfs().map_or(LocalRoot::HostSystem, LocalRoot::Rootfs);
    let mut config = LocalConfig::new(root.clone());
    config.state_dir = state.path().to_path_buf();
    let backend = match LocalBackend::new(config) {
        Ok(b) => Arc::new(b),
        Err(e) => {
            assert!(
                std::env::var("AUTO_SWE_REQUIRE_BWRAP").as_deref() != Ok("1"),
                "bubblewrap required: {e}"
            );
            eprintln!("skipping: {e}");
            return None;
        }
    };
    let mut spec = WorkspaceSpec::new("unused", root);
    "runtime".clone_into(&mut spec.label);
    spec.limits.memory_bytes = 512 * 1024 * 1024;
    spec.limits.pids = 256;
    let handle = backend.create(&spec).await.unwrap();
    let ws = Ws {
        backend,
        handle,
        _state: state,
    };
    let out = ws
        .sh(
            "mkdir -p /workspace/target-repo/src && cd /workspace/target-repo \
             && printf 'fn add(a: i32, b: i32) -> i32 { a - b }\\n' > src/lib.rs \
             && printf '#!/bin/sh\\ngrep -q \"a + b\" src/lib.rs && echo \"test add ... ok\" || { echo \"test add ... FAILED\"; exit 1; }\\n' > test.sh \
             && printf 'outside\\n' > /workspace/outside.txt \
             && ln -s /workspace/outside.txt link-out",
        )
        .await;
    assert_eq!(out.status, 0, "{}", out.stderr_text());
    Some(ws)
}

pub(crate) fn patterns() -> Arc<CompiledPatterns> {
    StaticPatterns::builtin().0
}

pub(crate) fn toolset(ws: &Ws, tracer: Arc<Tracer>, audit: Arc<MemoryAudit>) -> ToolSet {
    toolset_with(ws, tracer, audit, ToolConfig::default())
}

pub(crate) fn toolset_with_skills(
    ws: &Ws,
    tracer: Arc<Tracer>,
    audit: Arc<MemoryAudit>,
    skills: Vec<auto_swe_agents::PromptSkill>,
) -> ToolSet {
    ToolSet::new(ToolSetConfig {
        workspace: ws.tools(),
        patterns: patterns(),
        workspace_tools: auto_swe_agents::implementer_workspace_tools(None),
        skills,
        lessons: None,
        config: ToolConfig::default(),
        audit,
        tracer,
    })
}

pub(crate) fn toolset_with(
    ws: &Ws,
    tracer: Arc<Tracer>,
    audit: Arc<MemoryAudit>,
    config: ToolConfig,
) -> ToolSet {
    ToolSet::new(ToolSetConfig {
        workspace: ws.tools(),
        patterns: patterns(),
        workspace_tools: auto_swe_agents::implementer_workspace_tools(None),
        skills: Vec::new(),
        lessons: None,
        config,
        audit,
        tracer,
    })
}

pub(crate) async fn mock(script: Vec<MockTurn>) -> MockServer {
    MockServer::start(Api::AnthropicMessages, Some(KEY), script)
        .await
        .unwrap()
}

pub(crate) fn client(server: &MockServer) -> Arc<dyn ModelClient> {
    let mut policy = UrlPolicy::default();
    policy.allow_private_origin(&server.origin()).unwrap();
    let mut config = ClientConfig::new(
        ModelSpec::parse("anthropic/claude-sonnet-4-5").unwrap(),
        ApiKey::new(KEY),
    );
    config.endpoint = Endpoint::BaseUrl(url::Url::parse(&server.base_url()).unwrap());
    config.policy = Arc::new(policy);
    config.retry = RetryPolicy::none();
    Arc::new(ProviderClient::new(config).unwrap())
}

pub(crate) fn meter(input_cap: u64) -> Arc<Meter> {
    Arc::new(Meter::new(
        MeterConfig {
            tier: Tier::Standard,
            caps: TokenCaps {
                input: input_cap,
                output: 1_000_000,
            },
            usd_cap: None,
        },
        PriceCatalog::builtin(),
    ))
}

pub(crate) fn native(
    client: Arc<dyn ModelClient>,
    meter: Arc<Meter>,
    tools: ToolSet,
    tracer: Arc<Tracer>,
    config: LoopConfig,
) -> NativeLoop {
    NativeLoop::new(client, meter, Arc::new(tools), tracer, patterns(), config)
}
