//! A git host on loopback for the interception tests: HTTPS with a certificate from a test
//! authority, every request answered by the real `git http-backend` (git's own smart-HTTP
//! server, run as CGI), and every request refused with a 401 unless it carries the expected
//! token — as a hosted git service does.
//!
//! Self-contained (its own process helpers), so other crates' tests can include it by path.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

const LOOPBACK: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// `git` with a clean environment (no user or system configuration).
fn host_git(home: &Path) -> tokio::process::Command {
    #[expect(
        clippy::disallowed_methods,
        reason = "the test git host runs git itself (http-backend, repository set-up)"
    )]
    let mut command = tokio::process::Command::new("git");
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

async fn output(mut command: tokio::process::Command) -> std::process::Output {
    tokio::time::timeout(std::time::Duration::from_secs(60), command.output())
        .await
        .unwrap()
        .unwrap()
}

/// One request the git host answered.
#[derive(Debug, Clone)]
pub(crate) struct GitSeen {
    pub(crate) method: String,
    pub(crate) path_and_query: String,
    pub(crate) authorization: Option<String>,
    pub(crate) status: u16,
}

pub(crate) struct GitServer {
    pub(crate) port: u16,
    /// The test authority's certificate (what the proxy trusts upstream).
    pub(crate) ca_pem: String,
    /// The served repositories' root (`acme/widget.git` below it).
    pub(crate) root: PathBuf,
    pub(crate) seen: Arc<Mutex<Vec<GitSeen>>>,
    shutdown: CancellationToken,
    _dir: tempfile::TempDir,
}

impl Drop for GitServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub(crate) fn tls_config(host: &str) -> (rustls::ServerConfig, String) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "test git host authority");
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf_params = rcgen::CertificateParams::new(vec![host.to_owned()]).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![
            leaf.der().clone(),
            CertificateDer::from(ca_cert.der().to_vec()),
        ],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
    )
    .unwrap();
    (config, ca_cert.pem())
}

