//! Durable execution costs, as ratios against the same run without a journal in the same
//! process:
//! - overhead per step: a 100-step run through the worker (journal + fenced step records)
//!   against the bare interpreter, on `SQLite` (WAL) with `synchronous=NORMAL` (the store's
//!   default) and with `synchronous=FULL` (every commit flushed); on the `PostgreSQL` at
//!   `AUTO_SWE_POSTGRES_URL` when it is set (the development server runs with `fsync = off`);
//!   and on a throwaway `PostgreSQL` cluster with `fsync`, `synchronous_commit` and
//!   `full_page_writes` on, which the bench starts with `scripts/durable-postgres.sh` (loopback
//!   only, in a temporary directory) and stops by its PID. Each `PostgreSQL` row names the
//!   settings the server reported;
//! - resume: a run with 500 journaled effects (250 steps) woken from its wait, replayed and
//!   finished;
//! - parking: the worker process's resident memory after parking 1,000 waiting runs.
//!
//! `cargo bench -p auto-swe-worker --bench durable`. Prints a table; asserts nothing.
#![expect(
    clippy::unwrap_used,
    clippy::cast_precision_loss,
    clippy::print_stdout,
    reason = "a benchmark fails loudly and prints its table"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use auto_swe_interpreter::{
    CancellationToken, DispatchError, Dispatcher, RunOptions, SignalWait, SignalWake, StepDispatch,
    StepRecord, run_spec,
};
use auto_swe_spec::WorkflowSpec;
use auto_swe_store::{Keyring, LeaseToken, NewRun, Store, StoreConfig};
use auto_swe_worker::{
    DriveEnd, EffectsFactory, EmbeddedEngine, Parking, RunLease, RunTask, RunWake, Worker,
    WorkerConfig, WorkerError,
};
use serde_json::{Value, json};

/// Answers every step at once; waits find no signal.
struct Instant0;

#[async_trait]
impl Dispatcher for Instant0 {
    async fn dispatch_step(
        &self,
        request: &StepDispatch,
        _cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        Ok(json!({ "node": request.spec_node_id }))
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

fn chain(steps: usize, tail: Option<Value>) -> Value {
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
    nodes.push(
        tail.unwrap_or_else(|| json!({ "id": "end", "type": "terminate", "status": "SUCCESS" })),
    );
    json!({ "specVersion": 1, "name": "chain", "entry": "s0", "maxTransitions": 10_000, "nodes": nodes })
}

async fn sqlite(dir: &std::path::Path, name: &str) -> Store {
    sqlite_with(dir, name, "").await
}

/// A `SQLite` store with `query` (`?synchronous=full`, or empty) on its URL.
async fn sqlite_with(dir: &std::path::Path, name: &str, query: &str) -> Store {
    let url = format!(
        "sqlite://{}{query}",
        dir.join(format!("{name}.db")).display()
    );
    Store::open(StoreConfig::new(&url, Keyring::single(1, [7; 32])))
        .await
        .unwrap()
}

/// A fresh database on the server at `admin`, and the server's durability settings.
async fn postgres(admin: &str) -> Option<(Store, String)> {
    let name = format!("bench_{}", std::process::id());
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(admin)
        .await
        .ok()?;
    let mut settings = Vec::new();
    for setting in ["fsync", "synchronous_commit", "full_page_writes"] {
        let value: String = sqlx::query_scalar(&format!("SHOW {setting}"))
            .fetch_one(&mut conn)
            .await
            .ok()?;
        settings.push(format!("{setting} = {value}"));
    }
    sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\""))
        .execute(&mut conn)
        .await
        .ok()?;
    sqlx::query(&format!("CREATE DATABASE \"{name}\""))
        .execute(&mut conn)
        .await
        .ok()?;
    let (base, _) = admin.rsplit_once('/')?;
    let url = format!("{base}/{name}");
    let store = Store::open(StoreConfig::new(&url, Keyring::single(1, [7; 32])))
        .await
        .ok()?;
    Some((store, settings.join(", ")))
}

/// How many times the server has flushed its write-ahead log to disk (`pg_stat_wal`).
async fn wal_syncs(admin: &str) -> Option<i64> {
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(admin)
        .await
        .ok()?;
    sqlx::query_scalar("SELECT wal_sync FROM pg_stat_wal")
        .fetch_one(&mut conn)
        .await
        .ok()
}

/// A throwaway `PostgreSQL` cluster with durable settings, made by
/// `scripts/durable-postgres.sh` in a temporary directory and stopped by its PID when dropped.
struct DurablePostgres {
    url: String,
    pid: u32,
    /// Removed after `drop` has stopped the server.
    _dir: tempfile::TempDir,
}

