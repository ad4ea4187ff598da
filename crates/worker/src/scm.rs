//! The local SCM: repositories as bare git repositories under the worker's home, pull requests
//! as store rows, CI run on this machine (see [`crate::ci`]), merges only when a person says so.
//!
//! Each registered repository is a `git_repo` connection of the `local` organization whose
//! config names its bare repository and its source; a source is registered once and every later
//! run on it reuses the registration (see [`register`]). A pull request is keyed by (connection,
//! number), one per run and branch, and keeps its title, body and branches beside the bare
//! repository.
//!
//! [`Scm`] is the seam the worker's steps use: [`LocalScm`] is one provider; a hosted one (GitHub)
//! lives in its own crate and keeps a bare mirror of each repository under the worker's home, so
//! every provider hands the steps a [`LocalRepository`] their host-side git works on.

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use auto_swe_store::{
    CiStatus, PullRequest, PullRequestQuery, PullRequestState, PullRequestUpdate, Store, StoreError,
};
use serde::{Deserialize, Serialize};

use crate::local_git::{LocalGit, LocalGitError};

mod check;
mod register;

pub use check::PullRequestCheck;
pub use register::{Registered, Registration};

/// The organization local repositories belong to.
pub const LOCAL_ORG_SLUG: &str = "local";
/// The host name local repositories are recorded under.
pub const LOCAL_HOST: &str = "local";
/// The signal a run waiting on CI gets its verdict on.
pub const CI_SIGNAL: &str = "ciPipelineSignal";
/// The signal a run waiting for the merge gets when a person merges.
pub const MERGE_SIGNAL: &str = "humanMergeSignal";

/// Why an SCM operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScmError {
    /// git failed.
    #[error(transparent)]
    Git(#[from] LocalGitError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The connection is not a local repository.
    #[error("connection {0} is not a local repository")]
    NotLocal(String),
    /// No such pull request.
    #[error("no pull request {0}")]
    NoPullRequest(String),
    /// The pull request cannot be merged now.
    #[error("pull request {number} cannot be merged: {reason}")]
    NotMergeable {
        /// Its number.
        number: i64,
        /// Why.
        reason: String,
    },
    /// A file beside the repository could not be read or written.
    #[error("local SCM: {0}")]
    Io(#[from] std::io::Error),
    /// A hosted provider refused or failed; its own error named the code.
    #[error("{message}")]
    Provider {
        /// Stable code (`PULL_REQUEST_CLOSED`, `GITHUB_RATE_LIMITED`, …).
        code: &'static str,
        /// What happened, with no credential in it.
        message: String,
        /// Whether trying again may succeed.
        retryable: bool,
    },
}

impl ScmError {
    /// Stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            ScmError::Git(error) => error.code(),
            ScmError::Store(error) => error.code(),
            ScmError::NotLocal(_) => "REPOSITORY_NOT_LOCAL",
            ScmError::NoPullRequest(_) => "PULL_REQUEST_NOT_FOUND",
            ScmError::NotMergeable { .. } => "PULL_REQUEST_NOT_MERGEABLE",
            ScmError::Io(_) => "SCM_UNAVAILABLE",
            ScmError::Provider { code, .. } => code,
        }
    }

    /// Whether trying again may succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            ScmError::Git(error) => error.is_retryable(),
            ScmError::Store(error) => error.is_retryable(),
            ScmError::Io(_) => true,
            ScmError::Provider { retryable, .. } => *retryable,
            ScmError::NotLocal(_) | ScmError::NoPullRequest(_) | ScmError::NotMergeable { .. } => {
                false
            }
        }
    }
}

/// A registered local repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalRepository {
    /// Its connection.
    pub connection_id: String,
    /// The bare repository.
    pub path: PathBuf,
    /// The branch pull requests merge into.
    pub default_branch: String,
    /// Display name.
    pub name: String,
}

/// What a pull request says, kept beside its repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PullRequestText {
    /// Title.
    pub title: String,
    /// Body.
    pub body: String,
    /// Source branch.
    pub head_branch: String,
    /// Target branch.
    pub base_branch: String,
}

/// A pull request opened or updated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PullRequestOpened {
    /// Number.
    pub number: i64,
    /// `local://…` address.
    pub url: String,
    /// Its head.
    pub head_sha: String,
    /// Whether this call opened it.
    pub created: bool,
}

