//! Webhooks in (deduplicated by delivery id) and out (a log with retries), and the pull
//! requests the SCM providers track.

use std::time::Duration;

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::enums::string_enum;
use crate::error::{StoreError, StoreResult};

string_enum! {
    /// Where an outbound webhook stands.
    OutboundState, "outbound webhook state" {
        /// Waiting for its next attempt.
        Pending => "PENDING",
        /// Accepted by its target.
        Delivered => "DELIVERED",
        /// Out of attempts, or refused for good.
        Failed => "FAILED",
    }
}

string_enum! {
    /// A pull request's state at its host.
    PullRequestState, "pull request state" {
        /// Open.
        Open => "OPEN",
        /// Closed without merging.
        Closed => "CLOSED",
        /// Merged.
        Merged => "MERGED",
    }
}

string_enum! {
    /// The combined CI status of a pull request's head commit.
    CiStatus, "ci status" {
        /// Nothing reported yet.
        Unknown => "UNKNOWN",
        /// Checks running.
        Pending => "PENDING",
        /// All checks passed.
        Success => "SUCCESS",
        /// A check failed.
        Failure => "FAILURE",
    }
}

/// Whether an inbound delivery was new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryReceipt {
    /// First time this (provider, delivery id) was seen: process it.
    New,
    /// Seen before: a redelivery, drop it.
    Duplicate,
}

/// An outbound webhook to send.
#[derive(Debug, Clone, PartialEq)]
pub struct NewOutboundWebhook {
    /// Where it goes (a URL the caller has already checked against its policy).
    pub target: String,
    /// Event name.
    pub event: String,
    /// Body.
    pub payload: serde_json::Value,
    /// Attempts before it is given up (1..=50).
    pub max_attempts: u32,
}

/// A stored outbound webhook.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OutboundWebhook {
    /// Id.
    pub id: String,
    /// Target.
    pub target: String,
    /// Event.
    pub event: String,
    /// Body.
    pub payload: serde_json::Value,
    /// State.
    pub state: OutboundState,
    /// Attempts made so far.
    pub attempts: i64,
    /// Attempt limit.
    pub max_attempts: i64,
    /// Not sent again before this (database time).
    pub next_attempt_at: Timestamp,
    /// The last failure's text.
    pub last_error: Option<String>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// How an attempt to send went.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AttemptResult {
    /// The target accepted it.
    Delivered,
    /// It failed; try again after `retry_after` unless out of attempts.
    Retry {
        /// Why.
        error: String,
        /// Back-off, counted on the database's clock.
        retry_after: Duration,
    },
    /// It failed for good (the target refused it).
    GiveUp {
        /// Why.
        error: String,
    },
}

/// A pull request as its provider last reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PullRequest {
    /// The repository connection.
    pub connection_id: String,
    /// Number at the host.
    pub number: i64,
    /// The run that opened it, if one did.
    pub run_id: Option<String>,
    /// Web URL.
    pub url: String,
    /// Head commit.
    pub head_sha: String,
    /// State.
    pub state: PullRequestState,
    /// CI status of `head_sha`.
    pub ci_status: CiStatus,
    /// Last change.
    pub updated_at: Timestamp,
}

/// A pull request to record (insert, or update when the number is known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestUpdate {
    /// The repository connection.
    pub connection_id: String,
    /// Number at the host.
    pub number: i64,
    /// The run that opened it (kept once set).
    pub run_id: Option<String>,
    /// Web URL.
    pub url: String,
    /// Head commit; a new head resets the CI status to `UNKNOWN`.
    pub head_sha: String,
    /// State.
    pub state: PullRequestState,
}

/// Which pull requests to list; every filter that is set must match.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PullRequestQuery {
    /// Only this repository connection.
    pub connection_id: Option<String>,
    /// Only those opened by this run.
    pub run_id: Option<String>,
    /// Only those whose head's CI status is this.
    pub ci_status: Option<CiStatus>,
    /// At most this many (1..=500).
    pub limit: u32,
}

impl Default for PullRequestQuery {
    fn default() -> Self {
        Self {
            connection_id: None,
            run_id: None,
            ci_status: None,
            limit: 100,
        }
    }
}

