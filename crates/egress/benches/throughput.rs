//! Egress proxy cost on loopback: a 100 MB download direct and through the proxy (plain HTTP
//! forwarding, a `CONNECT` tunnel carrying TLS as an HTTPS download does, and a tunnel carrying
//! raw bytes: the worst case, where moving bytes is all any party does), and the latency a small
//! request gains by going through it. Prints the machine's load average before and after, since
//! the numbers mean little on a busy host.

#![expect(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::cast_precision_loss,
    reason = "a benchmark prints its results and fails loudly"
)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use auto_swe_egress::{
    EgressPolicy, EgressProxy, MemorySink, ProxyConfig, Rule, StaticResolver,
    client_hello_for_tests,
};
use auto_swe_scanners::UrlPolicy;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tokio_util::sync::CancellationToken;

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const BIG: usize = 100 * 1024 * 1024;
const ROUNDS: usize = 3;
const SMALL_REQUESTS: usize = 300;

/// An HTTP server answering `/big` with 100 MB and anything else with two bytes.
async fn http_upstream(big: Bytes) -> SocketAddr {
    let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let _ = stream.set_nodelay(true);
            let big = big.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let body = if request.uri().path() == "/big" {
                        big.clone()
                    } else {
                        Bytes::from_static(b"ok")
                    };
                    async move {
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(body)))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    address
}

/// A raw server for tunnels: reads the client's first bytes, then sends 100 MB.
async fn raw_upstream(big: Bytes) -> SocketAddr {
    let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let big = big.clone();
            tokio::spawn(async move {
                let mut first = [0_u8; 4096];
                let _ = stream.read(&mut first).await;
                let _ = stream.write_all(&big).await;
            });
        }
    });
    address
}

/// Both TLS ends for `registry.test`: a self-signed certificate the client trusts.
fn tls_ends() -> (TlsAcceptor, TlsConnector) {
    let certified = rcgen::generate_simple_self_signed(vec!["registry.test".to_owned()]).unwrap();
    let certificate: CertificateDer<'static> = certified.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certificate.clone()], key)
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(certificate).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    (
        TlsAcceptor::from(Arc::new(server)),
        TlsConnector::from(Arc::new(client)),
    )
}

/// The pace of the link-paced TLS server: 250 MB/s, a fast data-centre link (2 Gbit/s).
const LINK_BYTES_PER_SECOND: f64 = 250.0 * 1024.0 * 1024.0;

/// A TLS server for tunnels: completes the handshake, then sends 100 MB, at most
/// `LINK_BYTES_PER_SECOND` when `paced` (as a remote host behind a link would), else as fast
/// as it can.
async fn tls_upstream(big: Bytes, acceptor: TlsAcceptor, paced: bool) -> SocketAddr {
    let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let _ = stream.set_nodelay(true);
            let (big, acceptor) = (big.clone(), acceptor.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                if paced {
                    let start = Instant::now();
                    let mut sent = 0_usize;
                    for chunk in big.chunks(256 * 1024) {
                        let due = Duration::from_secs_f64(sent as f64 / LINK_BYTES_PER_SECOND);
                        tokio::time::sleep_until((start + due).into()).await;
                        if tls.write_all(chunk).await.is_err() {
                            return;
                        }
                        sent += chunk.len();
                    }
                } else {
                    let _ = tls.write_all(&big).await;
                }
                let _ = tls.shutdown().await;
            });
        }
    });
    address
}

/// One GET on a fresh connection to `connect_to`; returns the body length.
async fn get(connect_to: SocketAddr, uri: &str, host: &str) -> usize {
    let stream = TcpStream::connect(connect_to).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::get(uri)
        .header("host", host)
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut length = 0;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.unwrap().into_data() {
            length += data.len();
        }
    }
    length
}

/// A connection to `upstream`, through a `CONNECT` tunnel of the proxy when one is given.
async fn open(proxy: Option<SocketAddr>, upstream: SocketAddr, host: &str) -> TcpStream {
    let mut stream = TcpStream::connect(proxy.unwrap_or(upstream)).await.unwrap();
    stream.set_nodelay(true).unwrap();
    if proxy.is_some() {
        let head = format!("CONNECT {host}:{} HTTP/1.1\r\n\r\n", upstream.port());
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let mut byte = [0_u8; 1];
        while !answer.ends_with(b"\r\n\r\n") {
            assert_eq!(stream.read(&mut byte).await.unwrap(), 1);
            answer.push(byte[0]);
        }
        assert!(answer.starts_with(b"HTTP/1.1 200"));
    }
    stream
}

/// Reads `BIG` bytes over TLS from `upstream` (through the proxy when `proxy` is given).
async fn tls_download(
    proxy: Option<SocketAddr>,
    upstream: SocketAddr,
    connector: &TlsConnector,
) -> usize {
    let stream = open(proxy, upstream, "registry.test").await;
    let name = ServerName::try_from("registry.test").unwrap();
    let mut tls = connector.connect(name, stream).await.unwrap();
    let mut buffer = vec![0_u8; 256 * 1024];
    let mut total = 0;
    while total < BIG {
        let read = tls.read(&mut buffer).await.unwrap();
        assert!(read > 0, "the TLS stream closed early");
        total += read;
    }
    total
}

