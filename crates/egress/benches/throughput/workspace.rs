//! Rows with the client where a `local` or `docker` workspace's tools are: in a network
//! namespace of their own holding only loopback, reaching the proxy through the workspace's
//! bridge on `127.0.0.1:3128` inside, which hands each connection over to the proxy's Unix
//! socket. Such a namespace starts with the kernel's own TCP defaults, not the host's; the rows
//! run once with those and once with the receive buffer default a proxied workspace is given
//! ([`WORKSPACE_TCP_RMEM`]).
//!
//! Making a network namespace and entering it takes `CAP_SYS_ADMIN`: run unprivileged, these
//! rows are skipped with a note.

use std::fs::File;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use auto_swe_egress::WORKSPACE_TCP_RMEM;
use tokio::net::TcpStream;

/// Where the bridge listens inside, as in a workspace.
const INSIDE: &str = "127.0.0.1:3128";

/// A network namespace with the workspace's bridge listening in it; its bridge (the namespace's
/// only process) is ended, by its PID, when dropped.
pub(crate) struct Namespace {
    bridge: Child,
    net: File,
    /// `net.ipv4.tcp_rmem` inside, as read back.
    pub(crate) tcp_rmem: String,
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = self.bridge.kill();
        let _ = self.bridge.wait();
    }
}

/// Starts `program` (the bridge) to `socket` in a new network namespace whose loopback is up,
/// with `net.ipv4.tcp_rmem` set to `tcp_rmem` when given; `None` when the namespace cannot be
/// made (no privilege, no `unshare` or `ip`).
#[expect(
    clippy::disallowed_methods,
    reason = "the benchmark makes a workspace's network namespace with util-linux and iproute2"
)]
fn start(program: &Path, socket: &Path, tcp_rmem: Option<&str>) -> Option<Namespace> {
    let script = r#"ip link set lo up || exit 1
if [ -n "$1" ]; then printf '%s\n' "$1" > /proc/sys/net/ipv4/tcp_rmem || exit 1; fi
cat /proc/sys/net/ipv4/tcp_rmem
exec "$2" --serve 127.0.0.1:3128 "$3""#;
    let mut bridge = Command::new("unshare")
        .args(["--net", "--", "sh", "-c", script, "sh"])
        .arg(tcp_rmem.unwrap_or_default())
        .arg(program)
        .arg(socket)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut out = std::io::BufReader::new(bridge.stdout.take()?);
    let (mut read_back, mut said) = (String::new(), String::new());
    let _ = std::io::BufRead::read_line(&mut out, &mut read_back);
    let _ = std::io::BufRead::read_line(&mut out, &mut said);
    let net = File::open(format!("/proc/{}/ns/net", bridge.id()));
    let started = Namespace {
        bridge,
        net: net.ok()?,
        tcp_rmem: read_back.split_whitespace().collect::<Vec<_>>().join(" "),
    };
    (said.trim_end() == "listening").then_some(started)
}

impl Namespace {
    /// The bridge's PID, the namespace's only process.
    pub(crate) fn pid(&self) -> i32 {
        i32::try_from(self.bridge.id()).unwrap()
    }

    /// A connection to the bridge, made from inside the namespace (on a thread that enters
    /// it, so the socket is the namespace's) as a workspace's tool makes it.
    pub(crate) async fn connect(&self) -> TcpStream {
        let net = self.net.try_clone().unwrap();
        let (sender, receiver) = tokio::sync::oneshot::channel();
        // A thread of its own, which ends with the connect: no thread of the runtime's is
        // left in the namespace.
        std::thread::spawn(move || {
            nix::sched::setns(&net, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            let address: SocketAddr = INSIDE.parse().unwrap();
            let _ = sender.send(std::net::TcpStream::connect(address).unwrap());
        });
        let stream = receiver.await.unwrap();
        stream.set_nonblocking(true).unwrap();
        let stream = TcpStream::from_std(stream).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
    }
}

/// The namespaces the rows run in: the kernel's defaults, and the workspace's receive buffer.
pub(crate) fn namespaces(program: &Path, socket: &Path) -> Vec<(String, Namespace)> {
    [
        ("the kernel's defaults", None),
        ("the workspace's receive buffer", Some(WORKSPACE_TCP_RMEM)),
    ]
    .into_iter()
    .filter_map(|(what, rmem)| {
        let namespace = start(program, socket, rmem)?;
        Some((
            format!("{what} (tcp_rmem {})", namespace.tcp_rmem),
            namespace,
        ))
    })
    .collect()
}

/// The rows from `namespace` (set up with `settings`): a plain HTTP download and a TLS one
/// through a tunnel, each against the same download direct from the host's namespace.
pub(crate) async fn rows(
    settings: &str,
    namespace: &Namespace,
    upstreams: &super::Upstreams,
    connector: &tokio_rustls::TlsConnector,
) -> Vec<super::Row> {
    use super::{ClientBuffer, TARGET, get, get_over, paired, tls_download, tls_over, tunnel_to};
    let (http, tls) = (upstreams.http, upstreams.tls);
    let host = format!("registry.test:{}", http.port());
    let absolute = format!("http://{host}/big");
    let http_pair = paired(
        || get(http, "/big", &host),
        || async { get_over(namespace.connect().await, &absolute, &host).await },
    )
    .await;
    let tls_pair = paired(
        || tls_download(None, tls, connector, ClientBuffer::Autotuned),
        || async {
            let mut stream = namespace.connect().await;
            tunnel_to(&mut stream, tls, "registry.test").await;
            tls_over(stream, connector).await
        },
    )
    .await;
    let what = "from a workspace's own network namespace through its bridge, with";
    vec![
        (
            format!("100 MB over HTTP {what} {settings}"),
            http_pair,
            TARGET.to_owned(),
        ),
        (
            format!("100 MB over TLS {what} {settings}"),
            tls_pair,
            TARGET.to_owned(),
        ),
    ]
}
