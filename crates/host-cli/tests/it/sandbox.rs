//! `auto-swe sandbox probe` and `auto-swe sandbox run`, through the real binary, including hosts
//! where a backend is missing.

use std::process::{Command, Output};

fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

#[expect(clippy::disallowed_methods, reason = "the tests drive the real binary")]
fn auto_swe(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_auto-swe"));
    command.args(args);
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().unwrap()
}

fn probe_json(env: &[(&str, &str)]) -> serde_json::Value {
    let out = auto_swe(&["sandbox", "probe", "--format", "json"], env);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn backend<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["backend"] == name)
        .unwrap()
}

/// Whether a backend works here; fails under the matching `AUTO_SWE_REQUIRE_*`.
fn works(name: &str, require: &str) -> bool {
    let report = probe_json(&[]);
    let entry = backend(&report, name);
    let available = entry["available"] == true;
    assert!(available || !required(require), "{name} required: {entry}");
    if !available {
        eprintln!("skipping: {name} unavailable: {}", entry["reason"]);
    }
    available
}

#[test]
fn probe_names_the_reason_and_remedy_for_a_missing_docker_engine() {
    let report = probe_json(&[("DOCKER_HOST", "unix:///nonexistent/docker.sock")]);
    let docker = backend(&report, "docker");
    assert_eq!(docker["available"], false);
    assert_eq!(
        docker["reason"],
        "no engine socket at /nonexistent/docker.sock"
    );
    assert!(docker["remedy"].as_str().unwrap().contains("dockerd"));
    let kubernetes = backend(&report, "kubernetes");
    assert_eq!(kubernetes["available"], false);
    assert!(
        kubernetes["remedy"]
            .as_str()
            .unwrap()
            .contains("KUBECONFIG")
    );
}

#[test]
fn probe_names_the_reason_and_remedy_for_missing_bubblewrap() {
    let report = probe_json(&[("AUTO_SWE_BWRAP", "/nonexistent/bwrap")]);
    let local = backend(&report, "local");
    assert_eq!(local["available"], false);
    assert_eq!(
        local["reason"],
        "AUTO_SWE_BWRAP names /nonexistent/bwrap, which does not exist"
    );
    assert!(local["remedy"].as_str().unwrap().contains("AUTO_SWE_BWRAP"));
    // Nothing on PATH is the other way to have no bubblewrap.
    let report = probe_json(&[("PATH", "/nonexistent")]);
    let local = backend(&report, "local");
    assert_eq!(local["reason"], "bubblewrap (bwrap) is not installed");
    assert!(
        local["remedy"]
            .as_str()
            .unwrap()
            .contains("apt-get install bubblewrap")
    );
    // The text form says the same for people.
    let text = auto_swe(
        &["sandbox", "probe"],
        &[("AUTO_SWE_BWRAP", "/nonexistent/bwrap")],
    );
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains(
            "local       unavailable\n  why:    AUTO_SWE_BWRAP names /nonexistent/bwrap, which does not exist\n"
        ),
        "{text}"
    );
}

#[test]
fn run_on_a_missing_backend_fails_with_125_and_says_why() {
    let out = auto_swe(
        &["sandbox", "run", "--backend", "docker", "--", "true"],
        &[("DOCKER_HOST", "unix:///nonexistent/docker.sock")],
    );
    assert_eq!(out.status.code(), Some(125));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no engine socket at /nonexistent/docker.sock"),
        "{stderr}"
    );
    assert!(stderr.contains("WORKSPACE_BACKEND_UNAVAILABLE"), "{stderr}");
}

