//! Credentials at egress: the real git client clones and pushes through the proxy to a git host
//! on loopback that demands a token the client never had; the proxy adds it, for the run's one
//! repository, and lets a push through only in its window, only to the run's branch, only as a
//! fast-forward. Everything else to the git host is a 403 inside the tunnel.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use auto_swe_egress::{EgressVerdict, PushWindow, WorkspaceCa};

use crate::clients::{command, run, text};
use crate::git_server::{GitServer, git_ok};
use crate::support::{Proxy, loopback_names, policy};

/// Fake by construction: the git host on loopback accepts it, nothing else would.
const TOKEN: &str = "ghs_EgressTestToken000000000000000000000";

struct Fixture {
    server: GitServer,
    proxy: Proxy,
    window: PushWindow,
    /// The workspace authority's certificate, as the workspace would trust it.
    ca_file: PathBuf,
    home: tempfile::TempDir,
    origin: String,
}

async fn fixture() -> Fixture {
    let server = GitServer::start("git.test", &GitServer::authorization(TOKEN)).await;
    let origin = format!("git.test:{}", server.port);
    let ca = Arc::new(WorkspaceCa::generate("test").unwrap());
    let access = server.access(TOKEN, Arc::clone(&ca));
    let window = access.push_window.clone();
    let proxy = Proxy::start_git(
        policy(&[&origin], &[&origin]),
        Arc::new(loopback_names(&["git.test"])),
        access,
    )
    .await;
    let home = tempfile::tempdir().unwrap();
    let ca_file = home.path().join("workspace-ca.pem");
    std::fs::write(&ca_file, ca.certificate_pem()).unwrap();
    Fixture {
        server,
        proxy,
        window,
        ca_file,
        home,
        origin,
    }
}

impl Fixture {
    fn url(&self, repo: &str) -> String {
        format!("https://{}/{repo}", self.origin)
    }

    /// git as a workspace runs it: through the proxy, trusting the workspace authority, with
    /// no credential of its own.
    async fn git(&self, dir: &Path, args: &[&str]) -> std::process::Output {
        let mut git = command("git", self.home.path());
        git.current_dir(dir)
            .args(["-c", &format!("http.proxy={}", self.proxy.url())])
            .args(["-c", &format!("http.sslCAInfo={}", self.ca_file.display())])
            .args([
                "-c",
                "user.name=agent",
                "-c",
                "user.email=agent@example.test",
            ])
            .args(args);
        run(git).await
    }

    async fn clone(&self) -> PathBuf {
        let out = self
            .git(
                self.home.path(),
                &["clone", "-q", &self.url("acme/widget.git"), "clone"],
            )
            .await;
        assert!(out.status.success(), "{}", text(&out.stderr));
        self.home.path().join("clone")
    }

    async fn commit(&self, clone: &Path, file: &str) {
        std::fs::write(clone.join(file), format!("{file}\n")).unwrap();
        git_ok(clone, self.home.path(), &["add", file]).await;
        git_ok(clone, self.home.path(), &["commit", "-qm", file]).await;
    }

    async fn head(&self, clone: &Path) -> String {
        let mut git = command("git", self.home.path());
        git.current_dir(clone).args(["rev-parse", "HEAD"]);
        text(&run(git).await.stdout).trim().to_owned()
    }

