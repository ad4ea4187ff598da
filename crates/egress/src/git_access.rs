//! Credentials at egress for the run's git host: the token stays in the proxy, which adds it to
//! git's smart-HTTP requests for the run's one repository; pushes pass only while the worker
//! holds the push window open, and only to the run's branch (see [`crate::git_push`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::ca::WorkspaceCa;

/// The token the proxy adds for the repository; never printed.
#[derive(Clone)]
pub struct GitToken(Arc<str>);

impl GitToken {
    /// Wraps a token (a GitHub installation token, say).
    #[must_use]
    pub fn new(token: impl Into<String>) -> Self {
        Self(Arc::from(token.into()))
    }

    /// The `Authorization` value for smart HTTP: Basic with the token as the password of
    /// `x-access-token`, as GitHub and most hosts take it.
    pub(crate) fn authorization(&self) -> String {
        use base64::Engine as _;
        let pair = format!("x-access-token:{}", self.0);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    }
}

impl std::fmt::Debug for GitToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GitToken(***)")
    }
}

/// Whether a push may pass now. The worker opens it for its push and closes it after; shared by
/// clones of the handle.
#[derive(Debug, Clone, Default)]
pub struct PushWindow(Arc<AtomicBool>);

impl PushWindow {
    /// A closed window.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Lets pushes of the run's branch pass.
    pub fn open(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Refuses every push again.
    pub fn close(&self) {
        self.0.store(false, Ordering::SeqCst);
    }

    /// Whether pushes pass now.
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Whose certificates the proxy trusts when it connects to the git host itself.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum UpstreamTrust {
    /// The host's system roots.
    #[default]
    System,
    /// These roots only (PEM): an internal git host with a private authority.
    Pem(String),
}

/// The run's git host, repository and branch, and how the proxy reaches them: the `CONNECT`s to
/// `host:port` are intercepted (TLS terminated with the workspace's authority), every other
/// host's are tunnelled untouched.
#[derive(Debug, Clone)]
pub struct GitAccess {
    /// The git host (`github.com`).
    pub host: String,
    /// Its HTTPS port (443).
    pub port: u16,
    /// The repository, `owner/name`.
    pub repo: String,
    /// The run's branch: the only ref a push may update.
    pub branch: String,
    /// The token added to the repository's requests.
    pub token: GitToken,
    /// Whether pushes pass now.
    pub push_window: PushWindow,
    /// The authority the workspace trusts for `host`.
    pub ca: Arc<WorkspaceCa>,
    /// Whom the proxy trusts upstream.
    pub upstream: UpstreamTrust,
    /// The largest push body read (and checked) before it is forwarded.
    pub max_push_bytes: usize,
}

/// The default cap on a push body: 256 MiB.
pub const DEFAULT_MAX_PUSH_BYTES: usize = 256 * 1024 * 1024;

impl GitAccess {
    /// Access to `repo` (`owner/name`) on `host:443` for `branch`, with a closed push window,
    /// system roots upstream and the default push cap.
    #[must_use]
    pub fn new(
        host: impl Into<String>,
        repo: impl Into<String>,
        branch: impl Into<String>,
        token: GitToken,
        ca: Arc<WorkspaceCa>,
    ) -> Self {
        Self {
            host: host.into().to_ascii_lowercase(),
            port: 443,
            repo: repo.into(),
            branch: branch.into(),
            token,
            push_window: PushWindow::new(),
            ca,
            upstream: UpstreamTrust::System,
            max_push_bytes: DEFAULT_MAX_PUSH_BYTES,
        }
    }
}
