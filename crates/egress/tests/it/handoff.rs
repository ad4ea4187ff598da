//! Connections handed over on the proxy's Unix socket: what a workspace's bridge does with each
//! TCP connection its tools open. A connected loopback TCP socket is served as if accepted on a
//! TCP listener; every other descriptor a hostile workspace could send is refused unanswered.

use std::io::{IoSlice, Write as _};
use std::mem::MaybeUninit;
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use auto_swe_egress::{EgressVerdict, HANDOFF, hand_over};
use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};

use crate::clients::{assert_curl_reaches_tls_server, command, run, text, tls_server};
use crate::support::{PATIENCE, Serve, Upstream, status_and_body};
use crate::unix::start;

/// The workspace's bridge as `auto-swe-netbridge` runs it: a TCP port on loopback whose every
/// connection is handed over to the proxy, no byte copied here.
fn handing_bridge(socket: PathBuf) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let client = client.unwrap();
            let proxy = UnixStream::connect(&socket).unwrap();
            hand_over(&proxy, &client).unwrap();
        }
    });
    format!("http://{address}")
}

#[tokio::test]
async fn curl_through_a_handing_bridge_gets_http_tls_and_megabytes() {
    let dir = tempfile::tempdir().unwrap();
    let served = dir.path().join("served");
    std::fs::create_dir(&served).unwrap();
    let big: Vec<u8> = (0..5_000_003_u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(served.join("big.bin"), &big).unwrap();
    let (_server, tls_port) = tls_server(dir.path()).await;
    let upstream = Upstream::start(Serve::Files(served)).await;
    let plain = format!("registry.test:{}", upstream.port());
    let tls = format!("registry.test:{tls_port}");
    let proxy = start(&[&plain, &tls], &[&plain, &tls]);
    let proxy_url = handing_bridge(proxy.path.clone());
    let mut curl = command("curl", dir.path());
    curl.current_dir(dir.path())
        .args(["-sS", "-x", &proxy_url, "-o", "got.bin"])
        .arg(format!("http://{plain}/big.bin"));
    let output = run(curl).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(std::fs::read(dir.path().join("got.bin")).unwrap() == big);
    assert_curl_reaches_tls_server(dir.path(), &proxy_url, &tls).await;
    let mut curl = command("curl", dir.path());
    curl.args([
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-x",
        &proxy_url,
    ])
    .arg("http://elsewhere.test/");
    let output = run(curl).await;
    assert_eq!(text(&output.stdout), "403", "{}", text(&output.stderr));
    let decisions = proxy.sink.wait_for(3).await;
    let verdicts: Vec<bool> = decisions
        .iter()
        .map(|d| matches!(d.verdict, EgressVerdict::Allowed { .. }))
        .collect();
    assert_eq!(verdicts, [true, true, false], "{decisions:?}");
}

/// Sends the handoff byte with `fds` attached, as a hostile workspace could.
fn send_with(socket: &Path, fds: &[std::os::fd::BorrowedFd<'_>]) -> UnixStream {
    let proxy = UnixStream::connect(socket).unwrap();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() {
        assert!(control.push(SendAncillaryMessage::ScmRights(fds)));
    }
    let sent = rustix::net::sendmsg(
        &proxy,
        &[IoSlice::new(&[HANDOFF])],
        &mut control,
        SendFlags::empty(),
    )
    .unwrap();
    assert_eq!(sent, 1);
    proxy
}

/// Waits for the proxy to close `stream` and returns what it wrote first (nothing, for a
/// refusal).
fn answer_of(stream: &mut impl std::io::Read) -> Vec<u8> {
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        // Closed with the request still unread: a reset, and no answer either.
        Ok(_) => answer,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => answer,
        Err(e) => panic!("{e}"),
    }
}

/// Connects to a listener bound at `bind`, sends [`REQUEST`], hands the accepted side over to
/// the proxy on `socket` and checks the proxy answered it (a 403: the policy allows nothing).
fn assert_served(socket: &Path, bind: &str) {
    let listener = TcpListener::bind(bind).unwrap();
    let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    client.set_read_timeout(Some(PATIENCE)).unwrap();
    client.write_all(REQUEST).unwrap();
    let (server_side, _) = listener.accept().unwrap();
    let unix = UnixStream::connect(socket).unwrap();
    hand_over(&unix, &server_side).unwrap();
    drop((server_side, unix));
    let (status, body) = status_and_body(&answer_of(&mut client));
    assert_eq!(status, "HTTP/1.1 403 Forbidden", "{body}");
}

/// A request the proxy would answer (with a 403) if it served the descriptor it came on.
const REQUEST: &[u8] = b"GET http://elsewhere.test/ HTTP/1.1\r\nhost: elsewhere.test\r\n\r\n";

#[tokio::test]
async fn every_descriptor_but_a_loopback_tcp_connection_is_refused_unanswered() {
    let proxy = start(&[], &[]);
    let socket = proxy.path.clone();
    let dir = tempfile::tempdir().unwrap();
    tokio::task::spawn_blocking(move || {
        let timeout = Some(PATIENCE);
        // A Unix socket pair: the far end holds a request the proxy must never answer.
        let (mut far, near) = UnixStream::pair().unwrap();
        far.set_read_timeout(timeout).unwrap();
        far.write_all(REQUEST).unwrap();
        let mut unix = send_with(&socket, &[near.as_fd()]);
        drop(near);
        assert_eq!(answer_of(&mut unix), b"", "a Unix socket was taken");
        assert_eq!(answer_of(&mut far), b"", "a Unix socket was served");

        // A pipe, a file, a listening socket, a UDP socket, and no descriptor at all.
        let (pipe_out, pipe_in) = std::io::pipe().unwrap();
        let file = std::fs::File::create(dir.path().join("file")).unwrap();
        let listening = TcpListener::bind("127.0.0.1:0").unwrap();
        for (what, fds) in [
            ("a pipe", vec![pipe_in.as_fd()]),
            ("a file", vec![file.as_fd()]),
            ("a listening socket", vec![listening.as_fd()]),
            ("nothing", vec![]),
        ] {
            let mut unix = send_with(&socket, &fds);
            unix.set_read_timeout(timeout).unwrap();
            assert_eq!(answer_of(&mut unix), b"", "{what} was taken");
        }
        drop(pipe_in);
        let mut pipe_out = pipe_out;
        assert_eq!(answer_of(&mut pipe_out), b"", "the pipe was written to");
        assert_eq!(std::fs::read(dir.path().join("file")).unwrap(), b"");

        // A connected UDP socket on loopback: once the proxy has read the handoff, nothing
        // holds it any more, so a datagram to it is refused by the kernel rather than answered.
        let (udp, far) = (
            UdpSocket::bind("127.0.0.1:0").unwrap(),
            UdpSocket::bind("127.0.0.1:0").unwrap(),
        );
        udp.connect(far.local_addr().unwrap()).unwrap();
        far.connect(udp.local_addr().unwrap()).unwrap();
        far.set_read_timeout(timeout).unwrap();
        let mut unix = send_with(&socket, &[udp.as_fd()]);
        drop(udp);
        assert_eq!(answer_of(&mut unix), b"", "a UDP socket was taken");
        far.send(REQUEST).unwrap();
        let error = far.recv(&mut [0_u8; 512]).unwrap_err();
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::ConnectionRefused,
            "{error}"
        );

        // One loopback connection is served: the request on it gets its 403.
        assert_served(&socket, "127.0.0.1:0");
    })
    .await
    .unwrap();
    // Only the connection that was served reached a decision.
    let decisions = proxy.sink.wait_for(1).await;
    assert_eq!(decisions.len(), 1, "{decisions:?}");
}

