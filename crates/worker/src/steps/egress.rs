//! Proxied workspaces for steps: when the host gives the worker an egress policy, every step
//! workspace gets a proxy of its own (`auto-swe-egress`, deny by default) as its only way out,
//! and every request that proxy refuses or cannot carry is written to the run's trace with its
//! reason — so a person can see why a build failed.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use auto_swe_egress::{
    EgressDecision, EgressPolicy, EgressProxy, EgressSink, ProxyConfig, ProxyCredential,
    RefusalChannel, Resolve, Rule, SystemResolver,
};
use auto_swe_interpreter::DispatchError;
use auto_swe_sandbox::{EgressAttachment, EgressSocket, EgressTcpProxy, SecretValue};
use auto_swe_store::{LeaseToken, NewAgentTrace, Spend, Store};
use tokio_util::sync::CancellationToken;

use super::store_failure;

/// The trace kind of a refused (or failed) egress request.
pub const EGRESS_TRACE_KIND: &str = "egress_refused";

/// How step workspaces reach the network: through a proxy of their own applying `policy`.
#[derive(Clone)]
pub struct WorkspaceEgress {
    policy: EgressPolicy,
    resolver: Arc<dyn Resolve>,
    reach: Reach,
}

/// How a workspace reaches its proxy.
#[derive(Debug, Clone)]
enum Reach {
    /// A Unix socket under `sockets`, bridged inside by the program `bridge` (local, docker).
    Socket { bridge: PathBuf, sockets: PathBuf },
    /// TCP: the proxy listens on `bind` and the workspace is given `advertise` and a credential
    /// (a Kubernetes pod, whose `NetworkPolicy` lets it reach this address only).
    Tcp { bind: IpAddr, advertise: IpAddr },
}