fn run_suite(backend_name: &str) {
    // Output is streamed and the command's status is the exit status.
    let out = auto_swe(
        &[
            "sandbox",
            "run",
            "--backend",
            backend_name,
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 7",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");
    // A timeout kills the tree and exits 124.
    let out = auto_swe(
        &[
            "sandbox",
            "run",
            "--backend",
            backend_name,
            "--timeout",
            "1",
            "--",
            "sh",
            "-c",
            "sleep 60 & sleep 60",
        ],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(124),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The creating process's environment stays out; a secret passed by name gets in, and the
    // lockdown holds (read-only root, no capabilities, no network device but loopback).
    let canary = "Canary-Env-Value-4e1";
    let out = auto_swe(
        &[
            "sandbox",
            "run",
            "--backend",
            backend_name,
            "--secret-env",
            "PASSED_SECRET",
            "--",
            "sh",
            "-c",
            "env; touch /etc/x 2>/dev/null && echo WRITABLE; grep CapEff /proc/self/status; sed -n 's/^ *\\([a-z0-9]*\\):.*/iface \\1/p' /proc/net/dev",
        ],
        &[("CANARY_ENV", canary), ("PASSED_SECRET", "by-name-ok")],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains(canary), "{stdout}");
    assert!(stdout.contains("PASSED_SECRET=by-name-ok"), "{stdout}");
    assert!(!stdout.contains("WRITABLE"), "{stdout}");
    assert!(stdout.contains("CapEff:\t0000000000000000"), "{stdout}");
    let interfaces: Vec<&str> = stdout.lines().filter(|l| l.starts_with("iface ")).collect();
    assert_eq!(interfaces, ["iface lo"], "{stdout}");
}

#[test]
fn run_on_local() {
    if works("local", "AUTO_SWE_REQUIRE_BWRAP") {
        run_suite("local");
    }
}

#[test]
fn run_on_docker() {
    if works("docker", "AUTO_SWE_REQUIRE_DOCKER") {
        run_suite("docker");
    }
}

/// A configured rootfs that is not there is refused (125), never replaced by the host's own
/// directories; so is a `--workdir` that is a file, or one the mount guard refuses.
#[test]
fn local_refuses_what_was_configured_but_is_not_there() {
    if !works("local", "AUTO_SWE_REQUIRE_BWRAP") {
        return;
    }
    let out = auto_swe(
        &["sandbox", "run", "--backend", "local", "--", "echo", "RAN"],
        &[("AUTO_SWE_ROOTFS", "/nonexistent")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("/nonexistent"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("RAN"));
    let file = tempfile::NamedTempFile::new().unwrap();
    for workdir in [file.path().to_str().unwrap(), "/var/run", "/root/.cargo"] {
        let out = auto_swe(
            &[
                "sandbox",
                "run",
                "--backend",
                "local",
                "--workdir",
                workdir,
                "--",
                "echo",
                "RAN",
            ],
            &[],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{workdir}: {stderr}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("RAN"));
    }
    let out = auto_swe(
        &[
            "sandbox",
            "run",
            "--backend",
            "local",
            "--pids",
            "3",
            "--",
            "true",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--pids 3"));
}

/// The probe says who local sandboxes are on the host; `--network host` warns what is shared.
#[test]
fn probe_reports_the_identity_and_host_network_warns() {
    if !works("local", "AUTO_SWE_REQUIRE_BWRAP") {
        return;
    }
    let report = probe_json(&[]);
    let identity = &backend(&report, "local")["identity"];
    assert_ne!(identity["uid"], 0, "{identity}");
    let text = String::from_utf8_lossy(&auto_swe(&["sandbox", "probe"], &[]).stdout).into_owned();
    assert!(text.contains("  as:     "), "{text}");
    let out = auto_swe(
        &[
            "sandbox",
            "run",
            "--backend",
            "local",
            "--network",
            "host",
            "--",
            "true",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("shares this host's network stack") && stderr.contains("metadata"),
        "{stderr}"
    );
}

/// A set-uid plant through `--workdir` comes back to the directory's owner with no set-id bit
/// (local); on both backends `--workdir` binds and the command sees the directory.
fn workdir_suite(backend_name: &str) {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(dir.path().join("input"), "host text").unwrap();
    let out = auto_swe(
        &[
            "sandbox",
            "run",
            "--backend",
            backend_name,
            "--workdir",
            dir.path().to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "cat /workspace/input; cp /bin/sh /workspace/plant && chmod 6755 /workspace/plant",
        ],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"host text");
    let plant = std::fs::metadata(dir.path().join("plant")).unwrap();
    if backend_name == "local" {
        let owner = std::fs::metadata(dir.path()).unwrap();
        assert_eq!(plant.uid(), owner.uid());
        assert_eq!(plant.mode() & 0o6000, 0, "mode {:o}", plant.mode());
    }
    assert_ne!(
        (plant.uid(), plant.mode() & 0o4000 != 0),
        (0, true),
        "a set-uid root file was planted"
    );
}

#[test]
fn workdir_on_local() {
    if works("local", "AUTO_SWE_REQUIRE_BWRAP") {
        workdir_suite("local");
    }
}

#[test]
fn workdir_on_docker() {
    if works("docker", "AUTO_SWE_REQUIRE_DOCKER") {
        workdir_suite("docker");
    }
}

/// An HTTP server on loopback answering `body` to each of at most `connections` connections,
/// then ending by itself.
fn one_shot_server(body: &'static str, connections: usize) -> u16 {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(connections) {
            let Ok(mut stream) = stream else { continue };
            let mut head = [0_u8; 4096];
            let _ = stream.read(&mut head);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// `--network proxy`: the command reaches an allowed origin only through the run's proxy, a
/// refusal is a 403 inside and a reason on standard error outside, and nothing is reached
/// directly. (Loopback upstreams are what `--allow-private` exists for; `--allow` alone
/// refuses them.)
fn proxy_suite(backend_name: &str) {
    let port = one_shot_server("served through the proxy", 8);
    let origin = format!("localhost:{port}");
    let request = format!(
        "exec 3<>/dev/tcp/127.0.0.1/3128; \
         printf 'GET http://{origin}/ HTTP/1.1\\r\\nHost: {origin}\\r\\nConnection: close\\r\\n\\r\\n' >&3; \
         cat <&3"
    );
    let run = |policy: &[&str], script: &str| {
        let mut args = vec![
            "sandbox",
            "run",
            "--backend",
            backend_name,
            "--network",
            "proxy",
        ];
        args.extend_from_slice(policy);
        args.extend_from_slice(&["--", "bash", "-c", script]);
        auto_swe(&args, &[])
    };
    let out = run(&["--allow-private", &origin], &request);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("HTTP/1.1 200"), "{stdout}");
    assert!(stdout.ends_with("served through the proxy"), "{stdout}");

    for (policy, reason) in [
        (["--allow", origin.as_str()], "(LOOPBACK)"),
        (["--allow", "example.org:443"], "(DEFAULT_DENY)"),
    ] {
        let out = run(&policy, &request);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stdout.starts_with("HTTP/1.1 403"), "{stdout}");
        assert!(
            stderr.contains(&format!("auto-swe: egress refused {origin} {reason}")),
            "{stderr}"
        );
    }

    let out = run(
        &["--allow-private", &origin],
        &format!(
            "echo \"$https_proxy\"; (echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo reached; true"
        ),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "http://127.0.0.1:3128\n"
    );

    // The policy flags need the proxy, and a rule that does not parse is refused.
    let out = auto_swe(
        &[
            "sandbox",
            "run",
            "--backend",
            backend_name,
            "--allow",
            &origin,
            "--",
            "true",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("need --network proxy"));
    let out = run(&["--allow", "no port"], "true");
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("allow rule `no port`"));
}

#[test]
fn proxy_on_local() {
    if works("local", "AUTO_SWE_REQUIRE_BWRAP") {
        proxy_suite("local");
    }
}

#[test]
fn proxy_on_docker() {
    if works("docker", "AUTO_SWE_REQUIRE_DOCKER") {
        proxy_suite("docker");
    }
}

/// A TLS "model provider" on loopback for `localhost`, from an authority of its own: answers
/// `connections` requests and sends each request head it read down the channel. Its port and
/// its authority's certificate (PEM).
fn tls_provider(connections: usize) -> (u16, String, std::sync::mpsc::Receiver<String>) {
    use std::io::{Read as _, Write as _};
    use std::sync::Arc;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
        )
        .unwrap(),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (seen, heads) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(connections) {
            let Ok(tcp) = stream else { continue };
            let _ = tcp.set_read_timeout(Some(std::time::Duration::from_secs(20)));
            let connection = rustls::ServerConnection::new(Arc::clone(&config)).unwrap();
            let mut tls = rustls::StreamOwned::new(connection, tcp);
            let mut head = Vec::new();
            let mut byte = [0_u8; 1];
            while !head.ends_with(b"\r\n\r\n") && tls.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let _ = seen.send(String::from_utf8_lossy(&head).into_owned());
            let body = "{\"type\":\"message\"}";
            let _ = write!(
                tls,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    (port, ca_cert.pem(), heads)
}

/// `--key-at-egress`: the command holds a placeholder, the provider gets the key, and nothing
/// the command can print holds the key.
fn key_at_egress_suite(backend_name: &str) {
    // Fake by construction: only the provider above ever compares it.
    const CANARY: &str = "sk-ant-canary-KeyAtEgress-0000000000000000";
    let (port, provider_ca, heads) = tls_provider(4);
    let dir = tempfile::tempdir().unwrap();
    let roots = dir.path().join("provider-ca.pem");
    std::fs::write(&roots, provider_ca).unwrap();
    let origin = format!("localhost:{port}");
    let key = format!("TEST_PROVIDER_KEY={origin}/x-api-key");
    // git is what every workspace image has; `no_proxy` keeps loopback direct for the usual
    // tools, and this provider is on loopback only because the test is.
    let script = format!(
        "no_proxy= NO_PROXY= git -c \"http.extraHeader=x-api-key: $TEST_PROVIDER_KEY\" \
         ls-remote https://{origin}/v1/messages 2>&1; echo \"inside: $TEST_PROVIDER_KEY\"; \
         cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'"
    );
    let out = auto_swe(
        &[
            "sandbox",
            "run",
            "--backend",
            backend_name,
            "--network",
            "proxy",
            "--allow-private",
            &origin,
            "--key-at-egress",
            &key,
            "--",
            "sh",
            "-c",
            &script,
        ],
        &[
            ("TEST_PROVIDER_KEY", CANARY),
            // The proxy trusts the provider's authority as it would a system root.
            ("SSL_CERT_FILE", roots.to_str().unwrap()),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("inside: asw-egress-key-"), "{stdout}");
    assert!(
        !stdout.contains(CANARY),
        "the key reached the sandbox: {stdout}"
    );
    assert!(!stderr.contains(CANARY), "the key was printed: {stderr}");
    let head = heads
        .recv_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("x-api-key: {}", CANARY.to_ascii_lowercase())),
        "{head}"
    );

    // The key's variable must be set here, and the flag needs the proxy.
    let out = auto_swe(
        &[
            "sandbox",
            "run",
            "--backend",
            backend_name,
            "--network",
            "proxy",
            "--key-at-egress",
            &key,
            "--",
            "true",
        ],
        &[("TEST_PROVIDER_KEY", "")],
    );
    assert_eq!(out.status.code(), Some(125));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("TEST_PROVIDER_KEY is not set"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = auto_swe(
        &[
            "sandbox",
            "run",
            "--backend",
            backend_name,
            "--key-at-egress",
            &key,
            "--",
            "true",
        ],
        &[("TEST_PROVIDER_KEY", CANARY)],
    );
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("need --network proxy"));
}

#[test]
fn key_at_egress_on_local() {
    if works("local", "AUTO_SWE_REQUIRE_BWRAP") {
        key_at_egress_suite("local");
    }
}

#[test]
fn key_at_egress_on_docker() {
    if works("docker", "AUTO_SWE_REQUIRE_DOCKER") {
        key_at_egress_suite("docker");
    }
}