#[tokio::test]
async fn tcp_connections_are_taken_one_at_a_time_over_either_ip_version() {
    let proxy = start(&[], &[]);
    let socket = proxy.path.clone();
    tokio::task::spawn_blocking(move || {
        let timeout = Some(PATIENCE);
        // Two or three loopback connections at once (three do not fit the proxy's buffer):
        // more than one descriptor is refused whole.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        for count in [2, 3] {
            let mut clients = Vec::new();
            let mut accepted = Vec::new();
            for _ in 0..count {
                let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
                client.set_read_timeout(timeout).unwrap();
                client.write_all(REQUEST).unwrap();
                clients.push(client);
                accepted.push(listener.accept().unwrap().0);
            }
            let fds: Vec<_> = accepted.iter().map(AsFd::as_fd).collect();
            let mut unix = send_with(&socket, &fds);
            drop(fds);
            accepted.clear();
            assert_eq!(answer_of(&mut unix), b"");
            for client in &mut clients {
                assert_eq!(
                    answer_of(client),
                    b"",
                    "one of {count} connections was served"
                );
            }
        }

        // A stream socket of another protocol (Multipath TCP, where the kernel has it).
        if let Ok(mptcp) = rustix::net::socket(
            rustix::net::AddressFamily::INET,
            rustix::net::SocketType::STREAM,
            Some(rustix::net::ipproto::MPTCP),
        ) {
            rustix::net::connect(&mptcp, &listener.local_addr().unwrap()).unwrap();
            let (mut far, _) = listener.accept().unwrap();
            far.set_read_timeout(timeout).unwrap();
            far.write_all(REQUEST).unwrap();
            let mut unix = send_with(&socket, &[mptcp.as_fd()]);
            drop(mptcp);
            assert_eq!(answer_of(&mut unix), b"");
            assert_eq!(
                answer_of(&mut far),
                b"",
                "a Multipath TCP socket was served"
            );
        }

        // A loopback connection over IPv6 is served like one over IPv4.
        assert_served(&socket, "[::1]:0");
    })
    .await
    .unwrap();
    // Only the IPv6 connection was served.
    let decisions = proxy.sink.wait_for(1).await;
    assert_eq!(decisions.len(), 1, "{decisions:?}");
}
