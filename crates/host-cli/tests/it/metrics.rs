//! `auto-swe worker --metrics-addr`: the real binary serving `/metrics` on loopback, read back
//! by a Prometheus text-format parser, and what it answers to anything else.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn bin() -> Command {
    #[expect(
        clippy::disallowed_methods,
        reason = "the tests run the real built binary, as users do"
    )]
    let command = Command::new(env!("CARGO_BIN_EXE_auto-swe"));
    command
}

/// Ends the worker this test started, by its PID.
struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.0.id()).unwrap());
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.0.wait();
    }
}

fn request(address: &str, head: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn the_worker_serves_prometheus_metrics_on_its_metrics_address() {
    let home = tempfile::tempdir().unwrap();
    let mut child = bin()
        .args([
            "worker",
            "--model",
            "replay/demo",
            "--sandbox",
            "local",
            "--no-ci",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .env("AUTO_SWE_HOME", home.path())
        .env_remove("AUTO_SWE_STORE_URL")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let worker = Worker(child);
    let mut address = None;
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        if let Some(rest) = line.split("metrics at http://").nth(1) {
            address = rest.strip_suffix("/metrics").map(str::to_owned);
            break;
        }
    }
    let address = address.expect("the worker printed its metrics address");
    assert!(address.starts_with("127.0.0.1:"), "{address}");

    let (status, body) = request(
        &address,
        "GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    );
    assert_eq!(status, 200, "{body}");
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned()))).unwrap();
    let finalized = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "workflow_runs_finalized_total")
        .count();
    assert_eq!(finalized, 8, "every status × source seeded: {body}");
    let budget = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "workflow_budget_exceeded_total")
        .count();
    assert_eq!(budget, 3, "every tier seeded: {body}");

    // Anything else is refused, and a garbage request does not stop the listener.
    let (status, _) = request(
        &address,
        "GET /admin HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    );
    assert_eq!(status, 404);
    let (status, _) = request(
        &address,
        "POST /metrics HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
    );
    assert_eq!(status, 405);
    let _ = request(&address, "\u{0}\u{1}garbage\r\n\r\n");
    let (status, _) = request(
        &address,
        "GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    );
    assert_eq!(status, 200);
    drop(worker);
}

#[test]
fn a_metrics_address_that_is_not_host_and_port_is_refused() {
    let output = bin()
        .args(["worker", "--metrics-addr", "localhost"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--metrics-addr"));
}