impl std::fmt::Debug for WorkspaceEgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceEgress")
            .field("policy", &self.policy)
            .field("reach", &self.reach)
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
            reach: Reach::Socket { bridge, sockets },
        }
    }

    /// Workspaces behind `policy` that reach their proxies over TCP (Kubernetes pods): each
    /// workspace's proxy listens on a port of its own at `bind` and asks every request for a
    /// fresh credential, which only that workspace is given, with the address `advertise` (the
    /// worker's pod IP, say: the one the pods' `NetworkPolicy` lets them reach).
    #[must_use]
    pub fn over_tcp(policy: EgressPolicy, bind: IpAddr, advertise: IpAddr) -> Self {
        Self {
            policy,
            resolver: Arc::new(SystemResolver),
            reach: Reach::Tcp { bind, advertise },
        }
    }

    /// Resolves names with `resolver` instead.
    #[must_use]
    pub fn with_resolver(mut self, resolver: Arc<dyn Resolve>) -> Self {
        self.resolver = resolver;
        self
    }

    /// Starts one workspace's proxy, its decisions going to `trace` (refusals only; `None`:
    /// to the worker's log alone). The policy is the host's, extended with the allow rules of
    /// the team that owns `trace`'s run: the host's deny rules and address checks still win.
    pub(crate) async fn start(
        &self,
        trace: Option<EgressTrace>,
    ) -> Result<RunningEgress, DispatchError> {
        let mut policy = self.policy.clone();
        if let Some(trace) = &trace {
            policy.extend(&team_policy(&trace.team_rules().await?)?);
        }
        let sink: Arc<dyn EgressSink> = match trace {
            Some(trace) => Arc::new(trace.spawn()),
            None => Arc::new(NoSink),
        };
        match &self.reach {
            Reach::Socket { bridge, sockets } => {
                self.start_on_socket(policy, sink, bridge, sockets)
            }
            Reach::Tcp { bind, advertise } => self.start_on_tcp(policy, sink, *bind, *advertise),
        }
    }

    fn proxy(
        &self,
        policy: EgressPolicy,
        sink: Arc<dyn EgressSink>,
        config: ProxyConfig,
    ) -> Arc<EgressProxy> {
        Arc::new(EgressProxy::new(
            policy,
            Arc::clone(&self.resolver),
            sink,
            config,
        ))
    }

    fn start_on_tcp(
        &self,
        policy: EgressPolicy,
        sink: Arc<dyn EgressSink>,
        bind: IpAddr,
        advertise: IpAddr,
    ) -> Result<RunningEgress, DispatchError> {
        let failed = |what: &str, e: std::io::Error| {
            DispatchError::failure("WORKSPACE_EGRESS_FAILED", format!("{what}: {e}"))
        };
        let credential =
            ProxyCredential::generate().map_err(|e| failed("making the proxy's credential", e))?;
        let listener = std::net::TcpListener::bind((bind, 0))
            .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
            .and_then(tokio::net::TcpListener::from_std)
            .map_err(|e| failed("listening for the workspace's proxy", e))?;
        let port = listener
            .local_addr()
            .map_err(|e| failed("reading the proxy's port", e))?
            .port();
        let mut config = ProxyConfig::default();
        config.credential = Some(credential.clone());
        let shutdown = CancellationToken::new();
        tokio::spawn(
            self.proxy(policy, sink, config)
                .serve(listener, shutdown.clone()),
        );
        Ok(RunningEgress {
            attachment: EgressAttachment::Tcp(EgressTcpProxy {
                host: advertise,
                port,
                credential: SecretValue::new(credential.expose()),
                ca_bundle_pem: None,
            }),
            dir: None,
            shutdown,
        })
    }

    fn start_on_socket(
        &self,
        policy: EgressPolicy,
        sink: Arc<dyn EgressSink>,
        bridge: &std::path::Path,
        sockets: &std::path::Path,
    ) -> Result<RunningEgress, DispatchError> {
        use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
        let failed = |what: &str, e: std::io::Error| {
            DispatchError::failure("WORKSPACE_EGRESS_FAILED", format!("{what}: {e}"))
        };
        let name = format!("egress-{}", uuid::Uuid::now_v7().simple());
        let dir = sockets.join(name);
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
            std::fs::symlink_metadata(sockets),
        );
        let trusted = matches!((&mine, &above), (Ok(mine), Ok(above))
            if above.is_dir() && above.uid() == mine.uid() && above.mode() & 0o022 == 0);
        if !trusted {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(DispatchError::non_retryable(
                "WORKSPACE_EGRESS_FAILED",
                format!(
                    "the proxies' socket directory {} is not this process's own, or others may write to it",
                    sockets.display()
                ),
            ));
        }
        let socket = dir.join("egress.sock");
        let listener = tokio::net::UnixListener::bind(&socket)
            .map_err(|e| failed("listening on the proxy's socket", e))?;
        let shutdown = CancellationToken::new();
        tokio::spawn(
            self.proxy(policy, sink, ProxyConfig::default())
                .serve_unix(listener, shutdown.clone()),
        );
        Ok(RunningEgress {
            attachment: EgressAttachment::Socket(EgressSocket {
                socket,
                bridge: bridge.to_owned(),
                ca_bundle: None,
            }),
            dir: Some(dir),
            shutdown,
        })
    }
}

/// A team's allow rules as a policy to extend the host's with. The rules were checked when they
/// were saved; one that no longer parses refuses the workspace rather than being skipped.
fn team_policy(rules: &[String]) -> Result<EgressPolicy, DispatchError> {
    let mut policy = EgressPolicy::deny_all();
    for text in rules {
        let rule = Rule::parse(text).map_err(|e| {
            DispatchError::non_retryable(
                "EGRESS_TEAM_RULE_INVALID",
                format!("the team's egress rule `{text}`: {e}"),
            )
        })?;
        policy.allow(rule);
    }
    Ok(policy)
}

/// Decisions go to the proxy's own log lines only.
struct NoSink;

impl EgressSink for NoSink {
    fn record(&self, _decision: &EgressDecision) {}
}

/// One workspace's running proxy; it stops, and its socket goes, when this is dropped.
#[derive(Debug)]
pub(crate) struct RunningEgress {
    pub(crate) attachment: EgressAttachment,
    /// The socket's directory (a Unix socket proxy).
    dir: Option<PathBuf>,
    shutdown: CancellationToken,
}

impl Drop for RunningEgress {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
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