impl DurablePostgres {
    fn start() -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/durable-postgres.sh"
        );
        #[expect(
            clippy::disallowed_methods,
            reason = "the benchmark starts its own throwaway database server"
        )]
        let output = std::process::Command::new("bash")
            .arg(script)
            .arg(dir.path())
            .output()
            .map_err(|e| e.to_string())?;
        if !output.status.success() {
            return Err(String::from_utf8_lossy(&output.stderr).trim().to_owned());
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let mut lines = stdout.lines();
        let url = lines.next().unwrap_or_default().to_owned();
        let pid = lines
            .next()
            .and_then(|pid| pid.trim().parse().ok())
            .ok_or_else(|| format!("no PID from the script: {stdout}"))?;
        Ok(Self {
            url,
            pid,
            _dir: dir,
        })
    }
}

impl Drop for DurablePostgres {
    /// A fast shutdown (SIGINT to the postmaster), waited for up to a minute.
    fn drop(&mut self) {
        #[expect(
            clippy::disallowed_methods,
            reason = "the benchmark stops the server it started, by its PID"
        )]
        let _ = std::process::Command::new("kill")
            .args(["-INT", &self.pid.to_string()])
            .status();
        let process = std::path::PathBuf::from(format!("/proc/{}", self.pid));
        for _ in 0..600 {
            if !process.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn worker(store: &Store) -> Worker {
    Worker::new(
        Arc::new(EmbeddedEngine::new(store.clone(), Duration::from_secs(60))),
        Arc::new(Instant0),
        WorkerConfig::new("bench", Duration::from_secs(20)),
    )
}

async fn start(store: &Store, spec: Value) -> String {
    let run = store.create_run(NewRun::new(spec)).await.unwrap();
    store.enqueue(&run.id).await.unwrap();
    run.id
}

/// Median milliseconds per step of `rounds` journaled runs of a `steps`-step chain.
async fn journaled_per_step(store: &Store, steps: usize, rounds: usize) -> f64 {
    let worker = worker(store);
    let mut samples = Vec::new();
    for _ in 0..rounds {
        start(store, chain(steps, None)).await;
        let began = Instant::now();
        worker.run_once().await.unwrap().unwrap();
        samples.push(began.elapsed().as_secs_f64() * 1000.0 / steps as f64);
    }
    median(samples)
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn resident_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0.0);
    pages * 4096.0 / (1024.0 * 1024.0)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let steps = 100;
        let spec = WorkflowSpec::from_value_tolerant(chain(steps, None)).unwrap();
        let mut bare = Vec::new();
        for _ in 0..21 {
            let began = Instant::now();
            run_spec(&spec, json!({}), &Instant0, RunOptions::default()).await;
            bare.push(began.elapsed().as_secs_f64() * 1000.0 / steps as f64);
        }
        let bare = median(bare);
        println!("load: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
        println!("| measurement | value | against the bare interpreter |");
        println!("|---|---|---|");
        println!("| bare interpreter, per step | {bare:.4} ms | 1× |");
        let store = sqlite(dir.path(), "steps").await;
        let lite = journaled_per_step(&store, steps, 7).await;
        println!("| journaled on SQLite (WAL, synchronous = NORMAL), per step | {lite:.3} ms | {:.0}× |", lite / bare);
        let store = sqlite_with(dir.path(), "steps-full", "?synchronous=full").await;
        let full = journaled_per_step(&store, steps, 7).await;
        println!("| journaled on SQLite (WAL, synchronous = FULL), per step | {full:.3} ms | {:.0}× |", full / bare);
        let dev = std::env::var("AUTO_SWE_POSTGRES_URL").ok().filter(|u| !u.is_empty());
        if let Some((pg, settings)) = match &dev { Some(admin) => postgres(admin).await, None => None } {
            let per = journaled_per_step(&pg, steps, 7).await;
            println!("| journaled on PostgreSQL ({settings}), per step (target < 2 ms) | {per:.3} ms | {:.0}× |", per / bare);
        }
        match DurablePostgres::start() {
            Ok(server) => {
                if let Some((pg, settings)) = postgres(&server.url).await {
                    let before = wal_syncs(&server.url).await;
                    let per = journaled_per_step(&pg, steps, 7).await;
                    // Server processes report their WAL statistics as they exit.
                    pg.close().await;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    let flushes = match (before, wal_syncs(&server.url).await) {
                        (Some(before), Some(after)) => format!(
                            "; {:.1} WAL flushes per step, run setup included",
                            (after - before) as f64 / (7 * steps) as f64
                        ),
                        _ => String::new(),
                    };
                    println!("| journaled on PostgreSQL ({settings}), per step | {per:.3} ms{flushes} | {:.0}× |", per / bare);
                } else {
                    println!("| journaled on PostgreSQL with fsync on | not measured: the throwaway server did not answer | |");
                }
            }
            Err(why) => println!("| journaled on PostgreSQL with fsync on | not measured: {why} | |"),
        }

        // Resume: 250 steps (500 effects: a dispatch and a record each) journaled, then a wait.
        let tail = json!({ "id": "end", "type": "signal", "name": "go", "timeout": "1h", "onReceive": "done", "onTimeout": "done" });
        let mut resume_spec = chain(250, Some(tail));
        resume_spec["nodes"].as_array_mut().unwrap().push(json!({ "id": "done", "type": "terminate", "status": "SUCCESS" }));
        let store = sqlite(dir.path(), "resume").await;
        let parker = parking_worker(&store);
        let mut resumes = Vec::new();
        for _ in 0..7 {
            let id = start(&store, resume_spec.clone()).await;
            let first = parker.run_once().await.unwrap().unwrap();
            assert!(matches!(first.end, DriveEnd::Parked(_)));
            store.send_signal(&id, "go", &json!({})).await.unwrap();
            let began = Instant::now();
            let again = parker.run_once().await.unwrap().unwrap();
            resumes.push(began.elapsed().as_secs_f64() * 1000.0);
            assert!(again.effects.replayed >= 500, "{:?}", again.effects);
        }
        println!("| resume of a run with 500 journaled effects, to its end (target < 1 s) | {:.1} ms | |", median(resumes));

        // Parking: 1,000 runs that wait, parked by one worker; its resident memory before and after.
        let store = sqlite(dir.path(), "parked").await;
        let wait = json!({ "specVersion": 1, "name": "wait", "entry": "w", "nodes": [
            { "id": "w", "type": "signal", "name": "go", "timeout": "7d", "onReceive": "end", "onTimeout": "end" },
            { "id": "end", "type": "terminate", "status": "SUCCESS" }
        ]});
        let parking = parking_worker(&store);
        for _ in 0..1_000 {
            start(&store, wait.clone()).await;
        }
        let before = resident_mib();
        let mut held = 0;
        while let Some(report) = parking.run_once().await.unwrap() {
            if matches!(report.end, DriveEnd::Parked(_)) {
                held += 1;
            }
        }
        let after = resident_mib();
        println!("| {held} runs parked by one worker: resident memory before / after (target: under 50 MB more) | {before:.1} / {after:.1} MiB | |");
    });
}

