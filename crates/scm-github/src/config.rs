//! How a GitHub host is reached and who the worker is there.

use std::path::PathBuf;
use std::time::Duration;

use auto_swe_store::SecretString;
use auto_swe_worker::CommitIdentity;
use url::Url;

use crate::error::GitHubError;

/// Characters of failing CI log handed to a fixer, by default.
pub const DEFAULT_CI_LOG_BYTES: usize = 64 * 1024;

/// Longest a call waits out GitHub's rate limit, by default, before it fails
/// `GITHUB_RATE_LIMITED` (retryable: the step's own retry comes back later).
pub const DEFAULT_RATE_LIMIT_WAIT: Duration = Duration::from_secs(60);

/// The name of the check run the worker keeps on its pull requests' heads.
pub const DEFAULT_CHECK_NAME: &str = "auto-swe";

/// One GitHub host: github.com or a GitHub Enterprise Server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitHubHost {
    /// Lower-case `host[:port]`, as repository connections record it.
    pub host: String,
    /// The REST API's base (`https://api.github.com`, `https://HOST/api/v3`).
    pub api_base: Url,
    /// Where repositories are cloned from: `{git_base}{owner}/{name}.git`.
    pub git_base: Url,
}

impl GitHubHost {
    /// github.com.
    #[must_use]
    pub fn github_com() -> Self {
        Self {
            host: "github.com".to_owned(),
            api_base: Url::parse("https://api.github.com/").unwrap_or_else(|_| unreachable!()),
            git_base: Url::parse("https://github.com/").unwrap_or_else(|_| unreachable!()),
        }
    }

    /// A GitHub Enterprise Server at `host` (`ghe.example.com`, `ghe.example.com:8443`): its
    /// API under `/api/v3`, its repositories at the root.
    pub fn enterprise(host: &str) -> Result<Self, GitHubError> {
        let host = host.trim().to_ascii_lowercase();
        if host.is_empty() || host.contains(['/', '@', '?', '#', ' ']) {
            return Err(GitHubError::Config(format!(
                "`{host}` is not a host name (host or host:port)"
            )));
        }
        let parse = |text: String| {
            Url::parse(&text).map_err(|e| GitHubError::Config(format!("`{text}`: {e}")))
        };
        Ok(Self {
            api_base: parse(format!("https://{host}/api/v3/"))?,
            git_base: parse(format!("https://{host}/"))?,
            host,
        })
    }

    /// A host whose API and git live at the given bases (a test server, a proxy).
    pub fn custom(host: &str, api_base: &str, git_base: &str) -> Result<Self, GitHubError> {
        let parse = |text: &str| {
            let mut url =
                Url::parse(text).map_err(|e| GitHubError::Config(format!("`{text}`: {e}")))?;
            if !url.path().ends_with('/') {
                let path = format!("{}/", url.path());
                url.set_path(&path);
            }
            if !url.username().is_empty() || url.password().is_some() {
                return Err(GitHubError::Config(
                    "a base URL may not carry a credential".to_owned(),
                ));
            }
            Ok::<_, GitHubError>(url)
        };
        Ok(Self {
            host: host.trim().to_ascii_lowercase(),
            api_base: parse(api_base)?,
            git_base: parse(git_base)?,
        })
    }

    /// The clone URL of `owner/name`.
    pub(crate) fn clone_url(&self, owner: &str, name: &str) -> String {
        format!("{}{owner}/{name}.git", self.git_base)
    }
}

/// Who the worker is on GitHub.
#[derive(Clone)]
#[non_exhaustive]
pub enum GitHubAuth {
    /// A GitHub App: its id and its private key (PEM). Every call runs on an installation token
    /// scoped to one repository and to the permissions that call needs.
    App {
        /// The App's id.
        app_id: u64,
        /// Its private key, PEM (`-----BEGIN RSA PRIVATE KEY-----` or PKCS#8).
        private_key: SecretString,
    },
    /// A personal access token (single-user setups): scoped by whoever made it.
    Token(SecretString),
}

impl std::fmt::Debug for GitHubAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GitHubAuth::App { app_id, .. } => f
                .debug_struct("App")
                .field("app_id", app_id)
                .finish_non_exhaustive(),
            GitHubAuth::Token(_) => f.write_str("Token(***)"),
        }
    }
}

/// Everything the GitHub provider needs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GitHubConfig {
    /// The host.
    pub host: GitHubHost,
    /// Who the worker is there.
    pub auth: GitHubAuth,
    /// Where bare mirrors of the repositories are kept (one per connection).
    pub mirrors: PathBuf,
    /// The name of the worker's own check run.
    pub check_name: String,
    /// Where the check run links to (the run's page is `{details_base}{run id}`), if anywhere.
    pub details_base: Option<Url>,
    /// Longest a call waits out the rate limit.
    pub max_rate_limit_wait: Duration,
    /// Most bytes of failing CI log fetched.
    pub ci_log_bytes: usize,
    /// Who the run's commits are authored by ([`GitHubConfig::bot_identity`] for an App's bot
    /// account); the worker's own identity when `None`.
    pub commit_identity: Option<CommitIdentity>,
}

impl GitHubConfig {
    /// `auth` on `host`, mirrors under `mirrors`, the rest default.
    #[must_use]
    pub fn new(host: GitHubHost, auth: GitHubAuth, mirrors: PathBuf) -> Self {
        Self {
            host,
            auth,
            mirrors,
            check_name: DEFAULT_CHECK_NAME.to_owned(),
            details_base: None,
            max_rate_limit_wait: DEFAULT_RATE_LIMIT_WAIT,
            ci_log_bytes: DEFAULT_CI_LOG_BYTES,
            commit_identity: None,
        }
    }

    /// The commit identity of a GitHub App's bot account, which GitHub links to the App:
    /// `{slug}[bot]` with the no-reply address `{user id}+{slug}[bot]@users.noreply.github.com`
    /// (the user id is the bot account's, from `GET /users/{slug}[bot]`).
    #[must_use]
    pub fn bot_identity(app_slug: &str, bot_user_id: u64) -> CommitIdentity {
        let login = format!("{app_slug}[bot]");
        CommitIdentity {
            email: format!("{bot_user_id}+{login}@users.noreply.github.com"),
            name: login,
        }
    }
}
