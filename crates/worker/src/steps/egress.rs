//! Proxied workspaces for steps: when the host gives the worker an egress policy, every step
//! workspace gets a proxy of its own (`auto-swe-egress`, deny by default) as its only way out,
//! and every request that proxy refuses or cannot carry is written to the run's trace with its
//! reason — so a person can see why a build failed.

use std::path::PathBuf;
use std::sync::Arc;

use auto_swe_egress::{
    EgressDecision, EgressPolicy, EgressProxy, EgressSink, ProxyConfig, RefusalChannel, Resolve,
    SystemResolver,
};
use auto_swe_interpreter::DispatchError;
use auto_swe_sandbox::EgressSocket;
use auto_swe_store::{LeaseToken, NewAgentTrace, Spend, Store};
use tokio_util::sync::CancellationToken;

/// The trace kind of a refused (or failed) egress request.
pub const EGRESS_TRACE_KIND: &str = "egress_refused";

/// How step workspaces reach the network: through a proxy of their own applying `policy`.
#[derive(Clone)]
pub struct WorkspaceEgress {
    policy: EgressPolicy,
    resolver: Arc<dyn Resolve>,
    bridge: PathBuf,
    sockets: PathBuf,
}

impl std::fmt::Debug for WorkspaceEgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceEgress")
            .field("policy", &self.policy)
            .field("bridge", &self.bridge)
            .finish_non_exhaustive()
    }
}

impl WorkspaceEgress {
    /// Workspaces behind `policy` (see [`EgressPolicy::preset`] and [`EgressPolicy::extend`] for
    /// a team's additions), bridged by the program `bridge` (see
    /// `auto_swe_sandbox::bridge::locate_bridge`), with their proxies' sockets under `sockets`
    /// (a directory the sandbox's account may pass through), resolving with the host's resolver.
    #[must_use]
    pub fn new(policy: EgressPolicy, bridge: PathBuf, sockets: PathBuf) -> Self {
        Self {
            policy,
            resolver: Arc::new(SystemResolver),
            bridge,
            sockets,
        }
    }

    /// Resolves names with `resolver` instead.
    #[must_use]
    pub fn with_resolver(mut self, resolver: Arc<dyn Resolve>) -> Self {
        self.resolver = resolver;
        self
    }

    /// Starts one workspace's proxy, its decisions going to `trace` (refusals only; `None`:
    /// to the worker's log alone).
    pub(crate) fn start(&self, trace: Option<EgressTrace>) -> Result<RunningEgress, DispatchError> {
        use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
        let failed = |what: &str, e: std::io::Error| {
            DispatchError::failure("WORKSPACE_EGRESS_FAILED", format!("{what}: {e}"))
        };
        let name = format!("egress-{}", uuid::Uuid::now_v7().simple());
        let dir = self.sockets.join(name);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o711)
            .create(&dir)
            .map_err(|e| failed("making the proxy's socket directory", e))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))
            .map_err(|e| failed("opening the proxy's socket directory", e))?;
        // The directory above must be this process's own and writable by no one else: another
        // account that could swap a socket in it could stand in for the proxy.
        let (mine, above) = (
            std::fs::symlink_metadata(&dir),
            std::fs::symlink_metadata(&self.sockets),
        );
        let trusted = matches!((&mine, &above), (Ok(mine), Ok(above))
            if above.is_dir() && above.uid() == mine.uid() && above.mode() & 0o022 == 0);
        if !trusted {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(DispatchError::non_retryable(
                "WORKSPACE_EGRESS_FAILED",
                format!(
                    "the proxies' socket directory {} is not this process's own, or others may write to it",
                    self.sockets.display()
                ),
            ));
        }
        let socket = dir.join("egress.sock");
        let listener = tokio::net::UnixListener::bind(&socket)
            .map_err(|e| failed("listening on the proxy's socket", e))?;
        let sink: Arc<dyn EgressSink> = match trace {
            Some(trace) => Arc::new(trace.spawn()),
            None => Arc::new(NoSink),
        };
        let proxy = Arc::new(EgressProxy::new(
            self.policy.clone(),
            Arc::clone(&self.resolver),
            sink,
            ProxyConfig::default(),
        ));
        let shutdown = CancellationToken::new();
        tokio::spawn(proxy.serve_unix(listener, shutdown.clone()));
        Ok(RunningEgress {
            attachment: EgressSocket {
                socket,
                bridge: self.bridge.clone(),
                ca_bundle: None,
            },
            dir,
            shutdown,
        })
    }
}

/// Decisions go to the proxy's own log lines only.
struct NoSink;

impl EgressSink for NoSink {
    fn record(&self, _decision: &EgressDecision) {}
}

/// One workspace's running proxy; it stops, and its socket goes, when this is dropped.
#[derive(Debug)]
pub(crate) struct RunningEgress {
    pub(crate) attachment: EgressSocket,
    dir: PathBuf,
    shutdown: CancellationToken,
}

impl Drop for RunningEgress {
    fn drop(&mut self) {
        self.shutdown.cancel();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Where a workspace's refused requests go: the run's trace, under its lease, attributed to the
/// node whose workspace it is.
#[derive(Clone)]
pub struct EgressTrace {
    store: Store,
    token: LeaseToken,
    node: Option<String>,
    recording: Option<String>,
}

impl std::fmt::Debug for EgressTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressTrace")
            .field("run", &self.token.run_id)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl EgressTrace {
    /// The trace of the run `token` leases, for the node `node` (recording `recording`).
    #[must_use]
    pub fn new(
        store: Store,
        token: LeaseToken,
        node: Option<String>,
        recording: Option<String>,
    ) -> Self {
        Self {
            store,
            token,
            node,
            recording,
        }
    }

    /// A sink that hands refusals to a task writing them to the store (the proxy never waits on
    /// the store). The task ends with the proxy.
    fn spawn(self) -> RefusalChannel {
        let (sink, mut received) = RefusalChannel::new();
        tokio::spawn(async move {
            while let Some(first) = received.recv().await {
                let mut batch = vec![first];
                while let Ok(more) = received.try_recv() {
                    batch.push(more);
                }
                let rows = batch.iter().map(|d| self.row(d)).collect();
                if let Err(error) = self.store.append_traces(&self.token, rows).await {
                    tracing::warn!(%error, "egress refusals were not written to the run's trace");
                }
            }
        });
        sink
    }

    fn row(&self, decision: &EgressDecision) -> NewAgentTrace {
        NewAgentTrace {
            run_id: Some(self.token.run_id.clone()),
            workflow_id: self.token.run_id.clone(),
            node_id: self.node.clone(),
            recording_id: self.recording.clone(),
            activity: "egress".to_owned(),
            kind: EGRESS_TRACE_KIND.to_owned(),
            payload: serde_json::to_value(decision).unwrap_or(serde_json::Value::Null),
            spend_owner_org_id: None,
            model: None,
            usage: Spend::default(),
        }
    }
}