/// The run's pull request as a step asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PullRequestRequest {
    /// The run it belongs to (one pull request per run).
    pub run_id: String,
    /// The run's branch, its head.
    pub branch: String,
    /// Title.
    pub title: String,
    /// Body.
    pub body: String,
    /// Opened as a draft (a hosted provider's draft; the local SCM has none).
    pub draft: bool,
    /// Labels to put on it.
    pub labels: Vec<String>,
}

impl PullRequestRequest {
    /// A ready pull request from `branch` of `run_id`, with no labels.
    #[must_use]
    pub fn new(
        run_id: impl Into<String>,
        branch: impl Into<String>,
        title: impl Into<String>,
        body: impl Into<String>,
    ) -> Self {
        Self {
            run_id: run_id.into(),
            branch: branch.into(),
            title: title.into(),
            body: body.into(),
            draft: false,
            labels: Vec::new(),
        }
    }
}

/// Where the worker's pull requests go: the seam between the steps and a provider.
///
/// Implementor's contract: [`Scm::repository`] hands back a bare repository on this machine whose
/// default branch is current (the steps' host-side git works on it); a run has at most one pull
/// request, found before one is opened, so a repeated call never opens a second; an opened or
/// moved pull request is recorded in the store with its head's CI `PENDING` (what arms the run's
/// CI wait); errors carry stable codes and say whether a retry may help; no credential reaches an
/// error, a log or a span.
#[async_trait]
pub trait Scm: Send + Sync + std::fmt::Debug {
    /// The provider's name (`local`, `github`).
    fn provider(&self) -> &'static str;

    /// The repository of a connection, ready for the steps' git.
    async fn repository(&self, connection_id: &str) -> Result<LocalRepository, ScmError>;

    /// The run's pull request on `repo`, if it opened one.
    async fn pull_request_of_run(
        &self,
        repo: &LocalRepository,
        run_id: &str,
    ) -> Result<Option<PullRequest>, ScmError>;

    /// Publishes the run's branch and opens its pull request, or points the open one at the
    /// branch's new head.
    async fn create_or_update_pull_request(
        &self,
        repo: &LocalRepository,
        request: &PullRequestRequest,
    ) -> Result<PullRequestOpened, ScmError>;

    /// What the provider shows of `request` when its claim in the outcome ledger was never
    /// recorded (a worker died between the two): whether the run's pull request stands as the
    /// request would leave it. A provider that cannot read it back keeps the default,
    /// [`PullRequestCheck::CannotTell`], and the run stops for a person to answer.
    async fn check_pull_request(
        &self,
        repo: &LocalRepository,
        request: &PullRequestRequest,
    ) -> Result<PullRequestCheck, ScmError> {
        let _ = (repo, request);
        Ok(PullRequestCheck::CannotTell)
    }

    /// The CI log of a head (the failing part, size-capped by the provider), empty when none.
    async fn fetch_ci_logs(
        &self,
        repo: &LocalRepository,
        head_sha: &str,
    ) -> Result<String, ScmError>;

    /// Comments `body` (markdown) on pull request `number`; returns the comment's address.
    async fn comment_on_pull_request(
        &self,
        repo: &LocalRepository,
        number: i64,
        body: &str,
    ) -> Result<String, ScmError>;

    /// The local provider, when this is it (local CI judges only its repositories).
    fn as_local(&self) -> Option<&LocalScm> {
        None
    }

    /// Who the run's commits are authored by on this provider (a GitHub App's bot account, for
    /// example); the worker's own identity unless the provider names one.
    fn commit_identity(&self) -> CommitIdentity {
        CommitIdentity::default()
    }
}

/// A commit author: name and email.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitIdentity {
    /// `user.name`.
    pub name: String,
    /// `user.email`.
    pub email: String,
}

impl Default for CommitIdentity {
    /// The worker's own identity, on a domain that never receives mail.
    fn default() -> Self {
        Self {
            name: "auto-swe agent".to_owned(),
            email: "agent@auto-swe.invalid".to_owned(),
        }
    }
}

/// The local SCM provider.
#[derive(Debug, Clone)]
pub struct LocalScm {
    store: Store,
    git: LocalGit,
    root: PathBuf,
}

