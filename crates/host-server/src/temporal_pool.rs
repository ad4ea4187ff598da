//! The worker pool on a Temporal cluster: Temporal workers with the worker's own executors over
//! the store, the relay that takes the store's signals and stop requests to the workflows, and
//! a reaper that asks Temporal about the runs it drives.

use std::sync::Arc;
use std::time::Duration;

use auto_swe_engine_temporal::{
    RunEffects, SignalRelay, StoreEffects, TemporalEngine, TemporalLookup, TemporalWorker,
};
use auto_swe_store::Store;
use auto_swe_worker::{Reaper, ReaperConfig, StepEffects, WorkerServices};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::PoolConfig;
use crate::state::WorkerGauge;

/// Starts `config.workers` Temporal workers, the relay and the reaper into `tasks`, all
/// stopped by `stop`.
pub(crate) fn start(
    store: &Store,
    config: &PoolConfig,
    gauge: &WorkerGauge,
    services: &Arc<WorkerServices>,
    engine: &TemporalEngine,
    stop: &CancellationToken,
    tasks: &mut JoinSet<()>,
) {
    let effects: Arc<dyn RunEffects> = Arc::new(StoreEffects::new(
        store.clone(),
        Arc::new(StepEffects::new(Arc::clone(services))),
        Duration::from_secs(config.lease_seconds),
    ));
    for _ in 0..config.workers {
        let worker = TemporalWorker::new(engine.settings().clone(), Arc::clone(&effects));
        let running = gauge.started();
        let token = stop.clone();
        // A run's workflow state is not `Send`: each worker polls on a thread of its own.
        tasks.spawn_blocking(move || {
            let _running = running;
            if let Err(error) = worker.run_blocking(token) {
                tracing::error!(%error, code = error.code(), "a Temporal worker stopped");
            }
        });
    }
    let relay = SignalRelay::new(store.clone(), engine.clone());
    let token = stop.clone();
    tasks.spawn(async move { relay.serve(token).await });
    let reaper = Reaper::new(
        store.clone(),
        Arc::new(TemporalLookup::new(engine.clone(), store.clone())),
        ReaperConfig::default(),
    );
    let token = stop.clone();
    tasks.spawn(async move { reaper.serve(token).await });
}
