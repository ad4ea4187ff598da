//! A `CONNECT` to a host the proxy holds a credential for, intercepted: once the `ClientHello`
//! names the host, TLS is terminated with the workspace's own authority and each request inside
//! is read, then sent on over TLS of the proxy's own to a checked address.
//!
//! For the run's git host, only git's smart-HTTP requests for the run's repository pass and the
//! proxy adds the token to them; a push passes only while the push window is open, and only when
//! [`crate::git_push::check_push`] accepts it against the host's current refs. Everything else
//! is refused with a 403 inside the tunnel. For a host with a [`HostKey`], every request passes
//! with the key written over the workspace's placeholder.

use std::convert::Infallible;
use std::io::Read as _;
use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Either, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tracing::Instrument as _;

use crate::git_access::{GitAccess, UpstreamTrust};
use crate::git_push::{self, GitService};
use crate::host_key::HostKey;
use crate::io::Rewind;
use crate::proxy::{Ask, EgressProxy, ProxyBody, Stop};
use crate::refusal::{EgressRefusal, EgressVerdict};
use crate::tunnel::checked_hello;

/// The largest advertisement the proxy reads to check a push.
const MAX_ADVERTISEMENT: usize = 64 * 1024 * 1024;

/// A request body on its way upstream: the client's, streamed, or one the proxy read whole.
type UpstreamBody = Either<Incoming, Full<Bytes>>;

/// What the proxy adds for an intercepted host.
pub(crate) enum Credential {
    /// The run's git access.
    Git(GitAccess),
    /// A provider's API key.
    Key(HostKey),
}

/// One intercepted host with both TLS ends made once, when the proxy is built: reading the
/// system's roots is file I/O and a leaf certificate a key generation, neither for the path of
/// every `CONNECT`.
pub(crate) struct Route {
    credential: Credential,
    host: String,
    port: u16,
    server: Result<Arc<rustls::ServerConfig>, String>,
    connector: Result<tokio_rustls::TlsConnector, String>,
}

impl Route {
    pub(crate) fn new(credential: Credential) -> Self {
        let (host, port, ca, upstream) = match &credential {
            Credential::Git(access) => (
                access.host.clone(),
                access.port,
                &*access.ca,
                &access.upstream,
            ),
            Credential::Key(key) => (key.host().to_owned(), key.port(), key.ca(), key.upstream()),
        };
        let server = ca.server_config(&host).map_err(|e| e.to_string());
        let connector = connector(upstream);
        Self {
            credential,
            host,
            port,
            server,
            connector,
        }
    }

    /// Whether a `CONNECT` to `host:port` is this route's to intercept.
    pub(crate) fn intercepts(&self, host: &str, port: u16) -> bool {
        port == self.port && host.eq_ignore_ascii_case(&self.host)
    }
}

/// One intercepted client connection.
struct Session {
    proxy: Arc<EgressProxy>,
    route: Arc<Route>,
    ask: Ask,
    rule: String,
    addresses: Vec<IpAddr>,
    connector: tokio_rustls::TlsConnector,
}