impl GitServer {
    /// Serves `acme/widget.git` (one commit on `main`, and the branch `asw/run-1` at it) for
    /// `host`, to requests carrying `Authorization: <authorization>` only.
    pub(crate) async fn start(host: &str, authorization: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("srv");
        let bare = root.join("acme/widget.git");
        std::fs::create_dir_all(&bare).unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        git_ok(&bare, dir.path(), &["init", "-q", "--bare", "-b", "main"]).await;
        git_ok(&bare, dir.path(), &["config", "http.receivepack", "true"]).await;
        git_ok(&work, dir.path(), &["init", "-q", "-b", "main"]).await;
        std::fs::write(work.join("README.md"), "the widget\n").unwrap();
        git_ok(&work, dir.path(), &["add", "README.md"]).await;
        git_ok(&work, dir.path(), &["commit", "-qm", "first"]).await;
        let url = bare.to_str().unwrap();
        git_ok(
            &work,
            dir.path(),
            &["push", "-q", url, "main", "main:asw/run-1"],
        )
        .await;

        let (config, ca_pem) = tls_config(host);
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let shutdown = CancellationToken::new();
        let (serve_root, serve_seen, stop) = (root.clone(), Arc::clone(&seen), shutdown.clone());
        let expected = authorization.to_owned();
        let home = dir.path().to_owned();
        tokio::spawn(async move {
            loop {
                let tcp = tokio::select! {
                    () = stop.cancelled() => return,
                    accepted = listener.accept() => accepted.unwrap().0,
                };
                let acceptor = acceptor.clone();
                let (root, seen, expected, home) = (
                    serve_root.clone(),
                    Arc::clone(&serve_seen),
                    expected.clone(),
                    home.clone(),
                );
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = service_fn(move |request| {
                        let (root, seen, expected, home) = (
                            root.clone(),
                            Arc::clone(&seen),
                            expected.clone(),
                            home.clone(),
                        );
                        async move {
                            Ok::<_, std::convert::Infallible>(
                                answer(request, &root, &home, &expected, &seen).await,
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Self {
            port,
            ca_pem,
            root,
            seen,
            shutdown,
            _dir: dir,
        }
    }

    /// The `Authorization` this host demands for `token` (Basic, `x-access-token`).
    pub(crate) fn authorization(token: &str) -> String {
        use base64::Engine as _;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{token}"))
        )
    }

    /// The proxy's access to `acme/widget` on this host for the branch `asw/run-1` with
    /// `token`, behind the workspace authority `ca`, trusting this host's test authority.
    pub(crate) fn access(
        &self,
        token: &str,
        ca: Arc<auto_swe_egress::WorkspaceCa>,
    ) -> auto_swe_egress::GitAccess {
        let mut access = auto_swe_egress::GitAccess::new(
            "git.test",
            "acme/widget",
            "asw/run-1",
            auto_swe_egress::GitToken::new(token),
            ca,
        );
        access.port = self.port;
        access.upstream = auto_swe_egress::UpstreamTrust::Pem(self.ca_pem.clone());
        access
    }

    pub(crate) fn seen(&self) -> Vec<GitSeen> {
        self.seen.lock().unwrap().clone()
    }

    /// The commit a branch of the served repository is at.
    pub(crate) async fn branch(&self, name: &str) -> String {
        let mut git = host_git(&self.root);
        git.current_dir(self.root.join("acme/widget.git")).args([
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{name}"),
        ]);
        String::from_utf8_lossy(&output(git).await.stdout)
            .trim()
            .to_owned()
    }
}

async fn answer(
    request: hyper::Request<hyper::body::Incoming>,
    root: &Path,
    home: &Path,
    expected: &str,
    seen: &Mutex<Vec<GitSeen>>,
) -> hyper::Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let authorization = parts
        .headers
        .get("authorization")
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let mut record = GitSeen {
        method: parts.method.to_string(),
        path_and_query: parts.uri.path_and_query().unwrap().to_string(),
        authorization: authorization.clone(),
        status: 401,
    };
    if authorization.as_deref() != Some(expected) {
        seen.lock().unwrap().push(record);
        let mut response = hyper::Response::new(Full::new(Bytes::from_static(b"who are you?\n")));
        *response.status_mut() = hyper::StatusCode::UNAUTHORIZED;
        response.headers_mut().insert(
            "www-authenticate",
            hyper::header::HeaderValue::from_static("Basic realm=\"git\""),
        );
        return response;
    }
    let body = body.collect().await.unwrap().to_bytes();
    let mut cgi = host_git(home);
    cgi.arg("http-backend")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REMOTE_USER", "x-access-token")
        .env("REQUEST_METHOD", parts.method.as_str())
        .env("PATH_INFO", parts.uri.path())
        .env("QUERY_STRING", parts.uri.query().unwrap_or(""))
        .env("CONTENT_LENGTH", body.len().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (name, variable) in [
        ("content-type", "CONTENT_TYPE"),
        ("content-encoding", "HTTP_CONTENT_ENCODING"),
        ("git-protocol", "GIT_PROTOCOL"),
    ] {
        if let Some(value) = parts.headers.get(name) {
            cgi.env(variable, value.to_str().unwrap());
        }
    }
    let mut child = cgi.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&body).await.unwrap();
    drop(stdin);
    let output = child.wait_with_output().await.unwrap();
    let split = output
        .stdout
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| (at, 4))
        .or_else(|| {
            output
                .stdout
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|at| (at, 2))
        })
        .unwrap();
    let head = String::from_utf8_lossy(&output.stdout[..split.0]).into_owned();
    let mut response = hyper::Response::new(Full::new(Bytes::from(
        output.stdout[split.0 + split.1..].to_vec(),
    )));
    for line in head.lines() {
        let (name, value) = line.split_once(':').unwrap();
        if name.eq_ignore_ascii_case("status") {
            let code: u16 = value.trim()[..3].parse().unwrap();
            *response.status_mut() = hyper::StatusCode::from_u16(code).unwrap();
        } else {
            response.headers_mut().append(
                hyper::header::HeaderName::from_bytes(name.trim().as_bytes()).unwrap(),
                hyper::header::HeaderValue::from_str(value.trim()).unwrap(),
            );
        }
    }
    record.status = response.status().as_u16();
    seen.lock().unwrap().push(record);
    response
}

pub(crate) async fn git_ok(dir: &Path, home: &Path, args: &[&str]) {
    let mut git = host_git(home);
    git.current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.test"])
        .args(args);
    let out = output(git).await;
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
