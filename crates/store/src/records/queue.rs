//! The work queue: runnable runs handed to workers under leases.

use std::time::Duration;

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::error::{StoreError, StoreResult};

/// One run held by one worker until `lease_until`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The run.
    pub run_id: String,
    /// The worker holding it.
    pub worker: String,
    /// When the lease lapses unless extended.
    pub lease_until: Timestamp,
    /// How many times the run has been claimed; a fencing token for this lease.
    pub claim_count: i64,
}

/// What a run waits on while parked.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WakeOn {
    /// A signal with this name.
    Signal {
        /// Signal name.
        name: String,
    },
    /// An answer to this human step.
    HumanStep {
        /// Human step id.
        id: String,
    },
}

/// How a worker gives a run back.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Release {
    /// The run finished; it leaves the queue.
    Done,
    /// The run waits on a signal or human step; claimable again once it is written.
    Park(WakeOn),
    /// The run is runnable again at this time (a timer or a retry back-off).
    RunAt(Timestamp),
}

/// Where a run stands in the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum QueueState {
    /// Claimable from `available_at`.
    Runnable {
        /// Not claimable before this time.
        available_at: Timestamp,
    },
    /// Held by a worker.
    Leased {
        /// The holder.
        worker: String,
        /// The lease end.
        lease_until: Timestamp,
    },
    /// Waiting on a wake condition.
    Parked(WakeOn),
}

/// A claim request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    /// The claiming worker's id.
    pub worker: String,
    /// At most this many runs (1..=1000).
    pub limit: u32,
    /// Lease length (1 s ..= 1 h).
    pub lease: Duration,
}

/// Hands out runnable runs to workers.
///
/// Implementors guarantee: a run is held by at most one unexpired lease at a time; a run whose
/// lease expired is claimable again; a parked run is not claimable until its wake condition is
/// written; heartbeat and release succeed only for the current holder of the current lease
/// (otherwise `LEASE_LOST`).
#[async_trait]
pub trait QueueStore: Send + Sync {
    /// Makes a run runnable now (or leaves it as it is if it is already queued).
    async fn enqueue(&self, run_id: &str) -> StoreResult<()>;
    /// Makes a run runnable from `at`.
    async fn enqueue_at(&self, run_id: &str, at: Timestamp) -> StoreResult<()>;
    /// Claims up to `limit` runnable runs.
    async fn claim(&self, request: &ClaimRequest) -> StoreResult<Vec<Claim>>;
    /// Extends a held lease.
    async fn heartbeat(&self, claim: &Claim, lease: Duration) -> StoreResult<Claim>;
    /// Gives a held run back.
    async fn release(&self, claim: &Claim, release: Release) -> StoreResult<()>;
    /// Where a run stands, if it is queued.
    async fn queue_state(&self, run_id: &str) -> StoreResult<Option<QueueState>>;
    /// A waiter that wakes when new work may be claimable. Subscribe *before* claiming, then
    /// wait when a claim came back empty.
    async fn subscribe(&self) -> StoreResult<Box<dyn WorkWaiter>>;
}

/// Waits for new runnable work.
#[async_trait]
pub trait WorkWaiter: Send {
    /// Returns when work may have become runnable since the subscription (or the last wait), or
    /// after `max_wait`. Returns whether a wake-up was received.
    async fn wait(&mut self, max_wait: Duration) -> StoreResult<bool>;
}

/// The longest lease a worker may take.
pub const MAX_LEASE: Duration = Duration::from_secs(3600);
/// The most runs one claim may take.
pub const MAX_CLAIM_BATCH: u32 = 1000;

pub(crate) fn validate_lease(lease: Duration) -> StoreResult<()> {
    if lease < Duration::from_secs(1) || lease > MAX_LEASE {
        return Err(StoreError::invalid("lease", "must be between 1 s and 1 h"));
    }
    Ok(())
}

pub(crate) fn validate_claim(request: &ClaimRequest) -> StoreResult<()> {
    crate::limits::short_text("worker", &request.worker)?;
    if request.limit == 0 || request.limit > MAX_CLAIM_BATCH {
        return Err(StoreError::invalid(
            "claim limit",
            "must be between 1 and 1000",
        ));
    }
    validate_lease(request.lease)
}

pub(crate) fn wake_columns(wake: &WakeOn) -> (&'static str, &str) {
    match wake {
        WakeOn::Signal { name } => ("SIGNAL", name.as_str()),
        WakeOn::HumanStep { id } => ("HUMAN_STEP", id.as_str()),
    }
}

pub(crate) fn queue_state_from_row(
    state: &str,
    available_at: i64,
    worker: Option<String>,
    lease_until: Option<i64>,
    wake_kind: Option<&str>,
    wake_key: Option<String>,
) -> StoreResult<QueueState> {
    match (state, worker, lease_until, wake_kind, wake_key) {
        ("RUNNABLE", _, _, _, _) => Ok(QueueState::Runnable {
            available_at: Timestamp::from_millis(available_at),
        }),
        ("LEASED", Some(worker), Some(until), _, _) => Ok(QueueState::Leased {
            worker,
            lease_until: Timestamp::from_millis(until),
        }),
        ("PARKED", _, _, Some("SIGNAL"), Some(name)) => {
            Ok(QueueState::Parked(WakeOn::Signal { name }))
        }
        ("PARKED", _, _, Some("HUMAN_STEP"), Some(id)) => {
            Ok(QueueState::Parked(WakeOn::HumanStep { id }))
        }
        (other, ..) => Err(StoreError::corrupt("run_queue", format!("state {other}"))),
    }
}

/// The `PostgreSQL` notification channel for new runnable work.
pub const WORK_CHANNEL: &str = "auto_swe_runnable";
