//! Runs on Temporal with their rows in the store: the run row, its step records, traces, usage
//! and end are written by the worker's own step executors under the run's fenced lease, exactly
//! as on the embedded engine. Only the queue and the journal are Temporal's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_interpreter::{DispatchError, Dispatcher, SignalWait};
use auto_swe_store::{LeaseToken, QueueState, RunEngine, RunStatus, Store};
use auto_swe_worker::{
    DurableEngine, EffectsFactory, EmbeddedEngine, Parking, RunEnd, RunLease, RunWake, WorkerError,
    spill_text, stamp_answerer,
};
use serde_json::Value;

use crate::activities::RunEffects;

/// The lease holder every Temporal worker writes as. A run's activities may run on several
/// workers at once (fan-out branches), so they share the run's one lease instead of fencing each
/// other out; a lease that lapsed (every worker holding it died) is taken again with the next
/// epoch, after which the dead workers' writes are refused.
pub const TEMPORAL_LEASE_HOLDER: &str = "temporal";

/// One run this worker holds: its lease and the dispatcher made under it.
struct Held {
    lease: Mutex<RunLease>,
    dispatcher: Arc<dyn Dispatcher>,
}

impl Held {
    fn lease(&self) -> RunLease {
        self.lease
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn renew(&self, lease: RunLease) {
        *self.lease.lock().unwrap_or_else(PoisonError::into_inner) = lease;
    }
}

/// [`RunEffects`] over the store and the worker's step executors.
pub struct StoreEffects {
    engine: Arc<EmbeddedEngine>,
    store: Store,
    factory: Arc<dyn EffectsFactory>,
    lease: Duration,
    held: Arc<Mutex<HashMap<String, Arc<Held>>>>,
}

impl std::fmt::Debug for StoreEffects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreEffects")
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

fn refused(run_id: &str, error: &WorkerError) -> DispatchError {
    match error {
        WorkerError::RunEnded { .. } => {
            DispatchError::non_retryable("RUN_ENDED", format!("run {run_id} already ended"))
        }
        // Another engine drives the run: no retry on this one makes it Temporal's.
        WorkerError::Store(error @ auto_swe_store::StoreError::OtherEngine { .. }) => {
            DispatchError::non_retryable(error.code(), error.to_string())
        }
        other => DispatchError::failure(other.code(), other.to_string()),
    }
}

impl StoreEffects {
    /// Effects of runs in `store`, made by `factory` (the worker's `StepEffects`), under leases
    /// of `lease` (1 s to 1 h) kept while this worker holds the run.
    #[must_use]
    pub fn new(store: Store, factory: Arc<dyn EffectsFactory>, lease: Duration) -> Self {
        Self {
            engine: Arc::new(
                EmbeddedEngine::new(store.clone(), lease).serving(RunEngine::Temporal),
            ),
            store,
            factory,
            lease,
            held: Arc::default(),
        }
    }

    fn held(&self, run_id: &str) -> Option<Arc<Held>> {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(run_id)
            .cloned()
    }

    fn forget(&self, run_id: &str) {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(run_id);
    }

    /// The run's lease and dispatcher: the one held, renewed, or a fresh one.
    /// The token of the lease [`StoreEffects::hold`] holds for `run_id`, for a store write under
    /// it; a refusal in the interpreter's terms when the run cannot be held.
    async fn lease_token(&self, run_id: &str) -> Result<LeaseToken, DispatchError> {
        self.hold(run_id)
            .await
            .map(|held| LeaseToken::from(&held.lease()))
            .map_err(|error| refused(run_id, &error))
    }

    async fn hold(&self, run_id: &str) -> Result<Arc<Held>, WorkerError> {
        if let Some(held) = self.held(run_id) {
            match self.engine.heartbeat(&held.lease()).await {
                Ok(renewed) => {
                    held.renew(renewed);
                    return Ok(held);
                }
                Err(error @ WorkerError::RunEnded { .. }) => {
                    self.forget(run_id);
                    return Err(error);
                }
                // Lapsed or taken: make the run's effects again under the lease it has now.
                Err(_) => self.forget(run_id),
            }
        }
        let lease = self.take(run_id).await?;
        let task = self.engine.open(&lease).await?;
        let dispatcher = self
            .factory
            .for_run(&lease, &task, Arc::new(Parking::new()))?;
        let held = Arc::new(Held {
            lease: Mutex::new(lease),
            dispatcher,
        });
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(run_id.to_owned(), Arc::clone(&held));
        self.keep(run_id.to_owned(), Arc::downgrade(&held));
        Ok(held)
    }

