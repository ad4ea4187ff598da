//! Local CI: judges every pull request of a local repository whose head waits for a verdict
//! (`PENDING`), by running the repository's gate commands on that head in a fresh workspace,
//! and delivers the verdict to the run as `ciPipelineSignal` — only while the pull request's
//! head is still the commit judged, so a verdict about an old head never reaches the run.
//!
//! Every worker may run local CI; each head is still judged once. A runner claims the head in
//! the store (a lease of database time, renewed while the gates run) before it runs anything,
//! and skips a head another runner holds or has judged. The verdict closes the claim in the
//! same transaction that gives it to the waiting pull requests, so each of their runs gets one
//! signal. A runner that dies mid-judgment leaves a lease that passes; the next pass takes the
//! head again.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use auto_swe_store::{
    CiClaim, CiStatus, HeadClaim, PullRequest, PullRequestQuery, StoreError, VerdictRecord,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::scm::{CI_SIGNAL, LocalRepository, LocalScm, ScmError};
use crate::steps::{GateScope, WorkerServices, run_gates};

/// How often an idle CI runner looks for pending heads.
const CI_POLL: Duration = Duration::from_millis(500);

/// How long a claim on a head lasts without renewal (database time): how long a dead
/// runner's head waits before another runner takes it.
const CI_CLAIM_LEASE: Duration = Duration::from_secs(60);

/// How often a runner renews its claim while the gates run.
const CI_CLAIM_RENEW: Duration = Duration::from_secs(20);

/// A verdict delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiVerdict {
    /// The repository connection.
    pub connection_id: String,
    /// The pull request.
    pub number: i64,
    /// The head judged.
    pub head_sha: String,
    /// The verdict.
    pub status: CiStatus,
}

/// The local CI runner.
#[derive(Debug, Clone)]
pub struct LocalCi {
    services: Arc<WorkerServices>,
    /// Who this runner is when it claims a head; unique per runner.
    claimant: String,
}

impl LocalCi {
    /// A runner over the worker's services.
    #[must_use]
    pub fn new(services: Arc<WorkerServices>) -> Self {
        Self {
            services,
            claimant: format!("local-ci-{}", uuid::Uuid::now_v7().simple()),
        }
    }

    /// Judges every pending head that no other runner holds or has judged; returns the
    /// verdicts this runner delivered.
    #[tracing::instrument(level = "info", name = "local_ci", skip(self), fields(claimant = %self.claimant))]
    pub async fn run_pending(&self) -> Result<Vec<CiVerdict>, ScmError> {
        let Some(scm) = self.services.scm.as_local() else {
            return Ok(Vec::new());
        };
        let store = &self.services.store;
        let pending = store
            .list_pull_requests(&PullRequestQuery::default().with_ci_status(CiStatus::Pending))
            .await?;
        let mut heads = BTreeSet::new();
        let mut verdicts = Vec::new();
        for pr in pending {
            // One judgment per head: it reaches every pull request waiting on that head.
            if !heads.insert((pr.connection_id.clone(), pr.head_sha.clone())) {
                continue;
            }
            let repo = match scm.repository(&pr.connection_id).await {
                Ok(repo) => repo,
                Err(ScmError::NotLocal(_)) => continue,
                Err(error) => return Err(error),
            };
            let claim = store
                .claim_ci_head(
                    &pr.connection_id,
                    &pr.head_sha,
                    &self.claimant,
                    CI_CLAIM_LEASE,
                )
                .await?;
            let waiting = match claim {
                HeadClaim::Claimed(claim) => self.judge(scm, &repo, &pr, claim).await?,
                // Judged before (by any runner): a pull request back on that head takes the
                // verdict without the gates running again.
                HeadClaim::Judged { .. } => {
                    store
                        .replay_ci_verdict(&pr.connection_id, &pr.head_sha)
                        .await?
                }
                HeadClaim::Held { worker, .. } => {
                    tracing::debug!(number = pr.number, head = %pr.head_sha, holder = %worker, "another runner judges this head");
                    continue;
                }
                other => {
                    tracing::debug!(number = pr.number, head = %pr.head_sha, claim = ?other, "head not claimed");
                    continue;
                }
            };
            for judged in waiting {
                self.deliver(&judged).await?;
                verdicts.push(CiVerdict {
                    connection_id: judged.connection_id,
                    number: judged.number,
                    head_sha: judged.head_sha,
                    status: judged.ci_status,
                });
            }
        }
        Ok(verdicts)
    }

