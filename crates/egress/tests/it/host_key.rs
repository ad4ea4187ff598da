//! A model provider's key at egress: curl, as a harness in a workspace would, sends the
//! placeholder it was given through the proxy to a provider on loopback; the provider sees the
//! real key, the client never does, and a provider whose certificate the proxy cannot check
//! never receives the key.

use std::sync::{Arc, Mutex};

use auto_swe_egress::{EgressVerdict, HostKey, ProxyConfig, UpstreamTrust, WorkspaceCa};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::clients::{command, run, text};
use crate::git_server::tls_config;
use crate::support::{Proxy, loopback_names, policy};

/// The path the provider below takes in and never answers.
const STALL: &str = "/v1/stall";

/// Fake by construction: only the loopback provider below knows it.
const KEY: &str = "sk-ant-egress-test-key-0000000000000000";

/// One request the provider saw: its path and its `x-api-key` and `authorization` headers, and
/// whether a proxy header reached it.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    host: Option<String>,
    api_key: Option<String>,
    authorization: Option<String>,
    proxy_header: bool,
}

/// A TLS "model provider" on loopback for `models.test` that records what it is sent and
/// answers with a fixed body.
struct Provider {
    port: u16,
    ca_pem: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    shutdown: CancellationToken,
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Provider {
    async fn start() -> Self {
        let (config, ca_pem) = tls_config("models.test");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let shutdown = CancellationToken::new();
        let (record, stop) = (Arc::clone(&seen), shutdown.clone());
        tokio::spawn(async move {
            loop {
                let tcp = tokio::select! {
                    () = stop.cancelled() => return,
                    accepted = listener.accept() => accepted.unwrap().0,
                };
                let (acceptor, record) = (acceptor.clone(), Arc::clone(&record));
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service =
                        service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                            let record = Arc::clone(&record);
                            async move {
                                let header = |name: &str| {
                                    request
                                        .headers()
                                        .get(name)
                                        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                                };
                                let seen = Seen {
                                    path: request.uri().path().to_owned(),
                                    host: header("host"),
                                    api_key: header("x-api-key"),
                                    authorization: header("authorization"),
                                    proxy_header: request
                                        .headers()
                                        .keys()
                                        .any(|name| name.as_str().starts_with("proxy-")),
                                };
                                record.lock().unwrap().push(seen);
                                if request.uri().path() == STALL {
                                    std::future::pending::<()>().await;
                                }
                                let _ = request.into_body().collect().await;
                                Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                                    Bytes::from_static(b"{\"type\":\"message\"}"),
                                )))
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
            seen,
            shutdown,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

struct Fixture {
    provider: Provider,
    proxy: Proxy,
    placeholder: String,
    home: tempfile::TempDir,
    /// The workspace authority, as the workspace trusts it.
    ca_file: std::path::PathBuf,
}

/// A provider, and a proxy holding its key in `header`; `trusted`: whether the proxy trusts
/// the provider's certificate.
async fn fixture(header: &str, trusted: bool) -> Fixture {
    fixture_beside(header, trusted, None, ProxyConfig::default()).await
}

/// As [`fixture`], the policy also allowing `models.test` on the port `also`, the proxy of
/// `config`.
async fn fixture_beside(
    header: &str,
    trusted: bool,
    also: Option<u16>,
    config: ProxyConfig,
) -> Fixture {
    let provider = Provider::start().await;
    let origin = format!("models.test:{}", provider.port);
    let other = also.map(|port| format!("models.test:{port}"));
    let ca = Arc::new(WorkspaceCa::generate("test").unwrap());
    let upstream = if trusted {
        UpstreamTrust::Pem(provider.ca_pem.clone())
    } else {
        // An authority that signed nothing the provider presents.
        UpstreamTrust::Pem(
            WorkspaceCa::generate("other")
                .unwrap()
                .certificate_pem()
                .to_owned(),
        )
    };
    let key = HostKey::new("models.test", header, KEY, Arc::clone(&ca))
        .unwrap()
        .on_port(provider.port)
        .trusting(upstream);
    let placeholder = key.placeholder().to_owned();
    let origins: Vec<&str> = std::iter::once(origin.as_str())
        .chain(other.as_deref())
        .collect();
    let proxy = Proxy::start_keyed(
        policy(&origins, &origins),
        Arc::new(loopback_names(&["models.test"])),
        key,
        config,
    )
    .await;
    let home = tempfile::tempdir().unwrap();
    let ca_file = home.path().join("workspace-ca.pem");
    std::fs::write(&ca_file, ca.certificate_pem()).unwrap();
    Fixture {
        provider,
        proxy,
        placeholder,
        home,
        ca_file,
    }
}

impl Fixture {
    /// curl as a harness runs it: through the proxy, trusting the workspace authority, with
    /// `headers` and a JSON body; its output (headers and body) and exit status.
    async fn curl(&self, headers: &[String]) -> (String, bool) {
        self.curl_to(self.provider.port, "/v1/messages", &self.ca_file, headers)
            .await
    }

    /// curl to `path` on `models.test:port`, trusting `roots` only.
    async fn curl_to(
        &self,
        port: u16,
        path: &str,
        roots: &std::path::Path,
        headers: &[String],
    ) -> (String, bool) {
        let mut curl = command("curl", self.home.path());
        curl.args(["-sS", "-i", "--proxy-user", "agent:proxy-pass", "-x"])
            .arg(self.proxy.url())
            .arg("--cacert")
            .arg(roots);
        for header in headers {
            curl.args(["-H", header]);
        }
        curl.args(["-d", "{\"model\":\"m\"}"])
            .arg(format!("https://models.test:{port}{path}"));
        let out = run(curl).await;
        (
            format!("{}{}", text(&out.stdout), text(&out.stderr)),
            out.status.success(),
        )
    }
}

#[tokio::test]
async fn the_provider_gets_the_key_the_client_only_ever_had_a_placeholder_for() {
    let fixture = fixture("x-api-key", true).await;
    let (output, ok) = fixture
        .curl(&[format!("x-api-key: {}", fixture.placeholder)])
        .await;
    assert!(ok, "{output}");
    assert!(output.contains("{\"type\":\"message\"}"), "{output}");
    assert!(!output.contains(KEY), "the key came back to the client");
    let seen = fixture.provider.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].path, "/v1/messages");
    assert_eq!(
        seen[0].host.as_deref(),
        Some(format!("models.test:{}", fixture.provider.port).as_str())
    );
    assert_eq!(seen[0].api_key.as_deref(), Some(KEY));
    assert!(!seen[0].proxy_header, "a proxy header reached the provider");
    // The decision names the host and its rule; no decision carries the key.
    let decisions = format!("{:?}", fixture.proxy.sink.decisions());
    assert!(!decisions.contains(KEY));
    assert!(
        fixture
            .proxy
            .sink
            .decisions()
            .iter()
            .any(|d| matches!(d.verdict, EgressVerdict::Allowed { .. })),
        "{decisions}"
    );
}

#[tokio::test]
async fn a_bearer_key_is_written_inside_its_header_and_other_headers_pass_as_sent() {
    let fixture = fixture("authorization", true).await;
    let (output, ok) = fixture
        .curl(&[
            format!("Authorization: Bearer {}", fixture.placeholder),
            // The placeholder in another header stays a placeholder.
            format!("x-api-key: {}", fixture.placeholder),
        ])
        .await;
    assert!(ok, "{output}");
    let seen = fixture.provider.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(
        seen[0].api_key.as_deref(),
        Some(fixture.placeholder.as_str())
    );

    // A request without the placeholder goes as the workspace wrote it.
    let (output, ok) = fixture
        .curl(&["Authorization: Bearer the-workspace-own".to_owned()])
        .await;
    assert!(ok, "{output}");
    let seen = fixture.provider.seen();
    assert_eq!(
        seen[1].authorization.as_deref(),
        Some("Bearer the-workspace-own")
    );
}

#[tokio::test]
async fn a_provider_the_proxy_cannot_verify_never_receives_the_key() {
    let fixture = fixture("x-api-key", false).await;
    let (output, _) = fixture
        .curl(&[format!("x-api-key: {}", fixture.placeholder)])
        .await;
    assert!(output.contains("502"), "{output}");
    assert!(!output.contains(KEY));
    assert!(
        fixture.provider.seen().is_empty(),
        "a request reached a provider whose certificate did not check"
    );
    assert!(
        fixture.proxy.sink.decisions().iter().any(|d| matches!(
            &d.verdict,
            EgressVerdict::Failed {
                reason: "UPSTREAM",
                ..
            }
        )),
        "{:?}",
        fixture.proxy.sink.decisions()
    );
}

#[tokio::test]
async fn the_same_host_on_another_port_is_tunnelled_untouched_and_never_gets_the_key() {
    // A second server for the same name on another port, with an authority of its own.
    let elsewhere = Provider::start().await;
    let fixture = fixture_beside(
        "x-api-key",
        true,
        Some(elsewhere.port),
        ProxyConfig::default(),
    )
    .await;
    let roots = fixture.home.path().join("elsewhere-ca.pem");
    std::fs::write(&roots, &elsewhere.ca_pem).unwrap();
    // Trusting only that server's authority: the handshake succeeds only if the proxy did not
    // step in, and the placeholder arrives as the client sent it.
    let (output, ok) = fixture
        .curl_to(
            elsewhere.port,
            "/v1/messages",
            &roots,
            &[format!("x-api-key: {}", fixture.placeholder)],
        )
        .await;
    assert!(ok, "{output}");
    let seen = elsewhere.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0].api_key.as_deref(),
        Some(fixture.placeholder.as_str())
    );
    assert!(fixture.provider.seen().is_empty());
}

#[tokio::test]
async fn a_provider_that_never_answers_is_a_gateway_timeout_inside_the_tunnel() {
    let mut config = ProxyConfig::default();
    config.response_timeout = std::time::Duration::from_millis(300);
    let fixture = fixture_beside("x-api-key", true, None, config).await;
    let (output, ok) = fixture
        .curl_to(
            fixture.provider.port,
            STALL,
            &fixture.ca_file,
            &[format!("x-api-key: {}", fixture.placeholder)],
        )
        .await;
    assert!(ok, "{output}");
    assert!(output.contains("HTTP/1.1 504 Gateway Timeout"), "{output}");
    assert!(output.contains("EGRESS_FAILED (TIMEOUT)"), "{output}");
    assert!(!output.contains(KEY), "the key came back to the client");
    assert_eq!(fixture.provider.seen().len(), 1, "the request reached it");
    let port = fixture.provider.port;
    assert!(
        fixture.proxy.sink.decisions().iter().any(|d| matches!(
            &d.verdict,
            EgressVerdict::Failed { reason, message }
                if *reason == "TIMEOUT"
                    && message == &format!("models.test:{port}: no response within 300 ms")
        )),
        "{:?}",
        fixture.proxy.sink.decisions()
    );
}
