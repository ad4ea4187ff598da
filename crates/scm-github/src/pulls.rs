//! Pull requests: found by head branch before one is opened (never a second), created or
//! updated, labelled, commented on; their merge state read from the API.

use auto_swe_store::{CiStatus, PullRequestState, PullRequestUpdate};
use auto_swe_worker::{LocalRepository, PullRequestCheck, PullRequestOpened, PullRequestRequest};
use http::Method;
use serde::Serialize;
use serde_json::json;

use crate::auth::{CONTENTS_WRITE, PULL_REQUESTS_READ, PULL_REQUESTS_WRITE};
use crate::error::GitHubError;
use crate::models::PullJson;
use crate::scm::{GitHubScm, RepoRef};

/// A pull request's state as GitHub reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct MergeState {
    /// Number.
    pub number: u64,
    /// `open` or `closed`.
    pub state: String,
    /// Whether it was merged.
    pub merged: bool,
    /// Whether it is a draft.
    pub draft: bool,
    /// Whether GitHub can merge it (`None` while GitHub is still computing it).
    pub mergeable: Option<bool>,
    /// GitHub's `mergeable_state` (`clean`, `blocked`, `dirty`, `behind`, `unstable`, …).
    pub mergeable_state: Option<String>,
    /// Its head commit.
    pub head_sha: String,
}

impl GitHubScm {
    /// Pushes the run's branch and opens its pull request, or updates the one it has. A pull
    /// request that was closed without merging is `PULL_REQUEST_CLOSED`: no second one is
    /// opened. A branch moved on GitHub by someone else (a force-push) is `BRANCH_MOVED`.
    pub(crate) async fn publish(
        &self,
        local: &LocalRepository,
        request: &PullRequestRequest,
    ) -> Result<PullRequestOpened, GitHubError> {
        let repo = self.repo_ref(&local.connection_id).await?;
        let branch_ref = format!("refs/heads/{}", request.branch);
        let head = self.git.rev_parse(&local.path, &branch_ref).await?;
        let known = self
            .store
            .list_pull_requests(
                &auto_swe_store::PullRequestQuery::connection(&repo.connection_id)
                    .of_run(&request.run_id),
            )
            .await?
            .into_iter()
            .next();
        // A known pull request is checked before anything is pushed: a closed one stops here.
        let existing = match &known {
            // Heard closed (a webhook): refused without asking again.
            Some(pr) if pr.state != PullRequestState::Open => {
                return Err(GitHubError::PullRequestClosed {
                    number: u64::try_from(pr.number).unwrap_or(0),
                });
            }
            Some(pr) => {
                let found = self
                    .pull(&repo, u64::try_from(pr.number).unwrap_or(0))
                    .await?;
                self.refuse_closed(&repo, &found, &request.run_id).await?;
                Some(found)
            }
            None => None,
        };
        let remote = self.remote(&repo, CONTENTS_WRITE).await?;
        let refspec = format!("{branch_ref}:{branch_ref}");
        self.git
            .push_remote(&local.path, &remote, &[&refspec])
            .await?;
        let existing = match existing {
            Some(found) => Some(found),
            None => {
                self.find_by_head(&repo, &request.branch, &request.run_id)
                    .await?
            }
        };
        let (pull, created) = self.open_or_update(&repo, existing, request).await?;
        if !request.labels.is_empty() {
            self.add_labels(&repo, pull.number, &request.labels).await?;
        }
        let number = i64::try_from(pull.number).map_err(|_| GitHubError::Malformed {
            path: repo.path("/pulls"),
            detail: "a pull request number past i64".to_owned(),
        })?;
        let recorded = self
            .store
            .upsert_pull_request(PullRequestUpdate {
                connection_id: repo.connection_id.clone(),
                number,
                run_id: Some(request.run_id.clone()),
                url: pull.html_url.clone(),
                head_sha: head.clone(),
                state: PullRequestState::Open,
            })
            .await?;
        if recorded.ci_status != CiStatus::Success && recorded.ci_status != CiStatus::Failure {
            self.store
                .set_ci_status(&repo.connection_id, &head, CiStatus::Pending)
                .await?;
        }
        if self.app_id().is_some()
            && let Err(error) = self.start_own_check(&repo, &head, &request.run_id).await
        {
            // The run's own check is a courtesy to people; CI does not wait on it.
            tracing::warn!(code = error.code(), %error, "the run's check run was not written");
        }
        tracing::info!(number, created, head = %head, "pull request published");
        Ok(PullRequestOpened {
            number,
            url: pull.html_url,
            head_sha: head,
            created,
        })
    }

