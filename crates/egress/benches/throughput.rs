//! Egress proxy cost on loopback: a 100 MB download direct and through the proxy (plain HTTP
//! forwarding, a `CONNECT` tunnel carrying TLS as an HTTPS download does, from a host as fast as
//! the cores allow and from hosts paced like a remote one behind a link, and a tunnel carrying
//! raw bytes: the worst case, where moving bytes is all any party does), and the latency a small
//! request gains by going through it. The TLS rows run once more with the client's receive
//! buffer fixed rather than autotuned, which separates the proxy's own cost from the small
//! window a client's kernel sizes for a loopback peer. With the bridge program built (and
//! `CAP_SYS_ADMIN`), rows from a workspace's own network namespace through its bridge measure
//! what a `local` or `docker` workspace's tools get, at the kernel's TCP defaults and with the
//! workspace's receive buffer. Prints the machine's load average before and after, since the
//! numbers mean little on a busy host.

#![expect(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::cast_precision_loss,
    reason = "a benchmark prints its results and fails loudly"
)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
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

#[path = "throughput/paced.rs"]
mod paced;
#[path = "throughput/workspace.rs"]
mod workspace;

use paced::{LINK_MB_PER_SECOND, http_upstream_paced, tls_upstream};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const BIG: usize = 100 * 1024 * 1024;
/// Rounds per row, each a direct and a proxied download; the medians are reported.
const ROUNDS: usize = 9;
const SMALL_REQUESTS: usize = 300;

/// A loopback listener, registered with the runtime that first polls the server using it.
fn bind() -> (SocketAddr, std::net::TcpListener) {
    let listener = std::net::TcpListener::bind((LOOPBACK, 0)).unwrap();
    listener.set_nonblocking(true).unwrap();
    (listener.local_addr().unwrap(), listener)
}

/// A server on a free loopback port: each connection it accepts (`TCP_NODELAY` set) is served
/// by `serve` on a task of its own. Returns the address and the future that accepts.
fn server<F, S>(serve: F) -> (SocketAddr, impl Future<Output = ()> + Send)
where
    F: Fn(TcpStream) -> S + Send + 'static,
    S: Future<Output = ()> + Send + 'static,
{
    let (address, listener) = bind();
    let accept = async move {
        let listener = TcpListener::from_std(listener).unwrap();
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let _ = stream.set_nodelay(true);
            tokio::spawn(serve(stream));
        }
    };
    (address, accept)
}

/// An HTTP server answering `/big` with 100 MB and anything else with two bytes.
fn http_upstream(big: Bytes) -> (SocketAddr, impl Future<Output = ()> + Send) {
    server(move |stream| {
        let big = big.clone();
        async move {
            let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let body = if request.uri().path() == "/big" {
                    big.clone()
                } else {
                    Bytes::from_static(b"ok")
                };
                async move { Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(body))) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    })
}

