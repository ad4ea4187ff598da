//! Real clients through the proxy: curl (plain HTTP and HTTPS through `CONNECT`), `openssl
//! s_client` naming another server, and `git clone` over HTTP.

use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::Arc;

use auto_swe_egress::EgressVerdict;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::support::{PATIENCE, Proxy, Serve, Upstream, loopback_names, policy};

/// A command with a clean environment: no proxy variables or user configuration leak in.
pub(crate) fn command(program: &str, home: &Path) -> Command {
    #[expect(
        clippy::disallowed_methods,
        reason = "the tests drive real clients (curl, git, openssl) through the proxy"
    )]
    let mut command = Command::new(program);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

pub(crate) async fn run(mut command: Command) -> Output {
    tokio::time::timeout(PATIENCE, command.output())
        .await
        .unwrap()
        .unwrap()
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn curl_fetches_over_plain_http_and_the_proxy_credential_stays_behind() {
    let home = tempfile::tempdir().unwrap();
    let upstream = Upstream::start(Serve::Fixed("hello from the registry")).await;
    let origin = format!("registry.test:{}", upstream.port());
    let proxy = Proxy::start(
        policy(&[&origin], &[&origin]),
        Arc::new(loopback_names(&["registry.test", "other.test"])),
    )
    .await;
    let mut curl = command("curl", home.path());
    curl.args([
        "-sS",
        "--proxy-user",
        "agent:proxy-secret",
        "-x",
        &proxy.url(),
    ])
    .arg(format!("http://{origin}/simple/pkg?v=1"));
    let output = run(curl).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "hello from the registry");
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (seen[0].method.as_str(), seen[0].uri.as_str()),
        ("GET", "/simple/pkg?v=1")
    );
    assert_eq!(seen[0].headers.get("host"), Some(&origin));
    assert!(seen[0].body.is_empty());
    assert!(
        !seen[0]
            .headers
            .keys()
            .any(|name| name.starts_with("proxy-")),
        "{:?}",
        seen[0].headers
    );
    // A host no rule allows: curl sees the 403 and the reason.
    let mut curl = command("curl", home.path());
    curl.args(["-sS", "-w", "\n%{http_code}", "-x", &proxy.url()])
        .arg(format!("http://other.test:{}/", upstream.port()));
    let output = run(curl).await;
    let answer = text(&output.stdout);
    assert!(
        answer.starts_with("EGRESS_REFUSED (DEFAULT_DENY)"),
        "{answer}"
    );
    assert!(answer.ends_with("\n403"), "{answer}");
    assert_eq!(upstream.seen().len(), 1);
}

/// An `openssl s_server` on loopback with a certificate for `registry.test`, and the port it
/// chose (read from its own announcement, not guessed).
pub(crate) async fn tls_server(dir: &Path) -> (Child, u16) {
    let mut req = command("openssl", dir);
    req.current_dir(dir).args([
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        "key.pem",
        "-out",
        "cert.pem",
        "-days",
        "1",
        "-subj",
        "/CN=registry.test",
        "-addext",
        "subjectAltName=DNS:registry.test",
    ]);
    let made = run(req).await;
    assert!(made.status.success(), "{}", text(&made.stderr));
    let mut server = command("openssl", dir);
    server
        .current_dir(dir)
        .args([
            "s_server",
            "-accept",
            "127.0.0.1:0",
            "-cert",
            "cert.pem",
            "-key",
            "key.pem",
            "-www",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = server.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let port = tokio::time::timeout(PATIENCE, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(address) = line.strip_prefix("ACCEPT ") {
                return address.rsplit_once(':').unwrap().1.parse::<u16>().unwrap();
            }
        }
        panic!("openssl s_server exited before listening");
    })
    .await
    .unwrap();
    // Keep draining its output so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, port)
}

/// Fetches `https://{origin}/` from [`tls_server`]'s `openssl s_server` in `dir` with curl
/// through the proxy at `proxy_url`, and checks the server's own page came back.
pub(crate) async fn assert_curl_reaches_tls_server(dir: &Path, proxy_url: &str, origin: &str) {
    let mut curl = command("curl", dir);
    curl.args(["-sS", "--cacert", "cert.pem", "-x", proxy_url])
        .current_dir(dir)
        .arg(format!("https://{origin}/"));
    let output = run(curl).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("s_server"),
        "{}",
        text(&output.stdout)
    );
}