    /// Whether `request` was applied on GitHub (its claim in the outcome ledger was never
    /// recorded): the run's open pull request from its branch has the branch's head and the
    /// request's title and body. One that is applied is recorded (with its head's CI armed) as
    /// a publish would have; none, or one that differs, was not applied.
    pub(crate) async fn read_back(
        &self,
        local: &LocalRepository,
        request: &PullRequestRequest,
    ) -> Result<PullRequestCheck, GitHubError> {
        let repo = self.repo_ref(&local.connection_id).await?;
        let head = self
            .git
            .rev_parse(&local.path, &format!("refs/heads/{}", request.branch))
            .await?;
        let path = repo.path(&format!(
            "/pulls?state=open&per_page=100&head={}:{}",
            repo.owner,
            encode_query(&request.branch)
        ));
        let reply = self
            .repo_call(&repo, PULL_REQUESTS_READ, Method::GET, &path, None)
            .await?;
        let pulls: Vec<PullJson> = reply.json(&path)?;
        let Some(pull) = pulls.into_iter().find(|p| {
            p.state == "open" && p.head.name == request.branch && p.base.name == repo.default_branch
        }) else {
            return Ok(PullRequestCheck::NotApplied);
        };
        let applied = pull.head.sha == head
            && pull.title.as_deref().unwrap_or_default() == request.title
            && pull.body.as_deref().unwrap_or_default() == request.body;
        if !applied {
            return Ok(PullRequestCheck::NotApplied);
        }
        let number = i64::try_from(pull.number).map_err(|_| GitHubError::Malformed {
            path: path.clone(),
            detail: "a pull request number past i64".to_owned(),
        })?;
        let recorded = self
            .store
            .upsert_pull_request(PullRequestUpdate {
                connection_id: repo.connection_id.clone(),
                number,
                run_id: Some(request.run_id.clone()),
                url: pull.html_url.clone(),
                head_sha: head.clone(),
                state: PullRequestState::Open,
            })
            .await?;
        if recorded.ci_status != CiStatus::Success && recorded.ci_status != CiStatus::Failure {
            self.store
                .set_ci_status(&repo.connection_id, &head, CiStatus::Pending)
                .await?;
        }
        tracing::info!(number, head = %head, "the pull request was applied before");
        Ok(PullRequestCheck::Applied(PullRequestOpened {
            number,
            url: pull.html_url,
            head_sha: head,
            created: false,
        }))
    }

    /// Updates `existing` with the request's title and body, or opens the pull request.
    async fn open_or_update(
        &self,
        repo: &RepoRef,
        existing: Option<PullJson>,
        request: &PullRequestRequest,
    ) -> Result<(PullJson, bool), GitHubError> {
        if let Some(found) = existing {
            let path = repo.path(&format!("/pulls/{}", found.number));
            let body = json!({ "title": request.title, "body": request.body });
            let reply = self
                .repo_call(repo, PULL_REQUESTS_WRITE, Method::PATCH, &path, Some(&body))
                .await?;
            return Ok((reply.json::<PullJson>(&path)?, false));
        }
        let path = repo.path("/pulls");
        let body = json!({
            "title": request.title,
            "body": request.body,
            "head": request.branch,
            "base": repo.default_branch,
            "draft": request.draft,
        });
        let reply = self
            .repo_call(repo, PULL_REQUESTS_WRITE, Method::POST, &path, Some(&body))
            .await?;
        Ok((reply.json::<PullJson>(&path)?, true))
    }