    /// Runs the gates on a claimed head and records the verdict; returns the pull requests
    /// that took it (none when the claim was lost meanwhile: another runner judges the head).
    #[tracing::instrument(level = "info", skip(self, scm, repo, pr, claim), fields(number = pr.number, head = %pr.head_sha))]
    async fn judge(
        &self,
        scm: &LocalScm,
        repo: &LocalRepository,
        pr: &PullRequest,
        claim: CiClaim,
    ) -> Result<Vec<PullRequest>, ScmError> {
        let store = &self.services.store;
        let (claim, status) = match self.run_claimed(scm, repo, pr, claim.clone()).await {
            Ok(judged) => judged,
            Err(error) => {
                // Nothing judged: the head is free for the next pass at once.
                if let Err(release) = store.release_ci_claim(&claim).await {
                    tracing::warn!(code = release.code(), %release, "a CI claim was not released; its lease will pass");
                }
                return Err(error);
            }
        };
        let record = store.record_ci_verdict(&claim, status).await?;
        tracing::info!(status = status.as_str(), record = ?record, "local CI verdict");
        Ok(match record {
            VerdictRecord::Recorded { pull_requests } => pull_requests,
            _ => Vec::new(),
        })
    }

    /// Runs the gates on `pr`'s head while renewing `claim`, and writes their log; returns the
    /// claim as last renewed and the verdict.
    async fn run_claimed(
        &self,
        scm: &LocalScm,
        repo: &LocalRepository,
        pr: &PullRequest,
        mut claim: CiClaim,
    ) -> Result<(CiClaim, CiStatus), ScmError> {
        let text = scm.pull_request_text(repo, pr.number).await?;
        let gates = run_gates(
            &self.services,
            repo,
            &text.head_branch,
            &pr.head_sha,
            GateScope::Ci,
        );
        tokio::pin!(gates);
        let mut renew = tokio::time::interval(CI_CLAIM_RENEW);
        renew.tick().await;
        let mut held = true;
        let judged = loop {
            tokio::select! {
                judged = &mut gates => break judged,
                _ = renew.tick(), if held => {
                    match self.services.store.renew_ci_claim(&claim, CI_CLAIM_LEASE).await {
                        Ok(Some(renewed)) => claim = renewed,
                        Ok(None) => {
                            // Taken over after a stall: the verdict will not be recorded.
                            tracing::warn!("the claim on this head was lost while its gates ran");
                            held = false;
                        }
                        Err(error) => {
                            tracing::warn!(code = error.code(), %error, "a CI claim was not renewed");
                        }
                    }
                }
            }
        };
        let (status, log) = match judged {
            Ok(outcome) if outcome.passed => (CiStatus::Success, outcome.log()),
            Ok(outcome) => (CiStatus::Failure, outcome.log()),
            Err(error) => (
                CiStatus::Failure,
                format!(
                    "local CI could not judge this head: {}: {}\n",
                    error.code, error.message
                ),
            ),
        };
        scm.write_ci_log(repo, &pr.head_sha, &log).await?;
        Ok((claim, status))
    }

    /// Sends a pull request's verdict to the run that opened it.
    async fn deliver(&self, pr: &PullRequest) -> Result<(), ScmError> {
        let Some(run_id) = &pr.run_id else {
            return Ok(());
        };
        let payload = json!({
            "status": pr.ci_status.as_str(),
            "headSha": pr.head_sha,
            "number": pr.number,
        });
        match self
            .services
            .store
            .send_signal(run_id, CI_SIGNAL, &payload)
            .await
        {
            Ok(_) | Err(StoreError::RunEnded { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Judges pending heads until `shutdown` fires.
    pub async fn serve(&self, shutdown: CancellationToken) {
        while !shutdown.is_cancelled() {
            if let Err(error) = self.run_pending().await {
                tracing::warn!(code = error.code(), %error, "local CI pass failed");
            }
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = tokio::time::sleep(CI_POLL) => {}
            }
        }
    }
}