/// Serves an intercepted `CONNECT` (after its 200) to its end. `addresses` were all checked.
pub(crate) async fn intercept(
    proxy: Arc<EgressProxy>,
    route: Arc<Route>,
    ask: Ask,
    rule: String,
    addresses: Vec<IpAddr>,
    upgraded: Upgraded,
) {
    let mut client = TokioIo::new(upgraded);
    let Some(held) = checked_hello(&proxy, &ask, &mut client, &route.host).await else {
        return;
    };
    let prepared = route
        .server
        .clone()
        .and_then(|server| Ok((server, route.connector.clone()?)));
    let (tls_config, connector) = match prepared {
        Ok(prepared) => prepared,
        Err(message) => {
            proxy.record(
                &ask,
                EgressVerdict::Failed {
                    reason: "TLS",
                    message,
                },
            );
            return;
        }
    };
    let tls = match tokio_rustls::TlsAcceptor::from(tls_config)
        .accept(Rewind::new(held, client))
        .await
    {
        Ok(tls) => tls,
        Err(error) => {
            tracing::debug!(%error, "the workspace refused the intercepted handshake");
            return;
        }
    };
    let session = Arc::new(Session {
        proxy,
        route,
        ask,
        rule,
        addresses,
        connector,
    });
    let service = service_fn(move |request| {
        let session = Arc::clone(&session);
        async move { Ok::<_, Infallible>(session.handle(request).await) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(tls), service)
        .await;
    if let Err(error) = served {
        tracing::debug!(%error, "an intercepted connection ended with an error");
    }
}

/// The TLS client the proxy reaches an intercepted host with.
fn connector(trust: &UpstreamTrust) -> Result<tokio_rustls::TlsConnector, String> {
    let mut roots = rustls::RootCertStore::empty();
    match trust {
        UpstreamTrust::System => {
            let found = rustls_native_certs::load_native_certs();
            for certificate in found.certs {
                let _ = roots.add(certificate);
            }
        }
        UpstreamTrust::Pem(pem) => {
            use rustls::pki_types::pem::PemObject as _;
            for certificate in rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes()) {
                let certificate = certificate.map_err(|e| format!("upstream roots: {e}"))?;
                roots
                    .add(certificate)
                    .map_err(|e| format!("upstream roots: {e}"))?;
            }
        }
    }
    if roots.is_empty() {
        return Err("no upstream root certificate to trust".to_owned());
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(crate::ca::provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

fn refused(refusal: EgressRefusal) -> Stop {
    Stop::Refused(refusal)
}

fn upstream_failed(message: impl Into<String>) -> Stop {
    Stop::Failed {
        reason: "UPSTREAM",
        message: message.into(),
        status: StatusCode::BAD_GATEWAY,
    }
}

impl Session {
    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<ProxyBody> {
        let span = tracing::info_span!("egress.intercepted", host = %self.route.host, method = %request.method());
        async move {
            let forwarded = match &self.route.credential {
                Credential::Git(access) => self.decide_and_forward(access, request).await,
                Credential::Key(key) => self.forward_with_key(key, request).await,
            };
            match forwarded {
                Ok(response) => response.map(Either::Left),
                Err(stop) => {
                    self.proxy.record(&self.ask, stop.verdict());
                    stop.response()
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Every request to a keyed host goes on, with the key over the placeholder.
    async fn forward_with_key(
        &self,
        key: &HostKey,
        request: Request<Incoming>,
    ) -> Result<Response<Incoming>, Stop> {
        let (parts, body) = request.into_parts();
        let path = parts
            .uri
            .path_and_query()
            .map_or("/", http::uri::PathAndQuery::as_str);
        let mut upstream = Request::builder()
            .method(parts.method.clone())
            .uri(path)
            .body(Either::Left(body))
            .map_err(|e| upstream_failed(e.to_string()))?;
        *upstream.headers_mut() = key.outgoing_headers(&parts.headers);
        self.address_host(upstream.headers_mut())?;
        self.send(upstream).await
    }

    async fn decide_and_forward(
        &self,
        access: &GitAccess,
        request: Request<Incoming>,
    ) -> Result<Response<Incoming>, Stop> {
        let uri = request.uri();
        let git = git_push::classify_request(request.method().as_str(), uri.path(), uri.query())
            .ok_or_else(|| {
                refused(EgressRefusal::NotGit {
                    detail: "only git's smart-HTTP requests reach the git host",
                })
            })?;
        if !git_push::same_repo(git.repo(), &access.repo) {
            return Err(refused(EgressRefusal::NotGit {
                detail: "only the run's repository is reachable on the git host",
            }));
        }
        if git.service() == GitService::ReceivePack && !access.push_window.is_open() {
            return Err(refused(EgressRefusal::NoPushWindow));
        }
        let (parts, body) = request.into_parts();
        let body = if git.service() == GitService::ReceivePack && !git.is_advertisement() {
            let pushed = self.checked_push(access, &parts, body).await?;
            Either::Right(Full::new(pushed))
        } else {
            Either::Left(body)
        };
        let request = self.upstream_request(access, &parts, body)?;
        self.send(request).await
    }

    /// Reads a push whole (up to the cap), decodes it, and checks it against the refs the host
    /// advertises now; the bytes to send on.
    async fn checked_push(
        &self,
        access: &GitAccess,
        parts: &http::request::Parts,
        body: Incoming,
    ) -> Result<Bytes, Stop> {
        let bytes = Limited::new(body, access.max_push_bytes)
            .collect()
            .await
            .map_err(|_| {
                refused(EgressRefusal::Push {
                    code: "TOO_LARGE",
                    message: format!(
                        "the push is larger than {} bytes, or it was cut off",
                        access.max_push_bytes
                    ),
                })
            })?
            .to_bytes();
        let decoded = decoded(parts, &bytes, access.max_push_bytes)?;
        let push = git_push::parse_push(&decoded).map_err(|refusal| push_refused(&refusal))?;
        let advertised = self.advertised_refs(access, parts).await?;
        git_push::check_push(&push, &decoded, &access.branch, &advertised)
            .map_err(|refusal| push_refused(&refusal))?;
        Ok(bytes)
    }

    /// The host's refs now, as its receive-pack advertisement gives them.
    async fn advertised_refs(
        &self,
        access: &GitAccess,
        parts: &http::request::Parts,
    ) -> Result<std::collections::BTreeMap<String, git_push::ObjectId>, Stop> {
        let base = parts
            .uri
            .path()
            .strip_suffix("/git-receive-pack")
            .unwrap_or_default();
        let mut request = Request::builder()
            .method(Method::GET)
            .uri(format!("{base}/info/refs?service=git-receive-pack"))
            .header(header::ACCEPT_ENCODING, "identity")
            .header(header::USER_AGENT, "auto-swe-egress")
            .body(Either::Right(Full::new(Bytes::new())))
            .map_err(|e| upstream_failed(e.to_string()))?;
        self.authorise(access, request.headers_mut())?;
        let response = self.send(request).await?;
        if response.status() != StatusCode::OK {
            return Err(upstream_failed(format!(
                "the git host answered {} to the push's ref advertisement",
                response.status()
            )));
        }
        let body = Limited::new(response.into_body(), MAX_ADVERTISEMENT)
            .collect()
            .await
            .map_err(|e| upstream_failed(format!("reading the ref advertisement: {e}")))?
            .to_bytes();
        git_push::parse_advertisement(&body).map_err(|refusal| push_refused(&refusal))
    }

    /// The client's request as it goes upstream: origin-form, the host's `Host`, the token as
    /// the only credential, and no proxy or hop-by-hop headers.
    fn upstream_request(
        &self,
        access: &GitAccess,
        parts: &http::request::Parts,
        body: UpstreamBody,
    ) -> Result<Request<UpstreamBody>, Stop> {
        let path = parts
            .uri
            .path_and_query()
            .map_or("/", http::uri::PathAndQuery::as_str);
        let mut request = Request::builder()
            .method(parts.method.clone())
            .uri(path)
            .body(body)
            .map_err(|e| upstream_failed(e.to_string()))?;
        let rebuilt = matches!(request.body(), Either::Right(_));
        *request.headers_mut() = forwarded_headers(&parts.headers, rebuilt);
        self.authorise(access, request.headers_mut())?;
        Ok(request)
    }

    /// The host's own `Host`.
    fn address_host(&self, headers: &mut http::HeaderMap) -> Result<(), Stop> {
        let host = HeaderValue::from_str(&host_header(&self.route.host, self.route.port))
            .map_err(|e| upstream_failed(e.to_string()))?;
        headers.insert(header::HOST, host);
        Ok(())
    }

    fn authorise(&self, access: &GitAccess, headers: &mut http::HeaderMap) -> Result<(), Stop> {
        self.address_host(headers)?;
        let mut token = HeaderValue::from_str(&access.token.authorization())
            .map_err(|_| upstream_failed("the token is not a header value"))?;
        token.set_sensitive(true);
        headers.insert(header::AUTHORIZATION, token);
        Ok(())
    }

    /// Sends one request upstream over a TLS connection of its own to a checked address.
    async fn send(&self, request: Request<UpstreamBody>) -> Result<Response<Incoming>, Stop> {
        let target = self
            .ask
            .target
            .clone()
            .ok_or_else(|| upstream_failed("no target"))?;
        let (tcp, address) = self.proxy.connect(&target, &self.addresses).await?;
        let name = ServerName::try_from(self.route.host.clone())
            .map_err(|e| upstream_failed(e.to_string()))?;
        let tls = self
            .connector
            .connect(name, tcp)
            .await
            .map_err(|e| upstream_failed(format!("TLS with {}: {e}", self.route.host)))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| upstream_failed(e.to_string()))?;
        tokio::spawn(connection.in_current_span());
        self.proxy.record(
            &self.ask,
            EgressVerdict::Allowed {
                rule: self.rule.clone(),
                address,
            },
        );
        let sent = async {
            sender
                .send_request(request)
                .await
                .map_err(|e| upstream_failed(e.to_string()))
        };
        self.proxy.answered(&target, sent).await
    }
}

/// The client's headers that go upstream: none that carries a credential, the host, or a
/// hop's business, and, when the body was read and is sent anew (`rebuilt`), none that frames
/// it (hyper frames it again).
fn forwarded_headers(headers: &http::HeaderMap, rebuilt: bool) -> http::HeaderMap {
    let mut forwarded = http::HeaderMap::new();
    for (name, value) in headers {
        let hop = matches!(
            name.as_str(),
            "authorization"
                | "proxy-authorization"
                | "proxy-connection"
                | "connection"
                | "keep-alive"
                | "te"
                | "trailer"
                | "upgrade"
                | "host"
        );
        let framing =
            rebuilt && (name == header::CONTENT_LENGTH || name == header::TRANSFER_ENCODING);
        if !hop && !framing {
            forwarded.append(name.clone(), value.clone());
        }
    }
    forwarded
}

/// The `Host` the git host is addressed by: its name, with the port unless it is 443.
fn host_header(host: &str, port: u16) -> String {
    if port == 443 {
        host.to_owned()
    } else {
        format!("{host}:{port}")
    }
}

fn push_refused(refusal: &git_push::PushRefusal) -> Stop {
    refused(EgressRefusal::Push {
        code: refusal.code(),
        message: refusal.to_string(),
    })
}

/// The push body as git wrote it: gzip-decoded when it says so (up to `limit` bytes); any other
/// encoding is refused.
fn decoded(parts: &http::request::Parts, bytes: &Bytes, limit: usize) -> Result<Bytes, Stop> {
    match parts
        .headers
        .get(header::CONTENT_ENCODING)
        .map(HeaderValue::as_bytes)
    {
        None | Some(b"identity") => Ok(bytes.clone()),
        Some(b"gzip" | b"x-gzip") => {
            let mut out = Vec::new();
            let read = flate2::read::GzDecoder::new(bytes.as_ref())
                .take(u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1))
                .read_to_end(&mut out);
            match read {
                Ok(_) if out.len() <= limit => Ok(Bytes::from(out)),
                Ok(_) => Err(refused(EgressRefusal::Push {
                    code: "TOO_LARGE",
                    message: format!("the decoded push is larger than {limit} bytes"),
                })),
                Err(_) => Err(refused(EgressRefusal::Push {
                    code: "BAD_ENCODING",
                    message: "the push's gzip encoding does not decode".to_owned(),
                })),
            }
        }
        Some(_) => Err(refused(EgressRefusal::Push {
            code: "BAD_ENCODING",
            message: "a push is sent plain or gzip-encoded".to_owned(),
        })),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn parts(headers: &[(&str, &str)]) -> http::request::Parts {
        let mut request = Request::post("/acme/widget.git/git-receive-pack");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap().into_parts().0
    }

    fn gzip(bytes: &[u8]) -> Bytes {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).unwrap();
        Bytes::from(encoder.finish().unwrap())
    }

    fn refusal_reason(stop: &Stop) -> &'static str {
        match stop {
            Stop::Refused(refusal) => refusal.reason(),
            Stop::Failed { reason, .. } => reason,
        }
    }

    #[test]
    fn credentials_hops_and_the_host_never_go_upstream_and_a_rebuilt_body_is_framed_anew() {
        let parts = parts(&[
            ("authorization", "Basic c29tZW9uZTplbHNl"),
            ("proxy-authorization", "Basic eA=="),
            ("host", "elsewhere.test"),
            ("connection", "keep-alive"),
            ("te", "trailers"),
            ("content-length", "12"),
            ("transfer-encoding", "chunked"),
            ("content-type", "application/x-git-receive-pack-request"),
            ("git-protocol", "version=2"),
        ]);
        let streamed = forwarded_headers(&parts.headers, false);
        let names = |map: &http::HeaderMap| {
            let mut names: Vec<String> = map.keys().map(ToString::to_string).collect();
            names.sort();
            names
        };
        assert_eq!(
            names(&streamed),
            [
                "content-length",
                "content-type",
                "git-protocol",
                "transfer-encoding"
            ]
        );
        let rebuilt = forwarded_headers(&parts.headers, true);
        assert_eq!(names(&rebuilt), ["content-type", "git-protocol"]);
    }

    #[test]
    fn the_host_header_names_the_port_unless_it_is_443() {
        assert_eq!(host_header("github.com", 443), "github.com");
        assert_eq!(host_header("git.test", 8443), "git.test:8443");
    }

    #[test]
    fn a_push_body_is_decoded_within_its_cap_or_refused() {
        let body = Bytes::from(vec![b'p'; 1000]);
        let plain = decoded(&parts(&[]), &body, 1000).unwrap();
        assert_eq!(plain, body);
        let identity = decoded(&parts(&[("content-encoding", "identity")]), &body, 1000).unwrap();
        assert_eq!(identity, body);
        let zipped = gzip(&body);
        for encoding in ["gzip", "x-gzip"] {
            let out = decoded(&parts(&[("content-encoding", encoding)]), &zipped, 1000).unwrap();
            assert_eq!(out, body, "{encoding}");
        }
        // One byte over the cap, and a bomb far over it: refused, never inflated past the cap.
        let over = decoded(&parts(&[("content-encoding", "gzip")]), &zipped, 999).unwrap_err();
        assert_eq!(refusal_reason(&over), "TOO_LARGE");
        let bomb = gzip(&vec![0_u8; 64 * 1024 * 1024]);
        let refused = decoded(&parts(&[("content-encoding", "gzip")]), &bomb, 1024).unwrap_err();
        assert_eq!(refusal_reason(&refused), "TOO_LARGE");
        let broken = decoded(
            &parts(&[("content-encoding", "gzip")]),
            &Bytes::from_static(b"not gzip"),
            1000,
        )
        .unwrap_err();
        assert_eq!(refusal_reason(&broken), "BAD_ENCODING");
        let other = decoded(&parts(&[("content-encoding", "br")]), &body, 1000).unwrap_err();
        assert_eq!(refusal_reason(&other), "BAD_ENCODING");
    }
}
