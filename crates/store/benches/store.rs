//! Store benchmark, run against both backends: journal appends/s, claims/s with 8 concurrent
//! claimers at backlogs of 1,000 and 50,000 runs (with a one-round-trip baseline from the same
//! run), and memory top-10 search latency and recall over clustered 1536-dimension vectors with
//! and without the `HNSW` index.
//!
//! `cargo bench -p auto-swe-store --bench store`. `PostgreSQL` is measured when
//! `AUTO_SWE_POSTGRES_URL` names an admin URL (a fresh database is created and dropped).
//! `AUTO_SWE_BENCH_MEMORY_SIZES` (default `10000,100000`) sets the memory corpus sizes;
//! `AUTO_SWE_BENCH_ONLY=sqlite|postgres` picks a backend; `AUTO_SWE_BENCH_PARTS=memory` skips
//! the journal and queue parts; `AUTO_SWE_BENCH_BULK_LOAD=1` loads the `PostgreSQL` corpus
//! without the index and then builds it.
#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![expect(clippy::unwrap_used, reason = "a benchmark stops on any error")]
#![expect(
    clippy::cast_precision_loss,
    reason = "rates and latencies are approximate"
)]

use std::time::{Duration, Instant};

use auto_swe_store::{
    ClaimRequest, EMBEDDING_DIMENSIONS, JournalAppend, Keyring, LeaseToken, MemoryQuery,
    NewMemoryItem, NewRun, Release, SearchMode, Store, StoreConfig, cosine_distance,
};
use sqlx::Connection;

struct Rng(u64);

impl Rng {
    fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        f32::from(u16::try_from(self.0 >> 48).unwrap()) / 32_768.0 - 1.0
    }
}

/// Vectors with the structure real embeddings have: a low intrinsic dimension and clusters. A
/// point is a 16-dimension latent (one of 100 cluster centres plus Gaussian-like noise) mapped
/// into 1536 dimensions by one fixed random matrix, plus a little noise of its own. Uniform
/// noise in 1536 dimensions, by contrast, puts every point at nearly the same distance from
/// every other, which no approximate index can rank.
struct Clustered {
    rng: Rng,
    centres: Vec<[f32; 16]>,
    basis: Vec<[f32; 16]>,
}

impl Clustered {
    fn new(seed: u64) -> Self {
        let mut rng = Rng(seed);
        let point = |rng: &mut Rng, scale: f32| {
            let mut p = [0.0_f32; 16];
            for x in &mut p {
                *x = rng.next_f32() * scale;
            }
            p
        };
        let centres = (0..100).map(|_| point(&mut rng, 1.0)).collect();
        let basis = (0..EMBEDDING_DIMENSIONS)
            .map(|_| point(&mut rng, 1.0))
            .collect();
        Self {
            rng,
            centres,
            basis,
        }
    }

    fn gaussian(&mut self) -> f32 {
        (self.rng.next_f32() + self.rng.next_f32() + self.rng.next_f32()) / 3.0
    }