/// Reads `BIG` bytes from a tunnel (through the proxy when `proxy` is given) after sending a
/// `ClientHello`.
async fn tunnel_download(proxy: Option<SocketAddr>, upstream: SocketAddr, host: &str) -> usize {
    let mut stream = open(proxy, upstream, host).await;
    stream
        .write_all(&client_hello_for_tests(&[host]))
        .await
        .unwrap();
    let mut buffer = vec![0_u8; 256 * 1024];
    let mut total = 0;
    while total < BIG {
        let read = stream.read(&mut buffer).await.unwrap();
        assert!(read > 0, "the tunnel closed early");
        total += read;
    }
    total
}

fn mb_per_s(bytes: usize, elapsed: Duration) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / elapsed.as_secs_f64()
}

async fn best_of<F, Fut>(mut run: F) -> f64
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let mut best = 0.0_f64;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let bytes = run().await;
        assert_eq!(bytes, BIG);
        best = best.max(mb_per_s(bytes, start.elapsed()));
    }
    best
}

fn percentile(sorted: &[Duration], percent: usize) -> Duration {
    // Nearest rank: the smallest sample at or above `percent` of the samples.
    let rank = sorted.len() * percent / 100;
    sorted[rank.min(sorted.len() - 1)]
}

async fn latencies(connect_to: SocketAddr, uri: &str, host: &str) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(SMALL_REQUESTS);
    for _ in 0..SMALL_REQUESTS {
        let start = Instant::now();
        assert_eq!(get(connect_to, uri, host).await, 2);
        samples.push(start.elapsed());
    }
    samples.sort();
    samples
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map_or_else(|_| "unavailable".into(), |text| text.trim().to_owned())
}

async fn bench() {
    println!("load before: {}", load());
    let big = Bytes::from(vec![0x5a_u8; BIG]);
    let http = http_upstream(big.clone()).await;
    let raw = raw_upstream(big.clone()).await;
    let (acceptor, connector) = tls_ends();
    let tls = tls_upstream(big.clone(), acceptor.clone(), false).await;
    let paced = tls_upstream(big, acceptor, true).await;
    let mut addresses = UrlPolicy::new();
    let mut policy = EgressPolicy::deny_all();
    for origin in [
        format!("registry.test:{}", http.port()),
        format!("registry.test:{}", raw.port()),
        format!("registry.test:{}", tls.port()),
        format!("registry.test:{}", paced.port()),
    ] {
        addresses.allow_private_origin(&origin).unwrap();
        policy.allow(Rule::parse(&origin).unwrap());
    }
    let resolver = StaticResolver::new().with("registry.test", &[LOOPBACK]);
    let proxy = Arc::new(EgressProxy::new(
        policy.with_address_policy(addresses),
        Arc::new(resolver),
        Arc::new(MemorySink::new()),
        ProxyConfig::default(),
    ));
    let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let proxy_address = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    tokio::spawn(Arc::clone(&proxy).serve(listener, shutdown.clone()));

    let host = format!("registry.test:{}", http.port());
    let absolute = format!("http://{host}/big");
    let direct = best_of(|| get(http, "/big", &host)).await;
    let forwarded = best_of(|| get(proxy_address, &absolute, &host)).await;
    let tls_direct = best_of(|| tls_download(None, tls, &connector)).await;
    let tls_tunnelled = best_of(|| tls_download(Some(proxy_address), tls, &connector)).await;
    let paced_direct = best_of(|| tls_download(None, paced, &connector)).await;
    let paced_tunnelled = best_of(|| tls_download(Some(proxy_address), paced, &connector)).await;
    let raw_direct = best_of(|| tunnel_download(None, raw, "registry.test")).await;
    let tunnelled = best_of(|| tunnel_download(Some(proxy_address), raw, "registry.test")).await;
    println!(
        "100 MB over HTTP: direct {direct:.0} MB/s, through the proxy {forwarded:.0} MB/s, ratio {:.2} (target >= 0.80)",
        forwarded / direct
    );
    println!(
        "100 MB over TLS (an HTTPS download): direct {tls_direct:.0} MB/s, through a tunnel {tls_tunnelled:.0} MB/s, ratio {:.2} (target >= 0.80)",
        tls_tunnelled / tls_direct
    );
    println!(
        "100 MB over TLS from a host paced at 250 MB/s: direct {paced_direct:.0} MB/s, through a tunnel {paced_tunnelled:.0} MB/s, ratio {:.2} (target >= 0.80)",
        paced_tunnelled / paced_direct
    );
    println!(
        "100 MB of raw bytes through a tunnel (the worst case: nothing but copying): direct {raw_direct:.0} MB/s, through the proxy {tunnelled:.0} MB/s, ratio {:.2}",
        tunnelled / raw_direct
    );

    let small = format!("http://{host}/small");
    let direct = latencies(http, "/small", &host).await;
    let proxied = latencies(proxy_address, &small, &host).await;
    let added =
        |fraction| percentile(&proxied, fraction).saturating_sub(percentile(&direct, fraction));
    println!(
        "small GET, fresh connection each ({SMALL_REQUESTS} requests): direct p50 {:?} p90 {:?}; through the proxy p50 {:?} p90 {:?}; added p50 {:?} p90 {:?} (target < 2 ms)",
        percentile(&direct, 50),
        percentile(&direct, 90),
        percentile(&proxied, 50),
        percentile(&proxied, 90),
        added(50),
        added(90),
    );
    shutdown.cancel();
    println!("load after: {}", load());
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent; keep that run short.
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("egress throughput: run with `cargo bench -p auto-swe-egress` to measure");
        return;
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench());
}
