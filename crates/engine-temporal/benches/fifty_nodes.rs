//! A 50-node run on Temporal against the embedded engine, in the same process and run:
//! end-to-end time from launch to the recorded end, and the overhead per step. The embedded
//! engine runs on `SQLite` and, when `AUTO_SWE_POSTGRES_URL` is set, on `PostgreSQL`; Temporal
//! is the dev server at `AUTO_SWE_TEMPORAL_ADDRESS` (`source scripts/dev-temporal.sh`).
//!
//! `cargo bench -p auto-swe-engine-temporal --bench fifty_nodes`. Prints a table; asserts nothing.
#![expect(
    clippy::unwrap_used,
    clippy::cast_precision_loss,
    clippy::print_stdout,
    reason = "a benchmark fails loudly and prints its table"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use auto_swe_engine_temporal::{RunEffects, TemporalEngine, TemporalSettings, TemporalWorker};
use auto_swe_interpreter::{
    CancellationToken, DispatchError, Dispatcher, SignalWait, SignalWake, StepDispatch, StepRecord,
};
use auto_swe_store::{Keyring, NewRun, RunStatus, Store, StoreConfig};
use auto_swe_worker::{EmbeddedEngine, RunEnd, Worker, WorkerConfig};
use serde_json::{Value, json};

const NODES: usize = 50;
const ROUNDS: usize = 5;

/// Answers every step at once.
struct Instant0;

#[async_trait]
impl Dispatcher for Instant0 {
    async fn dispatch_step(
        &self,
        request: &StepDispatch,
        _cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        Ok(json!({"node": request.recording_id}))
    }

    async fn wait_signal(
        &self,
        _wait: &SignalWait,
        _abandoned: &CancellationToken,
    ) -> Result<SignalWake, DispatchError> {
        Ok(SignalWake::TimedOut)
    }

    async fn record_step(&self, _record: &StepRecord) -> Result<(), DispatchError> {
        Ok(())
    }

    async fn now_ms(&self, _recording_id: &str) -> Result<u64, DispatchError> {
        Ok(0)
    }
}

#[async_trait]
impl RunEffects for Instant0 {
    async fn dispatcher(&self, _run_id: &str) -> Result<Arc<dyn Dispatcher>, DispatchError> {
        Ok(Arc::new(Self))
    }

    async fn finish(&self, _run_id: &str, _end: &RunEnd) -> Result<(), DispatchError> {
        Ok(())
    }
}

fn chain(steps: usize) -> Value {
    let mut nodes: Vec<Value> = (0..steps)
        .map(|i| {
            let next = if i + 1 < steps {
                format!("s{}", i + 1)
            } else {
                "end".to_owned()
            };
            json!({ "id": format!("s{i}"), "type": "step", "step": "noop", "next": next })
        })
        .collect();
    nodes.push(json!({ "id": "end", "type": "terminate", "status": "SUCCESS" }));
    json!({ "specVersion": 1, "name": "chain", "entry": "s0", "nodes": nodes })
}

async fn postgres() -> Option<Store> {
    let admin = std::env::var("AUTO_SWE_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())?;
    let name = format!("bench_temporal_{}", std::process::id());
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&admin)
        .await
        .ok()?;
    sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\""))
        .execute(&mut conn)
        .await
        .ok()?;
    sqlx::query(&format!("CREATE DATABASE \"{name}\""))
        .execute(&mut conn)
        .await
        .ok()?;
    let (base, _) = admin.rsplit_once('/')?;
    Store::open(StoreConfig::new(
        format!("{base}/{name}"),
        Keyring::single(1, [7; 32]),
    ))
    .await
    .ok()
}

/// Median milliseconds from launch to the recorded end of a `NODES`-step run, serving with a
/// worker on the store.
async fn embedded(store: &Store) -> f64 {
    let worker = Worker::new(
        Arc::new(EmbeddedEngine::new(store.clone(), Duration::from_mins(1))),
        Arc::new(Instant0),
        WorkerConfig::new("bench", Duration::from_secs(20)),
    );
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { worker.serve(shutdown).await }
    });
    let mut samples = Vec::new();
    for _ in 0..ROUNDS {
        let began = Instant::now();
        let run = store.create_run(NewRun::new(chain(NODES))).await.unwrap();
        store.enqueue(&run.id).await.unwrap();
        while !matches!(
            store.get_run(&run.id).await.unwrap().status,
            RunStatus::Ended(_)
        ) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        samples.push(began.elapsed().as_secs_f64() * 1000.0);
    }
    shutdown.cancel();
    let _ = serving.await;
    median(samples)
}

/// The same on Temporal, with a worker on a thread of its own.
async fn temporal(address: &str) -> f64 {
    let queue = format!("bench-{}", std::process::id());
    let settings = TemporalSettings::new(address).with_task_queue(queue);
    let engine = TemporalEngine::connect(settings.clone()).await.unwrap();
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let thread = std::thread::spawn(move || {
        TemporalWorker::new(settings, Arc::new(Instant0))
            .run_blocking(stop)
            .unwrap();
    });
    let mut samples = Vec::new();
    for round in 0..=ROUNDS {
        let run = format!("bench-{}-{round}", std::process::id());
        let began = Instant::now();
        engine.launch(&run, chain(NODES), json!({})).await.unwrap();
        engine.wait_for_end(&run).await.unwrap();
        // The first round warms the worker's connection and caches.
        if round > 0 {
            samples.push(began.elapsed().as_secs_f64() * 1000.0);
        }
    }
    shutdown.cancel();
    thread.join().unwrap();
    median(samples)
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() {
    let Some(address) = std::env::var("AUTO_SWE_TEMPORAL_ADDRESS")
        .ok()
        .filter(|a| !a.is_empty())
    else {
        println!("no Temporal server (AUTO_SWE_TEMPORAL_ADDRESS): nothing measured");
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("bench.db").display());
        let lite = Store::open(StoreConfig::new(url, Keyring::single(1, [7; 32])))
            .await
            .unwrap();
        println!("load: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
        let on_lite = embedded(&lite).await;
        let on_pg = match postgres().await {
            Some(store) => Some(embedded(&store).await),
            None => None,
        };
        let on_temporal = temporal(&address).await;
        let baseline = on_pg.unwrap_or(on_lite);
        let per = |ms: f64| ms / NODES as f64;
        println!("| {NODES}-node run, launch to recorded end | median | per step | against the embedded engine{} |",
            if on_pg.is_some() { " on PostgreSQL" } else { " on SQLite" });
        println!("|---|---|---|---|");
        println!("| embedded, SQLite | {on_lite:.1} ms | {:.2} ms | {:.2}× |", per(on_lite), on_lite / baseline);
        if let Some(pg) = on_pg {
            println!("| embedded, PostgreSQL | {pg:.1} ms | {:.2} ms | 1× |", per(pg));
        }
        println!("| Temporal dev server | {on_temporal:.1} ms | {:.2} ms | {:.2}× |", per(on_temporal), on_temporal / baseline);
        println!("load: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
    });
}
