//! Local CI: judges every pull request of a local repository whose head waits for a verdict
//! (`PENDING`), by running the repository's gate commands on that head in a fresh workspace,
//! and delivers the verdict to the run as `ciPipelineSignal` — only while the pull request's
//! head is still the commit judged, so a verdict about an old head never reaches the run.

use std::sync::Arc;
use std::time::Duration;

use auto_swe_store::{CiStatus, PullRequestQuery, StoreError};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::scm::{CI_SIGNAL, ScmError};
use crate::steps::{GateScope, WorkerServices, run_gates};

/// How often an idle CI runner looks for pending heads.
const CI_POLL: Duration = Duration::from_millis(500);

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
}

impl LocalCi {
    /// A runner over the worker's services.
    #[must_use]
    pub fn new(services: Arc<WorkerServices>) -> Self {
        Self { services }
    }

    /// Judges every pending head once; returns the verdicts recorded.
    #[tracing::instrument(level = "info", name = "local_ci", skip(self))]
    pub async fn run_pending(&self) -> Result<Vec<CiVerdict>, ScmError> {
        let Some(scm) = self.services.scm.as_local() else {
            return Ok(Vec::new());
        };
        let store = &self.services.store;
        let pending = store
            .list_pull_requests(&PullRequestQuery::default().with_ci_status(CiStatus::Pending))
            .await?;
        let mut verdicts = Vec::new();
        for pr in pending {
            let repo = match scm.repository(&pr.connection_id).await {
                Ok(repo) => repo,
                Err(ScmError::NotLocal(_)) => continue,
                Err(error) => return Err(error),
            };
            let text = scm.pull_request_text(&repo, pr.number).await?;
            let (status, log) = match run_gates(
                &self.services,
                &repo,
                &text.head_branch,
                &pr.head_sha,
                GateScope::Ci,
            )
            .await
            {
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
            scm.write_ci_log(&repo, &pr.head_sha, &log).await?;
            let recorded = store
                .set_ci_status(&pr.connection_id, &pr.head_sha, status)
                .await?;
            tracing::info!(number = pr.number, head = %pr.head_sha, status = status.as_str(), recorded, "local CI verdict");
            if !recorded {
                continue;
            }
            if let Some(run_id) = &pr.run_id {
                let payload = json!({
                    "status": status.as_str(),
                    "headSha": pr.head_sha,
                    "number": pr.number,
                });
                match store.send_signal(run_id, CI_SIGNAL, &payload).await {
                    Ok(_) | Err(StoreError::RunEnded { .. }) => {}
                    Err(error) => return Err(error.into()),
                }
            }
            verdicts.push(CiVerdict {
                connection_id: pr.connection_id.clone(),
                number: pr.number,
                head_sha: pr.head_sha.clone(),
                status,
            });
        }
        Ok(verdicts)
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
