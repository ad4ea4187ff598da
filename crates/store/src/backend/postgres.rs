//! The `PostgreSQL` backend: scale-out coordination, `pgvector` memory search.
//!
//! Claims lock candidate rows with `FOR UPDATE SKIP LOCKED`, so concurrent workers on any number
//! of machines never block on, or share, a run. Writes that make work runnable queue a
//! `NOTIFY` on [`crate::WORK_CHANNEL`] that `PostgreSQL` delivers when they commit.

use std::str::FromStr;
use std::sync::Arc;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions, PgRow};

/// How long the server lets a session sit idle inside a transaction before ending it (see
/// `PgStore::open`). Every store transaction is a few statements with no waiting between them.
const IDLE_IN_TRANSACTION_TIMEOUT: &str = "5s";

use super::prelude::*;
use crate::records::memory::SearchMode;
use crate::records::queue::WORK_CHANNEL;

type DbKind = sqlx::Postgres;

/// The `PostgreSQL` store.
#[derive(Debug)]
pub(crate) struct PgStore {
    pool: sqlx::PgPool,
    keyring: Keyring,
    clock: Arc<dyn Clock>,
}

impl PgStore {
    /// The database's clock in milliseconds since the epoch (the transaction's start time).
    const NOW_MS: &'static str = "(EXTRACT(EPOCH FROM now()) * 1000)::BIGINT";

    /// Holds the run's queue row until commit: a claim skips it and a concurrent re-claim waits,
    /// then finds the epoch moved on only after the fenced write committed or rolled back.
    const FENCE_SQL: &'static str = "SELECT run_id FROM run_queue \
         WHERE run_id = $1 AND claim_count = $2 AND state = 'LEASED' \
         AND lease_until > (EXTRACT(EPOCH FROM now()) * 1000)::BIGINT FOR SHARE";

    /// A journal entry written in one statement under the fence: the queue row is held (`FOR
    /// SHARE`) from the check to the commit, so a re-claim waits for the write or, if it came
    /// first, the write finds the epoch moved on and inserts nothing. No row back: the fence
    /// refused, or the entry exists.
    const JOURNAL_INSERT_SQL: &'static str = "WITH fence AS (SELECT run_id FROM run_queue \
         WHERE run_id = $1 AND claim_count = $7 AND state = 'LEASED' \
         AND lease_until > (EXTRACT(EPOCH FROM now()) * 1000)::BIGINT FOR SHARE) \
         INSERT INTO run_journal (run_id, recording_id, attempt, kind, result, recorded_at) \
         SELECT $1, $2, $3, $4, $5, $6 FROM fence \
         ON CONFLICT (run_id, recording_id, attempt, kind) DO NOTHING RETURNING *";

    /// Appended to a row-picking subquery so concurrent pickers take different rows.
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";

    const EXPLAIN: &'static str = "EXPLAIN ";
    const EXPLAIN_COLUMN: &'static str = "QUERY PLAN";

    const CLAIM_SQL: &'static str = concat!(
        "WITH picked AS (",
        claim_candidates_sql!("(EXTRACT(EPOCH FROM now()) * 1000)::BIGINT"),
        " FOR UPDATE SKIP LOCKED) UPDATE run_queue AS q SET ",
        claim_set_sql!("(EXTRACT(EPOCH FROM now()) * 1000)::BIGINT"),
        " FROM picked WHERE q.run_id = picked.run_id \
         RETURNING q.run_id, q.state, q.claim_count, q.lease_until"
    );

    pub(crate) async fn open(
        url: &str,
        keyring: Keyring,
        clock: Arc<dyn Clock>,
        max_connections: u32,
    ) -> StoreResult<Self> {
        // A transaction left open by a client that stopped (paused, swapped out, partitioned)
        // would hold its run's queue row, and every fenced write keeps the row locked until it
        // commits: the run could not be taken over however long ago its lease ended. The
        // server ends such a session, rolling the write back, so a takeover waits at most this
        // long past the lease.
        let options = PgConnectOptions::from_str(url)
            .map_err(|_| StoreError::UnsupportedUrl)?
            .options([(
                "idle_in_transaction_session_timeout",
                IDLE_IN_TRANSACTION_TIMEOUT,
            )]);
        // No ping before each use: it doubled the round trips of every query (a fifth of a
        // launch's time under load). A connection the server dropped fails its next query,
        // which is refused as a database error and closes it; the pool then opens a new one.
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(2))
            .acquire_timeout(Duration::from_secs(60))
            .test_before_acquire(false)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(Self {
            pool,
            keyring,
            clock,
        })
    }

    /// A release statement that returns the run id when it matched, and when `notify`, queues
    /// the wake-up in the same statement.
    fn released_sql(update: &str, notify: bool) -> String {
        if notify {
            format!(
                "WITH released AS ({update} RETURNING run_id) \
                 SELECT run_id, pg_notify('{WORK_CHANNEL}', run_id) AS notified FROM released"
            )
        } else {
            format!("{update} RETURNING run_id")
        }
    }

    async fn wake_in_tx(
        &self,
        tx: &mut sqlx::Transaction<'_, DbKind>,
        run_id: &str,
    ) -> StoreResult<()> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(WORK_CHANNEL)
            .bind(run_id)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    #[expect(clippy::unused_self, reason = "same shape as the SQLite hook")]
    fn woke(&self) {}

    async fn work_waiter(&self) -> StoreResult<Box<dyn WorkWaiter>> {
        let mut listener = PgListener::connect_with(&self.pool).await?;
        listener.listen(WORK_CHANNEL).await?;
        Ok(Box::new(PgWaiter { listener }))
    }

    fn memory_from_row(row: &PgRow) -> StoreResult<MemoryItem> {
        Ok(MemoryItem {
            id: row.try_get("id")?,
            scope: row.try_get("scope")?,
            org_id: row.try_get("org_id")?,
            team_id: row.try_get("team_id")?,
            connection_id: row.try_get("connection_id")?,
            content: row.try_get("content")?,
            metadata: from_json_text("memory_items", &row.try_get::<String, _>("metadata")?)?,
            skills_active: from_json_text(
                "memory_items",
                &row.try_get::<String, _>("skills_active")?,
            )?,
            created_at: Timestamp::from_millis(row.try_get("created_at")?),
        })
    }
}

