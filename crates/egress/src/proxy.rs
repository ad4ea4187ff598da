//! The proxy: accepts client connections, decides each request with the policy, resolves the
//! target once, checks every address, and forwards to exactly a checked address — a TLS tunnel
//! for `CONNECT` (after holding the `ClientHello`'s server name to the `CONNECT` host), or one
//! plain HTTP request otherwise.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use auto_swe_scanners::RequestKind;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::credential::{PROXY_REALM, ProxyCredential};
use crate::git_access::GitAccess;
use crate::handoff::{Arrival, arrival};
use crate::host_key::HostKey;
use crate::intercept::{Credential, Route, intercept};
use crate::io::{Head, Rewind, read_head};
use crate::policy::{Access, EgressPolicy};
use crate::refusal::{EgressDecision, EgressRefusal, EgressSink, EgressVerdict};
use crate::resolve::Resolve;
use crate::target::{Target, connect_target, host_header_agrees, http_target};
use crate::tunnel::{Client, tunnel};

/// The body of a response the proxy sends: the upstream's, or its own.
pub(crate) type ProxyBody = Either<Incoming, Full<Bytes>>;

/// Limits of one proxy. The defaults suit a workspace's package managers and git.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProxyConfig {
    /// The largest request head read (request line and headers), in bytes.
    pub max_head_bytes: usize,
    /// The most lines a request head may have.
    pub max_head_lines: usize,
    /// How long a client has to send its request head, and a tunnel its `ClientHello`.
    pub handshake_timeout: Duration,
    /// How long connecting to the upstream may take.
    pub connect_timeout: Duration,
    /// How long the upstream may take to start its response (status line and headers) once a
    /// plain HTTP or intercepted request is on its way; past it the client gets a 504. The
    /// body, once it flows, has no limit of the proxy's.
    pub response_timeout: Duration,
    /// The most client connections served at once; more wait to be accepted.
    pub max_connections: usize,
    /// The credential every request must carry (`Proxy-Authorization: Basic`, see
    /// [`ProxyCredential`]); one without it, or with another, gets a 407 and is never
    /// forwarded. Set it when the listener is reachable by more than the one workspace (TCP on
    /// a cluster network); a Unix socket bound into one workspace needs none.
    pub credential: Option<ProxyCredential>,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        Self {
            max_head_bytes: 16 * 1024,
            max_head_lines: 100,
            handshake_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            response_timeout: Duration::from_secs(300),
            max_connections: 256,
            credential: None,
        }
    }
}

/// Why a request did not go through: refused by the policy (403) or failed upstream.
#[derive(Debug)]
pub(crate) enum Stop {
    Refused(EgressRefusal),
    Failed {
        reason: &'static str,
        message: String,
        status: StatusCode,
    },
}

impl From<EgressRefusal> for Stop {
    fn from(refusal: EgressRefusal) -> Self {
        Self::Refused(refusal)
    }
}

impl Stop {
    pub(crate) fn verdict(&self) -> EgressVerdict {
        match self {
            Self::Refused(refusal) => EgressVerdict::refused(refusal),
            Self::Failed {
                reason, message, ..
            } => EgressVerdict::Failed {
                reason,
                message: message.clone(),
            },
        }
    }

    pub(crate) fn response(&self) -> Response<ProxyBody> {
        let (status, body) = match self {
            Self::Refused(refusal @ EgressRefusal::ProxyAuthRequired) => {
                let mut response =
                    plain_response(StatusCode::PROXY_AUTHENTICATION_REQUIRED, refusal.body());
                let challenge = format!("Basic realm=\"{PROXY_REALM}\"");
                if let Ok(challenge) = header::HeaderValue::from_str(&challenge) {
                    response
                        .headers_mut()
                        .insert(header::PROXY_AUTHENTICATE, challenge);
                }
                return response;
            }
            Self::Refused(refusal) => (StatusCode::FORBIDDEN, refusal.body()),
            Self::Failed {
                reason,
                message,
                status,
            } => (*status, format!("EGRESS_FAILED ({reason}): {message}\n")),
        };
        plain_response(status, body)
    }
}