    fn refusals(&self) -> Vec<&'static str> {
        self.proxy
            .sink
            .decisions()
            .into_iter()
            .filter_map(|d| match d.verdict {
                EgressVerdict::Refused { reason, .. } => Some(reason),
                _ => None,
            })
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_carries_the_token_the_client_never_had() {
    let fx = fixture().await;
    let clone = fx.clone().await;
    assert_eq!(
        std::fs::read_to_string(clone.join("README.md")).unwrap(),
        "the widget\n"
    );
    let seen = fx.server.seen();
    assert!(!seen.is_empty());
    assert!(
        seen.iter()
            .all(|r| r.status == 200 && r.authorization.is_some()),
        "{seen:?}"
    );
    // Nothing the client keeps holds the token.
    let config = std::fs::read_to_string(clone.join(".git/config")).unwrap();
    assert!(!config.contains(TOKEN) && !config.contains("x-access-token"));
    assert!(fx.refusals().is_empty(), "{:?}", fx.refusals());
    // Without the workspace's authority the client refuses the intercepted certificate: the
    // tunnel to the git host is never a blind one.
    let mut git = command("git", fx.home.path());
    git.current_dir(fx.home.path())
        .args(["-c", &format!("http.proxy={}", fx.proxy.url())])
        .args(["clone", "-q", &fx.url("acme/widget.git"), "untrusted"]);
    let out = run(git).await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("certificate"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_pass_only_in_the_window_to_the_run_branch_as_fast_forwards() {
    let fx = fixture().await;
    let clone = fx.clone().await;
    let start = fx.server.branch("asw/run-1").await;
    fx.commit(&clone, "change.txt").await;
    let pushed = fx.head(&clone).await;

    // The window is closed: no receive-pack request reaches the host.
    let out = fx
        .git(&clone, &["push", "-q", "origin", "HEAD:asw/run-1"])
        .await;
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("403"), "{}", text(&out.stderr));
    assert_eq!(fx.server.branch("asw/run-1").await, start);
    assert!(
        !fx.server
            .seen()
            .iter()
            .any(|r| r.path_and_query.contains("receive-pack")),
        "{:?}",
        fx.server.seen()
    );

    fx.window.open();
    let out = fx
        .git(&clone, &["push", "-q", "origin", "HEAD:asw/run-1"])
        .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(fx.server.branch("asw/run-1").await, pushed);
    assert!(
        fx.server.seen().iter().any(|r| r.method == "POST"
            && r.path_and_query == "/acme/widget.git/git-receive-pack"
            && r.status == 200),
        "{:?}",
        fx.server.seen()
    );

    // Another branch, a new branch, a delete, and a rewritten history: each refused, the host
    // unchanged.
    let main = fx.server.branch("main").await;
    for (args, code) in [
        (&["push", "-q", "origin", "HEAD:main"][..], "OTHER_REF"),
        (
            &["push", "-q", "origin", "HEAD:refs/heads/asw/other"][..],
            "OTHER_REF",
        ),
        (&["push", "-q", "origin", ":asw/run-1"][..], "DELETE"),
    ] {
        let out = fx.git(&clone, args).await;
        assert!(!out.status.success(), "{args:?}");
        assert_eq!(fx.refusals().last(), Some(&code), "{args:?}");
    }
    git_ok(
        &clone,
        fx.home.path(),
        &["commit", "-q", "--amend", "-m", "rewritten"],
    )
    .await;
    let out = fx
        .git(
            &clone,
            &["push", "-q", "--force", "origin", "HEAD:asw/run-1"],
        )
        .await;
    assert!(!out.status.success());
    assert_eq!(fx.refusals().last(), Some(&"NOT_FAST_FORWARD"));
    assert_eq!(fx.server.branch("asw/run-1").await, pushed);
    assert_eq!(fx.server.branch("main").await, main);
    assert!(fx.server.branch("asw/other").await.is_empty());

    // Closed again: refused again.
    git_ok(&clone, fx.home.path(), &["reset", "-q", "--hard", &pushed]).await;
    fx.commit(&clone, "later.txt").await;
    fx.window.close();
    let out = fx
        .git(&clone, &["push", "-q", "origin", "HEAD:asw/run-1"])
        .await;
    assert!(!out.status.success());
    assert_eq!(fx.refusals().last(), Some(&"NO_PUSH_WINDOW"));
    assert_eq!(fx.server.branch("asw/run-1").await, pushed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_git_requests_for_the_run_repository_reach_the_git_host() {
    let fx = fixture().await;
    // Another repository on the same host.
    let out = fx
        .git(
            fx.home.path(),
            &["clone", "-q", &fx.url("acme/other.git"), "other"],
        )
        .await;
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("403"), "{}", text(&out.stderr));
    // A page of the host's, not git.
    let mut curl = command("curl", fx.home.path());
    curl.args(["-sS", "-x", &fx.proxy.url(), "--cacert"])
        .arg(&fx.ca_file)
        .arg(fx.url("acme/widget/settings"));
    let out = run(curl).await;
    assert!(
        text(&out.stdout).starts_with("EGRESS_REFUSED (NOT_GIT)"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    // A percent-encoded path is not decoded into the repository's.
    let mut curl = command("curl", fx.home.path());
    curl.args(["-sS", "-x", &fx.proxy.url(), "--cacert"])
        .arg(&fx.ca_file)
        .arg(fx.url("acme/widget%2e%2e/info/refs?service=git-upload-pack"));
    let out = run(curl).await;
    assert!(text(&out.stdout).starts_with("EGRESS_REFUSED (NOT_GIT)"));
    assert!(fx.server.seen().is_empty(), "{:?}", fx.server.seen());

    // A credential of the client's own is replaced by the run's token, never passed on.
    let out = fx
        .git(
            fx.home.path(),
            &[
                "-c",
                "http.extraHeader=Authorization: Basic c29tZW9uZTplbHNl",
                "clone",
                "-q",
                &fx.url("acme/widget.git"),
                "clone",
            ],
        )
        .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        fx.server
            .seen()
            .iter()
            .all(|r| r.authorization.as_deref() != Some("Basic c29tZW9uZTplbHNl")),
        "{:?}",
        fx.server.seen()
    );
}
