//! A dev server's address, workers on threads of their own, and recording steps.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_engine_temporal::{
    ActivityLimits, RunEffects, TemporalEngine, TemporalSettings, TemporalWorker,
};
use auto_swe_interpreter::{
    CancellationToken, DispatchError, Dispatcher, SignalWait, SignalWake, StepDispatch, StepEnd,
    StepRecord,
};
use auto_swe_sandbox::{LocalBackend, LocalConfig, LocalRoot};
use auto_swe_worker::RunEnd;
use serde_json::{Value, json};

/// The dev server's address; `None` (the test skips) when none is configured, unless
/// `AUTO_SWE_REQUIRE_TEMPORAL=1`, when a missing server fails the test.
pub(crate) fn temporal_address() -> Option<String> {
    match std::env::var("AUTO_SWE_TEMPORAL_ADDRESS") {
        Ok(address) if !address.is_empty() => Some(address),
        _ => {
            assert!(
                std::env::var("AUTO_SWE_REQUIRE_TEMPORAL").as_deref() != Ok("1"),
                "AUTO_SWE_REQUIRE_TEMPORAL=1 but AUTO_SWE_TEMPORAL_ADDRESS is not set"
            );
            eprintln!("skipped: no Temporal server (AUTO_SWE_TEMPORAL_ADDRESS)");
            None
        }
    }
}