impl PullRequestQuery {
    /// Every pull request of `connection_id`.
    #[must_use]
    pub fn connection(connection_id: impl Into<String>) -> Self {
        Self {
            connection_id: Some(connection_id.into()),
            ..Self::default()
        }
    }

    /// Only those opened by `run_id`.
    #[must_use]
    pub fn of_run(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = Some(run_id.into());
        self
    }

    /// Only those whose CI status is `status`.
    #[must_use]
    pub fn with_ci_status(mut self, status: CiStatus) -> Self {
        self.ci_status = Some(status);
        self
    }
}

/// A worker's claim on judging one head with local CI.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CiClaim {
    /// The repository connection.
    pub connection_id: String,
    /// The head judged (lower case).
    pub head_sha: String,
    /// Who holds the claim.
    pub worker: String,
    /// How many claims this head has seen; renewing, releasing and recording carry it, so a
    /// holder whose lease passed and was taken over writes nothing.
    pub epoch: i64,
    /// The lease's end (database time).
    pub lease_until: Timestamp,
}

/// What claiming a head for judging found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeadClaim {
    /// The caller judges the head: run the gates, then record the verdict.
    Claimed(CiClaim),
    /// Another claimant judges it while its lease lasts.
    Held {
        /// The holder.
        worker: String,
        /// Its lease's end (database time).
        lease_until: Timestamp,
    },
    /// The head was judged already.
    Judged {
        /// Its verdict (`SUCCESS` or `FAILURE`).
        verdict: CiStatus,
    },
}

/// What recording a verdict did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerdictRecord {
    /// The verdict is the head's for good. `pull_requests` are those that waited on it
    /// (`PENDING` with this head) and now carry it: deliver it to their runs. Empty when the
    /// head moved on meanwhile.
    Recorded {
        /// The pull requests that took the verdict.
        pull_requests: Vec<PullRequest>,
    },
    /// The claim was no longer the caller's (released, or its lease passed): nothing was
    /// written.
    ClaimLost,
}

