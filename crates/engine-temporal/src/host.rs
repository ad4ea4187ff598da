//! The host's side of runs on Temporal, behind the worker's seams: a launch starts the run's
//! workflow ([`RunStarter`]), the reaper asks Temporal about a run ([`ExecutionLookup`]), and
//! the signals and stop requests hosts write to the store reach the workflow through
//! [`SignalRelay`]. The CLI and the server keep writing the store exactly as for the embedded
//! engine.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_spec::TerminalStatus;
use auto_swe_store::{Relayed, Run, RunEngine, Store, Timestamp};
use auto_swe_worker::{EmbeddedEngine, ExecutionLookup, ExecutionState, RunStarter, WorkerError};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::client::{RunState, TemporalEngine};
use crate::error::TemporalError;

impl From<TemporalError> for WorkerError {
    fn from(error: TemporalError) -> Self {
        let retryable = matches!(
            error,
            TemporalError::Unavailable { .. } | TemporalError::Request(_)
        );
        WorkerError::Engine {
            code: error.code(),
            message: error.to_string(),
            retryable,
        }
    }
}

#[async_trait]
impl RunStarter for TemporalEngine {
    fn engine(&self) -> RunEngine {
        RunEngine::Temporal
    }

    async fn ready(&self) -> Result<(), WorkerError> {
        TemporalEngine::ready(self).await.map_err(WorkerError::from)
    }

    async fn start(&self, run: &Run, input: &Value) -> Result<(), WorkerError> {
        match self
            .launch(&run.id, run.spec_snapshot.clone(), input.clone())
            .await
        {
            // Workflow id = run id: a second start of the same run is the first.
            Ok(()) | Err(TemporalError::AlreadyStarted { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }
}

/// The reaper's questions about runs on Temporal: Temporal says where the workflow stands, and a
/// stranded run ends through the store's fenced, bill-once finalize.
#[derive(Clone)]
pub struct TemporalLookup {
    temporal: TemporalEngine,
    store: Arc<EmbeddedEngine>,
}

impl std::fmt::Debug for TemporalLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TemporalLookup").finish_non_exhaustive()
    }
}

impl TemporalLookup {
    /// Looks runs of `store` up on `temporal`.
    #[must_use]
    pub fn new(temporal: TemporalEngine, store: Store) -> Self {
        Self {
            temporal,
            store: Arc::new(
                EmbeddedEngine::new(store, Duration::from_secs(30)).serving(RunEngine::Temporal),
            ),
        }
    }
}

#[async_trait]
impl ExecutionLookup for TemporalLookup {
    fn engine(&self) -> RunEngine {
        RunEngine::Temporal
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn execution_state(&self, run_id: &str) -> Result<ExecutionState, WorkerError> {
        let state = match self.temporal.describe(run_id).await {
            Ok(state) => state,
            Err(TemporalError::RunNotFound { .. }) => return Ok(ExecutionState::Gone),
            Err(error) => return Err(error.into()),
        };
        Ok(match state {
            RunState::Running => ExecutionState::Live,
            // The workflow ended and says how, but the run's row did not take its end.
            RunState::Completed => match self.temporal.wait_for_end(run_id).await {
                Ok(end) => ExecutionState::Finished(end.status),
                Err(_) => ExecutionState::Gone,
            },
            RunState::Cancelled => ExecutionState::Finished(TerminalStatus::Cancelled),
            RunState::Failed | RunState::Terminated | RunState::TimedOut => ExecutionState::Gone,
        })
    }

    async fn end_stranded(
        &self,
        run_id: &str,
        status: TerminalStatus,
    ) -> Result<bool, WorkerError> {
        self.store.end_stranded(run_id, status).await
    }
}

/// How often the relay looks for what to forward when it found nothing last time.
pub const RELAY_INTERVAL: Duration = Duration::from_millis(200);

/// How long an item waits for its run's workflow to exist. A launch records the run and starts
/// its workflow within seconds; a workflow Temporal still does not know after this was never
/// started or was removed (an operator's terminate and the retention period), and the item is
/// dropped with a warning rather than kept at the head of every pass.
pub const RELAY_GIVE_UP: Duration = Duration::from_mins(5);

/// Forwards the signals and stop requests hosts write to the store for runs on Temporal, each
/// to its run's workflow, and marks each one forwarded once Temporal took it. A signal goes
/// under a request id made of the run and its position, so sending it again after a crash
/// between the send and the mark delivers it once.
#[derive(Debug, Clone)]
pub struct SignalRelay {
    store: Store,
    temporal: TemporalEngine,
}

/// What one relay pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelayPass {
    /// Items Temporal took.
    pub forwarded: usize,
    /// Items for runs that ended before Temporal took them, or whose workflow Temporal did not
    /// know for [`RELAY_GIVE_UP`], marked and dropped.
    pub dropped: usize,
    /// Items left for a later pass (the workflow not started yet, Temporal unreachable).
    pub left: usize,
}

impl SignalRelay {
    /// Relays `store`'s items for runs on Temporal to `temporal`.
    #[must_use]
    pub fn new(store: Store, temporal: TemporalEngine) -> Self {
        Self { store, temporal }
    }