/// Effects for the benchmarks: steps answer at once, waits read the store's signals and park
/// the run when none is there (as the built-in step executors' waits do).
struct ParkingEffects {
    store: Store,
}

struct ParkingDispatcher {
    store: Store,
    token: LeaseToken,
    parking: Arc<Parking>,
}

#[async_trait]
impl Dispatcher for ParkingDispatcher {
    async fn dispatch_step(
        &self,
        request: &StepDispatch,
        _cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        Ok(json!({ "node": request.spec_node_id }))
    }

    async fn wait_signal(
        &self,
        wait: &SignalWait,
        _abandoned: &CancellationToken,
    ) -> Result<SignalWake, DispatchError> {
        match self.store.consume_signal(&self.token, &wait.name).await {
            Ok(Some(signal)) => Ok(SignalWake::Delivered {
                payload: signal.payload,
            }),
            Ok(None) => {
                self.parking.request(RunWake {
                    signal: wait.name.clone(),
                    deadline: None,
                });
                Err(DispatchError::cancelled("parked"))
            }
            Err(error) => Err(DispatchError::non_retryable(
                error.code(),
                error.to_string(),
            )),
        }
    }

    async fn record_step(&self, _record: &StepRecord) -> Result<(), DispatchError> {
        Ok(())
    }

    async fn now_ms(&self, _recording_id: &str) -> Result<u64, DispatchError> {
        Ok(0)
    }
}

impl EffectsFactory for ParkingEffects {
    fn for_run(
        &self,
        lease: &RunLease,
        _task: &RunTask,
        parking: Arc<Parking>,
    ) -> Result<Arc<dyn Dispatcher>, WorkerError> {
        Ok(Arc::new(ParkingDispatcher {
            store: self.store.clone(),
            token: LeaseToken {
                run_id: lease.run_id.clone(),
                epoch: lease.fencing_token,
            },
            parking,
        }))
    }
}

fn parking_worker(store: &Store) -> Worker {
    Worker::with_effects(
        Arc::new(EmbeddedEngine::new(store.clone(), Duration::from_secs(60))),
        Arc::new(ParkingEffects {
            store: store.clone(),
        }),
        WorkerConfig::new("bench", Duration::from_secs(20)),
    )
}