/// A task queue no other test polls.
pub(crate) fn task_queue(name: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let at = std::time::UNIX_EPOCH
        .elapsed()
        .unwrap_or_default()
        .as_nanos();
    format!(
        "{name}-{}-{at}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A run id no other test uses.
pub(crate) fn run_id(name: &str) -> String {
    task_queue(&format!("run-{name}"))
}

/// Short activity limits, so a lost worker is noticed in seconds.
pub(crate) fn quick_limits() -> ActivityLimits {
    ActivityLimits {
        heartbeat_timeout_secs: 2,
        ..ActivityLimits::default()
    }
}

/// A worker on a thread of its own (run workflows are not `Send`), stopped when dropped.
pub(crate) struct WorkerThread {
    shutdown: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl WorkerThread {
    pub(crate) fn start(settings: TemporalSettings, effects: Arc<dyn RunEffects>) -> Self {
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let thread = std::thread::spawn(move || {
            if let Err(error) = TemporalWorker::new(settings, effects).run_blocking(stop) {
                eprintln!("worker ended: {error}");
            }
        });
        Self {
            shutdown,
            thread: Some(thread),
        }
    }
}

impl Drop for WorkerThread {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Steps that answer with their recording id and inputs, and remember every call. `flaky`
/// fails its first attempt (retryably); `slow` works for `slow_ms` unless cancelled; `big` and
/// `huge` answer just under 2 MiB and 3 MiB of text.
#[derive(Default)]
pub(crate) struct Steps {
    calls: Mutex<Vec<String>>,
    records: Mutex<Vec<(String, StepEnd)>>,
    slow_ms: u64,
}

impl Steps {
    /// Steps whose `slow` step works for `slow_ms`.
    pub(crate) fn slow(slow_ms: u64) -> Self {
        Self {
            slow_ms,
            ..Self::default()
        }
    }

    pub(crate) fn calls(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn records(&self) -> Vec<(String, StepEnd)> {
        let mut records = self
            .records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        records.sort_by(|a, b| a.0.cmp(&b.0));
        records
    }
}

#[async_trait]
impl Dispatcher for Steps {
    async fn dispatch_step(
        &self,
        request: &StepDispatch,
        cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request.recording_id.clone());
        match request.step.as_str() {
            "flaky" if request.attempt == 1 => {
                Err(DispatchError::failure("FLAKY", "the first attempt fails"))
            }
            "broken" => Err(DispatchError::non_retryable("BROKEN", "never works")),
            // 50 bytes under the engine's ceiling for a step's reply (so the server must take it),
            // and well over what a Temporal payload carries (2 MiB).
            "big" => Ok(json!({"text": "x".repeat(2_080_700)})),
            "huge" => Ok(json!({"text": "x".repeat(3 * 1024 * 1024)})),
            "slow" => {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(self.slow_ms)) => {}
                    () = cancellation.cancelled() => return Err(DispatchError::cancelled("stopped")),
                }
                Ok(json!({"node": request.recording_id, "slept": true}))
            }
            _ => Ok(json!({"node": request.recording_id, "inputs": request.inputs})),
        }
    }

    async fn wait_signal(
        &self,
        _wait: &SignalWait,
        _abandoned: &CancellationToken,
    ) -> Result<SignalWake, DispatchError> {
        Ok(SignalWake::TimedOut)
    }

    async fn record_step(&self, record: &StepRecord) -> Result<(), DispatchError> {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((record.recording_id.clone(), record.status));
        Ok(())
    }

    async fn now_ms(&self, _recording_id: &str) -> Result<u64, DispatchError> {
        Ok(0)
    }
}

/// The host's effects for the tests: one set of steps for every run, and each run's end.
#[derive(Default)]
pub(crate) struct HostEffects {
    pub(crate) steps: Arc<Steps>,
    ends: Mutex<BTreeMap<String, Vec<RunEnd>>>,
}

impl HostEffects {
    pub(crate) fn with_steps(steps: Steps) -> Arc<Self> {
        Arc::new(Self {
            steps: Arc::new(steps),
            ends: Mutex::default(),
        })
    }

    /// Every end recorded for `run_id` (exactly one once it ended).
    pub(crate) fn ends(&self, run_id: &str) -> Vec<RunEnd> {
        self.ends
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(run_id)
            .cloned()
            .unwrap_or_default()
    }
}

#[async_trait]
impl RunEffects for HostEffects {
    async fn dispatcher(&self, _run_id: &str) -> Result<Arc<dyn Dispatcher>, DispatchError> {
        Ok(Arc::clone(&self.steps) as Arc<dyn Dispatcher>)
    }

    async fn finish(&self, run_id: &str, end: &RunEnd) -> Result<(), DispatchError> {
        self.ends
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(run_id.to_owned())
            .or_default()
            .push(end.clone());
        Ok(())
    }
}

/// An engine and a worker on a task queue of their own.
pub(crate) struct Cluster {
    pub(crate) engine: TemporalEngine,
    pub(crate) effects: Arc<HostEffects>,
    _worker: WorkerThread,
}

impl Cluster {
    pub(crate) async fn start(address: &str, name: &str, steps: Steps) -> Self {
        let settings = TemporalSettings::new(address).with_task_queue(task_queue(name));
        let engine = TemporalEngine::connect(settings.clone())
            .await
            .expect("the dev server answers")
            .with_limits(quick_limits());
        let effects = HostEffects::with_steps(steps);
        let worker = WorkerThread::start(settings, Arc::clone(&effects) as Arc<dyn RunEffects>);
        Self {
            engine,
            effects,
            _worker: worker,
        }
    }

    /// Waits (at most a minute) for `run_id` to end.
    pub(crate) async fn end(&self, run_id: &str) -> RunEnd {
        tokio::time::timeout(Duration::from_mins(1), self.engine.wait_for_end(run_id))
            .await
            .expect("the run ends within a minute")
            .expect("the run's result reads")
    }
}

/// A spec with a name and version around `entry` and `nodes`.
pub(crate) fn spec(entry: &str, nodes: &Value) -> Value {
    json!({"specVersion": 1, "name": "engine-test", "entry": entry, "nodes": nodes})
}

/// A `local` backend, or `None` when bubblewrap is missing (a failure under
/// `AUTO_SWE_REQUIRE_BWRAP=1`).
pub(crate) fn backend(state: &std::path::Path) -> Option<(LocalBackend, LocalRoot)> {
    let root = std::env::var("AUTO_SWE_ROOTFS")
        .ok()
        .filter(|r| !r.is_empty())
        .map_or(LocalRoot::HostSystem, |r| LocalRoot::Rootfs(r.into()));
    let mut config = LocalConfig::new(root.clone());
    config.state_dir = state.to_path_buf();
    match LocalBackend::new(config) {
        Ok(backend) => Some((backend, root)),
        Err(error) => {
            assert!(
                std::env::var("AUTO_SWE_REQUIRE_BWRAP").as_deref() != Ok("1"),
                "bubblewrap required: {error}"
            );
            eprintln!("skipped: {error}");
            None
        }
    }
}

/// A store in `dir` (an `SQLite` file).
pub(crate) async fn scratch_store(dir: &std::path::Path) -> auto_swe_store::Store {
    let url = format!("sqlite://{}", dir.join("store.db").display());
    auto_swe_store::Store::open(auto_swe_store::StoreConfig::new(
        url,
        auto_swe_store::Keyring::generate(),
    ))
    .await
    .expect("the store opens")
}

/// A database of its own on the `PostgreSQL` server `AUTO_SWE_POSTGRES_URL` names, by its URL;
/// `None` (the test skips) without one, unless `AUTO_SWE_REQUIRE_POSTGRES=1`.
pub(crate) async fn postgres_database() -> Option<String> {
    use sqlx::Connection as _;
    let required = std::env::var("AUTO_SWE_REQUIRE_POSTGRES").as_deref() == Ok("1");
    let Some(admin_url) = std::env::var("AUTO_SWE_POSTGRES_URL")
        .ok()
        .filter(|url| !url.is_empty())
    else {
        assert!(
            !required,
            "AUTO_SWE_REQUIRE_POSTGRES=1 but AUTO_SWE_POSTGRES_URL is not set"
        );
        eprintln!("skipped: AUTO_SWE_POSTGRES_URL is not set");
        return None;
    };
    let mut admin = sqlx::PgConnection::connect(&admin_url)
        .await
        .expect("the PostgreSQL server answers");
    let name = task_queue("temporal").replace('-', "_");
    sqlx::query(&format!("CREATE DATABASE \"{name}\""))
        .execute(&mut admin)
        .await
        .expect("a database of its own");
    let mut url = url::Url::parse(&admin_url).expect("the admin URL parses");
    url.set_path(&format!("/{name}"));
    Some(url.to_string())
}

/// A store on `url` (every store of one test shares its key). A `PostgreSQL` pool's
/// connections belong to the runtime that made them, so each runtime that outlives another —
/// a test beside the worker threads it starts and stops — opens a store of its own.
pub(crate) async fn open_store(url: &str) -> auto_swe_store::Store {
    auto_swe_store::Store::open(auto_swe_store::StoreConfig::new(
        url,
        auto_swe_store::Keyring::single(1, [7; 32]),
    ))
    .await
    .expect("the store opens")
}

/// A store in `dir` and the worker's services over it: `local` workspaces under `dir/sandbox`,
/// agents on `models`, the local SCM under `dir/repos`. `None` (the test skips) without
/// bubblewrap.
pub(crate) async fn host_services(
    dir: &std::path::Path,
    models: Arc<dyn auto_swe_worker::ModelRouter>,
) -> Option<(auto_swe_store::Store, Arc<auto_swe_worker::WorkerServices>)> {
    let store = scratch_store(dir).await;
    services_over(dir, store, models)
}

/// The worker's services over `store`, as [`host_services`] makes them.
pub(crate) fn services_over(
    dir: &std::path::Path,
    store: auto_swe_store::Store,
    models: Arc<dyn auto_swe_worker::ModelRouter>,
) -> Option<(auto_swe_store::Store, Arc<auto_swe_worker::WorkerServices>)> {
    let (backend, root) = backend(&dir.join("sandbox"))?;
    let git = auto_swe_worker::local_git::LocalGit::new();
    let services = Arc::new(auto_swe_worker::WorkerServices {
        store: store.clone(),
        workspaces: auto_swe_worker::WorkspaceTemplate::new(
            Arc::new(backend),
            "unused".to_owned(),
            root,
            auto_swe_sandbox::ResourceLimits::new(512 * 1024 * 1024, 1_000_000_000, 256),
        ),
        models,
        prices: auto_swe_models::PriceCatalog::builtin(),
        scm: Arc::new(auto_swe_worker::LocalScm::new(
            store.clone(),
            git.clone(),
            dir.join("repos"),
        )),
        patterns: Arc::new(auto_swe_agents::StaticPatterns::builtin()),
        git,
        tier: auto_swe_models::Tier::Standard,
    });
    Some((store, services))
}

/// No agent runs in these tests: any model asked for is refused.
#[derive(Debug)]
pub(crate) struct NoModels;

impl auto_swe_worker::ModelRouter for NoModels {
    fn client(
        &self,
        agent_key: &str,
    ) -> Result<Arc<dyn auto_swe_models::ModelClient>, DispatchError> {
        Err(DispatchError::non_retryable(
            "NO_MODEL",
            format!("no model for {agent_key}"),
        ))
    }
}
