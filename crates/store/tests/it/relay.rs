//! Runs on an engine that does not read the store: their signals and stop requests wait in the
//! store until a relay forwards them, each once; embedded runs never show up there.

use std::time::Duration;

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::TestDb;

conformance!(
    signals_and_stops_of_temporal_runs_wait_for_the_relay,
    the_reaper_asks_each_engine_only_about_its_own_runs,
);

async fn signals_and_stops_of_temporal_runs_wait_for_the_relay(db: &TestDb) {
    let store = &db.store;
    let embedded = store.create_run(NewRun::new(json!({}))).await.unwrap();
    let temporal = store
        .create_run(NewRun::new(json!({})).on_engine(RunEngine::Temporal))
        .await
        .unwrap();
    assert_eq!(embedded.engine, RunEngine::Embedded);
    assert_eq!(
        store.get_run(&temporal.id).await.unwrap().engine,
        RunEngine::Temporal
    );

    let read_by_the_engine = store
        .send_signal(&embedded.id, "ci", &json!({"n": 0}))
        .await
        .unwrap();
    store.request_cancel(&embedded.id).await.unwrap();
    let first = store
        .send_signal(&temporal.id, "ci", &json!({"n": 1}))
        .await
        .unwrap();
    let second = store
        .send_signal(&temporal.id, "merge", &json!({"n": 2}))
        .await
        .unwrap();
    assert!(
        store
            .pending_relays(RunEngine::Embedded, 10)
            .await
            .unwrap()
            .is_empty(),
        "the embedded engine reads the store itself"
    );
    let pending = store.pending_relays(RunEngine::Temporal, 10).await.unwrap();
    assert_eq!(
        pending,
        vec![
            Relayed::Signal(first.clone()),
            Relayed::Signal(second.clone())
        ]
    );

    // A stop comes before the signals, is asked for once however often it is sent, and each
    // item is marked once.
    let at = store.request_cancel(&temporal.id).await.unwrap();
    store.request_cancel(&temporal.id).await.unwrap();
    let pending = store.pending_relays(RunEngine::Temporal, 2).await.unwrap();
    let stop = Relayed::Cancel {
        run_id: temporal.id.clone(),
        requested_at: at,
    };
    assert_eq!(pending, vec![stop.clone(), Relayed::Signal(first.clone())]);
    assert_eq!(pending[0].run_id(), temporal.id);
    assert!(store.mark_relayed(&stop).await.unwrap());
    assert!(!store.mark_relayed(&stop).await.unwrap());
    assert!(
        store
            .mark_relayed(&Relayed::Signal(first.clone()))
            .await
            .unwrap()
    );
    assert!(!store.mark_relayed(&Relayed::Signal(first)).await.unwrap());
    assert_eq!(
        store.pending_relays(RunEngine::Temporal, 10).await.unwrap(),
        vec![Relayed::Signal(second.clone())]
    );
    // A stop already forwarded is not asked for again by a later request.
    store.request_cancel(&temporal.id).await.unwrap();
    assert_eq!(
        store.pending_relays(RunEngine::Temporal, 10).await.unwrap(),
        vec![Relayed::Signal(second.clone())]
    );
    // A signal the engine reads from the store is never marked.
    assert!(
        !store
            .mark_relayed(&Relayed::Signal(read_by_the_engine))
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .pending_relays(RunEngine::Temporal, 0)
            .await
            .unwrap_err()
            .code(),
        "STORE_INVALID_INPUT"
    );
}

async fn the_reaper_asks_each_engine_only_about_its_own_runs(db: &TestDb) {
    let store = &db.store;
    let embedded = store.create_run(NewRun::new(json!({}))).await.unwrap();
    let temporal = store
        .create_run(NewRun::new(json!({})).on_engine(RunEngine::Temporal))
        .await
        .unwrap();
    db.clock.advance(Duration::from_secs(3_600));
    let candidates = |engine| ReapQuery {
        older_than: Duration::from_secs(60),
        limit: 10,
        engine,
    };
    let ids = |runs: Vec<Run>| runs.into_iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store
            .reap_candidates(&candidates(RunEngine::Embedded))
            .await
            .unwrap()),
        vec![embedded.id]
    );
    assert_eq!(
        ids(store
            .reap_candidates(&candidates(RunEngine::Temporal))
            .await
            .unwrap()),
        vec![temporal.id]
    );
}

#[test]
fn an_engine_setting_reads_in_any_case_and_nothing_else() {
    assert_eq!(
        RunEngine::from_setting("embedded").unwrap(),
        RunEngine::Embedded
    );
    assert_eq!(
        RunEngine::from_setting("Temporal").unwrap(),
        RunEngine::Temporal
    );
    assert_eq!(
        RunEngine::from_setting("TEMPORAL").unwrap(),
        RunEngine::Temporal
    );
    for wrong in ["", "temporal ", "kafka"] {
        assert_eq!(
            RunEngine::from_setting(wrong).unwrap_err().code(),
            "STORE_INVALID_INPUT",
            "{wrong:?}"
        );
    }
}