    /// Takes the run's lease, or shares it when another Temporal worker holds it.
    async fn take(&self, run_id: &str) -> Result<RunLease, WorkerError> {
        match self
            .store
            .claim_run(
                run_id,
                TEMPORAL_LEASE_HOLDER,
                self.lease,
                RunEngine::Temporal,
            )
            .await
        {
            Ok(claim) => Ok(RunLease::from(claim)),
            Err(error) if error.code() == "LEASE_LOST" => {
                let state = self
                    .store
                    .queue_state(run_id)
                    .await
                    .map_err(WorkerError::Store)?;
                match state {
                    Some(QueueState::Leased {
                        worker,
                        lease_until,
                        epoch,
                    }) if worker == TEMPORAL_LEASE_HOLDER => {
                        let shared = RunLease {
                            run_id: run_id.to_owned(),
                            worker,
                            fencing_token: epoch,
                            expires_at_ms: lease_until.as_millis(),
                        };
                        // Renewing it proves it is still the run's current lease.
                        self.engine.heartbeat(&shared).await
                    }
                    // Another holder (an operator's cancel) has it: not this worker's to make.
                    _ => Err(WorkerError::LeaseLost {
                        run_id: run_id.to_owned(),
                    }),
                }
            }
            Err(error) if error.code() == "RUN_ENDED" => Err(WorkerError::RunEnded {
                run_id: run_id.to_owned(),
            }),
            Err(error) => Err(WorkerError::Store(error)),
        }
    }

    /// Renews a held lease every third of its length while this worker holds the run (a step
    /// can outlast a lease); stops once the run is forgotten or the lease is lost.
    fn keep(&self, run_id: String, held: Weak<Held>) {
        let engine = Arc::clone(&self.engine);
        // Weak: once these effects are dropped (the worker stops), its leases are let lapse.
        let map = Arc::downgrade(&self.held);
        let every = self.lease / 3;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(held) = held.upgrade() else { return };
                match engine.heartbeat(&held.lease()).await {
                    Ok(renewed) => held.renew(renewed),
                    Err(error) => {
                        tracing::debug!(run_id = %run_id, code = error.code(), "the run's lease is no longer held");
                        let Some(map) = map.upgrade() else { return };
                        let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
                        if map
                            .get(&run_id)
                            .is_some_and(|current| Arc::ptr_eq(current, &held))
                        {
                            map.remove(&run_id);
                        }
                        return;
                    }
                }
            }
        });
    }
}

#[async_trait]
impl RunEffects for StoreEffects {
    #[tracing::instrument(level = "debug", skip(self))]
    async fn dispatcher(&self, run_id: &str) -> Result<Arc<dyn Dispatcher>, DispatchError> {
        self.hold(run_id)
            .await
            .map(|held| Arc::clone(&held.dispatcher))
            .map_err(|error| refused(run_id, &error))
    }

    #[tracing::instrument(level = "debug", skip(self, wait, payload))]
    async fn human_answer(
        &self,
        run_id: &str,
        wait: &SignalWait,
        payload: Value,
    ) -> Result<Value, DispatchError> {
        stamp_answerer(&self.store, run_id, wait, payload).await
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn waiting(
        &self,
        run_id: &str,
        waiting: bool,
        on: Option<&str>,
    ) -> Result<(), DispatchError> {
        let held = self
            .hold(run_id)
            .await
            .map_err(|error| refused(run_id, &error))?;
        let lease = held.lease();
        match (waiting, on) {
            // Parked on its wake, as on the embedded engine: the run holds no lease while it
            // waits, and readers see what wakes it. Its next effect takes the lease again.
            (true, Some(signal)) => {
                let wake = RunWake {
                    signal: signal.to_owned(),
                    deadline: None,
                };
                let parked = self.engine.park(&lease, wake).await;
                self.forget(run_id);
                parked.map_err(|error| refused(run_id, &error))
            }
            (waiting, _) => {
                let status = if waiting {
                    RunStatus::Waiting
                } else {
                    RunStatus::Running
                };
                self.store
                    .set_run_status(&LeaseToken::from(&lease), status)
                    .await
                    .map_err(|error| refused(run_id, &WorkerError::Store(error)))
            }
        }
    }

    #[tracing::instrument(level = "debug", skip(self, text))]
    async fn spill(
        &self,
        run_id: &str,
        text: &str,
        from_bytes: usize,
    ) -> Result<String, DispatchError> {
        let token = self.lease_token(run_id).await?;
        spill_text(
            &*self.store,
            &token,
            "text/plain; charset=utf-8",
            text,
            from_bytes,
        )
        .await
        .map_err(|error| refused(run_id, &WorkerError::Store(error)))
    }

    #[tracing::instrument(level = "debug", skip(self, end))]
    async fn finish(&self, run_id: &str, end: &RunEnd) -> Result<(), DispatchError> {
        let held = match self.hold(run_id).await {
            Ok(held) => held,
            // Recorded already (a retry after the write landed): nothing to do.
            Err(WorkerError::RunEnded { .. }) => return Ok(()),
            Err(error) => return Err(refused(run_id, &error)),
        };
        let completed = self.engine.complete(&held.lease(), end.clone()).await;
        self.forget(run_id);
        match completed {
            Ok(()) | Err(WorkerError::RunEnded { .. }) => Ok(()),
            Err(error) => Err(refused(run_id, &error)),
        }
    }
}