/// A raw server for tunnels: reads the client's first bytes, then sends 100 MB.
fn raw_upstream(big: Bytes) -> (SocketAddr, impl Future<Output = ()> + Send) {
    server(move |mut stream| {
        let big = big.clone();
        async move {
            let mut first = [0_u8; 4096];
            let _ = stream.read(&mut first).await;
            let _ = stream.write_all(&big).await;
        }
    })
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

/// One GET on a fresh connection to `connect_to`; returns the body length.
async fn get(connect_to: SocketAddr, uri: &str, host: &str) -> usize {
    let stream = TcpStream::connect(connect_to).await.unwrap();
    stream.set_nodelay(true).unwrap();
    get_over(stream, uri, host).await
}

/// One GET on `stream`; returns the body length.
async fn get_over(stream: TcpStream, uri: &str, host: &str) -> usize {
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

/// How the downloading client sizes its socket's receive buffer.
#[derive(Clone, Copy)]
enum ClientBuffer {
    /// As nearly every tool does: the kernel's autotuning, which sizes the window to the round
    /// trip to the peer (tens of microseconds on loopback, so a small window).
    Autotuned,
    /// Fixed with `SO_RCVBUF` before connecting, as a tool may choose to; the kernel caps it at
    /// `net.core.rmem_max` and doubles it.
    Fixed(u32),
}

/// A connection to `upstream`, through a `CONNECT` tunnel of the proxy when one is given.
async fn open(
    proxy: Option<SocketAddr>,
    upstream: SocketAddr,
    host: &str,
    buffer: ClientBuffer,
) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    if let ClientBuffer::Fixed(bytes) = buffer {
        socket.set_recv_buffer_size(bytes).unwrap();
    }
    let mut stream = socket.connect(proxy.unwrap_or(upstream)).await.unwrap();
    stream.set_nodelay(true).unwrap();
    if proxy.is_some() {
        tunnel_to(&mut stream, upstream, host).await;
    }
    stream
}

/// Asks the proxy on `stream` for a tunnel to `upstream` and waits for its 200.
async fn tunnel_to(stream: &mut TcpStream, upstream: SocketAddr, host: &str) {
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

/// Reads `BIG` bytes over TLS from `upstream` (through the proxy when `proxy` is given).
async fn tls_download(
    proxy: Option<SocketAddr>,
    upstream: SocketAddr,
    connector: &TlsConnector,
    buffer: ClientBuffer,
) -> usize {
    let stream = open(proxy, upstream, "registry.test", buffer).await;
    tls_over(stream, connector).await
}

/// Reads `BIG` bytes over TLS on `stream`, a connection to the upstream or a tunnel to it.
async fn tls_over(stream: TcpStream, connector: &TlsConnector) -> usize {
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
    let mut stream = open(proxy, upstream, host, ClientBuffer::Autotuned).await;
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

/// The CPU time every thread of this process has used so far.
fn cpu_time() -> Duration {
    let time = nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID).unwrap();
    Duration::new(
        u64::try_from(time.tv_sec()).unwrap(),
        u32::try_from(time.tv_nsec()).unwrap(),
    )
}

/// One download: its rate, and how many cores the process kept busy meanwhile (near 2 on two
/// cores means the download is bound by CPU, well under it that some party waits).
#[derive(Clone, Copy)]
struct Measure {
    mb_per_s: f64,
    cores: f64,
}

async fn timed(run: impl Future<Output = usize>) -> Measure {
    let (start, cpu) = (Instant::now(), cpu_time());
    let bytes = run.await;
    let (elapsed, used) = (start.elapsed(), cpu_time().saturating_sub(cpu));
    assert_eq!(bytes, BIG);
    Measure {
        mb_per_s: mb_per_s(bytes, elapsed),
        cores: used.as_secs_f64() / elapsed.as_secs_f64(),
    }
}

/// A download direct and through the proxy: each side's median round and the rounds' ratios,
/// sorted.
struct Pair {
    direct: Measure,
    proxied: Measure,
    ratios: Vec<f64>,
}

/// The median of `measures` by rate.
fn median(mut measures: Vec<Measure>) -> Measure {
    measures.sort_by(|a, b| a.mb_per_s.total_cmp(&b.mb_per_s));
    measures[measures.len() / 2]
}

/// `ROUNDS` rounds, each a direct download then a proxied one, so a drift in the machine's
/// speed (a neighbour on the host, the clock) falls on both sides of a round alike.
async fn paired<D, DF, P, PF>(mut direct: D, mut proxied: P) -> Pair
where
    D: FnMut() -> DF,
    DF: Future<Output = usize>,
    P: FnMut() -> PF,
    PF: Future<Output = usize>,
{
    let (mut directs, mut proxieds, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let (one, other) = (timed(direct()).await, timed(proxied()).await);
        ratios.push(other.mb_per_s / one.mb_per_s);
        directs.push(one);
        proxieds.push(other);
    }
    ratios.sort_by(f64::total_cmp);
    Pair {
        direct: median(directs),
        proxied: median(proxieds),
        ratios,
    }
}

/// A row: each side's median rate and the cores it kept busy, and the median of the rounds'
/// ratios with their range.
fn row(what: &str, pair: &Pair, target: &str) {
    let ratios = &pair.ratios;
    println!(
        "{what}: direct {:.0} MB/s ({:.2} cores busy), through the proxy {:.0} MB/s ({:.2} cores busy), ratio {:.2} (rounds {:.2}-{:.2}){target}",
        pair.direct.mb_per_s,
        pair.direct.cores,
        pair.proxied.mb_per_s,
        pair.proxied.cores,
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1],
    );
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

/// The upstream servers' addresses.
#[derive(Clone, Copy)]
struct Upstreams {
    http: SocketAddr,
    raw: SocketAddr,
    tls: SocketAddr,
    /// One TLS server per pace of `LINK_MB_PER_SECOND`, in its order.
    paced: [SocketAddr; LINK_MB_PER_SECOND.len()],
    /// One HTTP server per pace of `LINK_MB_PER_SECOND`, in its order.
    paced_http: [SocketAddr; LINK_MB_PER_SECOND.len()],
}

/// Binds the upstreams; returns their addresses and one future that serves them all, on
/// whichever runtime polls it.
fn upstreams(acceptor: &TlsAcceptor) -> (Upstreams, impl Future<Output = ()> + Send + use<>) {
    let big = Bytes::from(vec![0x5a_u8; BIG]);
    let (http, serve_http) = http_upstream(big.clone());
    let (raw, serve_raw) = raw_upstream(big.clone());
    let (tls, serve_tls) = tls_upstream(big.clone(), acceptor.clone(), None);
    let [
        (slow, serve_slow),
        (fast, serve_fast),
        (fastest, serve_fastest),
    ] = LINK_MB_PER_SECOND.map(|pace| tls_upstream(big.clone(), acceptor.clone(), Some(pace)));
    let paced = [slow, fast, fastest];
    let [
        (slow_http, serve_slow_http),
        (fast_http, serve_fast_http),
        (fastest_http, serve_fastest_http),
    ] = LINK_MB_PER_SECOND.map(|pace| http_upstream_paced(big.clone(), pace));
    let paced_http = [slow_http, fast_http, fastest_http];
    let serve = async move {
        tokio::join!(
            serve_http,
            serve_raw,
            serve_tls,
            serve_slow,
            serve_fast,
            serve_fastest,
            serve_slow_http,
            serve_fast_http,
            serve_fastest_http,
        );
    };
    (
        Upstreams {
            http,
            raw,
            tls,
            paced,
            paced_http,
        },
        serve,
    )
}

/// A proxy allowing `registry.test` on each upstream's port (resolved to loopback, allowed
/// though private).
fn egress_proxy(upstreams: &Upstreams) -> Arc<EgressProxy> {
    let mut addresses = UrlPolicy::new();
    let mut policy = EgressPolicy::deny_all();
    for upstream in [upstreams.http, upstreams.raw, upstreams.tls]
        .into_iter()
        .chain(upstreams.paced)
        .chain(upstreams.paced_http)
    {
        let origin = format!("registry.test:{}", upstream.port());
        addresses.allow_private_origin(&origin).unwrap();
        policy.allow(Rule::parse(&origin).unwrap());
    }
    let resolver = StaticResolver::new().with("registry.test", &[LOOPBACK]);
    Arc::new(EgressProxy::new(
        policy.with_address_policy(addresses),
        Arc::new(resolver),
        Arc::new(MemorySink::new()),
        ProxyConfig::default(),
    ))
}

/// The workspace's bridge program: `AUTO_SWE_NETBRIDGE`, else `auto-swe-netbridge` in this
/// build's directory (`cargo build --release -p auto-swe-sandbox --bin auto-swe-netbridge`).
fn bridge_program() -> Option<PathBuf> {
    let path = std::env::var_os("AUTO_SWE_NETBRIDGE")
        .map(PathBuf::from)
        .or_else(|| {
            let benchmark = std::env::current_exe().ok()?;
            Some(benchmark.parent()?.parent()?.join("auto-swe-netbridge"))
        })?;
    path.is_file().then_some(path)
}

/// A bridge process, the copy a workspace runs in the background, on a loopback port; ended,
/// by its PID, when dropped.
struct Bridge {
    child: Child,
    address: SocketAddr,
}

impl Bridge {
    /// The CPU time the bridge process has used so far, in clock ticks (its threads included).
    fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        // After the command name, in parentheses: state is field 3; utime and stime 14 and 15.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `program` carrying a free loopback port to `socket`, bound to `cpu` when given.
#[expect(
    clippy::disallowed_methods,
    reason = "the benchmark runs the workspace's bridge program, as a workspace does"
)]
fn start_bridge(program: &Path, socket: &Path, cpu: Option<usize>) -> Bridge {
    let address = std::net::TcpListener::bind((LOOPBACK, 0))
        .unwrap()
        .local_addr()
        .unwrap();
    let mut child = Command::new(program)
        .arg("--serve")
        .arg(address.to_string())
        .arg(socket)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(cpu) = cpu {
        pin(i32::try_from(child.id()).unwrap(), cpu);
    }
    let mut said = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut said,
    )
    .unwrap();
    assert_eq!(said.trim_end(), "listening", "the bridge did not start");
    Bridge { child, address }
}

