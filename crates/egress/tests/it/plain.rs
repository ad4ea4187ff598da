//! A plain `GET` or `HEAD` forwarded without hyper, its response body moved with `splice`: the
//! request the upstream gets, and what the client gets of each way an upstream may frame (or
//! misframe) its answer.

use std::sync::{Arc, Mutex};

use auto_swe_egress::EgressVerdict;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::support::{LOOPBACK, PATIENCE, Proxy, loopback_names, policy};

/// An upstream that reads one request head, records it, answers `reply` and closes.
struct Scripted {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

async fn scripted(reply: Vec<u8>) -> Scripted {
    scripted_in_parts(vec![reply]).await
}

/// [`scripted`] with the answer sent in `parts`, a short pause between them, so later parts
/// arrive after the proxy has read the head; the connection stays open a while after the
/// last one.
async fn scripted_in_parts(parts: Vec<Vec<u8>>) -> Scripted {
    let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let (parts, record) = (parts.clone(), Arc::clone(&record));
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0_u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                record
                    .lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&head).into_owned());
                let last = parts.len();
                for (index, part) in parts.into_iter().enumerate() {
                    if stream.write_all(&part).await.is_err() {
                        return;
                    }
                    if index + 1 < last {
                        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
                    }
                }
            });
        }
    });
    Scripted { port, seen }
}

/// Sends `method` for `/x` through a proxy allowing the scripted upstream; returns the answer.
async fn through(upstream: &Scripted, method: &str, extra: &str) -> (Proxy, Vec<u8>) {
    let origin = format!("registry.test:{}", upstream.port);
    let proxy = Proxy::start(
        policy(&[&origin], &[&origin]),
        Arc::new(loopback_names(&["registry.test"])),
    )
    .await;
    let request = format!(
        "{method} http://{origin}/x HTTP/1.1\r\nhost: {origin}\r\nconnection: keep-alive, x-hop\r\nx-hop: 1\r\nproxy-connection: keep-alive\r\naccept: */*\r\n{extra}\r\n"
    );
    let mut stream = tokio::net::TcpStream::connect(proxy.address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer))
        .await
        .unwrap()
        .unwrap();
    (proxy, answer)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn the_upstream_gets_a_request_framed_anew_and_the_client_exactly_the_length() {
    let upstream = scripted(
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nkeep-alive: timeout=5\r\nconnection: keep-alive, x-up\r\nx-up: 1\r\nx-kept: yes\r\n\r\nhello and more than promised"
            .to_vec(),
    )
    .await;
    let (proxy, answer) = through(&upstream, "GET", "").await;
    let answer = text(&answer);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert_eq!(body, "hello", "{answer}");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    let head = head.to_ascii_lowercase();
    assert!(
        head.contains("x-kept: yes") && head.contains("connection: close"),
        "{head}"
    );
    for dropped in ["keep-alive", "x-up"] {
        assert!(!head.contains(&format!("{dropped}:")), "{head}");
    }
    let seen = upstream.seen.lock().unwrap().clone();
    let request = seen[0].to_ascii_lowercase();
    assert!(request.starts_with("get /x http/1.1\r\n"), "{request}");
    assert!(request.contains(&format!("host: registry.test:{}\r\n", upstream.port)));
    assert!(request.contains("connection: close\r\n") && request.contains("accept: */*\r\n"));
    for dropped in ["x-hop", "proxy-connection", "keep-alive"] {
        assert!(!request.contains(&format!("{dropped}:")), "{request}");
    }
    assert!(matches!(
        proxy.sink.wait_for(1).await[0].verdict,
        EgressVerdict::Allowed { .. }
    ));
}

