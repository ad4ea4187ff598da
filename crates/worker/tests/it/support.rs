//! A fresh `SQLite` store per test and step executors that count what they run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_interpreter::{
    CancellationToken, DispatchError, Dispatcher, SignalWait, SignalWake, StepDispatch, StepRecord,
};
use auto_swe_store::{Keyring, NewRun, Store, StoreConfig};
use auto_swe_worker::EmbeddedEngine;
use serde_json::{Value, json};
use sqlx::Connection;
use tokio::sync::Notify;

/// The shortest lease the store grants.
pub(crate) const LEASE: Duration = Duration::from_secs(1);

/// Which backend a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Sqlite,
    Postgres,
}

fn require_postgres() -> bool {
    std::env::var("AUTO_SWE_REQUIRE_POSTGRES").is_ok_and(|v| v == "1")
}

/// The database URL with its database name replaced.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[authority_start..]
        .find('/')
        .map_or(base.len(), |i| authority_start + i);
    let mut out = format!("{}/{name}", &base[..path_start]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

fn unique_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "w_{}_{}_{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// One test's database.
pub(crate) struct TestStore {
    pub(crate) kind: Kind,
    pub(crate) url: String,
    pub(crate) store: Store,
    _dir: Option<tempfile::TempDir>,
    admin: Option<(String, String)>,
}

fn keyring() -> Keyring {
    Keyring::single(1, [0x22; 32])
}

impl TestStore {
    /// A fresh, migrated store; `None` when `PostgreSQL` is not configured and not required.
    pub(crate) async fn new(kind: Kind) -> Option<Self> {
        match kind {
            Kind::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}", dir.path().join("store.db").display());
                let store = Store::open(StoreConfig::new(&url, keyring()))
                    .await
                    .unwrap();
                Some(Self {
                    kind,
                    url,
                    store,
                    _dir: Some(dir),
                    admin: None,
                })
            }
            Kind::Postgres => {
                let Some(admin_url) = std::env::var("AUTO_SWE_POSTGRES_URL")
                    .ok()
                    .filter(|url| !url.is_empty())
                else {
                    assert!(
                        !require_postgres(),
                        "AUTO_SWE_REQUIRE_POSTGRES=1 but AUTO_SWE_POSTGRES_URL is not set"
                    );
                    eprintln!("skipped: AUTO_SWE_POSTGRES_URL is not set");
                    return None;
                };
                let mut admin = match sqlx::PgConnection::connect(&admin_url).await {
                    Ok(conn) => conn,
                    Err(error) => {
                        assert!(
                            !require_postgres(),
                            "AUTO_SWE_REQUIRE_POSTGRES=1 but PostgreSQL is unreachable: {error}"
                        );
                        eprintln!("skipped: PostgreSQL is unreachable: {error}");
                        return None;
                    }
                };
                let name = unique_name();
                sqlx::query(&format!("CREATE DATABASE \"{name}\""))
                    .execute(&mut admin)
                    .await
                    .unwrap();
                admin.close().await.unwrap();
                let url = with_database(&admin_url, &name);
                let store = Store::open(StoreConfig::new(&url, keyring()))
                    .await
                    .unwrap();
                Some(Self {
                    kind,
                    url,
                    store,
                    _dir: None,
                    admin: Some((admin_url, name)),
                })
            }
        }
    }

    /// Another store on the same database: another worker process, as far as the store can
    /// tell.
    pub(crate) async fn reopen(&self) -> Store {
        Store::open(StoreConfig::new(&self.url, keyring()))
            .await
            .unwrap()
    }

    /// An engine on this test's store.
    pub(crate) fn engine(&self) -> Arc<EmbeddedEngine> {
        Arc::new(EmbeddedEngine::new(self.store.clone(), LEASE))
    }

    /// Creates and enqueues a run of `spec`.
    pub(crate) async fn start(&self, spec: Value) -> String {
        let run = self.store.create_run(NewRun::new(spec)).await.unwrap();
        self.store.enqueue(&run.id).await.unwrap();
        run.id
    }

    /// Moves a run's lease `by` into the past, as if that much database time had passed: the
    /// store reads the database's clock, which a test cannot move.
    pub(crate) async fn age_lease(&self, run_id: &str, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap();
        assert!(run_id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'));
        let sql = format!(
            "UPDATE run_queue SET available_at = available_at - {ms}, \
             lease_until = lease_until - {ms} WHERE run_id = '{run_id}'"
        );
        match self.kind {
            Kind::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::query(&sql).execute(&mut conn).await.unwrap();
                conn.close().await.unwrap();
            }
            Kind::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::query(&sql).execute(&mut conn).await.unwrap();
                conn.close().await.unwrap();
            }
        }
    }

    /// Drops the database (`PostgreSQL`); the `SQLite` file goes with its temp dir.
    pub(crate) async fn finish(self) {
        self.store.close().await;
        if let Some((admin_url, name)) = self.admin
            && let Ok(mut admin) = sqlx::PgConnection::connect(&admin_url).await
        {
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                .execute(&mut admin)
                .await;
            let _ = admin.close().await;
        }
    }
}

/// Runs an async test body once per backend.
macro_rules! on_both_backends {
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    if let Some(db) = crate::support::TestStore::new(crate::support::Kind::Sqlite).await {
                        super::$name(&db).await;
                        db.finish().await;
                    }
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    if let Some(db) = crate::support::TestStore::new(crate::support::Kind::Postgres).await {
                        super::$name(&db).await;
                        db.finish().await;
                    }
                }
            }
        )+
    };
}
pub(crate) use on_both_backends;

/// Step executors that count each recording id they run and answer with the worker's name.
/// A step named `slow` waits for `release` after announcing itself on `reached`, when gated.
pub(crate) struct CountingSteps {
    name: &'static str,
    pub(crate) runs: Mutex<BTreeMap<String, u32>>,
    pub(crate) records: Mutex<BTreeMap<String, u32>>,
    outputs: Mutex<BTreeMap<String, Value>>,
    gate: Option<(Arc<Notify>, Arc<Notify>)>,
}

impl CountingSteps {
    pub(crate) fn new(name: &'static str) -> Self {
        Self {
            name,
            runs: Mutex::new(BTreeMap::new()),
            records: Mutex::new(BTreeMap::new()),
            outputs: Mutex::new(BTreeMap::new()),
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

    /// The output each recorded step carried, by recording id.
    pub(crate) fn outputs(&self) -> BTreeMap<String, Value> {
        self.outputs.lock().unwrap().clone()
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
        cancellation: &CancellationToken,
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
            tokio::select! {
                () = release.notified() => {}
                () = cancellation.cancelled() => {
                    return Err(DispatchError::cancelled("the run was stopped"));
                }
            }
        }
        if request.step == "long" {
            // Longer than a step record keeps, with a character that is more than one byte.
            let text = format!("{}é", "ab".repeat(10_000));
            let many: Vec<String> = (0..70)
                .map(|i| format!("{i}:{}", "z".repeat(8_100)))
                .collect();
            return Ok(json!({"text": text, "small": "s", "many": many}));
        }
        if request.step == "wide" {
            // No string too long for a record; 2.4 MB in all.
            let wide: Vec<String> = (0..300).map(|_| "w".repeat(7_999)).collect();
            return Ok(json!(wide));
        }
        if request.step == "loud" {
            return Err(DispatchError::non_retryable(
                "STEP_LOUD",
                "why ".repeat(5_000),
            ));
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
        if let Some(output) = &record.outputs {
            self.outputs
                .lock()
                .unwrap()
                .insert(record.recording_id.clone(), Value::clone(output));
        }
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
