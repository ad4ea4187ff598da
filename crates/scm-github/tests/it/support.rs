//! A store, a remote repository, the fake GitHub and a provider over them; an App key made for
//! the test; git helpers; a log capture.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use auto_swe_scm_github::{GitHubAuth, GitHubConfig, GitHubHost, GitHubScm};
use auto_swe_store::{Keyring, SecretString, Store, StoreConfig};
use auto_swe_worker::LocalRepository;
use auto_swe_worker::local_git::LocalGit;
use wiremock::MockServer;

use crate::fake::FakeGitHub;

pub(crate) const APP_ID: u64 = 31_337;
pub(crate) const OWNER: &str = "octo-org";
pub(crate) const NAME: &str = "hello-world";
pub(crate) const PERSONAL_TOKEN: &str = "github_pat_11ABCDEFG0123456789_notarealtoken";

/// An RSA key pair made for this test process (`openssl genrsa`): private PEM, public PEM.
pub(crate) fn app_key() -> &'static (String, String) {
    static KEY: OnceLock<(String, String)> = OnceLock::new();
    KEY.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let private = dir.path().join("app.pem");
        let status = std::process::Command::new("openssl")
            .args(["genrsa", "-traditional", "-out"])
            .arg(&private)
            .arg("2048")
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "openssl genrsa failed");
        let public = std::process::Command::new("openssl")
            .args(["rsa", "-pubout", "-in"])
            .arg(&private)
            .stderr(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(public.status.success());
        (
            std::fs::read_to_string(&private).unwrap(),
            String::from_utf8(public.stdout).unwrap(),
        )
    })
}

/// Which credential the provider runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Auth {
    App,
    Token,
}

/// Everything one test needs.
pub(crate) struct Harness {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) store: Store,
    pub(crate) server: MockServer,
    pub(crate) fake: FakeGitHub,
    pub(crate) remote: PathBuf,
    pub(crate) team_id: String,
    pub(crate) git: LocalGit,
}

