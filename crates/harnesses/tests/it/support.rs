//! A real `local` workspace on the host network (the mock providers listen on loopback), the
//! pinned CLIs mounted read-only, and a harness runtime over it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use auto_swe_agents::{Capability, StaticPatterns};
use auto_swe_models::{Meter, MeterConfig, ModelSpec, PriceCatalog, Tier, TokenCaps};
use auto_swe_runtime::{
    CanonicalPolicy, DECISION_DEADLINE, HarnessAdapter, HarnessError, HarnessRuntime,
    HarnessRuntimeConfig, MemoryAudit, PolicyRequirement, StepBudget, ToolWorkspace, Tracer,
    WorkspaceLayout,
};
use auto_swe_sandbox::{
    ExecRequest, LocalBackend, LocalConfig, LocalRoot, Mount, MountAccess, NetworkMode,
    WorkspaceBackend, WorkspaceHandle, WorkspaceSpec,
};
use auto_swe_scanners::HarnessConfig;

pub(crate) const CHECKOUT: &str = "/workspace/target-repo";

pub(crate) struct Ws {
    pub(crate) backend: Arc<LocalBackend>,
    pub(crate) handle: WorkspaceHandle,
    _state: tempfile::TempDir,
}

/// A workspace with each `(host directory, existing directory inside)` mounted read-only, or
/// `None` (with the reason printed) when bubblewrap cannot run here.
pub(crate) async fn workspace(mounts: &[(&Path, &str)]) -> Option<Ws> {
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
                std::env::var("AUTO_SWE_REQUIRE_BWRAP").as_deref() != Ok("1")
                    && std::env::var("AUTO_SWE_REQUIRE_HARNESS_CLIS").as_deref() != Ok("1"),
                "bubblewrap required: {e}"
            );
            eprintln!("skipped: bubblewrap cannot run here ({e})");
            return None;
        }
    };
    let mut spec = WorkspaceSpec::new("unused", root);
    // The host network, so the CLI reaches the mock providers on loopback; its only resolver
    // is loopback too, so no lookup leaves the machine.
    spec.network = NetworkMode::Host;
    spec.dns = vec![std::net::IpAddr::from([127, 0, 0, 1])];
    spec.mounts = mounts
        .iter()
        .map(|(source, target)| Mount {
            source: source.to_path_buf(),
            target: (*target).to_owned(),
            access: MountAccess::ReadOnly,
        })
        .collect();
    let handle = backend.create(&spec).await.unwrap();
    let ws = Ws {
        backend,
        handle,
        _state: state,
    };
    ws.sh(&format!("mkdir -p {CHECKOUT}")).await;
    Some(ws)
}

/// The pinned CLI named by `variable`, or `None` (reason printed) when it is not installed and
/// `AUTO_SWE_REQUIRE_HARNESS_CLIS` is unset.
pub(crate) fn cli(variable: &str, default: &str) -> Option<PathBuf> {
    let path = std::env::var_os(variable).map_or_else(|| PathBuf::from(default), PathBuf::from);
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var("AUTO_SWE_REQUIRE_HARNESS_CLIS").as_deref() != Ok("1"),
        "{variable}: {} is missing (run scripts/dev-harness-clis.sh)",
        path.display()
    );
    eprintln!(
        "skipped: {} is missing; `source scripts/dev-harness-clis.sh` installs it",
        path.display()
    );
    None
}

impl Ws {
    /// Runs `script` in the workspace; a script that fails fails the test with its stderr,
    /// so a failed exec is never read as empty output.
    pub(crate) async fn sh(&self, script: &str) -> String {
        let out = self
            .backend
            .exec(&self.handle, &ExecRequest::shell(script))
            .await
            .unwrap();
        assert_eq!(
            out.status,
            0,
            "`{script}` failed in the workspace: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout_text()
    }

    /// Whether nothing exists at `path` in the workspace.
    pub(crate) async fn absent(&self, path: &str) -> bool {
        self.sh(&format!("test -e '{path}' && echo present || true"))
            .await
            .is_empty()
    }

    pub(crate) async fn write(&self, path: &str, contents: &str) {
        let request = ExecRequest::new([
            "sh",
            "-c",
            r#"mkdir -p "$(dirname "$1")" && cat > "$1""#,
            "sh",
            path,
        ])
        .stdin(contents.as_bytes().to_vec());
        let out = self.backend.exec(&self.handle, &request).await.unwrap();
        assert_eq!(out.status, 0);
    }

    pub(crate) fn runtime(
        &self,
        adapter: Arc<dyn HarnessAdapter>,
        meter: Arc<Meter>,
        tracer: Arc<Tracer>,
        spec: &str,
        turn_deadline: Duration,
        requirement: PolicyRequirement,
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
                capabilities: [
                    Capability::Read,
                    Capability::Search,
                    Capability::Write,
                    Capability::Shell,
                ]
                .into(),
                patterns: StaticPatterns::builtin().0,
                harness: HarnessConfig::NotLoaded,
                checkout: CHECKOUT.to_owned(),
            },
            HarnessRuntimeConfig {
                spec: ModelSpec::parse(spec).unwrap(),
                max_steps: StepBudget::DEFAULT,
                turn_deadline,
                decision_deadline: DECISION_DEADLINE,
                requirement,
            },
        )
    }
}

pub(crate) fn meter() -> Arc<Meter> {
    Arc::new(Meter::new(
        MeterConfig {
            tier: Tier::Standard,
            caps: TokenCaps {
                input: 10_000_000,
                output: 10_000_000,
            },
            usd_cap: None,
        },
        PriceCatalog::builtin(),
    ))
}

/// With `AUTO_SWE_RECORD_GOLDEN=1`, a transcript that writes every line the CLI prints to
/// `tests/golden/<name>.jsonl` (started afresh): how the golden corpus is recorded when a pin
/// moves. The shape is kept and the bulk cut: strings to 200 characters, arrays to 3 items
/// (the handshake's answer lists every built-in command with its description).
pub(crate) fn recorder(name: &str) -> Option<auto_swe_harnesses::Transcript> {
    if std::env::var("AUTO_SWE_RECORD_GOLDEN").as_deref() != Ok("1") {
        return None;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.jsonl"));
    std::fs::write(&path, "").unwrap();
    let file = std::sync::Mutex::new(
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap(),
    );
    Some(Arc::new(move |line: &str| {
        use std::io::Write as _;
        let mut value: serde_json::Value = serde_json::from_str(line).unwrap();
        trim(&mut value);
        let mut file = file.lock().unwrap();
        writeln!(file, "{value}").unwrap();
    }))
}

fn trim(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) if s.chars().count() > 200 => {
            *s = s.chars().take(200).collect();
        }
        serde_json::Value::Array(items) => {
            items.truncate(3);
            items.iter_mut().for_each(trim);
        }
        serde_json::Value::Object(map) => map.values_mut().for_each(trim),
        _ => {}
    }
}