    fn vector(&mut self) -> Vec<f32> {
        self.rng.next_f32();
        let pick = usize::from(u16::try_from(self.rng.0 >> 48).unwrap()) % self.centres.len();
        let mut latent = self.centres[pick];
        for x in &mut latent {
            *x += 0.35 * self.gaussian();
        }
        (0..EMBEDDING_DIMENSIONS)
            .map(|d| {
                let row = self.basis[d];
                let dot: f32 = row.iter().zip(&latent).map(|(a, b)| a * b).sum();
                dot + 0.05 * self.gaussian()
            })
            .collect()
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// A new run, claimed: appends are fenced by its lease. Only used while the queue is empty.
async fn leased_run(store: &Store) -> LeaseToken {
    let run = store
        .create_run(NewRun::new(serde_json::json!({})))
        .await
        .unwrap();
    store.enqueue(&run.id).await.unwrap();
    let claims = store
        .claim(&ClaimRequest {
            worker: "journal".to_owned(),
            limit: 1,
            lease: Duration::from_secs(3600),
            engine: auto_swe_store::RunEngine::Embedded,
        })
        .await
        .unwrap();
    assert_eq!(claims[0].run_id, run.id);
    claims[0].token()
}

async fn journal_appends(store: &Store) {
    let token = leased_run(store).await;
    let n = 2_000;
    let started = Instant::now();
    for i in 0..n {
        store
            .append_journal(
                &token,
                JournalAppend {
                    run_id: token.run_id.clone(),
                    recording_id: format!("node-{i}"),
                    attempt: 1,
                    kind: "step".to_owned(),
                    result: serde_json::json!({"output": i, "status": "SUCCESS"}),
                },
            )
            .await
            .unwrap();
    }
    let sequential = f64::from(n) / started.elapsed().as_secs_f64();
    // Eight writers on eight runs at once.
    let mut tokens = Vec::new();
    for _ in 0..8 {
        tokens.push(leased_run(store).await);
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for token in tokens {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..500 {
                store
                    .append_journal(
                        &token,
                        JournalAppend {
                            run_id: token.run_id.clone(),
                            recording_id: format!("node-{i}"),
                            attempt: 1,
                            kind: "step".to_owned(),
                            result: serde_json::json!({"output": i}),
                        },
                    )
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let concurrent = 4_000.0 / started.elapsed().as_secs_f64();
    println!("  journal appends/s: {sequential:.0} (1 writer), {concurrent:.0} (8 writers)");
}

/// Raw SQL on the bench database, for loading backlogs and the baseline.
struct Raw {
    url: String,
    postgres: bool,
}

impl Raw {
    async fn execute(&self, sql: &str) {
        if self.postgres {
            let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
            sqlx::query(sql).execute(&mut conn).await.unwrap();
            conn.close().await.unwrap();
        } else {
            let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
            sqlx::query(sql).execute(&mut conn).await.unwrap();
            conn.close().await.unwrap();
        }
    }

    /// Tops the runnable backlog up to `n` runs (ids `q-<backlog>-<i>`), due in the past.
    async fn backlog(&self, n: usize) {
        let series = if self.postgres {
            format!("SELECT g AS i FROM generate_series(1, {n}) AS g")
        } else {
            format!(
                "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {n}) \
                 SELECT i FROM s"
            )
        };
        self.execute("UPDATE run_queue SET state = 'DONE' WHERE state = 'RUNNABLE'")
            .await;
        self.execute(&format!(
            "INSERT INTO workflow_runs (id, status, spec_snapshot, pins, \
             authorized_connection_ids, created_at, updated_at) \
             SELECT 'q-{n}-' || i, 'PENDING', '{{}}', '{{}}', '[]', 0, 0 FROM ({series}) AS s"
        ))
        .await;
        self.execute(&format!(
            "INSERT INTO run_queue (run_id, state, available_at, enqueued_at) \
             SELECT 'q-{n}-' || i, 'RUNNABLE', i, 0 FROM ({series}) AS s"
        ))
        .await;
        self.execute(if self.postgres {
            "ANALYZE run_queue"
        } else {
            "ANALYZE"
        })
        .await;
    }
}

/// Eight tasks doing `op` until `total` operations are done; returns operations per second.
async fn rate<F, Fut>(total: u32, op: F) -> f64
where
    F: Fn(u32) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..8 {
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..total / 8 {
                op(worker).await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    f64::from(total) / started.elapsed().as_secs_f64()
}

/// Claims/s with 8 claimers, batch 1, at a steady backlog (each claimed run is released to run
/// again at once, so the backlog stays the same size), against a baseline measured in the same
/// run: 8 tasks each reading the database's clock, one round trip per call.
async fn claims(store: &Store, raw: &Raw) {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("  load average before the queue part: {}", load.trim());
    for backlog in [1_000, 50_000] {
        raw.backlog(backlog).await;
        // One round trip per call: the floor under any claim, measured in the same run.
        let baseline = {
            let store = store.clone();
            rate(8_000, move |_| {
                let store = store.clone();
                async move {
                    store.database_time().await.unwrap();
                }
            })
            .await
        };
        let claims = {
            let store = store.clone();
            rate(8_000, move |worker| {
                let store = store.clone();
                async move {
                    let request = ClaimRequest {
                        worker: format!("w{worker}"),
                        limit: 1,
                        lease: Duration::from_secs(60),
                        engine: auto_swe_store::RunEngine::Embedded,
                    };
                    let got = store.claim(&request).await.unwrap();
                    assert_eq!(got.len(), 1, "the backlog ran dry");
                    for claim in got {
                        store
                            .release(&claim, Release::RunAfter(Duration::ZERO))
                            .await
                            .unwrap();
                    }
                }
            })
            .await
        };
        // Claims alone (no release): at most half the backlog, so its size barely moves.
        let claim_only = {
            let store = store.clone();
            let count = u32::try_from((backlog / 2).min(4_000)).unwrap() / 8 * 8;
            rate(count, move |worker| {
                let store = store.clone();
                async move {
                    let request = ClaimRequest {
                        worker: format!("w{worker}"),
                        limit: 1,
                        lease: Duration::from_secs(60),
                        engine: auto_swe_store::RunEngine::Embedded,
                    };
                    assert_eq!(store.claim(&request).await.unwrap().len(), 1);
                }
            })
            .await
        };
        println!(
            "  backlog {backlog}: claims/s (8 claimers, batch 1, claim only) {claim_only:.0}; \
             ratio to baseline {:.2}",
            claim_only / baseline
        );
        println!(
            "  backlog {backlog}: claims/s (8 claimers, batch 1, claim + release) {claims:.0}; \
             baseline (8 tasks, one round trip each) {baseline:.0}/s; ratio {:.2}",
            claims / baseline
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("  load average after the queue part: {}", load.trim());
}

/// Direct SQL on the `PostgreSQL` bench database. After each load the table is analysed, as
/// autovacuum would do in service: without statistics the planner takes the freshly loaded
/// table for one row and answers every search through the `(org_id, scope)` btree and a sort
/// (an exact scan), never the `HNSW` index. With `drop_index` (`AUTO_SWE_BENCH_BULK_LOAD=1`) the
/// corpus is loaded without the index, which is then built once per size (and the build timed),
/// as an operator would for a bulk import.
struct BulkLoad {
    url: String,
    drop_index: bool,
}

impl BulkLoad {
    async fn execute(&self, sql: &str) {
        let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
        sqlx::query(sql).execute(&mut conn).await.unwrap();
        conn.close().await.unwrap();
    }

    /// Several statements on one connection (session settings, then the work).
    async fn execute_script(&self, sql: &str) {
        let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
        sqlx::raw_sql(sql).execute(&mut conn).await.unwrap();
        conn.close().await.unwrap();
    }
}

async fn memory(store: &Store, sizes: &[usize], postgres: bool, bulk: Option<&BulkLoad>) {
    let mut rng = Clustered::new(0x2545_f491_4f6c_dd1d);
    let mut corpus: Vec<(String, Vec<f32>)> = Vec::new();
    for &size in sizes {
        if let Some(bulk) = bulk.filter(|b| b.drop_index) {
            bulk.execute("DROP INDEX IF EXISTS memory_items_embedding")
                .await;
        }
        let started = Instant::now();
        let missing = size - corpus.len();
        let mut tasks = Vec::new();
        let per_task = missing.div_ceil(4);
        for t in 0..4 {
            let count = per_task.min(missing.saturating_sub(t * per_task));
            let vectors: Vec<Vec<f32>> = (0..count).map(|_| rng.vector()).collect();
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let mut out = Vec::with_capacity(vectors.len());
                for v in vectors {
                    let item = NewMemoryItem::new("bench", "org", "lesson", v.clone());
                    out.push((store.add_memory(item).await.unwrap().id, v));
                }
                out
            }));
        }
        for task in tasks {
            corpus.extend(task.await.unwrap());
        }
        println!(
            "  memory: inserted {missing} vectors in {:.1} s ({} total)",
            started.elapsed().as_secs_f64(),
            corpus.len()
        );
        if let Some(bulk) = bulk.filter(|b| b.drop_index) {
            let started = Instant::now();
            // The graph of 100,000 vectors of 1536 dimensions is about 700 MB: built in memory
            // it takes minutes, spilled to disk it takes far longer.
            bulk.execute_script(
                "SET maintenance_work_mem = '1536MB'; \
                 CREATE INDEX memory_items_embedding ON memory_items \
                 USING hnsw (embedding vector_cosine_ops)",
            )
            .await;
            println!(
                "  memory: built the HNSW index over {} vectors in {:.1} s",
                corpus.len(),
                started.elapsed().as_secs_f64()
            );
        }
        if let Some(bulk) = bulk {
            bulk.execute("ANALYZE memory_items").await;
        }
        let queries: Vec<Vec<f32>> = (0..15).map(|_| rng.vector()).collect();
        let modes: &[(SearchMode, &str)] = if postgres {
            &[
                (SearchMode::Exact, "exact, no index"),
                (SearchMode::Approximate, "HNSW index"),
            ]
        } else {
            &[(SearchMode::Exact, "exact in Rust, no index")]
        };
        for (mode, label) in modes {
            let mut samples = Vec::new();
            let mut recall = 0;
            for query in &queries {
                let started = Instant::now();
                let hits = store
                    .search_memory(&MemoryQuery {
                        scope: "bench".to_owned(),
                        org_id: "org".to_owned(),
                        team_id: None,
                        connection_id: None,
                        embedding: query.clone(),
                        limit: 10,
                        mode: *mode,
                    })
                    .await
                    .unwrap();
                samples.push(started.elapsed());
                let mut truth: Vec<(f64, &str)> = corpus
                    .iter()
                    .map(|(id, v)| (cosine_distance(query, v), id.as_str()))
                    .collect();
                truth.sort_by(|a, b| a.0.total_cmp(&b.0));
                let truth: Vec<&str> = truth.iter().take(10).map(|t| t.1).collect();
                recall += hits
                    .iter()
                    .filter(|h| truth.contains(&h.item.id.as_str()))
                    .count();
            }
            println!(
                "  memory top-10 over {size}: median {:.2} ms ({label}), recall@10 {:.2}",
                median(samples).as_secs_f64() * 1e3,
                recall as f64 / (10.0 * queries.len() as f64)
            );
        }
    }
}

async fn bench(label: &str, store: &Store, raw: &Raw, sizes: &[usize], bulk: Option<&BulkLoad>) {
    println!("{label}");
    let parts = std::env::var("AUTO_SWE_BENCH_PARTS").unwrap_or_else(|_| "queue,memory".into());
    if parts.contains("queue") {
        journal_appends(store).await;
        claims(store, raw).await;
    }
    if !parts.contains("memory") {
        return;
    }
    memory(store, sizes, label.starts_with("PostgreSQL"), bulk).await;
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let sizes: Vec<usize> = std::env::var("AUTO_SWE_BENCH_MEMORY_SIZES")
        .unwrap_or_else(|_| "10000,100000".to_owned())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let keyring = Keyring::single(1, [9; 32]);
    let only = std::env::var("AUTO_SWE_BENCH_ONLY").unwrap_or_default();

    if only.is_empty() || only == "sqlite" {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("bench.db").display());
        let store = Store::open(StoreConfig::new(url.clone(), keyring.clone()))
            .await
            .unwrap();
        let raw = Raw {
            url,
            postgres: false,
        };
        bench("SQLite (file, WAL)", &store, &raw, &sizes, None).await;
        store.close().await;
    }

    if only.is_empty() || only == "postgres" {
        let Some(admin_url) = std::env::var("AUTO_SWE_POSTGRES_URL")
            .ok()
            .filter(|u| !u.is_empty())
        else {
            println!("PostgreSQL: skipped (AUTO_SWE_POSTGRES_URL is not set)");
            return;
        };
        let mut admin = sqlx::PgConnection::connect(&admin_url).await.unwrap();
        let name = format!("bench_{}", std::process::id());
        sqlx::query(&format!("CREATE DATABASE \"{name}\""))
            .execute(&mut admin)
            .await
            .unwrap();
        let url = match admin_url.rsplit_once('/') {
            Some((base, _)) => format!("{base}/{name}"),
            None => admin_url.clone(),
        };
        let store = Store::open(StoreConfig::new(url.clone(), keyring))
            .await
            .unwrap();
        let bulk = BulkLoad {
            url,
            drop_index: std::env::var("AUTO_SWE_BENCH_BULK_LOAD").is_ok_and(|v| v == "1"),
        };
        let raw = Raw {
            url: bulk.url.clone(),
            postgres: true,
        };
        bench(
            "PostgreSQL 16 + pgvector (HNSW m=16, ef_construction=64)",
            &store,
            &raw,
            &sizes,
            Some(&bulk),
        )
        .await;
        store.close().await;
        sqlx::query(&format!("DROP DATABASE \"{name}\" WITH (FORCE)"))
            .execute(&mut admin)
            .await
            .unwrap();
    }
}
