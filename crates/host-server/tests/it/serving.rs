//! How the server holds its connections, measured from outside over loopback: half-open
//! connections are closed after the header timeout while `/health` keeps answering, the caps
//! close the excess as it is accepted, SIGTERM ends the server within its grace period with
//! connections held, and every refusal keeps the one JSON error shape.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::{Server, code, fresh_database};

fn address(server: &Server) -> SocketAddr {
    server.base.trim_start_matches("http://").parse().unwrap()
}

/// A connection to `to` from `from` (any address of 127/8 is loopback).
async fn connect_from(from: IpAddr, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(from, 0)).unwrap();
    socket.connect(to).await.unwrap()
}

/// Waits up to `limit` for the server to close `stream`: true when it did.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0_u8; 512];
    loop {
        match tokio::time::timeout(limit, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            // A response (a 408, say) before the close.
            Ok(Ok(_)) => {}
        }
    }
}

/// One `GET /health` on `stream`, kept alive: true when it was answered 200.
async fn health_on(stream: &mut TcpStream) -> bool {
    if stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .is_err()
    {
        return false;
    }
    let mut seen = Vec::new();
    let mut buf = [0_u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) | Err(_) => return false,
            Ok(Ok(n)) => {
                seen.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&seen);
                if text.contains("\r\n\r\n") && text.contains('}') {
                    return text.starts_with("HTTP/1.1 200");
                }
            }
        }
    }
}

