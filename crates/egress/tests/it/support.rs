//! Test servers on loopback, the proxy under test, and raw clients.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use auto_swe_egress::{
    EgressPolicy, EgressProxy, GitAccess, HostKey, MemorySink, ProxyConfig, Resolve, Rule,
    StaticResolver,
};
use auto_swe_scanners::UrlPolicy;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub(crate) const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
/// Generous: only ever reached when the code under test hangs.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// One request an HTTP upstream saw.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) uri: String,
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) body: Vec<u8>,
}

/// What an upstream serves.
#[derive(Debug, Clone)]
pub(crate) enum Serve {
    /// HTTP: files under this directory (404 otherwise); every request recorded.
    Files(PathBuf),
    /// HTTP: this body for every request; every request recorded.
    Fixed(&'static str),
    /// Raw bytes: record the first read, answer `TUNNEL-OK`, close.
    Raw,
}

/// A server on loopback that records every connection it accepts, in accept order.
pub(crate) struct Upstream {
    pub(crate) address: SocketAddr,
    peers: watch::Sender<Vec<SocketAddr>>,
    probes: Mutex<Vec<SocketAddr>>,
    pub(crate) requests: Arc<Mutex<Vec<Seen>>>,
    pub(crate) raw: Arc<Mutex<Vec<Vec<u8>>>>,
    shutdown: CancellationToken,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Upstream {
    pub(crate) async fn start(serve: Serve) -> Self {
        let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
        let address = listener.local_addr().unwrap();
        let peers = watch::channel(Vec::new()).0;
        let requests = Arc::new(Mutex::new(Vec::new()));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let shutdown = CancellationToken::new();
        let upstream = Self {
            address,
            peers: peers.clone(),
            probes: Mutex::new(Vec::new()),
            requests: Arc::clone(&requests),
            raw: Arc::clone(&raw),
            shutdown: shutdown.clone(),
        };
        tokio::spawn(async move {
            loop {
                let (stream, peer) = tokio::select! {
                    () = shutdown.cancelled() => return,
                    accepted = listener.accept() => accepted.unwrap(),
                };
                peers.send_modify(|peers| peers.push(peer));
                let (serve, requests, raw) =
                    (serve.clone(), Arc::clone(&requests), Arc::clone(&raw));
                tokio::spawn(async move { serve_one(serve, stream, requests, raw).await });
            }
        });
        upstream
    }

    pub(crate) fn port(&self) -> u16 {
        self.address.port()
    }

    /// How many connections (other than these probes) reached this server before now. Deterministic: a probe connection
    /// is queued behind any connection the proxy opened earlier (the accept queue is first in,
    /// first out), so once the probe is accepted every earlier one has been counted.
    pub(crate) async fn connections(&self) -> usize {
        let probe = TcpStream::connect(self.address).await.unwrap();
        let mine = probe.local_addr().unwrap();
        self.probes.lock().unwrap().push(mine);
        let mut receiver = self.peers.subscribe();
        let peers =
            tokio::time::timeout(PATIENCE, receiver.wait_for(|peers| peers.contains(&mine)))
                .await
                .unwrap()
                .unwrap()
                .clone();
        let probes = self.probes.lock().unwrap();
        peers
            .iter()
            .take_while(|peer| **peer != mine)
            .filter(|peer| !probes.contains(peer))
            .count()
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.requests.lock().unwrap().clone()
    }
}

async fn serve_one(
    serve: Serve,
    mut stream: TcpStream,
    requests: Arc<Mutex<Vec<Seen>>>,
    raw: Arc<Mutex<Vec<Vec<u8>>>>,
) {
    let (files, fixed) = match serve {
        Serve::Raw => {
            let mut buffer = vec![0_u8; 65_536];
            let read = stream.read(&mut buffer).await.unwrap_or(0);
            if read > 0 {
                raw.lock().unwrap().push(buffer[..read].to_vec());
                let _ = stream.write_all(b"TUNNEL-OK").await;
            }
            return;
        }
        Serve::Files(root) => (Some(root), ""),
        Serve::Fixed(body) => (None, body),
    };
    let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        let (requests, files) = (Arc::clone(&requests), files.clone());
        async move {
            let (parts, body) = request.into_parts();
            let body = body
                .collect()
                .await
                .map(|b| b.to_bytes().to_vec())
                .unwrap_or_default();
            let headers = parts
                .headers
                .iter()
                .map(|(name, value)| {
                    (
                        name.as_str().to_owned(),
                        String::from_utf8_lossy(value.as_bytes()).into_owned(),
                    )
                })
                .collect();
            requests.lock().unwrap().push(Seen {
                method: parts.method.to_string(),
                uri: parts.uri.to_string(),
                headers,
                body,
            });
            let (status, payload) = match files {
                None => (200, Bytes::from_static(fixed.as_bytes())),
                Some(root) => {
                    let path = parts.uri.path().trim_start_matches('/');
                    if path.split('/').any(|segment| segment == "..") {
                        (404, Bytes::new())
                    } else {
                        match tokio::fs::read(root.join(path)).await {
                            Ok(bytes) => (200, Bytes::from(bytes)),
                            Err(_) => (404, Bytes::new()),
                        }
                    }
                }
            };
            let mut response = hyper::Response::new(Full::new(payload));
            *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// The proxy under test, on loopback.
pub(crate) struct Proxy {
    pub(crate) address: SocketAddr,
    pub(crate) sink: Arc<MemorySink>,
    shutdown: CancellationToken,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Proxy {
    pub(crate) async fn start(policy: EgressPolicy, resolver: Arc<dyn Resolve>) -> Self {
        Self::start_with(policy, resolver, ProxyConfig::default()).await
    }

    pub(crate) async fn start_with(
        policy: EgressPolicy,
        resolver: Arc<dyn Resolve>,
        config: ProxyConfig,
    ) -> Self {
        Self::start_proxy(policy, resolver, config, |proxy| proxy).await
    }

    /// A proxy that intercepts the `CONNECT`s of `git`'s host.
    pub(crate) async fn start_git(
        policy: EgressPolicy,
        resolver: Arc<dyn Resolve>,
        git: GitAccess,
    ) -> Self {
        Self::start_proxy(policy, resolver, ProxyConfig::default(), |proxy| {
            proxy.with_git(git)
        })
        .await
    }

    /// A proxy of `config` that writes `key` over its placeholder for the `CONNECT`s of its
    /// host.
    pub(crate) async fn start_keyed(
        policy: EgressPolicy,
        resolver: Arc<dyn Resolve>,
        key: HostKey,
        config: ProxyConfig,
    ) -> Self {
        Self::start_proxy(policy, resolver, config, |proxy| proxy.with_host_key(key)).await
    }

    async fn start_proxy(
        policy: EgressPolicy,
        resolver: Arc<dyn Resolve>,
        config: ProxyConfig,
        routes: impl FnOnce(EgressProxy) -> EgressProxy,
    ) -> Self {
        let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
        let address = listener.local_addr().unwrap();
        let sink = Arc::new(MemorySink::new());
        let shutdown = CancellationToken::new();
        let proxy = Arc::new(routes(EgressProxy::new(
            policy,
            resolver,
            sink.clone(),
            config,
        )));
        tokio::spawn(proxy.serve(listener, shutdown.clone()));
        Self {
            address,
            sink,
            shutdown,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Sends raw bytes and reads everything the proxy answers until it closes.
    pub(crate) async fn exchange(&self, request: &[u8]) -> Vec<u8> {
        let mut stream = TcpStream::connect(self.address).await.unwrap();
        stream.write_all(request).await.unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer))
            .await
            .unwrap()
            .unwrap();
        answer
    }
}

/// A policy allowing `rules`, with loopback opted in for exactly the `origins` (`host:port`)
/// given — the test servers' origins. No other loopback target is reachable.
pub(crate) fn policy(rules: &[&str], origins: &[&str]) -> EgressPolicy {
    let mut addresses = UrlPolicy::new();
    for origin in origins {
        addresses.allow_private_origin(origin).unwrap();
    }
    let mut policy = EgressPolicy::deny_all().with_address_policy(addresses);
    for rule in rules {
        policy.allow(Rule::parse(rule).unwrap());
    }
    policy
}

/// A resolver answering each name with loopback.
pub(crate) fn loopback_names(names: &[&str]) -> StaticResolver {
    names.iter().fold(StaticResolver::new(), |resolver, name| {
        resolver.with(name, &[LOOPBACK])
    })
}

/// The status line of a raw answer and its body text.
pub(crate) fn status_and_body(answer: &[u8]) -> (String, String) {
    let text = String::from_utf8_lossy(answer).into_owned();
    let status = text.lines().next().unwrap_or_default().to_owned();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}
