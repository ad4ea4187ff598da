//! CI on GitHub: the check runs and suites of a head, the verdict they add up to, the failing
//! jobs' logs (size-capped) for a fixer, and the worker's own check run.

use std::fmt::Write as _;

use auto_swe_store::CiStatus;
use http::Method;
use serde_json::json;

use crate::auth::{ACTIONS_READ, CHECKS_READ, CHECKS_WRITE};
use crate::client::{location, tail_bytes};
use crate::error::GitHubError;
use crate::models::{CheckRunJson, CheckRunsJson, CheckSuiteJson, CheckSuitesJson, is_failing};
use crate::scm::{GitHubScm, RepoRef};

/// The app slug GitHub Actions' check runs carry; their ids are the jobs' ids.
const ACTIONS_SLUG: &str = "github-actions";

impl GitHubScm {
    /// The check runs of `sha`, the worker's own left out.
    #[tracing::instrument(level = "debug", name = "github.check_runs", skip(self))]
    pub async fn check_runs(
        &self,
        repo: &RepoRef,
        sha: &str,
    ) -> Result<Vec<CheckRunJsonView>, GitHubError> {
        let path = repo.path(&format!("/commits/{sha}/check-runs?per_page=100"));
        let reply = self
            .repo_call(repo, CHECKS_READ, Method::GET, &path, None)
            .await?;
        let page: CheckRunsJson = reply.json(&path)?;
        Ok(page
            .check_runs
            .into_iter()
            .filter(|run| !self.is_own_run(run))
            .map(CheckRunJsonView::from)
            .collect())
    }

    /// The check suites of `sha`, the worker's own App's left out.
    #[tracing::instrument(level = "debug", name = "github.check_suites", skip(self))]
    pub async fn check_suites(
        &self,
        repo: &RepoRef,
        sha: &str,
    ) -> Result<Vec<CheckSuiteView>, GitHubError> {
        let path = repo.path(&format!("/commits/{sha}/check-suites?per_page=100"));
        let reply = self
            .repo_call(repo, CHECKS_READ, Method::GET, &path, None)
            .await?;
        let page: CheckSuitesJson = reply.json(&path)?;
        Ok(page
            .check_suites
            .into_iter()
            .filter(|suite| {
                self.app_id().is_none() || suite.app.as_ref().map(|a| a.id) != self.app_id()
            })
            .map(CheckSuiteView::from)
            .collect())
    }

    fn is_own_run(&self, run: &CheckRunJson) -> bool {
        run.name == self.config.check_name
            && match (self.app_id(), &run.app) {
                (Some(ours), Some(app)) => app.id == ours,
                _ => true,
            }
    }

    /// What CI says of `sha` once every check has finished: `None` while any check or suite
    /// still runs, or when nothing has reported.
    #[tracing::instrument(level = "info", name = "github.ci_verdict", skip(self))]
    pub async fn ci_verdict(
        &self,
        repo: &RepoRef,
        sha: &str,
    ) -> Result<Option<CiStatus>, GitHubError> {
        let runs = self.check_runs(repo, sha).await?;
        let suites = self.check_suites(repo, sha).await?;
        let suites_running = suites
            .iter()
            .any(|s| s.status.as_deref() != Some("completed") && s.check_runs != Some(0));
        if runs.is_empty() || suites_running || runs.iter().any(|r| r.status != "completed") {
            return Ok(None);
        }
        let failed = runs.iter().any(|r| is_failing(r.conclusion.as_deref()))
            || suites
                .iter()
                .any(|s| s.check_runs != Some(0) && is_failing(s.conclusion.as_deref()));
        Ok(Some(if failed {
            CiStatus::Failure
        } else {
            CiStatus::Success
        }))
    }

    /// The logs of the failing checks of `sha`, the last bytes of each, at most
    /// `ci_log_bytes` in all: Actions jobs' logs, other checks' reported output.
    pub(crate) async fn failing_logs(
        &self,
        repo: &RepoRef,
        sha: &str,
    ) -> Result<String, GitHubError> {
        let runs = self.check_runs(repo, sha).await?;
        let failing: Vec<&CheckRunJsonView> = runs
            .iter()
            .filter(|r| r.status == "completed" && is_failing(r.conclusion.as_deref()))
            .collect();
        if failing.is_empty() {
            return Ok(String::new());
        }
        let share = self.config.ci_log_bytes / failing.len();
        let mut out = String::new();
        for run in failing {
            let _ = writeln!(
                out,
                "== {} ({}) ==",
                run.name,
                run.conclusion.as_deref().unwrap_or("unknown")
            );
            let body = if run.app_slug.as_deref() == Some(ACTIONS_SLUG) {
                match self.job_log(repo, run.id, share).await {
                    Ok(log) => log,
                    Err(error) => {
                        tracing::warn!(code = error.code(), job = run.id, "job log unavailable");
                        run.reported(share)
                    }
                }
            } else {
                run.reported(share)
            };
            out.push_str(&body);
            if !out.ends_with('\n') {
                out.push('\n');
            }
        }
        Ok(out)
    }