/// The proxy as the benchmark reaches it: on a loopback port, and on a Unix socket behind a
/// bridge process as a `local` or `docker` workspace reaches it (when the bridge program is
/// built). Call it on the runtime that is to serve the proxy.
struct Served {
    tcp: SocketAddr,
    bridged: Option<Bridge>,
    /// The bridge in a workspace's network namespace, by the namespace's settings.
    inside: Vec<(String, workspace::Namespace)>,
    _dir: tempfile::TempDir,
}

fn serve_proxy(
    upstreams: &Upstreams,
    shutdown: &CancellationToken,
    bridge_cpu: Option<usize>,
) -> Served {
    let proxy = egress_proxy(upstreams);
    let (tcp, listener) = bind();
    let listener = TcpListener::from_std(listener).unwrap();
    tokio::spawn(Arc::clone(&proxy).serve(listener, shutdown.clone()));
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("egress.sock");
    let unix = tokio::net::UnixListener::bind(&socket).unwrap();
    tokio::spawn(proxy.serve_unix(unix, shutdown.clone()));
    let program = bridge_program();
    let bridged = program
        .as_ref()
        .map(|program| start_bridge(program, &socket, bridge_cpu));
    let inside = program
        .map(|program| workspace::namespaces(&program, &socket))
        .unwrap_or_default();
    if let Some(cpu) = bridge_cpu {
        for (_, namespace) in &inside {
            pin(namespace.pid(), cpu);
        }
    }
    Served {
        tcp,
        bridged,
        inside,
        _dir: dir,
    }
}

