//! Bookkeeping made again: a step record or a human step's notice whose first report was lost
//! (its worker died after the write and a Temporal activity was retried) finds what it wrote
//! and adds nothing.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use auto_swe_interpreter::{Dispatcher, HumanStepNotice, StepEnd, StepRecord};
use auto_swe_models::ReplayClient;
use auto_swe_store::StepStatus;
use auto_swe_worker::demo::DEMO_CASSETTE;
use auto_swe_worker::{Parking, RunDispatcher, RunScope, StepRegistry};
use serde_json::json;

use crate::services::{local_backend, services_with};
use crate::support::{TestStore, on_both_backends};

on_both_backends!(
    a_record_made_again_keeps_one_step_with_its_first_output,
    a_human_step_notified_again_asks_once_and_a_revisit_asks_again
);

fn record(attempt: u32, output: &str) -> StepRecord {
    StepRecord {
        recording_id: "impl".to_owned(),
        spec_node_id: "impl".to_owned(),
        node_type: "step".to_owned(),
        status: StepEnd::Completed,
        attempt,
        inputs: None,
        outputs: Some(Arc::new(json!(output))),
        error: None,
    }
}

/// A run held by a dispatcher over real services; `None` without bubblewrap (where it is not
/// required).
async fn held_run(db: &TestStore, dir: &Path) -> Option<(String, RunDispatcher)> {
    let (backend, root) = local_backend(&dir.join("state"))?;
    let cassette = serde_json::from_str(DEMO_CASSETTE).unwrap();
    let client = Arc::new(ReplayClient::new(cassette).unwrap());
    let services = services_with(db.store.clone(), backend, root, dir, client);
    let run_id = db.start(json!({})).await;
    let claim = db
        .store
        .claim_run(
            &run_id,
            "w1",
            Duration::from_secs(30),
            auto_swe_store::RunEngine::Embedded,
        )
        .await
        .unwrap();
    let dispatcher = RunDispatcher::new(
        services,
        Arc::new(StepRegistry::builtin()),
        RunScope {
            run_id: run_id.clone(),
            token: claim.token(),
            input: json!({}),
        },
        Arc::new(Parking::new()),
    );
    Some((run_id, dispatcher))
}

async fn a_record_made_again_keeps_one_step_with_its_first_output(db: &TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let Some((run_id, dispatcher)) = held_run(db, dir.path()).await else {
        return;
    };
    dispatcher.record_step(&record(1, "first")).await.unwrap();
    dispatcher.record_step(&record(1, "again")).await.unwrap();
    dispatcher.record_step(&record(2, "retried")).await.unwrap();
    let steps = db.store.list_steps(&run_id).await.unwrap();
    let mut kept: Vec<_> = steps
        .iter()
        .map(|step| (step.attempt, step.status, step.output["outputs"].clone()))
        .collect();
    kept.sort_by_key(|(attempt, ..)| *attempt);
    assert_eq!(
        kept,
        [
            (1, StepStatus::SUCCEEDED, json!("first")),
            (2, StepStatus::SUCCEEDED, json!("retried")),
        ]
    );
}

fn notice(recording_id: &str, title: &str) -> HumanStepNotice {
    HumanStepNotice {
        recording_id: recording_id.to_owned(),
        spec_node_id: "approve".to_owned(),
        node_type: "humanApproval".to_owned(),
        signal: "approve".to_owned(),
        title: title.to_owned(),
        description: None,
        timeout_ms: None,
        details: json!({}),
        context: json!({}),
    }
}

async fn a_human_step_notified_again_asks_once_and_a_revisit_asks_again(db: &TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let Some((run_id, dispatcher)) = held_run(db, dir.path()).await else {
        return;
    };
    dispatcher
        .notify_human_step(&notice("approve", "first"))
        .await
        .unwrap();
    dispatcher
        .notify_human_step(&notice("approve", "again"))
        .await
        .unwrap();
    dispatcher
        .notify_human_step(&notice("approve#2", "revisit"))
        .await
        .unwrap();
    let mut asked: Vec<_> = db
        .store
        .list_human_steps(&run_id)
        .await
        .unwrap()
        .into_iter()
        .map(|step| {
            (
                step.prompt["recordingId"].clone(),
                step.prompt["title"].clone(),
            )
        })
        .collect();
    asked.sort_by_key(|(id, _)| id.to_string());
    assert_eq!(
        asked,
        [
            (json!("approve"), json!("first")),
            (json!("approve#2"), json!("revisit")),
        ]
    );
}