    /// A pull request closed without merging, as an error (recorded as closed first).
    async fn refuse_closed(
        &self,
        repo: &RepoRef,
        found: &PullJson,
        run_id: &str,
    ) -> Result<(), GitHubError> {
        if found.state == "open" {
            return Ok(());
        }
        let state = if found.is_merged() {
            PullRequestState::Merged
        } else {
            PullRequestState::Closed
        };
        self.store
            .upsert_pull_request(PullRequestUpdate {
                connection_id: repo.connection_id.clone(),
                number: i64::try_from(found.number).unwrap_or(i64::MAX),
                run_id: Some(run_id.to_owned()),
                url: found.html_url.clone(),
                head_sha: found.head.sha.clone(),
                state,
            })
            .await?;
        Err(GitHubError::PullRequestClosed {
            number: found.number,
        })
    }

    /// The pull request from `branch`: an open one is reused; one closed without merging stops
    /// the run (no second is opened); none means none.
    async fn find_by_head(
        &self,
        repo: &RepoRef,
        branch: &str,
        run_id: &str,
    ) -> Result<Option<PullJson>, GitHubError> {
        let path = repo.path(&format!(
            "/pulls?state=all&per_page=100&head={}:{}",
            repo.owner,
            encode_query(branch)
        ));
        let reply = self
            .repo_call(repo, PULL_REQUESTS_READ, Method::GET, &path, None)
            .await?;
        let pulls: Vec<PullJson> = reply.json(&path)?;
        let ours: Vec<PullJson> = pulls
            .into_iter()
            .filter(|p| p.head.name == branch && p.base.name == repo.default_branch)
            .collect();
        if let Some(open) = ours.iter().find(|p| p.state == "open") {
            return Ok(Some(open.clone()));
        }
        if let Some(closed) = ours.first() {
            self.refuse_closed(repo, closed, run_id).await?;
        }
        Ok(None)
    }

    async fn pull(&self, repo: &RepoRef, number: u64) -> Result<PullJson, GitHubError> {
        let path = repo.path(&format!("/pulls/{number}"));
        let reply = self
            .repo_call(repo, PULL_REQUESTS_READ, Method::GET, &path, None)
            .await?;
        reply.json(&path)
    }

    /// Where pull request `number` stands on GitHub.
    #[tracing::instrument(level = "info", name = "github.merge_state", skip(self))]
    pub async fn merge_state(
        &self,
        repo: &RepoRef,
        number: u64,
    ) -> Result<MergeState, GitHubError> {
        let pull = self.pull(repo, number).await?;
        Ok(MergeState {
            number: pull.number,
            merged: pull.is_merged(),
            state: pull.state,
            draft: pull.draft.unwrap_or(false),
            mergeable: pull.mergeable,
            mergeable_state: pull.mergeable_state,
            head_sha: pull.head.sha,
        })
    }

    /// Adds `labels` to pull request `number`.
    #[tracing::instrument(level = "info", name = "github.labels", skip(self))]
    pub async fn add_labels(
        &self,
        repo: &RepoRef,
        number: u64,
        labels: &[String],
    ) -> Result<(), GitHubError> {
        let path = repo.path(&format!("/issues/{number}/labels"));
        self.repo_call(
            repo,
            PULL_REQUESTS_WRITE,
            Method::POST,
            &path,
            Some(&json!({ "labels": labels })),
        )
        .await?;
        Ok(())
    }

    /// Comments `body` on pull request (or issue) `number` (the review network's findings);
    /// returns the comment's URL.
    #[tracing::instrument(level = "info", name = "github.comment", skip(self, body))]
    pub async fn comment(
        &self,
        repo: &RepoRef,
        number: u64,
        body: &str,
    ) -> Result<String, GitHubError> {
        let path = repo.path(&format!("/issues/{number}/comments"));
        let reply = self
            .repo_call(
                repo,
                PULL_REQUESTS_WRITE,
                Method::POST,
                &path,
                Some(&json!({ "body": body })),
            )
            .await?;
        let value: serde_json::Value = reply.json(&path)?;
        Ok(value
            .get("html_url")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned())
    }
}

/// `text` percent-encoded for a query value.
pub(crate) fn encode_query(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~/".contains(&byte) {
            out.push(char::from(byte));
        } else {
            use std::fmt::Write as _;
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}
