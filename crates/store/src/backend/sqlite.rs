//! The `SQLite` backend: embedded, one machine, exact memory search in Rust.
//!
//! `SQLite` has one writer at a time, so every claim is a single `UPDATE … RETURNING` statement that
//! runs under the write lock; no two claimers can pick the same row. Waiters are woken in-process.
//!
//! The database runs in WAL mode with `synchronous = NORMAL`: a commit is durable against a crash
//! of the process, and the last commits before a power loss may be lost (the database stays
//! consistent). `?synchronous=full` on the URL (`sqlite:///path/store.db?synchronous=full`) makes
//! every commit wait for its flush to the disk; `normal` and `extra` are the other accepted
//! values.

use std::str::FromStr;
use std::sync::Arc;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};

use futures_util::TryStreamExt;

use super::prelude::*;

type DbKind = sqlx::Sqlite;

/// The `SQLite` store.
#[derive(Debug)]
pub(crate) struct SqliteStore {
    pool: sqlx::SqlitePool,
    keyring: Keyring,
    clock: Arc<dyn Clock>,
    wake: tokio::sync::watch::Sender<u64>,
}

impl SqliteStore {
    /// The database's clock in milliseconds since the epoch (constant within a statement).
    const NOW_MS: &'static str = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";

    /// A no-op write: it takes the database's write lock first, so nothing can re-claim the run
    /// before the fenced write commits.
    const FENCE_SQL: &'static str = "UPDATE run_queue SET state = state \
         WHERE run_id = $1 AND claim_count = $2 AND state = 'LEASED' \
         AND lease_until > CAST(unixepoch('subsec') * 1000 AS INTEGER) RETURNING run_id";

    /// A journal entry written in one statement under the fence (a statement holds the
    /// database's write lock throughout). No row back: the fence refused, or the entry exists.
    const JOURNAL_INSERT_SQL: &'static str = "INSERT INTO run_journal \
         (run_id, recording_id, attempt, kind, result, recorded_at) \
         SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM run_queue \
         WHERE run_id = $1 AND claim_count = $7 AND state = 'LEASED' \
         AND lease_until > CAST(unixepoch('subsec') * 1000 AS INTEGER)) \
         ON CONFLICT (run_id, recording_id, attempt, kind) DO NOTHING RETURNING *";

    /// Appended to a row-picking subquery so concurrent pickers take different rows.
    const SKIP_LOCKED: &'static str = "";

    const EXPLAIN: &'static str = "EXPLAIN QUERY PLAN ";
    const EXPLAIN_COLUMN: &'static str = "detail";

    const CLAIM_SQL: &'static str = concat!(
        "UPDATE run_queue SET ",
        claim_set_sql!("CAST(unixepoch('subsec') * 1000 AS INTEGER)"),
        " WHERE run_id IN (",
        claim_candidates_sql!("CAST(unixepoch('subsec') * 1000 AS INTEGER)"),
        ") RETURNING run_id, state, claim_count, lease_until"
    );

    pub(crate) async fn open(
        url: &str,
        keyring: Keyring,
        clock: Arc<dyn Clock>,
        max_connections: u32,
    ) -> StoreResult<Self> {
        let (driver_url, synchronous) = synchronous_from_url(url)?;
        let options = SqliteConnectOptions::from_str(&driver_url)
            .map_err(|_| StoreError::UnsupportedUrl)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(synchronous)
            .busy_timeout(Duration::from_secs(60))
            .foreign_keys(true);
        // An in-memory database exists per connection, so it gets exactly one.
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        let pool = SqlitePoolOptions::new()
            .max_connections(if in_memory { 1 } else { max_connections.max(1) })
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        let (wake, _) = tokio::sync::watch::channel(0);
        Ok(Self {
            pool,
            keyring,
            clock,
            wake,
        })
    }

    /// A release statement that returns the run id when it matched (waiters in this process are
    /// woken after it, by `woke`).
    fn released_sql(update: &str, _notify: bool) -> String {
        format!("{update} RETURNING run_id")
    }

    #[expect(clippy::unused_async, reason = "same shape as the PostgreSQL hook")]
    async fn wake_in_tx(
        &self,
        _tx: &mut sqlx::Transaction<'_, DbKind>,
        _run_id: &str,
    ) -> StoreResult<()> {
        Ok(())
    }

    fn woke(&self) {
        self.wake.send_modify(|n| *n = n.wrapping_add(1));
    }

    #[expect(clippy::unused_async, reason = "same shape as the PostgreSQL hook")]
    async fn work_waiter(&self) -> StoreResult<Box<dyn WorkWaiter>> {
        let mut receiver = self.wake.subscribe();
        receiver.borrow_and_update();
        Ok(Box::new(SqliteWaiter { receiver }))
    }

    fn memory_from_row(row: &SqliteRow) -> StoreResult<MemoryItem> {
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

/// A candidate ordered by distance, then id, so the heap's top is the worst kept hit.
#[derive(Debug, PartialEq)]
struct Scored {
    distance: f64,
    id: String,
}

impl Eq for Scored {}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.distance
            .total_cmp(&other.distance)
            .then_with(|| self.id.cmp(&other.id))
    }
}

struct SqliteWaiter {
    receiver: tokio::sync::watch::Receiver<u64>,
}