/// Webhooks and pull requests.
///
/// Implementors guarantee: an inbound (provider, delivery id) is `New` exactly once, however
/// many redeliveries race, until it is forgotten; an outbound webhook is handed to one sender at a time (a taken
/// webhook is not due again until its attempt window passes) and ends `DELIVERED` or `FAILED`
/// after at most `max_attempts` attempts; a CI status is recorded only for the pull request's
/// current head, so a late report about an old head changes nothing; local CI judges a head
/// (connection, commit) once: one claimant at a time holds it, a claim whose lease has passed
/// on the database's clock can be taken again, and a head with a recorded verdict is never
/// claimed again.
#[async_trait]
pub trait IntegrationStore: Send + Sync {
    /// Records an inbound delivery, or says it is a duplicate.
    async fn record_delivery(
        &self,
        provider: &str,
        delivery_id: &str,
        event: &str,
        payload: &serde_json::Value,
    ) -> StoreResult<DeliveryReceipt>;
    /// Forgets an inbound delivery whose action failed, so the provider's redelivery of it is
    /// `New` again (acted on, not dropped as a duplicate); true when there was one to forget.
    async fn forget_delivery(&self, provider: &str, delivery_id: &str) -> StoreResult<bool>;
    /// Logs an outbound webhook, due now.
    async fn enqueue_outbound(&self, webhook: NewOutboundWebhook) -> StoreResult<OutboundWebhook>;
    /// Takes up to `limit` due webhooks for `window` (they are not due to anyone else until it
    /// passes, or until their attempt is recorded).
    async fn take_due_outbound(
        &self,
        limit: u32,
        window: Duration,
    ) -> StoreResult<Vec<OutboundWebhook>>;
    /// Records an attempt's result.
    async fn record_attempt(&self, id: &str, result: AttemptResult)
    -> StoreResult<OutboundWebhook>;
    /// Records a pull request (insert or update).
    async fn upsert_pull_request(&self, update: PullRequestUpdate) -> StoreResult<PullRequest>;
    /// Reads a pull request.
    async fn get_pull_request(&self, connection_id: &str, number: i64) -> StoreResult<PullRequest>;
    /// The pull request whose head is this commit, if any.
    async fn pull_request_by_head(
        &self,
        connection_id: &str,
        head_sha: &str,
    ) -> StoreResult<Option<PullRequest>>;
    /// Pull requests matching `query`, newest number first, at most `query.limit` (1..=500).
    async fn list_pull_requests(&self, query: &PullRequestQuery) -> StoreResult<Vec<PullRequest>>;
    /// Sets the CI status of the pull request whose head is `head_sha`; `false` when the head
    /// has moved on (or no such pull request exists) and nothing was written.
    async fn set_ci_status(
        &self,
        connection_id: &str,
        head_sha: &str,
        status: CiStatus,
    ) -> StoreResult<bool>;
    /// Claims judging `head_sha` of `connection_id` for `worker`, for `lease` (1 s to 1 h) of
    /// database time. `Claimed` goes to one claimant at a time; a claim whose lease has passed
    /// can be claimed again; a judged head is `Judged` for good.
    async fn claim_ci_head(
        &self,
        connection_id: &str,
        head_sha: &str,
        worker: &str,
        lease: Duration,
    ) -> StoreResult<HeadClaim>;
    /// Extends a live claim to `lease` from now (database time); `None` when the claim is
    /// no longer the caller's.
    async fn renew_ci_claim(
        &self,
        claim: &CiClaim,
        lease: Duration,
    ) -> StoreResult<Option<CiClaim>>;
    /// Gives up a live claim without a verdict, so the head can be claimed again at once;
    /// `false` when it was no longer the caller's.
    async fn release_ci_claim(&self, claim: &CiClaim) -> StoreResult<bool>;
    /// Records the verdict (`SUCCESS` or `FAILURE`) of a live claim and closes the claim for
    /// good; in the same transaction the pull requests waiting on this head (`PENDING`) take
    /// the verdict.
    async fn record_ci_verdict(
        &self,
        claim: &CiClaim,
        verdict: CiStatus,
    ) -> StoreResult<VerdictRecord>;
    /// Gives a judged head's verdict to the pull requests that wait on that head again
    /// (`PENDING`: a branch moved back to a commit already judged), once: the pull requests
    /// that took it. Empty when none waits or the head was not judged.
    async fn replay_ci_verdict(
        &self,
        connection_id: &str,
        head_sha: &str,
    ) -> StoreResult<Vec<PullRequest>>;
}

pub(crate) fn validate_outbound(webhook: &NewOutboundWebhook) -> StoreResult<String> {
    crate::limits::short_text("webhook target", &webhook.target)?;
    crate::limits::short_text("webhook event", &webhook.event)?;
    if webhook.max_attempts == 0 || webhook.max_attempts > 50 {
        return Err(StoreError::invalid(
            "max attempts",
            "must be between 1 and 50",
        ));
    }
    crate::limits::json_text("webhook payload", &webhook.payload)
}

pub(crate) fn validate_pull_request(update: &PullRequestUpdate) -> StoreResult<()> {
    crate::limits::short_text("connection id", &update.connection_id)?;
    crate::limits::optional_short_text("run id", update.run_id.as_deref())?;
    crate::limits::short_text("pull request url", &update.url)?;
    validate_sha(&update.head_sha)?;
    if update.number < 1 {
        return Err(StoreError::invalid(
            "pull request number",
            "must be positive",
        ));
    }
    Ok(())
}

pub(crate) fn validate_sha(sha: &str) -> StoreResult<()> {
    if !(7..=64).contains(&sha.len()) || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(StoreError::invalid("head sha", "must be 7-64 hex digits"));
    }
    Ok(())
}

pub(crate) fn validate_verdict(verdict: CiStatus) -> StoreResult<()> {
    match verdict {
        CiStatus::Success | CiStatus::Failure => Ok(()),
        CiStatus::Unknown | CiStatus::Pending => Err(StoreError::invalid(
            "ci verdict",
            "must be SUCCESS or FAILURE",
        )),
    }
}
