//! Fresh stores per test on each backend.
//!
//! `PostgreSQL` tests read `AUTO_SWE_POSTGRES_URL` (an admin URL); each test creates its own
//! database, so tests run in parallel. Without the URL they print why and pass vacuously, unless
//! `AUTO_SWE_REQUIRE_POSTGRES=1`, when a missing or unreachable server fails them.

use std::sync::Arc;

use auto_swe_store::{Keyring, ManualClock, Store, StoreConfig, Timestamp};
use sqlx::Connection;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Sqlite,
    Postgres,
}

/// One test's database.
pub(crate) struct TestDb {
    pub(crate) kind: Kind,
    pub(crate) url: String,
    pub(crate) clock: ManualClock,
    pub(crate) store: Store,
    _dir: Option<tempfile::TempDir>,
    admin_url: Option<String>,
    db_name: Option<String>,
}

/// 2024-05-31T23:00:00Z: an hour before a month boundary.
pub(crate) const START: i64 = 1_717_196_400_000;

pub(crate) fn keyring() -> Keyring {
    Keyring::single(1, [0x11; 32])
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

impl TestDb {
    /// A fresh, migrated store; `None` when `PostgreSQL` is not configured and not required.
    pub(crate) async fn new(kind: Kind) -> Option<Self> {
        Self::with_keyring(kind, keyring()).await
    }

    pub(crate) async fn with_keyring(kind: Kind, keyring: Keyring) -> Option<Self> {
        let blank = BlankDb::new(kind).await?;
        Some(blank.open(keyring).await)
    }

    /// Another store on the same database (another process, as far as the store can tell).
    pub(crate) async fn reopen(&self, keyring: Keyring) -> Store {
        Store::open(
            StoreConfig::new(&self.url, keyring)
                .with_clock(Arc::new(self.clock.clone()))
                .with_max_connections(4),
        )
        .await
        .unwrap()
    }

    /// Another store on the same database whose own clock is `skew` milliseconds off the
    /// system clock (a worker on a machine with a wrong clock).
    pub(crate) async fn reopen_with_skew(&self, skew: i64) -> Store {
        let now = i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis(),
        )
        .unwrap();
        let clock = ManualClock::at_wall(Timestamp::from_millis(now + skew).to_system_time());
        Store::open(
            StoreConfig::new(&self.url, keyring())
                .with_clock(Arc::new(clock))
                .with_max_connections(4),
        )
        .await
        .unwrap()
    }

    /// Runs raw SQL against the database, for tests that play an attacker with database access.
    pub(crate) async fn raw_execute(&self, sql: &str) {
        match self.kind {
            Kind::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::query(sql).execute(&mut conn).await.unwrap();
                conn.close().await.unwrap();
            }
            Kind::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::query(sql).execute(&mut conn).await.unwrap();
                conn.close().await.unwrap();
            }
        }
    }

    /// Counts rows with raw SQL (`SELECT COUNT(*) …`), to inspect what is really stored.
    pub(crate) async fn raw_count(&self, sql: &str) -> i64 {
        match self.kind {
            Kind::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                let n: i64 = sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap();
                conn.close().await.unwrap();
                n
            }
            Kind::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
                let n: i64 = sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap();
                conn.close().await.unwrap();
                n
            }
        }
    }

    /// Creates a run, enqueues it and claims it as `worker` (a lease of 60 s of database time).
    pub(crate) async fn leased_run(
        &self,
        run: auto_swe_store::NewRun,
        worker: &str,
    ) -> (auto_swe_store::Run, auto_swe_store::Claim) {
        let run = self.store.create_run(run).await.unwrap();
        self.store.enqueue(&run.id).await.unwrap();
        let claim = self.claim_run(&run.id, worker).await;
        (run, claim)
    }

    /// Claims `run_id` as `worker`; the run must be the only one claimable.
    pub(crate) async fn claim_run(&self, run_id: &str, worker: &str) -> auto_swe_store::Claim {
        let claims = self
            .store
            .claim(&auto_swe_store::ClaimRequest {
                worker: worker.to_owned(),
                limit: 1,
                lease: std::time::Duration::from_secs(60),
                engine: auto_swe_store::RunEngine::Embedded,
            })
            .await
            .unwrap();
        assert_eq!(claims.len(), 1, "expected {run_id} to be claimable");
        assert_eq!(claims[0].run_id, run_id);
        claims.into_iter().next().unwrap()
    }

    /// Moves a queued run's times `by` into the past, as if that much database time had passed
    /// for it: a lease lapses, a timer falls due. (The store reads the database's clock, which a
    /// test cannot move.)
    pub(crate) async fn age_queue_entry(&self, run_id: &str, by: std::time::Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap();
        assert!(run_id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'));
        self.raw_execute(&format!(
            "UPDATE run_queue SET available_at = available_at - {ms}, \
             lease_until = lease_until - {ms} WHERE run_id = '{run_id}'"
        ))
        .await;
    }

    /// Drops the database (`PostgreSQL`); the `SQLite` file goes with its temp dir.
    pub(crate) async fn finish(self) {
        self.store.close().await;
        if let (Some(admin_url), Some(name)) = (self.admin_url, self.db_name)
            && let Ok(mut admin) = sqlx::PgConnection::connect(&admin_url).await
        {
            {
                let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                    .execute(&mut admin)
                    .await;
                let _ = admin.close().await;
            }
        }
    }
}