impl LocalScm {
    /// Repositories kept under `root`.
    #[must_use]
    pub fn new(store: Store, git: LocalGit, root: PathBuf) -> Self {
        Self { store, git, root }
    }

    /// The git runner.
    #[must_use]
    pub fn git(&self) -> &LocalGit {
        &self.git
    }

    /// The `local` org every local repository belongs to, made on first use.
    pub async fn local_org(&self) -> Result<String, ScmError> {
        Ok(self.local_org_record().await?.id)
    }

    async fn local_org_record(&self) -> Result<auto_swe_store::Organization, ScmError> {
        Ok(match self.store.find_org_by_slug(LOCAL_ORG_SLUG).await? {
            Some(org) => org,
            None => match self.store.create_org(LOCAL_ORG_SLUG, "Local").await {
                Ok(org) => org,
                // Another process created it first.
                Err(StoreError::Conflict { .. }) => self
                    .store
                    .find_org_by_slug(LOCAL_ORG_SLUG)
                    .await?
                    .ok_or_else(|| ScmError::NoPullRequest("local organization".to_owned()))?,
                Err(error) => return Err(error.into()),
            },
        })
    }

    async fn local_team(&self) -> Result<String, ScmError> {
        let org = self.local_org_record().await?;
        let find = || async {
            let teams = self.store.list_teams(&org.id).await?;
            Ok::<_, ScmError>(teams.into_iter().find(|t| t.name == "local").map(|t| t.id))
        };
        if let Some(id) = find().await? {
            return Ok(id);
        }
        match self.store.create_team(&org.id, "local").await {
            Ok(team) => Ok(team.id),
            // Another process created it first.
            Err(StoreError::Conflict { .. }) => find()
                .await?
                .ok_or_else(|| ScmError::NoPullRequest("local team".to_owned())),
            Err(error) => Err(error.into()),
        }
    }

    /// The local repository of a connection.
    pub async fn repository(&self, connection_id: &str) -> Result<LocalRepository, ScmError> {
        let connection = self.store.get_connection(connection_id).await?;
        if connection
            .repo
            .as_ref()
            .is_none_or(|r| r.host != LOCAL_HOST)
        {
            return Err(ScmError::NotLocal(connection_id.to_owned()));
        }
        Self::repository_of(connection)
    }

    fn text_path(repo: &LocalRepository, number: i64) -> PathBuf {
        repo.path
            .join("auto-swe-pulls")
            .join(format!("{number}.json"))
    }

