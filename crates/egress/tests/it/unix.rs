//! The proxy on a Unix socket, as a workspace without a network reaches it: the same decisions,
//! and tunnels relayed from the Unix socket.

use std::path::PathBuf;
use std::sync::Arc;

use auto_swe_egress::{
    EgressProxy, EgressVerdict, MemorySink, ProxyConfig, client_hello_for_tests,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;

use crate::clients::{assert_curl_reaches_tls_server, command, run, text, tls_server};
use crate::support::{LOOPBACK, PATIENCE, Serve, Upstream, loopback_names, policy};

pub(crate) struct UnixProxy {
    pub(crate) path: PathBuf,
    pub(crate) sink: Arc<MemorySink>,
    shutdown: CancellationToken,
    _dir: tempfile::TempDir,
}

impl Drop for UnixProxy {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub(crate) fn start(rules: &[&str], origins: &[&str]) -> UnixProxy {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("egress.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let sink = Arc::new(MemorySink::new());
    let proxy = Arc::new(EgressProxy::new(
        policy(rules, origins),
        Arc::new(loopback_names(&["registry.test"])),
        sink.clone(),
        ProxyConfig::default(),
    ));
    let shutdown = CancellationToken::new();
    tokio::spawn(proxy.serve_unix(listener, shutdown.clone()));
    UnixProxy {
        path,
        sink,
        shutdown,
        _dir: dir,
    }
}

#[tokio::test]
async fn a_tunnel_from_a_unix_socket_is_checked_and_relayed() {
    let upstream = Upstream::start(Serve::Raw).await;
    let origin = format!("registry.test:{}", upstream.port());
    let proxy = start(&[&origin], &[&origin]);
    for (sni, forwarded) in [("registry.test", true), ("evil.test", false)] {
        let mut stream = UnixStream::connect(&proxy.path).await.unwrap();
        let mut request = format!("CONNECT {origin} HTTP/1.1\r\n\r\n").into_bytes();
        request.extend_from_slice(&client_hello_for_tests(&[sni]));
        stream.write_all(&request).await.unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer))
            .await
            .unwrap()
            .unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert_eq!(answer.ends_with("TUNNEL-OK"), forwarded, "{answer}");
    }
    assert_eq!(upstream.connections().await, 1);
    let decisions = proxy.sink.wait_for(2).await;
    assert!(matches!(
        decisions[0].verdict,
        EgressVerdict::Allowed { .. }
    ));
    assert!(matches!(
        decisions[1].verdict,
        EgressVerdict::Refused {
            reason: "SNI_MISMATCH",
            ..
        }
    ));
}

/// A TCP port on loopback bridged byte for byte to the proxy's Unix socket — what a workspace
/// runs at `127.0.0.1:3128` so its tools can speak to a proxy the usual way.
async fn bridge(socket: PathBuf) -> String {
    let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let socket = socket.clone();
            tokio::spawn(async move {
                let mut unix = UnixStream::connect(socket).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut tcp, &mut unix).await;
            });
        }
    });
    format!("http://{address}")
}

#[tokio::test]
async fn curl_through_a_bridge_to_the_unix_socket_speaks_http_and_tls() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, tls_port) = tls_server(dir.path()).await;
    let upstream = Upstream::start(Serve::Fixed("plain over unix")).await;
    let plain = format!("registry.test:{}", upstream.port());
    let tls = format!("registry.test:{tls_port}");
    let proxy = start(&[&plain, &tls], &[&plain, &tls]);
    let proxy_url = bridge(proxy.path.clone()).await;
    let mut curl = command("curl", dir.path());
    curl.args(["-sS", "-x", &proxy_url])
        .arg(format!("http://{plain}/"));
    let output = run(curl).await;
    assert_eq!(
        text(&output.stdout),
        "plain over unix",
        "{}",
        text(&output.stderr)
    );
    assert_curl_reaches_tls_server(dir.path(), &proxy_url, &tls).await;
    let decisions = proxy.sink.wait_for(2).await;
    assert!(
        decisions
            .iter()
            .all(|d| matches!(d.verdict, EgressVerdict::Allowed { .. })),
        "{decisions:?}"
    );
}

#[tokio::test]
async fn any_byte_stream_can_be_served_and_its_tunnel_is_copied() {
    let upstream = Upstream::start(Serve::Raw).await;
    let origin = format!("registry.test:{}", upstream.port());
    let sink = Arc::new(MemorySink::new());
    let proxy = Arc::new(EgressProxy::new(
        policy(&[&origin], &[&origin]),
        Arc::new(loopback_names(&["registry.test"])),
        sink.clone(),
        ProxyConfig::default(),
    ));
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    tokio::spawn(proxy.serve_connection(server));
    let mut request = format!("CONNECT {origin} HTTP/1.1\r\n\r\n").into_bytes();
    request.extend_from_slice(&client_hello_for_tests(&["registry.test"]));
    client.write_all(&request).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, client.read_to_end(&mut answer))
        .await
        .unwrap()
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.ends_with("TUNNEL-OK"),
        "{answer}"
    );
    assert_eq!(
        *upstream.raw.lock().unwrap(),
        [client_hello_for_tests(&["registry.test"])]
    );
    assert!(matches!(
        sink.wait_for(1).await[0].verdict,
        EgressVerdict::Allowed { .. }
    ));
}
