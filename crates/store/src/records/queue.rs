//! The work queue: runnable runs handed to workers under leases.

use std::time::Duration;

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::error::{StoreError, StoreResult};

/// One run held by one worker until `lease_until` (database time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The run.
    pub run_id: String,
    /// The worker holding it.
    pub worker: String,
    /// When the lease lapses unless extended, by the database's clock.
    pub lease_until: Timestamp,
    /// The lease epoch: how many times the run has been claimed. Strictly increasing per run, it
    /// is the fencing token every execution write of this lease carries.
    pub epoch: i64,
}

impl Claim {
    /// The fencing token of this lease, for every write that belongs to the run's execution.
    #[must_use]
    pub fn token(&self) -> LeaseToken {
        LeaseToken {
            run_id: self.run_id.clone(),
            epoch: self.epoch,
        }
    }
}

/// A fencing token: the run and the lease epoch a write claims to act under.
///
/// The store refuses the write with `LEASE_LOST` unless `epoch` is the run's current epoch and
/// the run is still leased, checked in the write's own transaction while the run's queue row is
/// held, so a worker that lost its lease can never write, whatever its clock says.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaseToken {
    /// The run.
    pub run_id: String,
    /// The lease epoch ([`Claim::epoch`]).
    pub epoch: i64,
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
    /// The run waits on a signal or human step for at most `deadline` (counted on the
    /// database's clock): claimable again once the wake condition is written or the deadline
    /// passes, whichever comes first. Such a run reads as runnable from its deadline.
    ParkUntil {
        /// What wakes it early.
        wake: WakeOn,
        /// When it wakes anyway.
        deadline: Duration,
    },
    /// The run is runnable again after this delay, counted on the database's clock (a timer or
    /// a retry back-off).
    RunAfter(Duration),
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
        /// The lease end (database time).
        lease_until: Timestamp,
        /// The lease epoch.
        epoch: i64,
    },
    /// Waiting on a wake condition.
    Parked(WakeOn),
    /// Waiting on a wake condition for at most until `deadline` (database time), when it becomes
    /// claimable anyway ([`Release::ParkUntil`]).
    ParkedUntil {
        /// What wakes it early.
        wake: WakeOn,
        /// When it is claimable without its wake.
        deadline: Timestamp,
    },
    /// Released as done, or ended by finalize; not claimable.
    Done,
    /// Dead-lettered: `max_attempts` claims in a row ended without a release (each holder
    /// crashed or stalled). Never claimed again.
    Abandoned,
}

/// How to put a run in the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enqueue {
    /// The run.
    pub run_id: String,
    /// Claimable after this delay, counted on the database's clock.
    pub delay: Duration,
    /// After this many claims in a row that end without a release, the run is abandoned
    /// instead of claimed again (1..=100).
    pub max_attempts: u32,
}

impl Enqueue {
    /// Runnable now, with [`DEFAULT_MAX_ATTEMPTS`].
    #[must_use]
    pub fn now(run_id: impl Into<String>) -> Self {
        Self {
            run_id: run_id.into(),
            delay: Duration::ZERO,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        }
    }

    /// Claimable only after `delay`.
    #[must_use]
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Abandons the run after `max_attempts` claims in a row end without a release.
    #[must_use]
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }
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
    /// Only runs this engine drives: a host never claims a run of another engine.
    pub engine: crate::RunEngine,
}