struct PgWaiter {
    listener: PgListener,
}

#[async_trait::async_trait]
impl WorkWaiter for PgWaiter {
    async fn wait(&mut self, max_wait: Duration) -> StoreResult<bool> {
        match tokio::time::timeout(max_wait, self.listener.recv()).await {
            Ok(Ok(_)) => {
                // Drain what else already arrived: one wake-up covers them all.
                while self.listener.next_buffered().is_some() {}
                Ok(true)
            }
            Ok(Err(error)) => Err(StoreError::from(error)),
            Err(_) => Ok(false),
        }
    }
}

impl_run_stores!(PgStore, PgRow);
impl_spend_store!(PgStore, PgRow);
impl_queue_store!(PgStore, PgRow);
impl_run_queries!(PgStore, PgRow);
impl_integration_store!(PgStore, PgRow);
impl_membership_store!(PgStore, PgRow);
impl_identity_stores!(PgStore, PgRow);
impl_connection_store!(PgStore, PgRow);
impl_execution_stores!(PgStore, PgRow);
impl_library_stores!(PgStore, PgRow);
impl_agent_library!(PgStore, PgRow);
impl_trigger_store!(PgStore, PgRow);
impl_memory_shared!(PgStore, |embedding: Vec<f32>| pgvector::Vector::from(
    embedding
));

#[async_trait::async_trait]
impl MemoryStore for PgStore {
    async fn add_memory(&self, item: NewMemoryItem) -> StoreResult<MemoryItem> {
        self.memory_add(item).await
    }

    async fn get_memory(&self, id: &str) -> StoreResult<MemoryItem> {
        self.memory_by_id(id).await
    }

    async fn delete_memory(&self, id: &str) -> StoreResult<()> {
        self.memory_delete(id).await
    }

    async fn search_memory(&self, query: &MemoryQuery) -> StoreResult<Vec<MemoryHit>> {
        crate::records::memory::validate_query(query)?;
        let mut tx = self.pool.begin().await?;
        match query.mode {
            // Without index scans the planner compares every candidate: exact neighbours.
            SearchMode::Exact => {
                sqlx::query("SET LOCAL enable_indexscan = off")
                    .execute(&mut *tx)
                    .await?;
            }
            SearchMode::Approximate => {
                let ef_search = (query.limit * 2).max(40);
                sqlx::query(&format!("SET LOCAL hnsw.ef_search = {ef_search}"))
                    .execute(&mut *tx)
                    .await?;
            }
        }
        let rows = sqlx::query(&format!(
            "SELECT {MEMORY_COLUMNS}, embedding <=> $1 AS distance FROM memory_items \
             WHERE org_id = $2 AND scope = $3 AND ($4::text IS NULL OR team_id = $4) \
             AND ($5::text IS NULL OR connection_id = $5) \
             ORDER BY embedding <=> $1 LIMIT $6"
        ))
        .bind(pgvector::Vector::from(query.embedding.clone()))
        .bind(&query.org_id)
        .bind(&query.scope)
        .bind(&query.team_id)
        .bind(&query.connection_id)
        .bind(i64::from(query.limit))
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        rows.iter()
            .map(|row| {
                Ok(MemoryHit {
                    item: Self::memory_from_row(row)?,
                    distance: row.try_get("distance")?,
                })
            })
            .collect()
    }
}

#[async_trait::async_trait]
impl crate::StoreBackend for PgStore {
    fn backend(&self) -> crate::DatabaseKind {
        crate::DatabaseKind::Postgres
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}