/// One throughput row: what was downloaded, direct and through the proxy.
type Row = (String, Pair, String);

/// The client's fixed receive buffer for the row that takes autotuning out of the picture:
/// 4 MiB asked (what the kernel grants is printed).
const FIXED_CLIENT_BUFFER: u32 = 4 * 1024 * 1024;

/// What the kernel grants a socket that asks for `FIXED_CLIENT_BUFFER`, in KiB.
fn granted_client_buffer() -> u32 {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(FIXED_CLIENT_BUFFER).unwrap();
    socket.recv_buffer_size().unwrap() / 1024
}

const TARGET: &str = " (target >= 0.80)";

/// Measures each download direct and through the proxy at `proxy_address`; the paced ones only
/// when `paced`.
async fn throughput(
    upstreams: &Upstreams,
    served: &Served,
    connector: &TlsConnector,
    paced: bool,
) -> Vec<Row> {
    let proxy_address = served.tcp;
    let host = format!("registry.test:{}", upstreams.http.port());
    let absolute = format!("http://{host}/big");
    let (http, tls, raw) = (upstreams.http, upstreams.tls, upstreams.raw);
    let autotuned = ClientBuffer::Autotuned;
    let mut rows = vec![(
        "100 MB over HTTP".to_owned(),
        paired(
            || get(http, "/big", &host),
            || get(proxy_address, &absolute, &host),
        )
        .await,
        TARGET.to_owned(),
    )];
    rows.push((
        "100 MB over TLS through a tunnel (an HTTPS download)".to_owned(),
        paired(
            || tls_download(None, tls, connector, autotuned),
            || tls_download(Some(proxy_address), tls, connector, autotuned),
        )
        .await,
        TARGET.to_owned(),
    ));
    let fixed = ClientBuffer::Fixed(FIXED_CLIENT_BUFFER);
    rows.push((
        "100 MB over TLS through a tunnel, the client's receive buffer fixed (SO_RCVBUF) rather than autotuned".to_owned(),
        paired(
            || tls_download(None, tls, connector, fixed),
            || tls_download(Some(proxy_address), tls, connector, fixed),
        )
        .await,
        format!("; the kernel granted {} KiB", granted_client_buffer()),
    ));
    if paced {
        for (pace, upstream) in LINK_MB_PER_SECOND.into_iter().zip(upstreams.paced_http) {
            let host = format!("registry.test:{}", upstream.port());
            let absolute = format!("http://{host}/big");
            rows.push((
                format!("100 MB over HTTP from a host paced at {pace} MB/s"),
                paired(
                    || get(upstream, "/big", &host),
                    || get(proxy_address, &absolute, &host),
                )
                .await,
                TARGET.to_owned(),
            ));
        }
        for (pace, upstream) in LINK_MB_PER_SECOND.into_iter().zip(upstreams.paced) {
            rows.push((
                format!("100 MB over TLS through a tunnel from a host paced at {pace} MB/s"),
                paired(
                    || tls_download(None, upstream, connector, autotuned),
                    || tls_download(Some(proxy_address), upstream, connector, autotuned),
                )
                .await,
                TARGET.to_owned(),
            ));
        }
    }
    if let Some(bridge) = &served.bridged {
        for (buffer, how) in [(autotuned, ""), (fixed, ", the client's buffer fixed")] {
            let (address, ticks) = (bridge.address, bridge.cpu_ticks());
            let pair = paired(
                || tls_download(None, tls, connector, buffer),
                || tls_download(Some(address), tls, connector, buffer),
            )
            .await;
            // Clock ticks are hundredths of a second on Linux.
            let seconds = (bridge.cpu_ticks() - ticks) as f64 / 100.0;
            rows.push((
                format!(
                    "100 MB over TLS through the workspace's bridge, the proxy's Unix socket and a tunnel{how}"
                ),
                pair,
                format!(
                    "{TARGET}; the bridge process used {:.2} CPU-seconds per GB",
                    seconds / (ROUNDS * BIG) as f64 * 1e9
                ),
            ));
        }
    }
    for (settings, namespace) in &served.inside {
        rows.extend(workspace::rows(settings, namespace, upstreams, connector).await);
    }
    rows.push((
        "100 MB of raw bytes through a tunnel (the worst case: nothing but copying)".to_owned(),
        paired(
            || tunnel_download(None, raw, "registry.test"),
            || tunnel_download(Some(proxy_address), raw, "registry.test"),
        )
        .await,
        String::new(),
    ));
    rows
}