    /// The last `cap` bytes of an Actions job's log (GitHub redirects to a short-lived URL,
    /// fetched without the token).
    async fn job_log(&self, repo: &RepoRef, job: u64, cap: usize) -> Result<String, GitHubError> {
        let path = repo.path(&format!("/actions/jobs/{job}/logs"));
        let reply = self
            .repo_call(repo, ACTIONS_READ, Method::GET, &path, None)
            .await?;
        if reply.status.is_redirection() {
            let target = location(&reply).ok_or_else(|| GitHubError::Malformed {
                path: path.clone(),
                detail: "a redirect with no location".to_owned(),
            })?;
            return self.api.download_tail(&target, cap).await;
        }
        Ok(tail_bytes(&reply.body, cap))
    }

    /// Opens the worker's check run on `head` (in progress, linking to the run).
    pub(crate) async fn start_own_check(
        &self,
        repo: &RepoRef,
        head: &str,
        run_id: &str,
    ) -> Result<u64, GitHubError> {
        let path = repo.path("/check-runs");
        let mut body = json!({
            "name": self.config.check_name,
            "head_sha": head,
            "status": "in_progress",
            "external_id": run_id,
            "output": {
                "title": "auto-swe run in progress",
                "summary": format!("Run `{run_id}` is waiting for CI and review."),
            },
        });
        if let Some(url) = self.details_url(run_id) {
            body["details_url"] = json!(url);
        }
        let reply = self
            .repo_call(repo, CHECKS_WRITE, Method::POST, &path, Some(&body))
            .await?;
        let run: CheckRunJson = reply.json(&path)?;
        Ok(run.id)
    }

    /// Completes the worker's check run on `head` with `conclusion` (`success`, `failure`,
    /// `cancelled`, …) and `summary`; `false` when it has none there.
    #[tracing::instrument(level = "info", name = "github.finish_check", skip(self, summary))]
    pub async fn finish_own_check(
        &self,
        repo: &RepoRef,
        head: &str,
        conclusion: &str,
        summary: &str,
    ) -> Result<bool, GitHubError> {
        if self.app_id().is_none() {
            return Ok(false);
        }
        let path = repo.path(&format!(
            "/commits/{head}/check-runs?check_name={}",
            crate::pulls::encode_query(&self.config.check_name)
        ));
        let reply = self
            .repo_call(repo, CHECKS_READ, Method::GET, &path, None)
            .await?;
        let page: CheckRunsJson = reply.json(&path)?;
        let Some(own) = page.check_runs.iter().find(|r| self.is_own_run(r)) else {
            return Ok(false);
        };
        let path = repo.path(&format!("/check-runs/{}", own.id));
        let body = json!({
            "status": "completed",
            "conclusion": conclusion,
            "output": { "title": format!("auto-swe: {conclusion}"), "summary": summary },
        });
        self.repo_call(repo, CHECKS_WRITE, Method::PATCH, &path, Some(&body))
            .await?;
        Ok(true)
    }
}

/// A check run as the provider reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckRunJsonView {
    /// Id (for Actions, the job's id).
    pub id: u64,
    /// Name.
    pub name: String,
    /// The commit it judged.
    pub head_sha: String,
    /// `queued`, `in_progress`, `completed`, …
    pub status: String,
    /// `success`, `failure`, … once completed.
    pub conclusion: Option<String>,
    /// The app behind it.
    pub app_slug: Option<String>,
    /// Its reported output (title, summary, text).
    pub output: String,
}

impl CheckRunJsonView {
    fn reported(&self, cap: usize) -> String {
        if self.output.is_empty() {
            "(the check reported no output)\n".to_owned()
        } else {
            tail_bytes(self.output.as_bytes(), cap)
        }
    }
}

impl From<CheckRunJson> for CheckRunJsonView {
    fn from(run: CheckRunJson) -> Self {
        let output = run.output.unwrap_or_default();
        let text = [output.title, output.summary, output.text]
            .into_iter()
            .flatten()
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        Self {
            id: run.id,
            name: run.name,
            head_sha: run.head_sha,
            status: run.status,
            conclusion: run.conclusion,
            app_slug: run.app.and_then(|a| a.slug),
            output: text,
        }
    }
}

/// A check suite as the provider reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckSuiteView {
    /// The commit.
    pub head_sha: String,
    /// `queued`, `in_progress`, `completed`.
    pub status: Option<String>,
    /// Its conclusion once completed.
    pub conclusion: Option<String>,
    /// How many check runs it holds, when GitHub says.
    pub check_runs: Option<u64>,
}

impl From<CheckSuiteJson> for CheckSuiteView {
    fn from(suite: CheckSuiteJson) -> Self {
        Self {
            head_sha: suite.head_sha,
            status: suite.status,
            conclusion: suite.conclusion,
            check_runs: suite.latest_check_runs_count,
        }
    }
}
