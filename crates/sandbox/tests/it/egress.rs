//! Proxied workspaces: the egress proxy (on a Unix socket, bound in) is the only way out.
//! Upstreams are servers on this machine's loopback that the proxy is told, name by name, to
//! reach; inside the workspace that loopback is not there at all.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use auto_swe_egress::{
    EgressPolicy, EgressProxy, EgressVerdict, MemorySink, ProxyConfig, Rule, StaticResolver,
};
use auto_swe_sandbox::{
    EgressSocket, ExecOutput, ExecRequest, LocalRoot, NetworkMode, WorkspaceBackend,
    WorkspaceHandle, WorkspaceSpec,
};
use auto_swe_scanners::UrlPolicy;
use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, UnixListener};
use tokio_util::sync::CancellationToken;

use crate::harness;

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Files served over plain HTTP on loopback; every request path recorded.
pub(crate) struct FileServer {
    pub(crate) port: u16,
    pub(crate) paths: Arc<Mutex<Vec<String>>>,
    shutdown: CancellationToken,
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl FileServer {
    pub(crate) async fn start(root: PathBuf) -> Self {
        let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let paths = Arc::new(Mutex::new(Vec::new()));
        let shutdown = CancellationToken::new();
        let (seen, stop) = (Arc::clone(&paths), shutdown.clone());
        tokio::spawn(async move {
            loop {
                let stream = tokio::select! {
                    () = stop.cancelled() => return,
                    accepted = listener.accept() => accepted.unwrap().0,
                };
                let (root, seen) = (root.clone(), Arc::clone(&seen));
                let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let (root, seen) = (root.clone(), Arc::clone(&seen));
                    async move {
                        let path = request.uri().path().trim_start_matches('/').to_owned();
                        seen.lock().unwrap().push(path.clone());
                        // A directory serves its `index.html`, as a package index does.
                        let file = (!path.split('/').any(|s| s == ".."))
                            .then(|| root.join(&path))
                            .map(|p| if p.is_dir() { p.join("index.html") } else { p })
                            .filter(|p| p.is_file());
                        let response = if let Some(file) = file {
                            let html = file.extension().is_some_and(|e| e == "html");
                            let mut found = hyper::Response::new(Full::new(Bytes::from(
                                tokio::fs::read(file).await.unwrap(),
                            )));
                            if html {
                                found.headers_mut().insert(
                                    hyper::header::CONTENT_TYPE,
                                    hyper::header::HeaderValue::from_static("text/html"),
                                );
                            }
                            found
                        } else {
                            let mut missing = hyper::Response::new(Full::new(Bytes::new()));
                            *missing.status_mut() = hyper::StatusCode::NOT_FOUND;
                            missing
                        };
                        Ok::<_, std::convert::Infallible>(response)
                    }
                });
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            port,
            paths,
            shutdown,
        }
    }

    pub(crate) fn requests(&self) -> Vec<String> {
        self.paths.lock().unwrap().clone()
    }
}

/// The egress proxy of one workspace, on a Unix socket in a directory the sandbox's account
/// may pass through.
pub(crate) struct SocketProxy {
    pub(crate) attachment: EgressSocket,
    pub(crate) sink: Arc<MemorySink>,
    shutdown: CancellationToken,
    dir: tempfile::TempDir,
}

impl Drop for SocketProxy {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl SocketProxy {
    /// A proxy allowing exactly `allowed` (`host:port` rules whose hosts resolve to loopback,
    /// opted in origin by origin) and resolving `names` to loopback.
    pub(crate) fn start(allowed: &[String], names: &[&str]) -> Self {
        Self::start_inner(allowed, names, None)
    }

    /// [`SocketProxy::start`] intercepting `git`'s host.
    pub(crate) fn start_with_git(
        allowed: &[String],
        names: &[&str],
        git: auto_swe_egress::GitAccess,
    ) -> Self {
        Self::start_inner(allowed, names, Some(git))
    }

