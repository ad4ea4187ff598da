//! Migration `0015_step_once` on a run whose step was written twice before it: the earliest row
//! stays, and the later copies go.

use crate::support::{BlankDb, Kind, keyring};

/// A run with `impl` attempt 1 written twice (the second a retried record), attempt 2 once, and
/// another run with the same recording id.
const OLDER_ROWS: &str = "
INSERT INTO workflow_runs (id, status, spec_snapshot, pins, authorized_connection_ids,
    created_at, updated_at) VALUES
    ('r1', 'RUNNING', '{}', '{}', '[]', 1, 1),
    ('r2', 'RUNNING', '{}', '{}', '[]', 1, 1);
INSERT INTO workflow_steps (id, run_id, recording_id, node_id, attempt, status, output,
    started_at, ended_at) VALUES
    ('s-later', 'r1', 'impl', 'impl', 1, 'SUCCESS', '\"second\"', 20, 21),
    ('s-first', 'r1', 'impl', 'impl', 1, 'SUCCESS', '\"first\"', 10, 11),
    ('s-tie-b', 'r1', 'review', 'review', 1, 'SUCCESS', '\"b\"', 30, 31),
    ('s-tie-a', 'r1', 'review', 'review', 1, 'SUCCESS', '\"a\"', 30, 31),
    ('s-retry', 'r1', 'impl', 'impl', 2, 'FAILED', 'null', 40, 41),
    ('s-other', 'r2', 'impl', 'impl', 1, 'SUCCESS', 'null', 50, 51);
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_written_twice_keeps_its_first_row_on_sqlite() {
    if let Some(blank) = BlankDb::new(Kind::Sqlite).await {
        blank.written_before(15, OLDER_ROWS).await;
        check(blank).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_written_twice_keeps_its_first_row_on_postgres() {
    if let Some(blank) = BlankDb::new(Kind::Postgres).await {
        blank.written_before(15, OLDER_ROWS).await;
        check(blank).await;
    }
}

async fn check(blank: BlankDb) {
    let db = blank.open(keyring()).await;
    let ids = |steps: Vec<auto_swe_store::WorkflowStep>| {
        steps.into_iter().map(|s| s.id).collect::<Vec<_>>()
    };
    assert_eq!(
        ids(db.store.list_steps("r1").await.unwrap()),
        ["s-first", "s-tie-a", "s-retry"]
    );
    assert_eq!(ids(db.store.list_steps("r2").await.unwrap()), ["s-other"]);
}
