//! The embedded engine: runs made durable by the store alone — the work queue's fenced leases
//! for claiming, the run journal for effects, finalize for the end.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_store::{
    Claim, ClaimRequest, FinalizeOutcome, FinalizeRun, JournalAppend, LeaseToken, QueueState,
    Release, RunEngine, RunStatus, Spend, Store, TerminalStatus, Timestamp, WakeOn,
};
use serde_json::Value;

use crate::engine::{
    DurableEngine, EffectHistory, EffectKey, EffectKind, ExecutionLookup, ExecutionState,
    RecordedEffect, RunEnd, RunLease, RunTask, RunWake,
};

/// The name the run reaper takes a stranded run's lease under.
const REAPER: &str = "run-reaper";
use crate::error::WorkerError;

/// A [`DurableEngine`] over one [`Store`].
#[derive(Debug, Clone)]
pub struct EmbeddedEngine {
    store: Store,
    lease: Duration,
    runs: RunEngine,
}

impl EmbeddedEngine {
    /// An engine whose leases last `lease` (1 s to 1 h, as the store allows) unless renewed,
    /// over the embedded engine's runs.
    #[must_use]
    pub fn new(store: Store, lease: Duration) -> Self {
        Self {
            store,
            lease,
            runs: RunEngine::Embedded,
        }
    }

    /// The same store machinery (leases, fenced writes, finalize) over the runs of `engine`:
    /// how a Temporal host holds and ends its runs' rows. Its claims and its reaper's take only
    /// runs of that engine; the store refuses any other (`RUN_OTHER_ENGINE`).
    #[must_use]
    pub fn serving(mut self, engine: RunEngine) -> Self {
        self.runs = engine;
        self
    }

    /// The store it runs on.
    #[must_use]
    pub fn store(&self) -> &Store {
        &self.store
    }
}

fn claim_of(lease: &RunLease) -> Claim {
    Claim {
        run_id: lease.run_id.clone(),
        worker: lease.worker.clone(),
        lease_until: Timestamp::from_millis(lease.expires_at_ms),
        epoch: lease.fencing_token,
    }
}

impl From<Claim> for RunLease {
    /// The lease a store claim is: its epoch is the fencing token.
    fn from(claim: Claim) -> Self {
        Self {
            run_id: claim.run_id,
            worker: claim.worker,
            fencing_token: claim.epoch,
            expires_at_ms: claim.lease_until.as_millis(),
        }
    }
}

impl From<&RunLease> for LeaseToken {
    /// The store's fence a lease writes under: its fencing token is the run's epoch.
    fn from(lease: &RunLease) -> Self {
        LeaseToken {
            run_id: lease.run_id.clone(),
            epoch: lease.fencing_token,
        }
    }
}