    /// The directory of the socket (the sandbox's account may pass through it).
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn start_inner(
        allowed: &[String],
        names: &[&str],
        git: Option<auto_swe_egress::GitAccess>,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o711),
        )
        .unwrap();
        let socket = dir.path().join("egress.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let mut addresses = UrlPolicy::new();
        let mut policy = EgressPolicy::deny_all();
        for rule in allowed {
            addresses.allow_private_origin(rule).unwrap();
            policy.allow(Rule::parse(rule).unwrap());
        }
        let policy = policy.with_address_policy(addresses);
        let resolver = names.iter().fold(StaticResolver::new(), |resolver, name| {
            resolver.with(name, &[LOOPBACK])
        });
        let sink = Arc::new(MemorySink::new());
        let mut proxy = EgressProxy::new(
            policy,
            Arc::new(resolver),
            sink.clone(),
            ProxyConfig::default(),
        );
        if let Some(git) = git {
            proxy = proxy.with_git(git);
        }
        let proxy = Arc::new(proxy);
        let shutdown = CancellationToken::new();
        tokio::spawn(proxy.serve_unix(listener, shutdown.clone()));
        Self {
            attachment: EgressSocket {
                socket,
                bridge: PathBuf::from(env!("CARGO_BIN_EXE_auto-swe-netbridge")),
                ca_bundle: None,
            },
            sink,
            shutdown,
            dir,
        }
    }

