//! GitHub as the auto-swe worker's SCM.
//!
//! [`GitHubScm`] implements the worker's [`Scm`](auto_swe_worker::Scm) seam on octocrab's
//! client: as a GitHub App (an RS256 JWT issued 60 s back and expiring within ten minutes, and
//! installation tokens scoped to one repository and the permissions each call needs, cached
//! until shortly before they expire) or with a personal access token, on github.com or a GitHub
//! Enterprise Server. Repositories are mirrored bare under the worker's home; the run's branch
//! is pushed with the token carried as a header in git's environment (never a command line or a
//! URL), and its pull request is found by head branch before one is opened, so there is never a
//! second. CI is read from check runs and suites; failing jobs' logs are fetched, size-capped,
//! for the CI fixer; the worker keeps its own check run on the head.
//!
//! [`GitHubWebhooks`] is the webhook endpoint's logic for a server to mount: the
//! `X-Hub-Signature-256` HMAC is verified in constant time with the host's secret (GitHub
//! Enterprise hosts by `X-GitHub-Enterprise-Host`), deliveries are deduplicated by id, a finished
//! CI report becomes `ciPipelineSignal` only for a pull request pending at that head, a merge
//! becomes `humanMergeSignal`, and a mention becomes a [`TriggerRequest`].
//!
//! Every API call runs in a `github.api` span (method, path, status); no token reaches a span,
//! a log line or an error.

mod auth;
mod checks;
mod client;
mod config;
mod error;
mod models;
mod pulls;
mod scm;
mod webhook;

pub use auth::{
    ACTIONS_READ, AppClaims, AppKey, CHECKS_READ, CHECKS_WRITE, CONTENTS_READ, CONTENTS_WRITE,
    JWT_BACKDATE, JWT_LIFETIME, METADATA_READ, PULL_REQUESTS_READ, PULL_REQUESTS_WRITE,
    Permissions, TOKEN_MARGIN,
};
pub use checks::{CheckRunJsonView as CheckRun, CheckSuiteView as CheckSuite};
pub use config::{
    DEFAULT_CHECK_NAME, DEFAULT_CI_LOG_BYTES, DEFAULT_RATE_LIMIT_WAIT, GitHubAuth, GitHubConfig,
    GitHubHost,
};
pub use error::GitHubError;
pub use pulls::MergeState;
pub use scm::{GitHubScm, PROVIDER, RepoRef};
pub use webhook::{
    DEFAULT_MENTION, DELIVERY_HEADER, ENTERPRISE_HOST_HEADER, EVENT_HEADER, GitHubWebhooks,
    SIGNATURE_HEADER, TriggerRequest, WebhookError, WebhookOutcome, WebhookSecrets, sign,
    verify_signature,
};
