//! What a run came to, kept with its row; strings too long for it stored as artifacts.

use std::sync::Arc;
use std::time::Duration;

use auto_swe_worker::{MAX_SPILLS, SPILL_ARTIFACT, Worker, WorkerConfig, spilled_artifact_id};
use serde_json::json;

use crate::support::{CountingSteps, TestStore, on_both_backends};

on_both_backends!(
    long_strings_of_the_result_are_stored_as_artifacts_the_row_names,
    a_failed_run_keeps_its_error_code_and_message,
    a_long_error_message_is_cut_and_the_run_still_ends,
    a_result_too_large_for_the_row_is_stored_whole_as_json,
);

async fn finish(db: &TestStore, spec: serde_json::Value) -> (String, serde_json::Value) {
    let run_id = db.start(spec).await;
    let worker = Worker::new(
        db.engine(),
        Arc::new(CountingSteps::new("w")),
        WorkerConfig::new("w", Duration::from_millis(200)),
    );
    worker.run_once().await.unwrap().unwrap();
    let kept = db.store.run_result(&run_id).await.unwrap().unwrap();
    (run_id, kept)
}

async fn long_strings_of_the_result_are_stored_as_artifacts_the_row_names(db: &TestStore) {
    let spec = json!({"entry": "big", "nodes": [{"id": "big", "type": "step", "step": "long"}]});
    let (run_id, kept) = finish(db, spec).await;
    let result = &kept["result"];
    assert_eq!(result["small"], json!("s"));
    assert_eq!(kept["error"], json!(null));

    let placeholder = result["text"].as_str().unwrap();
    let id = spilled_artifact_id(placeholder).unwrap_or_else(|| panic!("{placeholder}"));
    let (artifact, body) = db.store.get_artifact(id).await.unwrap();
    let text = format!("{}é", "ab".repeat(10_000));
    assert_eq!(body, text.as_bytes());
    assert_eq!(artifact.run_id, run_id);
    assert_eq!(artifact.name, SPILL_ARTIFACT);
    assert!(
        placeholder.ends_with(&format!("— {} bytes]", text.len())),
        "{placeholder}"
    );

    // The first MAX_SPILLS long strings are stored; the rest are cut to a record's length.
    let many = result["many"].as_array().unwrap();
    assert_eq!(many.len(), 70);
    let mut stored = 0;
    for (i, value) in many.iter().enumerate() {
        let value = value.as_str().unwrap();
        let original = format!("{i}:{}", "z".repeat(8_100));
        if let Some(id) = spilled_artifact_id(value) {
            stored += 1;
            assert_eq!(
                db.store.get_artifact(id).await.unwrap().1,
                original.as_bytes()
            );
        } else {
            assert_eq!(
                value.chars().count(),
                auto_swe_interpreter::RECORD_STRING_LIMIT
            );
            assert!(original.starts_with(value));
        }
    }
    assert_eq!(stored, MAX_SPILLS - 1, "one spill went to `text`");
    let artifacts = db.store.list_artifacts(&run_id).await.unwrap();
    assert_eq!(artifacts.len(), MAX_SPILLS);
}

async fn a_failed_run_keeps_its_error_code_and_message(db: &TestStore) {
    let spec = json!({"entry": "x", "nodes": [{"id": "x", "type": "step", "step": "broken"}]});
    let (run_id, kept) = finish(db, spec).await;
    assert_eq!(kept["error"]["code"], json!("STEP_BROKEN"));
    assert!(
        kept["error"]["message"]
            .as_str()
            .unwrap()
            .contains("broken on purpose")
    );
    assert_eq!(kept["result"], json!(null));
    assert!(db.store.list_artifacts(&run_id).await.unwrap().is_empty());
}

async fn a_result_too_large_for_the_row_is_stored_whole_as_json(db: &TestStore) {
    // The context holds the 2.4 MB output twice and the result once: more than a row keeps, so
    // the context is stored whole as one artifact and the result stays in the row.
    let spec = json!({"entry": "w", "nodes": [
        {"id": "w", "type": "step", "step": "wide", "next": "s"},
        {"id": "s", "type": "set", "values": {"context.a": "$.nodes.w.output",
            "context.b": "$.nodes.w.output"}, "next": "t"},
        {"id": "t", "type": "terminate", "status": "SUCCESS", "result": "$.nodes.w.output"}
    ]});
    let (run_id, kept) = finish(db, spec).await;
    assert_eq!(kept["error"], json!(null), "{}", kept["error"]);
    assert_eq!(kept["result"].as_array().map(Vec::len), Some(300));
    let placeholder = kept["context"].as_str().unwrap();
    let id = spilled_artifact_id(placeholder).unwrap_or_else(|| panic!("{placeholder}"));
    let (artifact, body) = db.store.get_artifact(id).await.unwrap();
    assert_eq!(artifact.content_type, "application/json");
    let whole: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(whole["a"], kept["result"]);
    assert_eq!(whole["b"], kept["result"]);
    assert_eq!(db.store.list_artifacts(&run_id).await.unwrap().len(), 1);
}

async fn a_long_error_message_is_cut_and_the_run_still_ends(db: &TestStore) {
    let spec = json!({"entry": "x", "nodes": [{"id": "x", "type": "step", "step": "loud"}]});
    let (run_id, kept) = finish(db, spec).await;
    assert_eq!(kept["error"]["code"], json!("STEP_LOUD"));
    let message = kept["error"]["message"].as_str().unwrap();
    assert_eq!(
        message.chars().count(),
        auto_swe_interpreter::RECORD_STRING_LIMIT
    );
    assert!(db.store.list_artifacts(&run_id).await.unwrap().is_empty());
}