/// Every party on one two-thread runtime, scheduled on whichever core is free: the proxy takes
/// CPU from both ends of the download.
async fn shared() {
    let (acceptor, connector) = tls_ends();
    let (upstreams, serve_upstreams) = upstreams(&acceptor);
    tokio::spawn(serve_upstreams);
    let shutdown = CancellationToken::new();
    let served = serve_proxy(&upstreams, &shutdown, None);
    let proxy_address = served.tcp;
    if served.bridged.is_some() && served.inside.is_empty() {
        println!(
            "no network namespace could be made (it takes CAP_SYS_ADMIN, unshare and ip): no row from a workspace's own namespace"
        );
    }

    println!("-- all parties sharing the cores");
    for (what, pair, target) in throughput(&upstreams, &served, &connector, true).await {
        row(&what, &pair, &target);
    }

    let host = format!("registry.test:{}", upstreams.http.port());
    let small = format!("http://{host}/small");
    let direct = latencies(upstreams.http, "/small", &host).await;
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
}

/// Binds the thread or process `pid` (0: the calling thread) to `cpu`; threads it starts later
/// inherit the binding.
fn pin(pid: i32, cpu: usize) {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu).unwrap();
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(pid), &set).unwrap();
}

/// The first two CPUs this process may run on.
fn two_cpus() -> Option<(usize, usize)> {
    let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok()?;
    let mut cpus =
        (0..nix::sched::CpuSet::count()).filter(|&cpu| allowed.is_set(cpu).unwrap_or(false));
    Some((cpus.next()?, cpus.next()?))
}

/// A thread bound to `cpu` running `work` on a single-threaded runtime of its own.
fn on_cpu<T: Send + 'static>(
    name: &str,
    cpu: usize,
    work: impl Future<Output = T> + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let thread = std::thread::Builder::new().name(format!("{name}-cpu{cpu}"));
    thread
        .spawn(move || {
            pin(0, cpu);
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(work)
        })
        .unwrap()
}

/// The upstream alone on one core, as a remote host is off the worker's cores, sending as fast
/// as that core lets it; the client and the proxy share the other core, as a workspace and its
/// proxy share a worker's. Each side's loopback receive work runs on the sender's core, so the
/// client's core does less here than with a real network card: the direct figure is, if
/// anything, flattered.
fn pinned(upstream_cpu: usize, client_cpu: usize) {
    let (acceptor, connector) = tls_ends();
    let (upstreams, serve_upstreams) = upstreams(&acceptor);
    // Serves until the process exits.
    drop(on_cpu("upstream", upstream_cpu, serve_upstreams));
    let rows = on_cpu("client", client_cpu, async move {
        let shutdown = CancellationToken::new();
        let served = serve_proxy(&upstreams, &shutdown, Some(client_cpu));
        let rows = throughput(&upstreams, &served, &connector, false).await;
        drop(served);
        shutdown.cancel();
        rows
    })
    .join()
    .unwrap();
    println!(
        "-- the upstream on CPU {upstream_cpu}, the client, the proxy and the bridge on CPU {client_cpu}"
    );
    for (what, pair, target) in rows {
        row(&what, &pair, &target);
    }
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent; keep that run short.
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("egress throughput: run with `cargo bench -p auto-swe-egress` to measure");
        return;
    }
    println!("load before: {}", load());
    if bridge_program().is_none() {
        println!(
            "no bridge program (AUTO_SWE_NETBRIDGE, or `cargo build --release -p auto-swe-sandbox --bin auto-swe-netbridge`): no row through the workspace's bridge"
        );
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(shared());
    match two_cpus() {
        Some((first, second)) => pinned(second, first),
        None => println!("-- one CPU only: no row with the upstream on a core of its own"),
    }
    println!("load after: {}", load());
}