    /// What a pull request says.
    pub async fn pull_request_text(
        &self,
        repo: &LocalRepository,
        number: i64,
    ) -> Result<PullRequestText, ScmError> {
        let bytes = tokio::fs::read(Self::text_path(repo, number)).await?;
        serde_json::from_slice(&bytes)
            .map_err(|e| ScmError::Io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
    }

    /// The run's pull request on `repo`, if it opened one.
    pub async fn pull_request_of_run(
        &self,
        repo: &LocalRepository,
        run_id: &str,
    ) -> Result<Option<PullRequest>, ScmError> {
        let query = PullRequestQuery::connection(&repo.connection_id).of_run(run_id);
        Ok(self
            .store
            .list_pull_requests(&query)
            .await?
            .into_iter()
            .next())
    }

    /// Opens the run's pull request from `branch`, or points it at the branch's new head:
    /// idempotent on (run, branch). Either way the head's CI status becomes `PENDING`, which is
    /// what arms the run's CI wait (local CI judges pending heads).
    #[tracing::instrument(level = "info", skip(self, title, body))]
    pub async fn create_or_update_pull_request(
        &self,
        repo: &LocalRepository,
        run_id: &str,
        branch: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequestOpened, ScmError> {
        let head = self
            .git
            .rev_parse(&repo.path, &format!("refs/heads/{branch}"))
            .await?;
        let existing = self.pull_request_of_run(repo, run_id).await?;
        let (number, created) = match &existing {
            Some(pr) => (pr.number, false),
            None => (self.claim_number(repo).await?, true),
        };
        let text = PullRequestText {
            title: title.to_owned(),
            body: body.to_owned(),
            head_branch: branch.to_owned(),
            base_branch: repo.default_branch.clone(),
        };
        let encoded =
            serde_json::to_vec_pretty(&text).map_err(|e| ScmError::Io(std::io::Error::other(e)))?;
        // Written beside it and renamed over it, so a worker killed mid-write never leaves a
        // torn text behind.
        let path = Self::text_path(repo, number);
        let partial = path.with_extension("json.partial");
        tokio::fs::write(&partial, encoded).await?;
        tokio::fs::rename(&partial, &path).await?;
        let url = format!("local://{}/pull/{number}", repo.name);
        let recorded = self
            .store
            .upsert_pull_request(PullRequestUpdate {
                connection_id: repo.connection_id.clone(),
                number,
                run_id: Some(run_id.to_owned()),
                url: url.clone(),
                head_sha: head.clone(),
                state: PullRequestState::Open,
            })
            .await?;
        if recorded.ci_status != CiStatus::Success && recorded.ci_status != CiStatus::Failure {
            self.store
                .set_ci_status(&repo.connection_id, &head, CiStatus::Pending)
                .await?;
        }
        Ok(PullRequestOpened {
            number,
            url,
            head_sha: head,
            created,
        })
    }

    /// A pull request number of `repo` no other run holds: the next after the recorded ones
    /// whose text file this call creates first. Runs on one repository may open their pull
    /// requests at the same moment, from different processes; creating the file is the claim
    /// (a number whose claimant stopped before recording it stays unused).
    async fn claim_number(&self, repo: &LocalRepository) -> Result<i64, ScmError> {
        let recorded = self
            .store
            .list_pull_requests(&PullRequestQuery::connection(&repo.connection_id))
            .await?;
        let mut number = recorded.iter().map(|p| p.number).max().unwrap_or(0) + 1;
        let dir = repo.path.join("auto-swe-pulls");
        tokio::fs::create_dir_all(&dir).await?;
        loop {
            let claimed = tokio::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(Self::text_path(repo, number))
                .await;
            match claimed {
                Ok(_) => return Ok(number),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => number += 1,
                Err(error) => return Err(error.into()),
            }
        }
    }

    fn comments_dir(repo: &LocalRepository, number: i64) -> PathBuf {
        repo.path
            .join("auto-swe-pulls")
            .join(format!("{number}.comments"))
    }

    /// Comments `body` on pull request `number`: kept beside its text, one file per comment.
    #[tracing::instrument(level = "info", skip(self, body))]
    pub async fn comment_on_pull_request(
        &self,
        repo: &LocalRepository,
        number: i64,
        body: &str,
    ) -> Result<String, ScmError> {
        let dir = Self::comments_dir(repo, number);
        tokio::fs::create_dir_all(&dir).await?;
        let next = self.pull_request_comments(repo, number).await?.len() + 1;
        tokio::fs::write(dir.join(format!("{next:05}.md")), body).await?;
        Ok(format!(
            "local://{}/pull/{number}#comment-{next}",
            repo.name
        ))
    }

    /// The comments on pull request `number`, oldest first.
    pub async fn pull_request_comments(
        &self,
        repo: &LocalRepository,
        number: i64,
    ) -> Result<Vec<String>, ScmError> {
        let dir = Self::comments_dir(repo, number);
        let mut entries = match tokio::fs::read_dir(&dir).await {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let mut names = Vec::new();
        while let Some(entry) = entries.next_entry().await? {
            let name = entry.file_name().to_string_lossy().into_owned();
            // Only the files this provider wrote: five digits and `.md`.
            let ours = name
                .strip_suffix(".md")
                .is_some_and(|n| n.len() == 5 && n.bytes().all(|b| b.is_ascii_digit()));
            if ours {
                names.push(name);
            }
        }
        names.sort();
        let mut comments = Vec::with_capacity(names.len());
        for name in names {
            comments.push(tokio::fs::read_to_string(dir.join(name)).await?);
        }
        Ok(comments)
    }

    fn log_path(repo: &LocalRepository, head_sha: &str) -> PathBuf {
        repo.path
            .join("auto-swe-ci")
            .join(format!("{head_sha}.log"))
    }

    /// Stores the CI log of a head.
    pub async fn write_ci_log(
        &self,
        repo: &LocalRepository,
        head_sha: &str,
        log: &str,
    ) -> Result<(), ScmError> {
        let path = Self::log_path(repo, head_sha);
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir).await?;
        }
        tokio::fs::write(path, log).await?;
        Ok(())
    }

    /// The CI log of a head, empty when none was written.
    pub async fn fetch_ci_logs(
        &self,
        repo: &LocalRepository,
        head_sha: &str,
    ) -> Result<String, ScmError> {
        match tokio::fs::read_to_string(Self::log_path(repo, head_sha)).await {
            Ok(text) => Ok(text),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(error) => Err(error.into()),
        }
    }

    /// Merges an open pull request whose head CI passed into its base, on a person's word, and
    /// returns the new tip of the base branch.
    #[tracing::instrument(level = "info", skip(self))]
    pub async fn merge(
        &self,
        repo: &LocalRepository,
        number: i64,
        merged_by: &str,
    ) -> Result<String, ScmError> {
        let pr = match self
            .store
            .get_pull_request(&repo.connection_id, number)
            .await
        {
            Ok(pr) => pr,
            Err(StoreError::NotFound { .. }) => {
                return Err(ScmError::NoPullRequest(format!("#{number}")));
            }
            Err(error) => return Err(error.into()),
        };
        if pr.state != PullRequestState::Open {
            return Err(ScmError::NotMergeable {
                number,
                reason: format!("it is {}", pr.state.as_str().to_ascii_lowercase()),
            });
        }
        if pr.ci_status != CiStatus::Success {
            return Err(ScmError::NotMergeable {
                number,
                reason: format!(
                    "CI at its head is {}",
                    pr.ci_status.as_str().to_ascii_lowercase()
                ),
            });
        }
        let text = self.pull_request_text(repo, number).await?;
        let tip = self
            .git
            .rev_parse(&repo.path, &format!("refs/heads/{}", text.head_branch))
            .await?;
        if tip != pr.head_sha {
            return Err(ScmError::NotMergeable {
                number,
                reason: "its branch moved since CI judged it".to_owned(),
            });
        }
        let message = format!(
            "Merge pull request #{number}: {}\n\nMerged by {merged_by}.",
            text.title
        );
        let merged = self
            .git
            .merge(&repo.path, &text.base_branch, &text.head_branch, &message)
            .await?;
        self.store
            .upsert_pull_request(PullRequestUpdate {
                connection_id: repo.connection_id.clone(),
                number,
                run_id: pr.run_id.clone(),
                url: pr.url.clone(),
                head_sha: pr.head_sha.clone(),
                state: PullRequestState::Merged,
            })
            .await?;
        Ok(merged)
    }

    /// Where repositories live.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }
}

#[async_trait]
impl Scm for LocalScm {
    fn provider(&self) -> &'static str {
        LOCAL_HOST
    }