fn open_file_limit() -> u64 {
    auto_swe_server::connection_limits::open_file_limit().unwrap_or(1024)
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// A counter's value in the `/metrics` text.
async fn metric(base: &str, series: &str) -> u64 {
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| unreachable!("no {series} in {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_connections_are_closed_while_health_keeps_answering() {
    let Some(url) = fresh_database("slowloris") else {
        return;
    };
    let server = Server::start(
        &url,
        0,
        "headerReadTimeoutSeconds = 15\nmaxConnections = 8000\nmaxConnectionsPerAddress = 0\n",
    );
    let to = address(&server);
    // The test holds each connection's socket and the server its own: stay well under the
    // open-file limit both processes share.
    let count = usize::try_from((open_file_limit() / 2).saturating_sub(200))
        .unwrap()
        .min(3000);
    let rss_before = rss_kib(server.pid());
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();

    // Half-open connections: a request line and part of a header, never finished. One more
    // trickles a byte every 300 ms: the deadline runs from the head's first byte.
    let started = Instant::now();
    let mut held = Vec::with_capacity(count);
    let mut opening = tokio::task::JoinSet::new();
    // Many at once, so one SYN retried after a full backlog does not hold up the rest.
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(256));
    for _ in 0..count {
        let permits = std::sync::Arc::clone(&permits);
        opening.spawn(async move {
            let _permit = permits.acquire().await.unwrap();
            let mut stream = TcpStream::connect(to).await.unwrap();
            stream
                .write_all(b"GET /health HTTP/1.1\r\nHost: test\r\nX-Slow: ")
                .await
                .unwrap();
            stream
        });
    }
    while let Some(stream) = opening.join_next().await {
        held.push(stream.unwrap());
    }
    let opened_in = started.elapsed();
    let trickling = tokio::spawn(async move {
        let mut stream = connect_from([127, 0, 2, 1].into(), to).await;
        let began = Instant::now();
        let partial = b"GET /health HTTP/1.1\r\nHost: test\r\nX-Slow: ";
        // 200 bytes at 300 ms each: a minute, far past the header timeout.
        for byte in partial
            .iter()
            .chain(std::iter::repeat_n(&b'a', 200 - partial.len()))
        {
            if stream.write_all(&[*byte]).await.is_err() {
                return Some(began.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        None
    });

    // /health answers throughout: each call on a new connection, as a prober makes it.
    let mut latencies = Vec::new();
    for _ in 0..10 {
        let asked = Instant::now();
        let response = tokio::time::timeout(
            Duration::from_secs(20),
            client.get(format!("{}/health", server.base)).send(),
        )
        .await
        .expect("/health answers while the half-open connections are held")
        .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        latencies.push(asked.elapsed());
    }
    let open_now = metric(&server.base, "http_connections_open").await;
    let rss_held = rss_kib(server.pid());

    // The server closes every one of them after the header timeout.
    let waited = Instant::now();
    let mut closing = tokio::task::JoinSet::new();
    for mut stream in held {
        // A bound on liveness, not a measure: the figure printed below is the measure.
        closing.spawn(async move { closed_within(&mut stream, Duration::from_secs(90)).await });
    }
    let mut closed = 0;
    while let Some(done) = closing.join_next().await {
        closed += usize::from(done.unwrap());
    }
    let closed_in = waited.elapsed();
    let trickled_for = trickling.await.unwrap();
    let timed_out = metric(
        &server.base,
        "http_connections_timed_out_total{reason=\"header\"}",
    )
    .await;
    let rss_after = rss_kib(server.pid());
    let max = latencies.iter().max().unwrap();
    let sum: Duration = latencies.iter().sum();
    eprintln!(
        "slowloris: {count} half-open connections opened in {opened_in:?}; /health under them: \
         mean {:?}, max {max:?}; open by /metrics {open_now}; server RSS {} MiB before, {} MiB \
         held, {} MiB after; all closed {closed_in:?} after the check; trickler closed after \
         {trickled_for:?}; loadavg {}",
        sum / 10,
        rss_before / 1024,
        rss_held / 1024,
        rss_after / 1024,
        load_average()
    );
    assert_eq!(closed, count, "every half-open connection is closed");
    assert!(open_now >= count as u64, "{open_now}");
    assert!(timed_out >= count as u64, "{timed_out}");
    assert!(
        trickled_for.is_some(),
        "a head trickled a byte at a time is cut off"
    );
    // Generous: a few dozen KiB per connection, not the megabytes a leak would cost.
    assert!(
        rss_held < rss_before + 512 * 1024,
        "{rss_before} KiB → {rss_held} KiB"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caps_close_the_excess_as_it_is_accepted() {
    let Some(url) = fresh_database("caps") else {
        return;
    };
    let server = Server::start(
        &url,
        0,
        "maxConnections = 16\nmaxConnectionsPerAddress = 4\n",
    );
    let to = address(&server);

    // Four from one address are served and kept; the fifth is closed unanswered.
    let mut kept = Vec::new();
    for _ in 0..4 {
        let mut stream = connect_from([127, 0, 3, 1].into(), to).await;
        assert!(health_on(&mut stream).await);
        kept.push(stream);
    }
    let mut fifth = connect_from([127, 0, 3, 1].into(), to).await;
    assert!(!health_on(&mut fifth).await);
    assert!(closed_within(&mut fifth, Duration::from_secs(10)).await);
    // Another address is still served.
    let mut other = connect_from([127, 0, 3, 2].into(), to).await;
    assert!(health_on(&mut other).await);
    kept.push(other);

    // Sixteen in all: the next, from any address, is closed.
    let mut refused_at = None;
    for index in 0..20_u8 {
        let mut stream = connect_from([127, 0, 4, index / 3 + 1].into(), to).await;
        if health_on(&mut stream).await {
            kept.push(stream);
        } else {
            refused_at = Some(kept.len());
            break;
        }
    }
    assert_eq!(refused_at, Some(16));
    drop(kept);
    // The places are free again once the server sees the closes.
    let client = reqwest::Client::new();
    let mut status = None;
    for _ in 0..100 {
        if let Ok(response) = client.get(format!("{}/health", server.base)).send().await {
            status = Some(response.status());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, Some(StatusCode::OK));
    let by_address = metric(
        &server.base,
        "http_connections_refused_total{cap=\"address\"}",
    )
    .await;
    let by_server = metric(
        &server.base,
        "http_connections_refused_total{cap=\"server\"}",
    )
    .await;
    assert!(
        by_address >= 1 && by_server >= 1,
        "{by_address} {by_server}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_server_within_its_grace_with_connections_held() {
    let Some(url) = fresh_database("sigterm") else {
        return;
    };
    let grace = 3;
    let mut server = Server::start(
        &url,
        1,
        &format!(
            "headerReadTimeoutSeconds = 120\nrequestTimeoutSeconds = 600\n\
             shutdownGraceSeconds = {grace}\n"
        ),
    );
    let to = address(&server);
    // Three half-open connections, and a request in flight whose body never comes.
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut stream = TcpStream::connect(to).await.unwrap();
        stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: test\r\nX-Slow: ")
            .await
            .unwrap();
        held.push(stream);
    }
    let mut busy = TcpStream::connect(to).await.unwrap();
    busy.write_all(
        b"POST /api/v1/webhooks/github HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n\
          Content-Length: 100\r\n\r\n{",
    )
    .await
    .unwrap();
    // The server is up and answering before the signal.
    let (status, _) = server.call(Method::GET, "/health", None, None).await;
    assert_eq!(status, StatusCode::OK);

    let pid = server.pid().to_string();
    let signalled = Instant::now();
    #[expect(
        clippy::disallowed_methods,
        reason = "the test signals the server it started, by its PID"
    )]
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    let exited = tokio::task::block_in_place(|| server.wait_exit(Duration::from_secs(grace + 15)));
    let took = signalled.elapsed();
    eprintln!(
        "SIGTERM with 3 half-open connections and 1 request in flight (grace {grace} s): exited \
         {exited:?} after {took:?}; loadavg {}",
        load_average()
    );
    let exited = exited.expect("the server exits within its grace period and a margin");
    assert!(exited.success(), "{exited:?}");
    assert!(closed_within(&mut busy, Duration::from_secs(5)).await);
    for mut stream in held {
        assert!(closed_within(&mut stream, Duration::from_secs(5)).await);
    }
}

#[tokio::test]
async fn every_refusal_keeps_the_one_error_shape() {
    let Some(url) = fresh_database("shapes") else {
        return;
    };
    let server = Server::start(
        &url,
        0,
        "requestTimeoutSeconds = 1\nmetricsListen = \"127.0.0.1:0\"\n",
    );
    let token = server.admin_token();
    let client = reqwest::Client::new();
    let shape = |status: StatusCode, body: &str| -> (StatusCode, Value) {
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    };

    // A path segment that is not UTF-8 once decoded.
    let response = client
        .get(format!("{}/api/v1/workflow-runs/%FF%FE", server.base))
        .bearer_auth(token.trim())
        .send()
        .await
        .unwrap();
    let (status, body) = shape(response.status(), &response.text().await.unwrap());
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "INVALID_PATH"),
        "{body}"
    );

    // A GitHub delivery over the body limit (64 KiB here), before any handler reads it.
    let response = client
        .post(format!("{}/api/v1/webhooks/github", server.base))
        .header("content-type", "application/json")
        .header("x-github-event", "ping")
        .header("x-github-delivery", "d-1")
        .header("x-hub-signature-256", "sha256=00")
        .body(vec![b' '; 100 * 1024])
        .send()
        .await
        .unwrap();
    let (status, body) = shape(response.status(), &response.text().await.unwrap());
    assert_eq!(
        (status, code(&body)),
        (StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE"),
        "{body}"
    );

    // Queries and bodies that do not parse.
    let response = client
        .get(format!("{}/api/v1/workflow-runs?limit=many", server.base))
        .bearer_auth(token.trim())
        .send()
        .await
        .unwrap();
    let (status, body) = shape(response.status(), &response.text().await.unwrap());
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "INVALID_QUERY"),
        "{body}"
    );
    let response = client
        .post(format!("{}/api/v1/work-requests", server.base))
        .bearer_auth(token.trim())
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    let (status, body) = shape(response.status(), &response.text().await.unwrap());
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "INVALID_BODY"),
        "{body}"
    );

    // A request whose body never comes runs past its timeout: 408 in the same shape.
    let mut stream = TcpStream::connect(address(&server)).await.unwrap();
    stream
        .write_all(
            b"POST /api/v1/webhooks/github HTTP/1.1\r\nHost: test\r\n\
              Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
        )
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"REQUEST_TIMEOUT\""), "{answer}");

    // /metrics is on its own listener, not beside the API.
    let metrics_base = server
        .startup
        .iter()
        .find_map(|l| l.strip_prefix("auto-swe-server: metrics on "))
        .expect("the metrics address is printed")
        .to_owned();
    let (status, body) = server.call(Method::GET, "/metrics", None, None).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::NOT_FOUND, "ROUTE_NOT_FOUND")
    );
    let text = reqwest::get(format!("{metrics_base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("http_connections_open"), "{text}");
    assert!(text.ends_with("# EOF\n"), "{text}");
}