#[async_trait]
impl ExecutionLookup for EmbeddedEngine {
    fn engine(&self) -> RunEngine {
        self.runs
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn execution_state(&self, run_id: &str) -> Result<ExecutionState, WorkerError> {
        let state = self
            .store
            .queue_state(run_id)
            .await
            .map_err(|e| WorkerError::from_store(run_id, e))?;
        Ok(match state {
            // Never queued, dead-lettered, or released without its end written.
            Some(QueueState::Abandoned | QueueState::Done) | None => ExecutionState::Gone,
            // Queued, held (a lapsed lease is taken again by the next claim) or parked: the
            // queue will hand it to a worker.
            Some(_) => ExecutionState::Live,
        })
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn end_stranded(
        &self,
        run_id: &str,
        status: TerminalStatus,
    ) -> Result<bool, WorkerError> {
        let claim = match self
            .store
            .claim_run(run_id, REAPER, self.lease, self.runs)
            .await
        {
            Ok(claim) => claim,
            Err(error) if matches!(error.code(), "LEASE_LOST" | "RUN_ENDED") => return Ok(false),
            Err(error) => return Err(WorkerError::from_store(run_id, error)),
        };
        let finalize = FinalizeRun {
            status: RunStatus::Ended(status),
            usage: Spend::default(),
            result: None,
        };
        match self.store.finalize_run(&claim.token(), finalize).await {
            Ok(FinalizeOutcome::AlreadyFinalized) => Ok(false),
            Ok(_) => Ok(true),
            Err(error) if matches!(error.code(), "LEASE_LOST" | "RUN_ENDED") => Ok(false),
            Err(error) => Err(WorkerError::from_store(run_id, error)),
        }
    }
}

#[async_trait]
impl DurableEngine for EmbeddedEngine {
    #[tracing::instrument(level = "debug", skip(self))]
    async fn acquire(&self, worker: &str, limit: u32) -> Result<Vec<RunLease>, WorkerError> {
        let request = ClaimRequest {
            worker: worker.to_owned(),
            limit,
            lease: self.lease,
            engine: self.runs,
        };
        let claims = self
            .store
            .claim(&request)
            .await
            .map_err(|e| WorkerError::from_store("", e))?;
        Ok(claims.into_iter().map(RunLease::from).collect())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run_id = %lease.run_id))]
    async fn open(&self, lease: &RunLease) -> Result<RunTask, WorkerError> {
        let run_id = &lease.run_id;
        let run = self
            .store
            .get_run(run_id)
            .await
            .map_err(|e| WorkerError::from_store(run_id, e))?;
        if run.status.is_terminal() {
            return Err(WorkerError::RunEnded {
                run_id: run_id.clone(),
            });
        }
        if run.status != RunStatus::Running {
            self.store
                .set_run_status(&LeaseToken::from(lease), RunStatus::Running)
                .await
                .map_err(|e| WorkerError::from_store(run_id, e))?;
        }
        let input = match &run.run_input_id {
            Some(id) => {
                self.store
                    .get_run_input(id)
                    .await
                    .map_err(|e| WorkerError::from_store(run_id, e))?
                    .payload
            }
            None => Value::Object(serde_json::Map::new()),
        };
        Ok(RunTask {
            spec_snapshot: run.spec_snapshot,
            input,
            history: Arc::new(StoreHistory {
                store: self.store.clone(),
                token: LeaseToken::from(lease),
            }),
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run_id = %lease.run_id))]
    async fn heartbeat(&self, lease: &RunLease) -> Result<RunLease, WorkerError> {
        self.store
            .heartbeat(&claim_of(lease), self.lease)
            .await
            .map(RunLease::from)
            .map_err(|e| WorkerError::from_store(&lease.run_id, e))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run_id = %lease.run_id))]
    async fn complete(&self, lease: &RunLease, end: RunEnd) -> Result<(), WorkerError> {
        let result = match end.result {
            Some(document) => Some(
                crate::spill::spill_document(&*self.store, &LeaseToken::from(lease), document)
                    .await
                    .map_err(|e| WorkerError::from_store(&lease.run_id, e))?,
            ),
            None => None,
        };
        let finalize = FinalizeRun {
            status: RunStatus::Ended(end.status),
            usage: Spend::default(),
            result,
        };
        match self
            .store
            .finalize_run(&LeaseToken::from(lease), finalize)
            .await
            .map_err(|e| WorkerError::from_store(&lease.run_id, e))?
        {
            FinalizeOutcome::AlreadyFinalized => Err(WorkerError::RunEnded {
                run_id: lease.run_id.clone(),
            }),
            _ => Ok(()),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run_id = %lease.run_id))]
    async fn cancel_requested(&self, lease: &RunLease) -> Result<bool, WorkerError> {
        self.store
            .get_run(&lease.run_id)
            .await
            .map(|run| run.cancel_requested_at.is_some())
            .map_err(|e| WorkerError::from_store(&lease.run_id, e))
    }

    async fn wait_for_work(&self, max: Duration) {
        match self.store.subscribe().await {
            Ok(mut waiter) => {
                if let Err(error) = waiter.wait(max).await {
                    tracing::debug!(%error, "work waiter failed; sleeping instead");
                    tokio::time::sleep(max).await;
                }
            }
            Err(_) => tokio::time::sleep(max).await,
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run_id = %lease.run_id, signal = %wake.signal))]
    async fn park(&self, lease: &RunLease, wake: RunWake) -> Result<(), WorkerError> {
        // A run waiting on anything is `WAITING` for readers; the queue row holds the wake.
        self.store
            .set_run_status(&LeaseToken::from(lease), RunStatus::Waiting)
            .await
            .map_err(|e| WorkerError::from_store(&lease.run_id, e))?;
        let on = WakeOn::Signal { name: wake.signal };
        let release = match wake.deadline {
            Some(deadline) => Release::ParkUntil {
                wake: on,
                deadline: deadline.clamp(Duration::from_millis(1), MAX_PARK),
            },
            None => Release::Park(on),
        };
        self.release(lease, release).await
    }
}

/// The longest a run parks before it is woken anyway (and re-parks if its wait is longer): the
/// store's longest delay.
const MAX_PARK: Duration = Duration::from_secs(365 * 24 * 3600);

impl EmbeddedEngine {
    async fn release(&self, lease: &RunLease, release: Release) -> Result<(), WorkerError> {
        self.store
            .release(&claim_of(lease), release)
            .await
            .map_err(|e| WorkerError::from_store(&lease.run_id, e))
    }
}

/// One run's journal in the store, written under one lease token.
struct StoreHistory {
    store: Store,
    token: LeaseToken,
}

impl StoreHistory {
    fn decode(&self, entry: auto_swe_store::JournalEntry) -> Result<RecordedEffect, WorkerError> {
        let kind = EffectKind::parse(&entry.kind).ok_or_else(|| WorkerError::JournalCorrupt {
            run_id: self.token.run_id.clone(),
            recording_id: entry.recording_id.clone(),
            kind: entry.kind.clone(),
            reason: "unknown effect kind".to_owned(),
        })?;
        Ok(RecordedEffect {
            key: EffectKey {
                recording_id: entry.recording_id,
                occurrence: entry.attempt,
                kind,
            },
            result: entry.result,
        })
    }
}

#[async_trait]
impl EffectHistory for StoreHistory {
    async fn load(&self) -> Result<Vec<RecordedEffect>, WorkerError> {
        let run_id = &self.token.run_id;
        self.store
            .read_journal(run_id)
            .await
            .map_err(|e| WorkerError::from_store(run_id, e))?
            .into_iter()
            .map(|entry| self.decode(entry))
            .collect()
    }

    async fn record(&self, effect: RecordedEffect) -> Result<RecordedEffect, WorkerError> {
        let append = JournalAppend {
            run_id: self.token.run_id.clone(),
            recording_id: effect.key.recording_id,
            attempt: effect.key.occurrence,
            kind: effect.key.kind.as_str().to_owned(),
            result: effect.result,
        };
        let (entry, _) = self
            .store
            .append_journal(&self.token, append)
            .await
            .map_err(|e| WorkerError::from_store(&self.token.run_id, e))?;
        self.decode(entry)
    }
}