/// A created database no migration has touched yet (to test a migration on older rows).
pub(crate) struct BlankDb {
    pub(crate) kind: Kind,
    pub(crate) url: String,
    dir: Option<tempfile::TempDir>,
    admin_url: Option<String>,
    db_name: Option<String>,
}

impl BlankDb {
    /// A fresh, empty database; `None` when `PostgreSQL` is not configured and not required.
    pub(crate) async fn new(kind: Kind) -> Option<Self> {
        match kind {
            Kind::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}", dir.path().join("store.db").display());
                Some(Self {
                    kind,
                    url,
                    dir: Some(dir),
                    admin_url: None,
                    db_name: None,
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
                    eprintln!(
                        "skipped: AUTO_SWE_POSTGRES_URL is not set (scripts/dev-postgres.sh starts one)"
                    );
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
                let name = format!("t_{}", uuid_like());
                sqlx::query(&format!("CREATE DATABASE \"{name}\""))
                    .execute(&mut admin)
                    .await
                    .unwrap();
                admin.close().await.unwrap();
                let url = with_database(&admin_url, &name);
                Some(Self {
                    kind,
                    url,
                    dir: None,
                    admin_url: Some(admin_url),
                    db_name: Some(name),
                })
            }
        }
    }

    /// Applies the migrations older than `version`, then `rows` (SQL): the database as a store
    /// of before `version` left it.
    pub(crate) async fn written_before(&self, version: i64, rows: &str) {
        let older = |mut migrator: sqlx::migrate::Migrator| {
            migrator.migrations = std::borrow::Cow::Owned(
                migrator
                    .migrations
                    .iter()
                    .filter(|m| m.version < version)
                    .cloned()
                    .collect(),
            );
            migrator
        };
        match self.kind {
            Kind::Sqlite => {
                let options =
                    <sqlx::sqlite::SqliteConnectOptions as std::str::FromStr>::from_str(&self.url)
                        .unwrap()
                        .create_if_missing(true);
                let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
                older(sqlx::migrate!("./migrations/sqlite"))
                    .run(&pool)
                    .await
                    .unwrap();
                sqlx::raw_sql(rows).execute(&pool).await.unwrap();
                pool.close().await;
            }
            Kind::Postgres => {
                let pool = sqlx::PgPool::connect(&self.url).await.unwrap();
                older(sqlx::migrate!("./migrations/postgres"))
                    .run(&pool)
                    .await
                    .unwrap();
                sqlx::raw_sql(rows).execute(&pool).await.unwrap();
                pool.close().await;
            }
        }
    }

    /// Opens the store on it (applying every pending migration).
    pub(crate) async fn open(self, keyring: Keyring) -> TestDb {
        let clock = ManualClock::at_wall(Timestamp::from_millis(START).to_system_time());
        let mut config = StoreConfig::new(&self.url, keyring).with_clock(Arc::new(clock.clone()));
        if self.kind == Kind::Postgres {
            config = config.with_max_connections(12);
        }
        let store = Store::open(config).await.unwrap();
        TestDb {
            kind: self.kind,
            url: self.url,
            clock,
            store,
            _dir: self.dir,
            admin_url: self.admin_url,
            db_name: self.db_name,
        }
    }
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{}_{}_{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// A small deterministic generator for test vectors.
pub(crate) struct XorShift(pub u64);

impl XorShift {
    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value in [-1, 1).
    pub(crate) fn next_f32(&mut self) -> f32 {
        f32::from(u16::try_from(self.next_u64() >> 48).unwrap()) / 32_768.0 - 1.0
    }

    pub(crate) fn vector(&mut self, dims: usize) -> Vec<f32> {
        (0..dims).map(|_| self.next_f32()).collect()
    }
}

/// Declares one conformance test per backend: `conformance!(name, body_fn)` where
/// `body_fn(TestDb)` is an async function.
#[macro_export]
macro_rules! conformance {
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn sqlite() {
                    if let Some(db) = $crate::support::TestDb::new($crate::support::Kind::Sqlite).await {
                        super::$name(&db).await;
                        db.finish().await;
                    }
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn postgres() {
                    if let Some(db) = $crate::support::TestDb::new($crate::support::Kind::Postgres).await {
                        super::$name(&db).await;
                        db.finish().await;
                    }
                }
            }
        )+
    };
}

#[test]
fn database_names_are_replaced_in_urls() {
    assert_eq!(
        with_database("postgres://u:p@127.0.0.1:5432/postgres", "t_1"),
        "postgres://u:p@127.0.0.1:5432/t_1"
    );
    assert_eq!(
        with_database("postgres://u@localhost:1/db?sslmode=disable", "x"),
        "postgres://u@localhost:1/x?sslmode=disable"
    );
    assert_eq!(with_database("postgres://h:1", "x"), "postgres://h:1/x");
}