#[tokio::test]
async fn curl_speaks_tls_through_a_tunnel_and_a_foreign_server_name_is_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = tls_server(dir.path()).await;
    let origin = format!("registry.test:{port}");
    let proxy = Proxy::start(
        policy(&[&origin], &[&origin]),
        Arc::new(loopback_names(&["registry.test"])),
    )
    .await;
    assert_curl_reaches_tls_server(dir.path(), &proxy.url(), &origin).await;
    let decisions = proxy.sink.wait_for(1).await;
    assert!(
        matches!(&decisions[0].verdict, EgressVerdict::Allowed { .. }),
        "{decisions:?}"
    );
    // A real TLS client through the same tunnel naming another server.
    let mut client = command("openssl", dir.path());
    client.args([
        "s_client",
        "-proxy",
        &proxy.address.to_string(),
        "-connect",
        &origin,
        "-servername",
        "evil.test",
    ]);
    let output = run(client).await;
    assert!(!output.status.success());
    let decisions = proxy.sink.wait_for(2).await;
    assert!(
        matches!(
            &decisions[1].verdict,
            EgressVerdict::Refused {
                reason: "SNI_MISMATCH",
                ..
            }
        ),
        "{decisions:?}"
    );
}

fn git(dir: &Path, home: &Path, args: &[&str]) -> Command {
    let mut git = command("git", home);
    git.current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args);
    git
}

async fn git_ok(dir: &Path, home: &Path, args: &[&str]) -> Output {
    let output = run(git(dir, home, args)).await;
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        text(&output.stderr)
    );
    output
}

#[tokio::test]
async fn git_clones_over_http_through_the_proxy_and_only_from_the_allowed_host() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let served = tempfile::tempdir().unwrap();
    let source = work.path().join("source");
    std::fs::create_dir(&source).unwrap();
    git_ok(&source, home.path(), &["init", "-q"]).await;
    std::fs::write(
        source.join("README.md"),
        "cloned through the egress proxy\n",
    )
    .unwrap();
    git_ok(&source, home.path(), &["add", "README.md"]).await;
    git_ok(&source, home.path(), &["commit", "-qm", "first"]).await;
    let bare = served.path().join("repo.git");
    git_ok(
        work.path(),
        home.path(),
        &[
            "clone",
            "-q",
            "--bare",
            source.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    )
    .await;
    git_ok(&bare, home.path(), &["update-server-info"]).await;

    let upstream = Upstream::start(Serve::Files(served.path().to_owned())).await;
    let origin = format!("git.test:{}", upstream.port());
    let proxy = Proxy::start(
        policy(&[&origin], &[&origin]),
        Arc::new(loopback_names(&["git.test", "mirror.test"])),
    )
    .await;
    let proxy_setting = format!("http.proxy={}", proxy.url());
    git_ok(
        work.path(),
        home.path(),
        &[
            "-c",
            &proxy_setting,
            "clone",
            "-q",
            &format!("http://{origin}/repo.git"),
            "clone",
        ],
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(work.path().join("clone/README.md")).unwrap(),
        "cloned through the egress proxy\n"
    );
    let seen = upstream.seen();
    assert!(
        seen.iter()
            .any(|request| request.uri.starts_with("/repo.git/info/refs")),
        "{seen:?}"
    );
    assert!(
        proxy
            .sink
            .decisions()
            .iter()
            .all(|d| matches!(d.verdict, EgressVerdict::Allowed { .. }))
    );
    // Another host: git reports the proxy's 403 and nothing reaches the server.
    let before = upstream.seen().len();
    let output = run(git(
        work.path(),
        home.path(),
        &[
            "-c",
            &proxy_setting,
            "clone",
            "-q",
            &format!("http://mirror.test:{}/repo.git", upstream.port()),
            "refused",
        ],
    ))
    .await;
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("403"),
        "{}",
        text(&output.stderr)
    );
    assert_eq!(upstream.seen().len(), before);
}
