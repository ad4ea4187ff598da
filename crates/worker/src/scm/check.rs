//! Reading back a pull request whose claim in the outcome ledger was never recorded: the worker
//! asks the provider whether the run's pull request stands as the request would leave it, so a
//! worker that died between the claim and its record does not leave the run for a person when
//! the provider can tell.

use auto_swe_store::CiStatus;

use super::{LocalRepository, LocalScm, PullRequestOpened, PullRequestRequest, ScmError};

/// What a provider shows of a pull request request whose claim was never recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PullRequestCheck {
    /// The run's pull request stands as the request leaves it (its head the branch's, its text
    /// the request's): the request was applied, and this is the pull request as it stands.
    /// `created` is `false`: a read-back cannot say which attempt opened it.
    Applied(PullRequestOpened),
    /// The run has no pull request, or it does not stand as the request leaves it: the request
    /// was not applied, and sending it again makes it once.
    NotApplied,
    /// The provider cannot read it back.
    CannotTell,
}

impl LocalScm {
    /// Whether `request` was applied: the run has a recorded pull request whose head is the
    /// run's branch's tip and whose text is the request's. The text is written before the pull
    /// request is recorded, so a recorded head with the request's text means the whole update
    /// went through (its CI is armed again if the worker died before arming it); anything
    /// less is sent again (the update is idempotent on the run's branch).
    #[tracing::instrument(level = "info", skip(self, repo, request), fields(run_id = %request.run_id))]
    pub async fn check_pull_request(
        &self,
        repo: &LocalRepository,
        request: &PullRequestRequest,
    ) -> Result<PullRequestCheck, ScmError> {
        let head = self
            .git
            .rev_parse(&repo.path, &format!("refs/heads/{}", request.branch))
            .await?;
        let Some(recorded) = self.pull_request_of_run(repo, &request.run_id).await? else {
            return Ok(PullRequestCheck::NotApplied);
        };
        if recorded.head_sha != head {
            return Ok(PullRequestCheck::NotApplied);
        }
        let text = match self.pull_request_text(repo, recorded.number).await {
            Ok(text) => text,
            // No text, or one that does not parse: the update did not finish.
            Err(ScmError::Io(_)) => return Ok(PullRequestCheck::NotApplied),
            Err(error) => return Err(error),
        };
        if text.title != request.title
            || text.body != request.body
            || text.head_branch != request.branch
        {
            return Ok(PullRequestCheck::NotApplied);
        }
        // The update arms the head's CI after recording it; a worker that died in between
        // left it unarmed, and arming it again is harmless.
        if recorded.ci_status != CiStatus::Success && recorded.ci_status != CiStatus::Failure {
            self.store
                .set_ci_status(&repo.connection_id, &head, CiStatus::Pending)
                .await?;
        }
        Ok(PullRequestCheck::Applied(PullRequestOpened {
            number: recorded.number,
            url: recorded.url,
            head_sha: head,
            created: false,
        }))
    }
}
