//! A fresh `SQLite` store per test and step executors that count what they run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_interpreter::{
    CancellationToken, DispatchError, Dispatcher, SignalWait, SignalWake, StepDispatch, StepRecord,
};
use auto_swe_store::{Keyring, NewRun, Store, StoreConfig};
use auto_swe_worker::{DurableEngine, EmbeddedEngine, RunLease};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// The shortest lease the store grants.
pub(crate) const LEASE: Duration = Duration::from_secs(1);

pub(crate) struct TestStore {
    pub(crate) store: Store,
    _dir: tempfile::TempDir,
}

impl TestStore {
    pub(crate) async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("store.db").display());
        let store = Store::open(StoreConfig::new(&url, Keyring::single(1, [0x22; 32])))
            .await
            .unwrap();
        Self { store, _dir: dir }
    }

    pub(crate) fn engine(&self) -> Arc<EmbeddedEngine> {
        Arc::new(EmbeddedEngine::new(self.store.clone(), LEASE))
    }

    /// Creates and enqueues a run of `spec`.
    pub(crate) async fn start(&self, spec: Value) -> String {
        let run = self.store.create_run(NewRun::new(spec)).await.unwrap();
        self.store.enqueue(&run.id).await.unwrap();
        run.id
    }
}

/// Acquires a run for `worker`, waiting for a held lease to lapse. Leases lapse by the
/// database's clock, so this polls it (bounded) rather than moving a test clock.
pub(crate) async fn acquire_when_free(engine: &dyn DurableEngine, worker: &str) -> RunLease {
    for _ in 0..100 {
        if let Some(lease) = engine.acquire(worker, 1).await.unwrap().into_iter().next() {
            return lease;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no run became claimable");
}

/// Step executors that count each recording id they run and answer with the worker's name.
/// A step named `slow` waits for `release` after announcing itself on `reached`, when gated.
pub(crate) struct CountingSteps {
    name: &'static str,
    pub(crate) runs: Mutex<BTreeMap<String, u32>>,
    pub(crate) records: Mutex<BTreeMap<String, u32>>,
    gate: Option<(Arc<Notify>, Arc<Notify>)>,
}

impl CountingSteps {
    pub(crate) fn new(name: &'static str) -> Self {
        Self {
            name,
            runs: Mutex::new(BTreeMap::new()),
            records: Mutex::new(BTreeMap::new()),
            gate: None,
        }
    }

    /// `slow` steps announce themselves on `reached` and wait for `release`.
    pub(crate) fn gated(mut self, reached: Arc<Notify>, release: Arc<Notify>) -> Self {
        self.gate = Some((reached, release));
        self
    }

    pub(crate) fn runs(&self) -> BTreeMap<String, u32> {
        self.runs.lock().unwrap().clone()
    }

    pub(crate) fn records(&self) -> BTreeMap<String, u32> {
        self.records.lock().unwrap().clone()
    }
}

#[async_trait]
impl Dispatcher for CountingSteps {
    async fn dispatch_step(
        &self,
        request: &StepDispatch,
        _cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        *self
            .runs
            .lock()
            .unwrap()
            .entry(request.recording_id.clone())
            .or_default() += 1;
        if request.step == "slow"
            && let Some((reached, release)) = &self.gate
        {
            reached.notify_one();
            release.notified().await;
        }
        if request.step == "broken" {
            return Err(DispatchError::non_retryable(
                "STEP_BROKEN",
                "broken on purpose",
            ));
        }
        Ok(json!({"by": self.name, "node": request.recording_id}))
    }

    async fn wait_signal(
        &self,
        _wait: &SignalWait,
        _abandoned: &CancellationToken,
    ) -> Result<SignalWake, DispatchError> {
        Ok(SignalWake::TimedOut)
    }

    async fn record_step(&self, record: &StepRecord) -> Result<(), DispatchError> {
        *self
            .records
            .lock()
            .unwrap()
            .entry(record.recording_id.clone())
            .or_default() += 1;
        Ok(())
    }

    async fn now_ms(&self, _recording_id: &str) -> Result<u64, DispatchError> {
        Ok(1_717_196_400_000)
    }
}

/// `a` → `slow` → `c`, then the end.
pub(crate) fn three_steps() -> Value {
    json!({
        "entry": "a",
        "nodes": [
            {"id": "a", "type": "step", "step": "work", "next": "slow"},
            {"id": "slow", "type": "step", "step": "slow", "next": "c"},
            {"id": "c", "type": "step", "step": "work"}
        ]
    })
}
