//! Local mode on a Temporal cluster (`engine = "temporal"` in the configuration, or
//! `AUTO_SWE_ENGINE=temporal`): launches start the run's workflow, and `auto-swe worker` runs a
//! Temporal worker over the store with the relay that takes the store's signals, answers and
//! stops to the workflows, and a reaper that asks Temporal about them.

use std::sync::Arc;
use std::time::Duration;

use auto_swe_engine_temporal::{
    RunEffects, SignalRelay, StoreEffects, TemporalEngine, TemporalLookup, TemporalWorker,
};
use auto_swe_store::{RunEngine, Store};
use auto_swe_worker::{LocalCi, Reaper, ReaperConfig, StepEffects, WorkerServices};
use tokio_util::sync::CancellationToken;

/// The engine runs start on: `flag` when given, else `AUTO_SWE_ENGINE`, else the
/// configuration's `engine`.
pub(crate) fn chosen(flag: Option<RunEngine>) -> anyhow::Result<RunEngine> {
    if let Some(engine) = flag {
        return Ok(engine);
    }
    match std::env::var("AUTO_SWE_ENGINE")
        .ok()
        .filter(|e| !e.is_empty())
    {
        Some(engine) => parse_engine(&engine).map_err(|e| anyhow::anyhow!("AUTO_SWE_ENGINE: {e}")),
        None => Ok(crate::config::load()?.engine),
    }
}

/// Reads `embedded` or `temporal`.
pub(crate) fn parse_engine(text: &str) -> Result<RunEngine, String> {
    RunEngine::from_setting(text).map_err(|_| format!("{text:?}: embedded or temporal"))
}

/// The Temporal cluster the configuration's `[temporal]` (and `AUTO_SWE_TEMPORAL_*`) names,
/// connected; `ENGINE_UNAVAILABLE` naming its address when it does not answer.
pub(crate) async fn connect() -> anyhow::Result<TemporalEngine> {
    let env = |name: &str| std::env::var(name).ok();
    let settings = crate::config::load()?
        .temporal
        .settings(&env)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    TemporalEngine::connect(settings)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// Serves runs on `engine` until `shutdown` fires: a Temporal worker making effects with
/// `services` under leases of `lease`, the relay, the reaper, and local CI unless `ci` is off.
pub(crate) async fn serve(
    store: &Store,
    services: &Arc<WorkerServices>,
    engine: &TemporalEngine,
    lease: Duration,
    ci: bool,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let effects: Arc<dyn RunEffects> = Arc::new(StoreEffects::new(
        store.clone(),
        Arc::new(StepEffects::new(Arc::clone(services))),
        lease,
    ));
    let worker = TemporalWorker::new(engine.settings().clone(), effects);
    let token = shutdown.clone();
    // A run's workflow state is not `Send`: the worker polls on a thread of its own.
    let polling = tokio::task::spawn_blocking(move || worker.run_blocking(token));
    let mut tasks = tokio::task::JoinSet::new();
    let relay = SignalRelay::new(store.clone(), engine.clone());
    let token = shutdown.clone();
    tasks.spawn(async move { relay.serve(token).await });
    let reaper = Reaper::new(
        store.clone(),
        Arc::new(TemporalLookup::new(engine.clone(), store.clone())),
        ReaperConfig::default(),
    );
    let token = shutdown.clone();
    tasks.spawn(async move { reaper.serve(token).await });
    if ci {
        let judge = LocalCi::new(Arc::clone(services));
        let token = shutdown.clone();
        tasks.spawn(async move { judge.serve(token).await });
    }
    let polled = polling.await;
    // The worker stops on shutdown or on its own failure: either way, so does the rest.
    shutdown.cancel();
    while tasks.join_next().await.is_some() {}
    polled
        .map_err(|e| anyhow::anyhow!("the Temporal worker's thread: {e}"))?
        .map_err(|e| anyhow::anyhow!("{e}"))
}