/// Hands out runnable runs to workers.
///
/// Implementors guarantee: every lease time is the database's clock, never the caller's; a run is
/// held by at most one unexpired lease at a time; each claim of a run gets a higher epoch than
/// the last; a run whose lease expired is claimable again, until `max_attempts` claims in a row
/// ended without a release, when it is abandoned (`RUN_ABANDONED`); a parked run is not
/// claimable until its wake condition is written; heartbeat and release succeed only for the
/// current epoch (otherwise `LEASE_LOST`); an ended run is never enqueued or claimed again
/// (`RUN_ENDED`).
#[async_trait]
pub trait QueueStore: Send + Sync {
    /// Makes a run runnable now (or leaves it as it is if it is already queued).
    async fn enqueue(&self, run_id: &str) -> StoreResult<()> {
        self.enqueue_with(&Enqueue::now(run_id)).await
    }
    /// Puts a run in the queue (a run already queued, leased or parked is left as it is; one
    /// released as done is queued again with its epoch kept).
    async fn enqueue_with(&self, enqueue: &Enqueue) -> StoreResult<()>;
    /// Claims up to `limit` runnable runs of the request's engine.
    async fn claim(&self, request: &ClaimRequest) -> StoreResult<Vec<Claim>>;
    /// Extends a held lease.
    async fn heartbeat(&self, claim: &Claim, lease: Duration) -> StoreResult<Claim>;
    /// Gives a held run back.
    async fn release(&self, claim: &Claim, release: Release) -> StoreResult<()>;
    /// Takes a lease on one named run that no live lease holds (queued, parked, released,
    /// abandoned, never enqueued, or leased past its end), with the next epoch: how a reaper or
    /// an operator gets the token to finalize a stranded run through the same fenced
    /// `finalize_run` as its own worker. `LEASE_LOST` while another lease is live, `RUN_ENDED`
    /// once finalized, `RUN_OTHER_ENGINE` when `engine` does not drive the run.
    async fn claim_run(
        &self,
        run_id: &str,
        worker: &str,
        lease: Duration,
        engine: crate::RunEngine,
    ) -> StoreResult<Claim>;
    /// Puts a dead-lettered run back in the queue with its attempt count reset (an operator's
    /// decision); its epoch keeps counting. `STORE_CONFLICT` unless the run is abandoned.
    async fn requeue_abandoned(&self, run_id: &str) -> StoreResult<()>;
    /// Where a run stands, if it was ever queued.
    async fn queue_state(&self, run_id: &str) -> StoreResult<Option<QueueState>>;
    /// The database's clock, which every lease, wake time and timer is compared against.
    async fn database_time(&self) -> StoreResult<Timestamp>;
    /// The database's plan for the claim statement, one line per plan node (`EXPLAIN` on
    /// `PostgreSQL`, `EXPLAIN QUERY PLAN` on `SQLite`), for checking that it is served by the
    /// queue's index. Nothing is claimed.
    async fn claim_plan(&self) -> StoreResult<Vec<String>>;
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
/// How many claims in a row may end without a release before a run is abandoned, by default.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// The longest delay a timer or enqueue may ask for (one year).
pub const MAX_DELAY: Duration = Duration::from_secs(366 * 86_400);

pub(crate) fn validate_enqueue(enqueue: &Enqueue) -> StoreResult<()> {
    crate::limits::short_text("run id", &enqueue.run_id)?;
    validate_delay(enqueue.delay)?;
    if enqueue.max_attempts == 0 || enqueue.max_attempts > 100 {
        return Err(StoreError::invalid(
            "max attempts",
            "must be between 1 and 100",
        ));
    }
    Ok(())
}

pub(crate) fn validate_delay(delay: Duration) -> StoreResult<()> {
    if delay > MAX_DELAY {
        return Err(StoreError::invalid("delay", "must be at most a year"));
    }
    Ok(())
}

/// A duration in whole milliseconds, for SQL arithmetic on the database's clock.
pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

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

/// The columns of one `run_queue` row that say where the run stands.
pub(crate) struct QueueRow {
    pub(crate) state: String,
    pub(crate) available_at: i64,
    pub(crate) worker: Option<String>,
    pub(crate) lease_until: Option<i64>,
    pub(crate) epoch: i64,
    pub(crate) wake_kind: Option<String>,
    pub(crate) wake_key: Option<String>,
}

pub(crate) fn queue_state_from_row(row: QueueRow) -> StoreResult<QueueState> {
    let QueueRow {
        state,
        available_at,
        worker,
        lease_until,
        epoch,
        wake_kind,
        wake_key,
    } = row;
    match (
        state.as_str(),
        worker,
        lease_until,
        wake_kind.as_deref(),
        wake_key,
    ) {
        ("RUNNABLE", _, _, Some("SIGNAL"), Some(name)) => Ok(QueueState::ParkedUntil {
            wake: WakeOn::Signal { name },
            deadline: Timestamp::from_millis(available_at),
        }),
        ("RUNNABLE", _, _, Some("HUMAN_STEP"), Some(id)) => Ok(QueueState::ParkedUntil {
            wake: WakeOn::HumanStep { id },
            deadline: Timestamp::from_millis(available_at),
        }),
        ("RUNNABLE", _, _, _, _) => Ok(QueueState::Runnable {
            available_at: Timestamp::from_millis(available_at),
        }),
        ("LEASED", Some(worker), Some(until), _, _) => Ok(QueueState::Leased {
            worker,
            lease_until: Timestamp::from_millis(until),
            epoch,
        }),
        ("DONE", ..) => Ok(QueueState::Done),
        ("ABANDONED", ..) => Ok(QueueState::Abandoned),
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

/// Refuses a write whose data names another run than its token.
pub(crate) fn same_run(token: &LeaseToken, run_id: &str) -> StoreResult<()> {
    if token.run_id != run_id {
        return Err(StoreError::invalid(
            "lease token",
            "the token is for another run than the write",
        ));
    }
    Ok(())
}
