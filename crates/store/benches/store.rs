//! Store benchmark, run against both backends: journal appends/s, claims/s with 8 concurrent
//! claimers, and memory top-10 search latency over 1536-dimension vectors with and without the
//! `HNSW` index.
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

    fn vector(&mut self) -> Vec<f32> {
        (0..EMBEDDING_DIMENSIONS).map(|_| self.next_f32()).collect()
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

async fn claims(store: &Store) {
    let runs = 4_000;
    for _ in 0..runs {
        let run = store
            .create_run(NewRun::new(serde_json::json!({})))
            .await
            .unwrap();
        store.enqueue(&run.id).await.unwrap();
    }
    for batch in [1, 10] {
        if batch == 10 {
            for _ in 0..runs {
                let run = store
                    .create_run(NewRun::new(serde_json::json!({})))
                    .await
                    .unwrap();
                store.enqueue(&run.id).await.unwrap();
            }
        }
        let started = Instant::now();
        let mut tasks = Vec::new();
        for worker in 0..8 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let request = ClaimRequest {
                    worker: format!("w{worker}"),
                    limit: batch,
                    lease: Duration::from_secs(60),
                };
                let mut claimed = 0_u32;
                loop {
                    let got = store.claim(&request).await.unwrap();
                    if got.is_empty() {
                        return claimed;
                    }
                    for claim in got {
                        store.release(&claim, Release::Done).await.unwrap();
                        claimed += 1;
                    }
                }
            }));
        }
        let mut total = 0;
        for task in tasks {
            total += task.await.unwrap();
        }
        let rate = f64::from(total) / started.elapsed().as_secs_f64();
        println!(
            "  claims/s (8 claimers, batch {batch}, claim + release): {rate:.0} ({total} runs)"
        );
    }
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
}

async fn memory(store: &Store, sizes: &[usize], postgres: bool, bulk: Option<&BulkLoad>) {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
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
            bulk.execute(
                "CREATE INDEX memory_items_embedding ON memory_items \
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
        let queries: Vec<Vec<f32>> = (0..7).map(|_| rng.vector()).collect();
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

async fn bench(label: &str, store: &Store, sizes: &[usize], bulk: Option<&BulkLoad>) {
    println!("{label}");
    if std::env::var("AUTO_SWE_BENCH_PARTS").map_or(true, |p| p.contains("queue")) {
        journal_appends(store).await;
        claims(store).await;
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
        let store = Store::open(StoreConfig::new(url, keyring.clone()))
            .await
            .unwrap();
        bench("SQLite (file, WAL)", &store, &sizes, None).await;
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
        bench(
            "PostgreSQL 16 + pgvector (HNSW m=16, ef_construction=64)",
            &store,
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