#[async_trait::async_trait]
impl WorkWaiter for SqliteWaiter {
    async fn wait(&mut self, max_wait: Duration) -> StoreResult<bool> {
        match tokio::time::timeout(max_wait, self.receiver.changed()).await {
            Ok(Ok(())) => {
                self.receiver.borrow_and_update();
                Ok(true)
            }
            Ok(Err(_)) | Err(_) => Ok(false),
        }
    }
}

impl_run_stores!(SqliteStore, SqliteRow);
impl_spend_store!(SqliteStore, SqliteRow);
impl_queue_store!(SqliteStore, SqliteRow);
impl_run_queries!(SqliteStore, SqliteRow);
impl_integration_store!(SqliteStore, SqliteRow);
impl_membership_store!(SqliteStore, SqliteRow);
impl_identity_stores!(SqliteStore, SqliteRow);
impl_connection_store!(SqliteStore, SqliteRow);
impl_execution_stores!(SqliteStore, SqliteRow);
impl_library_stores!(SqliteStore, SqliteRow);
impl_agent_library!(SqliteStore, SqliteRow);
impl_trigger_store!(SqliteStore, SqliteRow);
impl_memory_shared!(SqliteStore, |embedding: Vec<f32>| {
    crate::records::memory::embedding_to_bytes(&embedding)
});

#[async_trait::async_trait]
impl MemoryStore for SqliteStore {
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
        // Exact search: stream every candidate, keep the nearest in a bounded heap, then load
        // only those rows. Memory stays at one row plus `limit` ids whatever the corpus size.
        let query_norm = crate::records::memory::norm(&query.embedding);
        let keep = query.limit as usize;
        let mut heap: std::collections::BinaryHeap<Scored> =
            std::collections::BinaryHeap::with_capacity(keep + 1);
        let mut rows = sqlx::query(
            "SELECT id, embedding FROM memory_items WHERE org_id = $1 AND scope = $2 \
             AND ($3 IS NULL OR team_id = $3) AND ($4 IS NULL OR connection_id = $4)",
        )
        .bind(&query.org_id)
        .bind(&query.scope)
        .bind(&query.team_id)
        .bind(&query.connection_id)
        .fetch(&self.pool);
        while let Some(row) = rows.try_next().await? {
            let bytes: &[u8] = row.try_get("embedding")?;
            let distance =
                crate::records::memory::cosine_distance_bytes(&query.embedding, query_norm, bytes)?;
            let candidate = Scored {
                distance,
                id: row.try_get("id")?,
            };
            if heap.len() < keep {
                heap.push(candidate);
            } else if heap.peek().is_some_and(|worst| candidate < *worst) {
                heap.pop();
                heap.push(candidate);
            }
        }
        drop(rows);
        let scored = heap.into_sorted_vec();
        let mut hits = Vec::with_capacity(scored.len());
        for Scored { distance, id } in scored {
            hits.push(MemoryHit {
                item: self.get_memory(&id).await?,
                distance,
            });
        }
        Ok(hits)
    }
}

#[async_trait::async_trait]
impl crate::StoreBackend for SqliteStore {
    fn backend(&self) -> crate::DatabaseKind {
        crate::DatabaseKind::Sqlite
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

/// The `synchronous` setting a URL asks for (`?synchronous=normal`, the default, `full` or
/// `extra`), and the URL without that parameter, for the driver (which knows no such parameter).
fn synchronous_from_url(url: &str) -> StoreResult<(String, SqliteSynchronous)> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), SqliteSynchronous::Normal));
    };
    let mut synchronous = SqliteSynchronous::Normal;
    let mut rest = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("synchronous", value)) => {
                synchronous = match value.to_ascii_lowercase().as_str() {
                    "normal" => SqliteSynchronous::Normal,
                    "full" => SqliteSynchronous::Full,
                    "extra" => SqliteSynchronous::Extra,
                    _ => return Err(StoreError::UnsupportedUrl),
                };
            }
            _ => rest.push(pair),
        }
    }
    let url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    Ok((url, synchronous))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_synchronous_parameter_is_read_and_left_out_of_the_driver_url() {
        let cases = [
            (
                "sqlite:///d/s.db",
                "sqlite:///d/s.db",
                SqliteSynchronous::Normal,
            ),
            (
                "sqlite:///d/s.db?synchronous=full",
                "sqlite:///d/s.db",
                SqliteSynchronous::Full,
            ),
            (
                "sqlite:///d/s.db?mode=rwc&synchronous=FULL&cache=shared",
                "sqlite:///d/s.db?mode=rwc&cache=shared",
                SqliteSynchronous::Full,
            ),
            (
                "sqlite::memory:?synchronous=extra",
                "sqlite::memory:",
                SqliteSynchronous::Extra,
            ),
            (
                "sqlite:///d/s.db?mode=rwc",
                "sqlite:///d/s.db?mode=rwc",
                SqliteSynchronous::Normal,
            ),
        ];
        for (url, driver_url, synchronous) in cases {
            let (got_url, got) = synchronous_from_url(url).unwrap();
            assert_eq!((got_url.as_str(), got), (driver_url, synchronous), "{url}");
        }
        assert!(matches!(
            synchronous_from_url("sqlite:///d/s.db?synchronous=off"),
            Err(StoreError::UnsupportedUrl)
        ));
    }
}
