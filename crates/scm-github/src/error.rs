//! What can go wrong talking to GitHub, each with a stable code.

use std::time::Duration;

use auto_swe_store::StoreError;
use auto_swe_worker::ScmError;
use auto_swe_worker::local_git::LocalGitError;

/// Why a GitHub call failed. No variant carries a token: messages quote only what GitHub said
/// and the path that was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitHubError {
    /// The configuration cannot work (a key that does not parse, a bad base URL).
    #[error("GitHub configuration: {0}")]
    Config(String),
    /// The App's private key was refused (expired, revoked or not the App's).
    #[error("GitHub refused the App's credentials: {0}")]
    BadCredentials(String),
    /// The App is not installed on the repository, or its installation lost access to it.
    #[error("the GitHub App cannot reach {repository}: {detail}")]
    InstallationLost {
        /// `owner/name`.
        repository: String,
        /// What GitHub said.
        detail: String,
    },
    /// The connection is not a repository of this GitHub host.
    #[error("connection {0} is not a repository on this GitHub host")]
    NotCovered(String),
    /// The token may not do this (missing permission or scope).
    #[error("GitHub refused {path}: {detail}")]
    Forbidden {
        /// The API path.
        path: String,
        /// What GitHub said.
        detail: String,
    },
    /// The thing asked for does not exist.
    #[error("GitHub has no {path}")]
    NotFound {
        /// The API path.
        path: String,
    },
    /// The run's pull request was closed by a person: the run does not open another.
    #[error("pull request #{number} was closed without merging; the run opens no other")]
    PullRequestClosed {
        /// Its number.
        number: u64,
    },
    /// GitHub refused the request as invalid.
    #[error("GitHub refused {path} ({status}): {detail}")]
    Rejected {
        /// The API path.
        path: String,
        /// HTTP status.
        status: u16,
        /// What GitHub said.
        detail: String,
    },
    /// The rate limit holds the call past what the step may wait: the client's allowance, or
    /// what is left before the step's deadline, whichever is shorter.
    #[error(
        "GitHub's rate limit holds {path} for {wait:?}, past what the step may wait ({may_wait:?})"
    )]
    RateLimited {
        /// The API path.
        path: String,
        /// How long GitHub asked to wait.
        wait: Duration,
        /// How long the step could still wait.
        may_wait: Duration,
    },
    /// GitHub failed, or could not be reached.
    #[error("GitHub is unavailable ({path}): {detail}")]
    Unavailable {
        /// The API path.
        path: String,
        /// What happened.
        detail: String,
    },
    /// An answer did not have the documented shape.
    #[error("GitHub answered {path} with an unexpected body: {detail}")]
    Malformed {
        /// The API path.
        path: String,
        /// What did not parse.
        detail: String,
    },
    /// git failed (a push, a fetch).
    #[error(transparent)]
    Git(#[from] LocalGitError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl GitHubError {
    /// Stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            GitHubError::Config(_) => "GITHUB_CONFIG_INVALID",
            GitHubError::BadCredentials(_) => "GITHUB_CREDENTIALS_REFUSED",
            GitHubError::InstallationLost { .. } => "GITHUB_INSTALLATION_LOST",
            GitHubError::NotCovered(_) => "REPOSITORY_NOT_COVERED",
            GitHubError::Forbidden { .. } => "GITHUB_FORBIDDEN",
            GitHubError::NotFound { .. } => "GITHUB_NOT_FOUND",
            GitHubError::PullRequestClosed { .. } => "PULL_REQUEST_CLOSED",
            GitHubError::Rejected { .. } => "GITHUB_REJECTED",
            GitHubError::RateLimited { .. } => "GITHUB_RATE_LIMITED",
            GitHubError::Unavailable { .. } => "GITHUB_UNAVAILABLE",
            GitHubError::Malformed { .. } => "GITHUB_MALFORMED_RESPONSE",
            GitHubError::Git(error) => error.code(),
            GitHubError::Store(error) => error.code(),
        }
    }

    /// Whether trying again may succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            GitHubError::RateLimited { .. } | GitHubError::Unavailable { .. } => true,
            GitHubError::Git(error) => error.is_retryable(),
            GitHubError::Store(error) => error.is_retryable(),
            GitHubError::Config(_)
            | GitHubError::BadCredentials(_)
            | GitHubError::InstallationLost { .. }
            | GitHubError::NotCovered(_)
            | GitHubError::Forbidden { .. }
            | GitHubError::NotFound { .. }
            | GitHubError::PullRequestClosed { .. }
            | GitHubError::Rejected { .. }
            | GitHubError::Malformed { .. } => false,
        }
    }
}

impl From<GitHubError> for ScmError {
    fn from(error: GitHubError) -> Self {
        match error {
            GitHubError::Git(error) => ScmError::Git(error),
            GitHubError::Store(error) => ScmError::Store(error),
            other => ScmError::Provider {
                code: other.code(),
                message: other.to_string(),
                retryable: other.is_retryable(),
            },
        }
    }
}