    /// The egress allow rules of the team that owns the run (none for a run without a team).
    async fn team_rules(&self) -> Result<Vec<String>, DispatchError> {
        let run = self
            .store
            .get_run(&self.token.run_id)
            .await
            .map_err(|e| store_failure(&e))?;
        let Some(team) = run.team_id else {
            return Ok(Vec::new());
        };
        let team = self
            .store
            .get_team(&team)
            .await
            .map_err(|e| store_failure(&e))?;
        Ok(team.egress_allow)
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

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use auto_swe_egress::{EgressPolicy, Rule, StaticResolver};
    use auto_swe_scanners::UrlPolicy;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    #[test]
    fn a_team_rule_that_does_not_parse_refuses_the_workspace() {
        let policy = team_policy(&["GET pkg.example.test:443".to_owned()]).unwrap();
        let get = auto_swe_egress::Access::Http {
            method: "GET".to_owned(),
        };
        assert!(policy.decide("pkg.example.test", 443, &get).is_ok());
        assert!(policy.decide("other.example.test", 443, &get).is_err());
        for bad in ["pkg.example.test", "*:443", "GET"] {
            let error = team_policy(&[bad.to_owned()]).unwrap_err();
            assert_eq!(error.code, "EGRESS_TEAM_RULE_INVALID", "{bad}");
        }
    }

    /// An upstream answering every connection with `200 registry`.
    async fn registry() -> u16 {
        let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut head = [0_u8; 4096];
                let _ = stream.read(&mut head).await;
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\nconnection: close\r\n\r\nregistry")
                    .await;
            }
        });
        port
    }

    /// One plain request through the proxy at `port`, with `authorization` when given; the
    /// whole answer.
    async fn through(port: u16, origin: &str, authorization: Option<&str>) -> String {
        let mut stream = TcpStream::connect((LOOPBACK, port)).await.unwrap();
        let credential = authorization
            .map(|value| format!("proxy-authorization: {value}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "GET http://{origin}/ HTTP/1.1\r\nhost: {origin}\r\n{credential}connection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        String::from_utf8_lossy(&answer).into_owned()
    }

    #[tokio::test]
    async fn a_tcp_proxy_serves_only_the_workspace_holding_its_credential() {
        let origin = format!("registry.test:{}", registry().await);
        let mut addresses = UrlPolicy::new();
        addresses.allow_private_origin(&origin).unwrap();
        let mut policy = EgressPolicy::deny_all();
        policy.allow(Rule::parse(&origin).unwrap());
        let egress =
            WorkspaceEgress::over_tcp(policy.with_address_policy(addresses), LOOPBACK, LOOPBACK)
                .with_resolver(Arc::new(
                    StaticResolver::new().with("registry.test", &[LOOPBACK]),
                ));
        let running = egress.start(None).await.unwrap();
        let EgressAttachment::Tcp(proxy) = &running.attachment else {
            panic!(
                "a TCP proxy's attachment is a TCP one: {:?}",
                running.attachment
            );
        };
        assert_eq!(proxy.host, LOOPBACK);
        let basic = |user_and_password: &str| {
            use base64::Engine as _;
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(user_and_password)
            )
        };
        let right = basic(&format!("auto-swe:{}", proxy.credential.expose()));
        let answer = through(proxy.port, &origin, Some(&right)).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("registry"), "{answer}");
        for wrong in [
            None,
            Some(basic("auto-swe:another-workspace's")),
            Some(basic(&format!("Auto-swe:{}", proxy.credential.expose()))),
        ] {
            let answer = through(proxy.port, &origin, wrong.as_deref()).await;
            assert!(answer.starts_with("HTTP/1.1 407"), "{wrong:?}: {answer}");
        }
        // A second workspace's proxy has a port and a credential of its own.
        let other = egress.start(None).await.unwrap();
        let EgressAttachment::Tcp(other_proxy) = &other.attachment else {
            panic!("a TCP attachment");
        };
        assert_ne!(other_proxy.port, proxy.port);
        assert_ne!(other_proxy.credential.expose(), proxy.credential.expose());
        let answer = through(other_proxy.port, &origin, Some(&right)).await;
        assert!(answer.starts_with("HTTP/1.1 407"), "{answer}");
        // Dropped, the proxy stops listening.
        let port = proxy.port;
        drop(running);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(TcpStream::connect((LOOPBACK, port)).await.is_err());
    }
}