    async fn repository(&self, connection_id: &str) -> Result<LocalRepository, ScmError> {
        LocalScm::repository(self, connection_id).await
    }

    async fn pull_request_of_run(
        &self,
        repo: &LocalRepository,
        run_id: &str,
    ) -> Result<Option<PullRequest>, ScmError> {
        LocalScm::pull_request_of_run(self, repo, run_id).await
    }

    async fn create_or_update_pull_request(
        &self,
        repo: &LocalRepository,
        request: &PullRequestRequest,
    ) -> Result<PullRequestOpened, ScmError> {
        LocalScm::create_or_update_pull_request(
            self,
            repo,
            &request.run_id,
            &request.branch,
            &request.title,
            &request.body,
        )
        .await
    }

    async fn check_pull_request(
        &self,
        repo: &LocalRepository,
        request: &PullRequestRequest,
    ) -> Result<PullRequestCheck, ScmError> {
        LocalScm::check_pull_request(self, repo, request).await
    }

    async fn fetch_ci_logs(
        &self,
        repo: &LocalRepository,
        head_sha: &str,
    ) -> Result<String, ScmError> {
        LocalScm::fetch_ci_logs(self, repo, head_sha).await
    }

    async fn comment_on_pull_request(
        &self,
        repo: &LocalRepository,
        number: i64,
        body: &str,
    ) -> Result<String, ScmError> {
        LocalScm::comment_on_pull_request(self, repo, number, body).await
    }

    fn as_local(&self) -> Option<&LocalScm> {
        Some(self)
    }
}