#[tokio::test]
async fn a_long_head_passes_and_bytes_past_the_length_never_do() {
    let long = format!("x-long: {}\r\n", "l".repeat(20_000));
    let upstream = scripted_in_parts(vec![
        format!("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n{long}\r\nhel").into_bytes(),
        b"lo and more than promised".to_vec(),
    ])
    .await;
    let (_proxy, answer) = through(&upstream, "GET", "").await;
    let answer = text(&answer);
    assert!(answer.contains(&long), "the long header was cut");
    assert!(
        answer.ends_with("\r\n\r\nhello"),
        "{}",
        &answer[answer.len() - 40..]
    );
}

#[tokio::test]
async fn a_head_that_never_ends_is_cut_off_at_its_bound() {
    // Far more than the bound, no blank line, sent in odd-sized parts (so no read ends on the
    // bound itself), and the connection left open after it.
    let mut parts = vec![b"HTTP/1.1 200 OK\r\nx-endless: ".to_vec()];
    parts.extend(std::iter::repeat_n(vec![b'e'; 7_001], 30));
    parts.push(Vec::new());
    let upstream = scripted_in_parts(parts).await;
    let (_proxy, answer) = through(&upstream, "GET", "").await;
    let answer = text(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
        "{answer}"
    );
    assert!(answer.contains("too large"), "{answer}");
}

#[tokio::test]
async fn a_chunked_or_close_delimited_body_runs_to_the_upstream_s_close() {
    let chunked = scripted(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 99\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
            .to_vec(),
    )
    .await;
    let (_proxy, answer) = through(&chunked, "GET", "").await;
    let answer = text(&answer);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let head = head.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200 ok\r\n"), "{answer}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert!(!head.contains("content-length"), "{head}");
    assert_eq!(body, "5\r\nhello\r\n0\r\n\r\n");

    let delimited = scripted(b"HTTP/1.0 200 OK\r\n\r\nuntil the end".to_vec()).await;
    let (_proxy, answer) = through(&delimited, "GET", "").await;
    assert!(
        text(&answer).ends_with("\r\n\r\nuntil the end"),
        "{}",
        text(&answer)
    );
}

#[tokio::test]
async fn head_and_not_modified_answers_carry_no_body() {
    let upstream = scripted(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello".to_vec()).await;
    let (_proxy, answer) = through(&upstream, "HEAD", "").await;
    let answer = text(&answer);
    assert!(
        answer.ends_with("content-length: 5\r\nconnection: close\r\n\r\n"),
        "{answer}"
    );
    let cached =
        scripted(b"HTTP/1.1 304 Not Modified\r\ncontent-length: 5\r\n\r\nhello".to_vec()).await;
    let (_proxy, answer) = through(&cached, "GET", "if-none-match: \"a\"\r\n").await;
    assert!(text(&answer).ends_with("\r\n\r\n"), "{}", text(&answer));
}

#[tokio::test]
async fn a_misframed_or_oversized_answer_is_a_gateway_error_and_recorded() {
    let huge = format!("HTTP/1.1 200 OK\r\nx-big: {}\r\n\r\n", "a".repeat(70_000));
    for (reply, why) in [
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\nhello!".to_vec(),
            "disagree",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: -5\r\n\r\nhello".to_vec(),
            "not a number",
        ),
        (huge.into_bytes(), "too large"),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nupgrade: x\r\n\r\n".to_vec(),
            "switched",
        ),
        (b"HTTP/1.1 200 OK\r\ncontent-le".to_vec(), "closed before"),
    ] {
        let upstream = scripted(reply).await;
        let (proxy, answer) = through(&upstream, "GET", "").await;
        let answer = text(&answer);
        assert!(
            answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
            "{why}: {answer}"
        );
        assert!(
            answer.contains("EGRESS_FAILED (UPSTREAM)") && answer.contains(why),
            "{answer}"
        );
        let decisions = proxy.sink.wait_for(2).await;
        assert!(
            matches!(
                &decisions[1].verdict,
                EgressVerdict::Failed {
                    reason: "UPSTREAM",
                    ..
                }
            ),
            "{decisions:?}"
        );
    }
}
