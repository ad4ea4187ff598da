//! A proxy with a credential: every request, tunnel or plain, must carry it as
//! `Proxy-Authorization: Basic`; anything else is a 407 that reaches no upstream, and the header
//! itself never travels upstream.

use std::sync::Arc;

use auto_swe_egress::{EgressVerdict, ProxyConfig, ProxyCredential, client_hello_for_tests};
use base64::Engine as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{PATIENCE, Proxy, Serve, Upstream, loopback_names, policy, status_and_body};

const CREDENTIAL: &str = "test-credential-0123456789";

fn authorization(pair: &str) -> String {
    format!(
        "Proxy-Authorization: Basic {}\r\n",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

/// A proxy that asks for [`CREDENTIAL`], allowing `origin` (on loopback).
async fn guarded(origin: &str) -> Proxy {
    let mut config = ProxyConfig::default();
    config.credential = Some(ProxyCredential::new(CREDENTIAL));
    Proxy::start_with(
        policy(&[origin], &[origin]),
        Arc::new(loopback_names(&["registry.test"])),
        config,
    )
    .await
}

/// Asserts a raw answer is a 407 with the Basic challenge, and the latest decision says
/// `PROXY_AUTH_REQUIRED`.
async fn assert_asked_for_credential(proxy: &Proxy, answer: &[u8], count: usize) {
    let text = String::from_utf8_lossy(answer);
    let (status, body) = status_and_body(answer);
    assert_eq!(
        status, "HTTP/1.1 407 Proxy Authentication Required",
        "{text}"
    );
    assert!(
        text.to_ascii_lowercase()
            .contains("proxy-authenticate: basic realm=\"auto-swe-egress\"\r\n"),
        "{text}"
    );
    assert!(
        body.starts_with("EGRESS_REFUSED (PROXY_AUTH_REQUIRED)"),
        "{body}"
    );
    let decisions = proxy.sink.wait_for(count).await;
    assert_eq!(decisions.len(), count, "{decisions:?}");
    assert_eq!(decisions[count - 1].host, "registry.test");
    match &decisions[count - 1].verdict {
        EgressVerdict::Refused { reason, .. } => assert_eq!(*reason, "PROXY_AUTH_REQUIRED"),
        other => panic!("not refused: {other:?}"),
    }
    assert!(!format!("{decisions:?}").contains(CREDENTIAL));
}

#[tokio::test]
async fn requests_without_the_credential_or_with_another_get_407_and_reach_nothing() {
    let upstream = Upstream::start(Serve::Fixed("hello")).await;
    let origin = format!("registry.test:{}", upstream.port());
    let proxy = guarded(&origin).await;
    let wrong = [
        String::new(),
        authorization("auto-swe:not-the-credential"),
        authorization(&format!("someone:{CREDENTIAL}")),
        authorization(&format!("auto-swe:{CREDENTIAL}x")),
        format!("Proxy-Authorization: Bearer {CREDENTIAL}\r\n"),
    ];
    let mut count = 0;
    for header in &wrong {
        for head in [
            format!("CONNECT {origin} HTTP/1.1\r\nHost: {origin}\r\n{header}\r\n"),
            format!("GET http://{origin}/ HTTP/1.1\r\nHost: {origin}\r\n{header}\r\n"),
        ] {
            count += 1;
            let answer = proxy.exchange(head.as_bytes()).await;
            assert_asked_for_credential(&proxy, &answer, count).await;
        }
    }
    assert_eq!(upstream.connections().await, 0);
}

#[tokio::test]
async fn the_right_credential_passes_and_never_travels_upstream() {
    let upstream = Upstream::start(Serve::Fixed("hello")).await;
    let origin = format!("registry.test:{}", upstream.port());
    let proxy = guarded(&origin).await;
    let header = authorization(&format!("auto-swe:{CREDENTIAL}"));
    let answer = proxy
        .exchange(
            format!("GET http://{origin}/path HTTP/1.1\r\nHost: {origin}\r\n{header}\r\n")
                .as_bytes(),
        )
        .await;
    let (status, body) = status_and_body(&answer);
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert_eq!(body, "hello");
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].uri, "/path");
    assert!(
        !seen[0].headers.contains_key("proxy-authorization"),
        "{:?}",
        seen[0].headers
    );
    assert!(!format!("{:?}", seen[0].headers).contains(CREDENTIAL));
}

#[tokio::test]
async fn a_tunnel_with_the_right_credential_opens() {
    let upstream = Upstream::start(Serve::Raw).await;
    let origin = format!("registry.test:{}", upstream.port());
    let proxy = guarded(&origin).await;
    let header = authorization(&format!("auto-swe:{CREDENTIAL}"));
    let mut stream = TcpStream::connect(proxy.address).await.unwrap();
    stream
        .write_all(
            format!("CONNECT {origin} HTTP/1.1\r\nHost: {origin}\r\n{header}\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut answer = Vec::new();
    let mut byte = [0_u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).await.unwrap(), 1, "{answer:?}");
        answer.push(byte[0]);
    }
    assert!(answer.starts_with(b"HTTP/1.1 200 OK"), "{answer:?}");
    let hello = client_hello_for_tests(&["registry.test"]);
    stream.write_all(&hello).await.unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rest, b"TUNNEL-OK");
    // What reached the upstream is the ClientHello alone: the CONNECT head (and its
    // credential) stayed at the proxy.
    assert_eq!(*upstream.raw.lock().unwrap(), [hello]);
}

/// curl given the proxy URL as a workspace is (`http_proxy=http://auto-swe:<credential>@ip:port`,
/// from the environment, never the command line) sends the credential the proxy asks for;
/// without it curl sees the 407 and nothing reaches upstream.
#[tokio::test]
async fn curl_with_the_credential_in_its_proxy_url_passes() {
    use crate::clients::{command, run, text};
    let home = tempfile::tempdir().unwrap();
    let upstream = Upstream::start(Serve::Fixed("hello")).await;
    let origin = format!("registry.test:{}", upstream.port());
    let proxy = guarded(&origin).await;
    let with = format!("http://auto-swe:{CREDENTIAL}@{}", proxy.address);
    for (proxy_url, expected) in [(with, "200"), (proxy.url(), "407")] {
        let mut curl = command("curl", home.path());
        curl.env("http_proxy", &proxy_url)
            .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}"])
            .arg(format!("http://{origin}/"));
        let output = run(curl).await;
        assert!(output.status.success(), "{}", text(&output.stderr));
        assert_eq!(text(&output.stdout), expected, "{}", proxy.url());
    }
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1);
    assert!(!format!("{:?}", seen[0].headers).contains(CREDENTIAL));
}