    pub(crate) fn verdicts(&self) -> Vec<(String, bool)> {
        self.sink
            .decisions()
            .into_iter()
            .map(|d| {
                (
                    format!("{}:{}", d.host, d.port),
                    matches!(d.verdict, EgressVerdict::Allowed { .. }),
                )
            })
            .collect()
    }
}

pub(crate) fn proxied(mut spec: WorkspaceSpec, proxy: &SocketProxy) -> WorkspaceSpec {
    spec.network = NetworkMode::Proxy;
    spec.egress = Some(proxy.attachment.clone().into());
    spec
}

pub(crate) async fn sh(
    backend: &dyn WorkspaceBackend,
    ws: &WorkspaceHandle,
    script: &str,
) -> ExecOutput {
    backend
        .exec(
            ws,
            &ExecRequest::new(["/bin/sh", "-c", script]).timeout(Duration::from_secs(60)),
        )
        .await
        .unwrap()
}

/// A program of this host's, run outside any sandbox to set up what the upstreams serve.
#[expect(
    clippy::disallowed_methods,
    reason = "the test prepares served files with the host's git and python3"
)]
fn host_command(program: &str) -> std::process::Command {
    std::process::Command::new(program)
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A bare repository with one commit, served as files (git's dumb HTTP protocol).
pub(crate) fn served_repository(served: &Path) {
    let work = tempfile::tempdir().unwrap();
    let git = |dir: &Path, args: &[&str]| {
        let out = host_command("git")
            .current_dir(dir)
            .env("HOME", work.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.test"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
    };
    let source = work.path().join("source");
    std::fs::create_dir(&source).unwrap();
    git(&source, &["init", "-q", "-b", "main"]);
    std::fs::write(source.join("README.md"), "cloned through the proxy\n").unwrap();
    git(&source, &["add", "README.md"]);
    git(&source, &["commit", "-qm", "first"]);
    let bare = served.join("repo.git");
    git(
        work.path(),
        &[
            "clone",
            "-q",
            "--bare",
            source.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    git(&bare, &["update-server-info"]);
}

/// git in the workspace clones [`served_repository`]'s repository from `origin` through the
/// proxy.
async fn clones_through_the_proxy(
    backend: &dyn WorkspaceBackend,
    ws: &WorkspaceHandle,
    origin: &str,
) {
    let cloned = sh(
        backend,
        ws,
        &format!(
            "git clone -q http://{origin}/repo.git /workspace/clone && cat /workspace/clone/README.md"
        ),
    )
    .await;
    assert_eq!(cloned.status, 0, "{}", text(&cloned.stderr));
    assert_eq!(cloned.stdout_text(), "cloned through the proxy\n");
}

/// A one-file wheel and the simple index page that lists it, as a package index serves them.
fn served_index(served: &Path) {
    let made = host_command("python3")
        .current_dir(served)
        .args([
            "-c",
            r#"
import os, zipfile
os.makedirs("simple/demo-pkg", exist_ok=True)
name = "demo_pkg-1.0-py3-none-any.whl"
with zipfile.ZipFile(name, "w") as w:
    w.writestr("demo_pkg/__init__.py", "VALUE = 1\n")
    w.writestr("demo_pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n")
    w.writestr("demo_pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    w.writestr("demo_pkg-1.0.dist-info/RECORD", "")
with open("simple/demo-pkg/index.html", "w") as f:
    f.write('<html><body><a href="../../%s">%s</a></body></html>' % (name, name))
"#,
        ])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made.stderr));
}

/// Local: the host's own tools (curl, pip, git) in a proxied workspace reach the allowed
/// registry through the proxy, get a 403 anywhere else, and reach nothing directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxied_local_workspace_reaches_only_what_the_proxy_allows() {
    let state = tempfile::tempdir().unwrap();
    let Some((backend, _)) = harness::local(&state) else {
        return;
    };
    let served = tempfile::tempdir().unwrap();
    std::fs::write(served.path().join("hello.txt"), "hello from the registry\n").unwrap();
    served_repository(served.path());
    served_index(served.path());
    let upstream = FileServer::start(served.path().to_owned()).await;
    let origin = format!("registry.test:{}", upstream.port);
    let proxy = SocketProxy::start(
        std::slice::from_ref(&origin),
        &["registry.test", "other.test"],
    );
    // The host's tools (curl, python3 with pip): the workspace sees the host's /usr.
    let spec = proxied(harness::spec("unused", LocalRoot::HostSystem), &proxy);
    let ws = backend.create(&spec).await.unwrap();

    let fetched = sh(
        &backend,
        &ws,
        &format!("curl -sSf http://{origin}/hello.txt"),
    )
    .await;
    assert_eq!(fetched.status, 0, "{}", text(&fetched.stderr));
    assert_eq!(fetched.stdout_text(), "hello from the registry\n");

    let other = format!("other.test:{}", upstream.port);
    let refused = sh(
        &backend,
        &ws,
        &format!("curl -sS -o /dev/null -w '%{{http_code}}' http://{other}/hello.txt"),
    )
    .await;
    assert_eq!(refused.stdout_text(), "403", "{}", text(&refused.stderr));

    receive_buffers_are_the_workspace_s(&backend, &ws).await;

    clones_through_the_proxy(&backend, &ws, &origin).await;

    let pip = sh(
        &backend,
        &ws,
        &format!(
            "python3 -m pip download --no-cache-dir --no-deps --disable-pip-version-check \
             --trusted-host registry.test --index-url http://{origin}/simple -d /workspace/wheels demo-pkg >/dev/null && ls /workspace/wheels"
        ),
    )
    .await;
    assert_eq!(pip.status, 0, "{}", text(&pip.stderr));
    assert_eq!(pip.stdout_text(), "demo_pkg-1.0-py3-none-any.whl\n");

    // Past the proxy there is nothing: no interface but loopback, and the upstream's address
    // is this workspace's own empty loopback.
    let before = upstream.requests().len();
    let direct = sh(
        &backend,
        &ws,
        &format!(
            "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:{}/hello.txt",
            upstream.port
        ),
    )
    .await;
    assert_eq!(direct.stdout_text(), "lo\n");
    assert_eq!(
        direct.status,
        7,
        "curl cannot connect: {}",
        text(&direct.stderr)
    );
    assert_eq!(upstream.requests().len(), before);

    let verdicts = proxy.verdicts();
    assert!(verdicts.contains(&(origin.clone(), true)), "{verdicts:?}");
    assert!(verdicts.contains(&(other, false)), "{verdicts:?}");
    assert!(
        verdicts
            .iter()
            .all(|(target, allowed)| *allowed == (*target == origin)),
        "{verdicts:?}"
    );
    backend.remove(&ws).await.unwrap();
}

/// Every exec of a proxied workspace (each in a network namespace of its own on `local`) starts
/// with the workspace's TCP receive buffers, and the host's stay as they were.
async fn receive_buffers_are_the_workspace_s(backend: &dyn WorkspaceBackend, ws: &WorkspaceHandle) {
    let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let host = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").unwrap();
    for _ in 0..3 {
        let read = sh(backend, ws, "cat /proc/sys/net/ipv4/tcp_rmem").await;
        assert_eq!(read.status, 0, "{}", text(&read.stderr));
        assert_eq!(
            words(&read.stdout_text()),
            auto_swe_egress::WORKSPACE_TCP_RMEM
        );
    }
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").unwrap(),
        host
    );
}

/// A proxied workspace without its attachment, or an attachment without proxy networking, is
/// refused before anything is made.
#[tokio::test]
async fn proxy_networking_and_its_attachment_come_together() {
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    let entries = || std::fs::read_dir(state.path()).unwrap().count();
    let before = entries();
    let mut spec = harness::spec("unused", root.clone());
    spec.network = NetworkMode::Proxy;
    let error = backend.create(&spec).await.unwrap_err();
    assert_eq!(error.code(), "WORKSPACE_INVALID_REQUEST", "{error}");

    let proxy = SocketProxy::start(&[], &[]);
    let mut spec = proxied(harness::spec("unused", root.clone()), &proxy);
    spec.network = NetworkMode::None;
    let error = backend.create(&spec).await.unwrap_err();
    assert_eq!(error.code(), "WORKSPACE_INVALID_REQUEST", "{error}");

    // A socket path that is not a socket.
    let mut spec = proxied(harness::spec("unused", root), &proxy);
    let mut not_a_socket = proxy.attachment.clone();
    not_a_socket.socket = proxy.attachment.bridge.clone();
    spec.egress = Some(not_a_socket.into());
    let error = backend.create(&spec).await.unwrap_err();
    assert!(error.to_string().contains("not a Unix socket"), "{error}");
    assert_eq!(entries(), before, "nothing was made");
}

/// Docker: the container has no network at all; its keeper's bridge carries git through the
/// proxy, a host the policy does not name gets a 403, and nothing is reached directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxied_docker_workspace_reaches_only_what_the_proxy_allows() {
    let Some(backend) = harness::docker().await else {
        return;
    };
    let served = tempfile::tempdir().unwrap();
    served_repository(served.path());
    let upstream = FileServer::start(served.path().to_owned()).await;
    let origin = format!("registry.test:{}", upstream.port);
    let other = format!("other.test:{}", upstream.port);
    let proxy = SocketProxy::start(
        std::slice::from_ref(&origin),
        &["registry.test", "other.test"],
    );
    let spec = proxied(
        harness::spec(&harness::image(), LocalRoot::HostSystem),
        &proxy,
    );
    let ws = backend.create(&spec).await.unwrap();

    clones_through_the_proxy(&backend, &ws, &origin).await;
    receive_buffers_are_the_workspace_s(&backend, &ws).await;

    let refused = sh(
        &backend,
        &ws,
        &format!("git clone -q http://{other}/repo.git /workspace/refused"),
    )
    .await;
    assert_ne!(refused.status, 0);
    assert!(
        text(&refused.stderr).contains("403"),
        "{}",
        text(&refused.stderr)
    );

    let before = upstream.requests().len();
    let direct = sh(
        &backend,
        &ws,
        &format!(
            "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; \
             bash -c 'echo > /dev/tcp/127.0.0.1/{}' 2>/dev/null && echo reached; \
             git -c http.proxy= clone -q http://{origin}/repo.git /workspace/direct 2>/dev/null && echo cloned; \
             true",
            upstream.port
        ),
    )
    .await;
    assert_eq!(direct.stdout_text(), "lo\n", "{}", text(&direct.stderr));
    assert_eq!(upstream.requests().len(), before);

    let verdicts = proxy.verdicts();
    assert!(verdicts.contains(&(origin.clone(), true)), "{verdicts:?}");
    assert!(verdicts.contains(&(other, false)), "{verdicts:?}");
    backend.remove(&ws).await.unwrap();
}