/// Runs git with no configuration from the machine.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "tester")
        .env("GIT_AUTHOR_EMAIL", "tester@example.com")
        .env("GIT_COMMITTER_NAME", "tester")
        .env("GIT_COMMITTER_EMAIL", "tester@example.com")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Commits `file` = `content` on `branch` of the bare repository `repo` (from the branch's
/// tip, or from `main` when it does not exist) and returns the new commit.
pub(crate) fn commit_on(repo: &Path, branch: &str, file: &str, content: &str) -> String {
    let work = tempfile::tempdir().unwrap();
    let repo_text = repo.to_string_lossy().into_owned();
    git(work.path(), &["clone", "--quiet", &repo_text, "w"]);
    let w = work.path().join("w");
    let exists = std::process::Command::new("git")
        .current_dir(&w)
        .args([
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("origin/{branch}"),
        ])
        .output()
        .unwrap()
        .status
        .success();
    if exists {
        git(
            &w,
            &[
                "checkout",
                "--quiet",
                "-B",
                branch,
                &format!("origin/{branch}"),
            ],
        );
    } else {
        git(&w, &["checkout", "--quiet", "-b", branch, "origin/main"]);
    }
    std::fs::write(w.join(file), content).unwrap();
    git(&w, &["add", "-A"]);
    git(&w, &["commit", "--quiet", "-m", &format!("change {file}")]);
    git(
        &w,
        &[
            "push",
            "--quiet",
            "--force",
            "origin",
            &format!("HEAD:refs/heads/{branch}"),
        ],
    );
    git(&w, &["rev-parse", "HEAD"])
}

impl Harness {
    /// A store, a remote holding one commit on `main`, and the fake GitHub in front of it.
    pub(crate) async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("source");
        std::fs::create_dir_all(&source).unwrap();
        std::fs::write(source.join("README.md"), "hello\n").unwrap();
        Self::with_source(dir, &source).await
    }

    /// As [`Harness::new`], the remote cloned from `source` (a repository or a directory of
    /// files to commit).
    pub(crate) async fn with_source(dir: tempfile::TempDir, source: &Path) -> Self {
        let git = LocalGit::new();
        if !source.join(".git").exists() {
            git.init_with_commit(source, "main", "initial")
                .await
                .unwrap();
        }
        let remote = dir
            .path()
            .join("remotes")
            .join(OWNER)
            .join(format!("{NAME}.git"));
        std::fs::create_dir_all(remote.parent().unwrap()).unwrap();
        git.clone_bare(source.to_str().unwrap(), &remote)
            .await
            .unwrap();
        let url = format!("sqlite://{}", dir.path().join("store.db").display());
        let store = Store::open(StoreConfig::new(&url, Keyring::single(1, [0x33; 32])))
            .await
            .unwrap();
        let org = store.create_org("octo", "Octo").await.unwrap();
        let team = store.create_team(&org.id, "core").await.unwrap();
        let (server, fake) = FakeGitHub::start(APP_ID, &app_key().1, remote.clone()).await;
        fake.with(|s| s.personal_token = Some(PERSONAL_TOKEN.to_owned()));
        Self {
            dir,
            store,
            server,
            fake,
            remote,
            team_id: team.id,
            git,
        }
    }

    /// The host: github.com's name, the API at the fake (under `/api/v3`, as GHE has it), git
    /// from the remotes directory.
    pub(crate) fn host(&self) -> GitHubHost {
        GitHubHost::custom(
            "github.com",
            &format!("{}/api/v3/", self.server.uri()),
            &format!("file://{}/", self.dir.path().join("remotes").display()),
        )
        .unwrap()
    }

    pub(crate) fn config(&self, auth: Auth) -> GitHubConfig {
        let auth = match auth {
            Auth::App => GitHubAuth::App {
                app_id: APP_ID,
                private_key: SecretString::new(app_key().0.clone()),
            },
            Auth::Token => GitHubAuth::Token(SecretString::new(PERSONAL_TOKEN)),
        };
        let mut config = GitHubConfig::new(self.host(), auth, self.dir.path().join("mirrors"));
        config.details_base = Some(url::Url::parse("https://auto-swe.example/runs/").unwrap());
        config.commit_identity = Some(GitHubConfig::bot_identity("auto-swe-test", 41_898_282));
        config
    }

    pub(crate) fn scm(&self, auth: Auth) -> Arc<GitHubScm> {
        Arc::new(GitHubScm::new(self.config(auth), self.store.clone(), self.git.clone()).unwrap())
    }

    /// A run in the store (pull requests name the run that opened them).
    pub(crate) async fn run(&self) -> String {
        let spec = serde_json::json!({ "entry": "done", "nodes": [] });
        self.store
            .create_run(auto_swe_store::NewRun::new(spec))
            .await
            .unwrap()
            .id
    }

    /// Registers the remote as a connection and mirrors it.
    pub(crate) async fn register(&self, scm: &GitHubScm) -> LocalRepository {
        scm.register(&self.team_id, OWNER, NAME).await.unwrap()
    }
}

/// Every log line written on this thread while its [`CaptureGuard`] lives, at every level.
#[derive(Clone, Default)]
pub(crate) struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

thread_local! {
    static CAPTURING: std::cell::RefCell<Option<Captured>> = const { std::cell::RefCell::new(None) };
}

/// Where the binary's one subscriber writes: this thread's capture, if it has one.
struct ThreadWriter(Option<Captured>);

impl std::io::Write for ThreadWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(captured) = &self.0 {
            captured.0.lock().unwrap().extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Stops this thread's capture when dropped.
pub(crate) struct CaptureGuard;

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        CAPTURING.with(|c| c.borrow_mut().take());
    }
}

/// Captures every span and event (with their fields) on this thread until the guard drops.
///
/// One global subscriber serves every test of the binary, so the interest `tracing` caches per
/// call site never depends on which test's scoped subscriber happened to be registered when a
/// call site was first hit on another thread (a race that left a capture empty).
pub(crate) fn capture_logs() -> (Captured, CaptureGuard) {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_writer(|| ThreadWriter(CAPTURING.with(|c| c.borrow().clone())))
            .with_max_level(tracing::Level::TRACE)
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::FULL)
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_global_default(subscriber)
            .expect("no other global subscriber in this test binary");
    });
    let captured = Captured::default();
    CAPTURING.with(|c| *c.borrow_mut() = Some(captured.clone()));
    (captured, CaptureGuard)
}