    /// One pass over up to 100 waiting items.
    pub async fn pass(&self) -> Result<RelayPass, WorkerError> {
        let items = self
            .store
            .pending_relays(RunEngine::Temporal, 100)
            .await
            .map_err(WorkerError::Store)?;
        let mut pass = RelayPass::default();
        if items.is_empty() {
            return Ok(pass);
        }
        let now = self
            .store
            .database_time()
            .await
            .map_err(WorkerError::Store)?;
        for item in items {
            let sent = match &item {
                Relayed::Signal(signal) => {
                    let request_id = format!("auto-swe-signal-{}-{}", signal.run_id, signal.seq);
                    self.temporal
                        .deliver(
                            &signal.run_id,
                            &signal.name,
                            signal.payload.clone(),
                            Some(request_id),
                        )
                        .await
                }
                Relayed::Cancel { run_id, .. } => self.temporal.cancel(run_id).await,
                other => {
                    tracing::warn!(run_id = other.run_id(), "an item the relay does not know");
                    pass.left += 1;
                    continue;
                }
            };
            match sent {
                Ok(()) => pass.forwarded += 1,
                Err(TemporalError::RunNotFound { .. }) if self.ended(item.run_id()).await? => {
                    pass.dropped += 1;
                }
                Err(TemporalError::RunNotFound { .. }) if given_up(&item, now) => {
                    tracing::warn!(
                        run_id = item.run_id(),
                        "no workflow for this run after the relay's wait: the item is dropped"
                    );
                    pass.dropped += 1;
                }
                Err(error @ TemporalError::PayloadTooLarge { .. }) => {
                    tracing::warn!(
                        run_id = item.run_id(),
                        %error,
                        "the item can never be delivered: it is dropped"
                    );
                    pass.dropped += 1;
                }
                Err(error) => {
                    tracing::debug!(run_id = item.run_id(), code = error.code(), %error, "not forwarded yet");
                    pass.left += 1;
                    continue;
                }
            }
            self.store
                .mark_relayed(&item)
                .await
                .map_err(WorkerError::Store)?;
        }
        Ok(pass)
    }

    /// Whether the run has ended (or is gone from the store).
    async fn ended(&self, run_id: &str) -> Result<bool, WorkerError> {
        match self.store.get_run(run_id).await {
            Ok(run) => Ok(run.status.is_terminal()),
            Err(error) if error.code() == "STORE_NOT_FOUND" => Ok(true),
            Err(error) => Err(WorkerError::Store(error)),
        }
    }

    /// Relays until `shutdown` fires: again at once after a pass that moved something, after
    /// [`RELAY_INTERVAL`] otherwise. A failed pass is logged and tried again.
    pub async fn serve(&self, shutdown: CancellationToken) {
        let span = tracing::info_span!("temporal.relay");
        async {
            loop {
                let pause = match self.pass().await {
                    Ok(pass) if pass.forwarded + pass.dropped > 0 => Duration::ZERO,
                    Ok(_) => RELAY_INTERVAL,
                    Err(error) => {
                        tracing::warn!(code = error.code(), %error, "relay pass failed");
                        RELAY_INTERVAL
                    }
                };
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(pause) => {}
                }
            }
        }
        .instrument(span)
        .await;
    }
}

/// Whether `item` has waited for its workflow longer than [`RELAY_GIVE_UP`] at `now`.
fn given_up(item: &Relayed, now: Timestamp) -> bool {
    let since = match item {
        Relayed::Signal(signal) => signal.received_at,
        Relayed::Cancel { requested_at, .. } => *requested_at,
        _ => return false,
    };
    now.as_millis() - since.as_millis()
        > i64::try_from(RELAY_GIVE_UP.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use auto_swe_store::{Relayed, Timestamp};

    use super::{RELAY_GIVE_UP, given_up};

    #[test]
    fn an_item_is_given_up_only_after_the_relays_wait() {
        let stop = Relayed::Cancel {
            run_id: "r".to_owned(),
            requested_at: Timestamp::from_millis(1_000),
        };
        let wait = i64::try_from(RELAY_GIVE_UP.as_millis()).unwrap_or(i64::MAX);
        assert!(!given_up(&stop, Timestamp::from_millis(1_000)));
        assert!(!given_up(&stop, Timestamp::from_millis(1_000 + wait)));
        assert!(given_up(&stop, Timestamp::from_millis(1_001 + wait)));
    }
}