fn plain_response(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut response = Response::new(Either::Right(Full::new(Bytes::from(body))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Where a request asks to go, when that reads as a target (for the trace only).
fn requested_target(request: &Request<Incoming>) -> Option<Target> {
    let authority = request.uri().authority()?;
    if request.method() == Method::CONNECT {
        connect_target(authority.as_str()).ok()
    } else {
        http_target(authority.as_str()).ok()
    }
}

/// One request being decided: its connection, what it asks and where.
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    pub(crate) connection: u64,
    pub(crate) access: Option<Access>,
    pub(crate) target: Option<Target>,
}

/// The allowlisting forward proxy of one workspace.
pub struct EgressProxy {
    policy: EgressPolicy,
    routes: Vec<Arc<Route>>,
    resolver: Arc<dyn Resolve>,
    sink: Arc<dyn EgressSink>,
    config: ProxyConfig,
    next_connection: AtomicU64,
    permits: Arc<Semaphore>,
}

impl std::fmt::Debug for EgressProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressProxy")
            .field("policy", &self.policy)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Out of descriptors, or a connection reset before it was accepted: back off briefly rather
/// than spin.
async fn accept_failed(error: &std::io::Error) {
    tracing::warn!(%error, "egress proxy accept failed");
    tokio::time::sleep(Duration::from_millis(50)).await;
}

impl EgressProxy {
    /// A proxy deciding with `policy`, resolving with `resolver` and reporting to `sink`.
    #[must_use]
    pub fn new(
        policy: EgressPolicy,
        resolver: Arc<dyn Resolve>,
        sink: Arc<dyn EgressSink>,
        config: ProxyConfig,
    ) -> Self {
        let permits = Arc::new(Semaphore::new(config.max_connections.max(1)));
        Self {
            policy,
            routes: Vec::new(),
            resolver,
            sink,
            config,
            next_connection: AtomicU64::new(1),
            permits,
        }
    }

    /// Intercepts the `CONNECT`s to `git`'s host (see [`GitAccess`]); the policy must still
    /// allow that host.
    #[must_use]
    pub fn with_git(mut self, git: GitAccess) -> Self {
        self.routes.push(Arc::new(Route::new(Credential::Git(git))));
        self
    }

    /// Intercepts the `CONNECT`s to `key`'s host and writes the key over its placeholder (see
    /// [`HostKey`]); the policy must still allow that host. A host given twice is intercepted
    /// for the first.
    #[must_use]
    pub fn with_host_key(mut self, key: HostKey) -> Self {
        self.routes.push(Arc::new(Route::new(Credential::Key(key))));
        self
    }

    pub(crate) fn config(&self) -> &ProxyConfig {
        &self.config
    }

    /// Accepts connections on `listener` until `shutdown` is cancelled; each is served on its
    /// own task. Connections already accepted run to their end.
    pub async fn serve(self: Arc<Self>, listener: TcpListener, shutdown: CancellationToken) {
        loop {
            let Ok(permit) = Arc::clone(&self.permits).acquire_owned().await else {
                return;
            };
            let accepted = tokio::select! {
                () = shutdown.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    self.spawn_connection(stream, &peer.to_string(), permit);
                }
                Err(error) => accept_failed(&error).await,
            }
        }
    }

    /// [`EgressProxy::serve`] on a Unix socket — the form in which the proxy is bind-mounted
    /// into a workspace that has no network of its own.
    pub async fn serve_unix(self: Arc<Self>, listener: UnixListener, shutdown: CancellationToken) {
        loop {
            let Ok(permit) = Arc::clone(&self.permits).acquire_owned().await else {
                return;
            };
            let accepted = tokio::select! {
                () = shutdown.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, _)) => self.spawn_unix_connection(stream, permit),
                Err(error) => accept_failed(&error).await,
            }
        }
    }

    /// Serves one connection to the Unix socket: a TCP connection the workspace's bridge hands
    /// over (see [`crate::handoff`]), or a client speaking HTTP on the socket itself. Both get
    /// one handshake deadline, from the accept on.
    fn spawn_unix_connection(self: &Arc<Self>, stream: UnixStream, permit: OwnedSemaphorePermit) {
        let proxy = Arc::clone(self);
        let span = tracing::info_span!("egress.accept", peer = "unix");
        tokio::spawn(
            async move {
                let deadline = tokio::time::Instant::now() + proxy.config.handshake_timeout;
                match tokio::time::timeout_at(deadline, arrival(&stream)).await {
                    Ok(Ok(Arrival::Handed(tcp))) => {
                        drop(stream);
                        proxy.serve_until(tcp, deadline).await;
                    }
                    Ok(Ok(Arrival::Stream)) => proxy.serve_until(stream, deadline).await,
                    Ok(Ok(Arrival::Closed)) | Err(_) => {}
                    Ok(Err(error)) => {
                        tracing::warn!(%error, "egress proxy refused a handed-over connection");
                    }
                }
                drop(permit);
            }
            .instrument(span),
        );
    }

    fn spawn_connection<IO>(self: &Arc<Self>, io: IO, peer: &str, permit: OwnedSemaphorePermit)
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let proxy = Arc::clone(self);
        let span = tracing::info_span!("egress.accept", peer);
        tokio::spawn(
            async move {
                proxy.serve_connection(io).await;
                drop(permit);
            }
            .instrument(span),
        );
    }

    /// Serves one client connection (one request; a `CONNECT` becomes a tunnel). A TCP or Unix
    /// socket's tunnel is relayed in the kernel; any other stream's by copying.
    pub async fn serve_connection<IO>(self: Arc<Self>, io: IO)
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let deadline = tokio::time::Instant::now() + self.config.handshake_timeout;
        self.serve_until(io, deadline).await;
    }

    /// [`EgressProxy::serve_connection`] with the request head due by `deadline`.
    async fn serve_until<IO>(self: Arc<Self>, mut io: IO, deadline: tokio::time::Instant)
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let connection = self.next_connection.fetch_add(1, Ordering::Relaxed);
        let span = tracing::info_span!("egress.connection", connection);
        async move {
            let head = tokio::time::timeout_at(
                deadline,
                read_head(
                    &mut io,
                    self.config.max_head_bytes,
                    self.config.max_head_lines,
                ),
            )
            .await;
            let bytes = match head {
                Ok(Ok(Head::Complete(bytes))) => bytes,
                Ok(Ok(Head::TooLarge)) => {
                    let refusal = EgressRefusal::HeadersTooLarge;
                    self.record(
                        &Ask {
                            connection,
                            access: None,
                            target: None,
                        },
                        EgressVerdict::refused(&refusal),
                    );
                    let body = refusal.body();
                    let reply = format!(
                        "HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain; charset=utf-8\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = io.write_all(reply.as_bytes()).await;
                    let _ = io.shutdown().await;
                    return;
                }
                Ok(Ok(Head::Closed) | Err(_)) | Err(_) => return,
            };
            let proxy = Arc::clone(&self);
            let service = service_fn(move |request| {
                let proxy = Arc::clone(&proxy);
                async move { Ok::<_, Infallible>(proxy.handle(connection, request).await) }
            });
            let served = hyper::server::conn::http1::Builder::new()
                .keep_alive(false)
                .max_buf_size((self.config.max_head_bytes * 2).max(8192))
                .serve_connection(TokioIo::new(Rewind::new(bytes, io)), service)
                .with_upgrades()
                .await;
            if let Err(error) = served {
                tracing::debug!(%error, "egress connection ended with an error");
            }
        }
        .instrument(span)
        .await;
    }

    async fn handle(
        self: Arc<Self>,
        connection: u64,
        request: Request<Incoming>,
    ) -> Response<ProxyBody> {
        let access = if request.method() == Method::CONNECT {
            Access::Tunnel
        } else {
            Access::Http {
                method: request.method().as_str().to_owned(),
            }
        };
        let mut ask = Ask {
            connection,
            access: Some(access.clone()),
            target: None,
        };
        let admitted = self.config.credential.as_ref().is_none_or(|credential| {
            credential.admits(request.headers().get(header::PROXY_AUTHORIZATION))
        });
        let result = if admitted {
            match access {
                Access::Tunnel => self.handle_connect(&mut ask, request).await,
                Access::Http { .. } => self.handle_http(&mut ask, &access, request).await,
            }
        } else {
            // Named in the trace (which tool left the credential out), never reached.
            ask.target = requested_target(&request);
            Err(EgressRefusal::ProxyAuthRequired.into())
        };
        result.unwrap_or_else(|stop| {
            self.record(&ask, stop.verdict());
            stop.response()
        })
    }

    async fn handle_connect(
        self: &Arc<Self>,
        ask: &mut Ask,
        request: Request<Incoming>,
    ) -> Result<Response<ProxyBody>, Stop> {
        let authority = request.uri().authority().ok_or(EgressRefusal::BadTarget {
            detail: "a CONNECT target is host:port",
        })?;
        let target = connect_target(authority.as_str())?;
        ask.target = Some(target.clone());
        let allowed = self
            .policy
            .decide(&target.host, target.port, &Access::Tunnel)?;
        let addresses = self.checked_addresses(&target).await?;
        let proxy = Arc::clone(self);
        let tunnel_ask = ask.clone();
        let route = self
            .routes
            .iter()
            .find(|route| route.intercepts(&target.host, target.port))
            .cloned();
        tokio::spawn(
            async move {
                match (hyper::upgrade::on(request).await, route) {
                    (Ok(upgraded), Some(route)) => {
                        let rule = allowed.rule;
                        intercept(proxy, route, tunnel_ask, rule, addresses, upgraded).await;
                    }
                    (Ok(upgraded), None) => {
                        let client = Client::of(upgraded);
                        tunnel(proxy, tunnel_ask, allowed.rule, addresses, client).await;
                    }
                    (Err(error), _) => tracing::debug!(%error, "CONNECT upgrade failed"),
                }
            }
            .in_current_span(),
        );
        Ok(Response::new(Either::Right(Full::new(Bytes::new()))))
    }

    async fn handle_http(
        self: &Arc<Self>,
        ask: &mut Ask,
        access: &Access,
        request: Request<Incoming>,
    ) -> Result<Response<ProxyBody>, Stop> {
        let uri = request.uri();
        if uri.scheme_str() != Some("http") {
            return Err(EgressRefusal::NotProxyForm.into());
        }
        let authority = uri.authority().ok_or(EgressRefusal::NotProxyForm)?;
        let target = http_target(authority.as_str())?;
        ask.target = Some(target.clone());
        let mut hosts = request.headers().get_all(header::HOST).iter();
        let agrees = match (hosts.next(), hosts.next()) {
            (None, _) => true,
            (Some(value), None) => host_header_agrees(value.as_bytes(), &target),
            (Some(_), Some(_)) => false,
        };
        if !agrees {
            return Err(EgressRefusal::HostMismatch.into());
        }
        let allowed = self.policy.decide(&target.host, target.port, access)?;
        let addresses = self.checked_addresses(&target).await?;
        let (stream, address) = self.connect(&target, &addresses).await?;
        self.record(
            ask,
            EgressVerdict::Allowed {
                rule: allowed.rule,
                address,
            },
        );
        let forwarded = async {
            crate::forward::forward(stream, &target, request)
                .await
                .map_err(|message| Stop::Failed {
                    reason: "UPSTREAM",
                    message,
                    status: StatusCode::BAD_GATEWAY,
                })
        };
        self.answered(&target, forwarded).await
    }

    /// `sent` (a request on its way upstream, up to its response head), given at most
    /// [`ProxyConfig::response_timeout`]: an upstream that accepts and never answers holds no
    /// client and no connection slot for longer.
    pub(crate) async fn answered<T>(
        &self,
        target: &Target,
        sent: impl Future<Output = Result<T, Stop>>,
    ) -> Result<T, Stop> {
        let limit = self.config.response_timeout;
        tokio::time::timeout(limit, sent).await.unwrap_or_else(|_| {
            Err(Stop::Failed {
                reason: "TIMEOUT",
                message: format!(
                    "{}:{}: no response within {} ms",
                    target.host,
                    target.port,
                    limit.as_millis()
                ),
                status: StatusCode::GATEWAY_TIMEOUT,
            })
        })
    }

    /// Resolves the target once and checks the name and every address it resolved to; any
    /// refused address refuses the request (a name that mixes public and private answers is
    /// not one to trust).
    async fn checked_addresses(&self, target: &Target) -> Result<Vec<IpAddr>, Stop> {
        let addresses = self.policy.address_policy();
        addresses
            .check_url(
                &format!("https://{}:{}/", target.host, target.port),
                RequestKind::Plain,
            )
            .map_err(|refusal| EgressRefusal::Address { refusal })?;
        let resolved = self
            .resolver
            .resolve(&target.host, target.port)
            .await
            .map_err(|error| Stop::Failed {
                reason: "RESOLVE_FAILED",
                message: error.to_string(),
                status: StatusCode::BAD_GATEWAY,
            })?;
        for address in &resolved {
            addresses
                .check_origin_address(&target.host, target.port, *address)
                .map_err(|refusal| EgressRefusal::Address { refusal })?;
        }
        Ok(resolved)
    }

    /// Connects to the first checked address that answers — only ever one of `addresses`.
    pub(crate) async fn connect(
        &self,
        target: &Target,
        addresses: &[IpAddr],
    ) -> Result<(TcpStream, IpAddr), Stop> {
        let mut last = String::from("no address to connect to");
        for address in addresses {
            let socket = SocketAddr::new(*address, target.port);
            match tokio::time::timeout(self.config.connect_timeout, TcpStream::connect(socket))
                .await
            {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok((stream, *address));
                }
                Ok(Err(error)) => last = format!("{socket}: {error}"),
                Err(_) => {
                    return Err(Stop::Failed {
                        reason: "TIMEOUT",
                        message: format!("{socket}: connecting timed out"),
                        status: StatusCode::GATEWAY_TIMEOUT,
                    });
                }
            }
        }
        Err(Stop::Failed {
            reason: "CONNECT_FAILED",
            message: last,
            status: StatusCode::BAD_GATEWAY,
        })
    }

    /// Sends a decision to the sink and the trace.
    pub(crate) fn record(&self, ask: &Ask, verdict: EgressVerdict) {
        let (host, port) = ask.target.as_ref().map_or((String::new(), 0), |target| {
            (target.host.clone(), target.port)
        });
        match &verdict {
            EgressVerdict::Allowed { rule, address } => {
                tracing::info!(host, port, rule, %address, "egress allowed");
            }
            EgressVerdict::Refused { reason, rule, .. } => {
                tracing::warn!(
                    host,
                    port,
                    reason,
                    rule = rule.as_deref().unwrap_or("-"),
                    "egress refused"
                );
            }
            EgressVerdict::Failed { reason, message } => {
                tracing::warn!(host, port, reason, message, "egress failed");
            }
        }
        self.sink.record(&EgressDecision {
            connection: ask.connection,
            access: ask.access.clone(),
            host,
            port,
            verdict,
        });
    }
}
