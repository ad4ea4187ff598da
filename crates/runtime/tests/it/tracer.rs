//! The tracer: redaction and bounds before buffering, buffered writes that never fail the
//! caller and never write a row twice.

use std::sync::Arc;
use std::sync::Mutex;

use async_trait::async_trait;
use auto_swe_runtime::{
    NodeAttribution, TRACE_STRING_MAX_CHARS, TraceEntry, TraceRecord, TraceSink, TraceSinkError,
    Tracer,
};
use auto_swe_scanners::Redactor;
use serde_json::json;

/// Refuses the first `fail` batches, then stores.
#[derive(Default)]
struct Flaky {
    fail: Mutex<usize>,
    stored: Mutex<Vec<TraceRecord>>,
}

#[async_trait]
impl TraceSink for Flaky {
    async fn write(&self, rows: &[TraceRecord]) -> Result<(), TraceSinkError> {
        let mut fail = self.fail.lock().unwrap();
        if *fail > 0 {
            *fail -= 1;
            return Err(TraceSinkError {
                message: "database unavailable".to_owned(),
            });
        }
        self.stored.lock().unwrap().extend_from_slice(rows);
        Ok(())
    }
}

#[tokio::test]
async fn rows_are_redacted_bounded_numbered_and_attributed() {
    let sink = Arc::new(Flaky::default());
    let mut redactor = Redactor::new();
    redactor.add_secret("hunter2-session-value");
    let node = NodeAttribution {
        run_id: Some("run-1".to_owned()),
        spec_node_id: Some("impl".to_owned()),
        recording_id: Some("fan[0]/impl".to_owned()),
        step_attempt: Some(2),
        agent_key: Some("implementer".to_owned()),
    };
    let tracer = Tracer::new(sink.clone(), node.clone(), redactor);
    let token = format!("ghp_{}", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
    tracer.record(TraceEntry::event(
        "bash",
        json!({"command": format!("echo hunter2-session-value {token}"), "big": "x".repeat(40_000)}),
    ));
    tracer.record(TraceEntry::event("second", json!({})));
    let report = tracer.flush().await;
    assert_eq!((report.written, report.pending), (2, 0));
    let rows = sink.stored.lock().unwrap().clone();
    assert_eq!(rows.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(rows[0].node, node);
    let text = serde_json::to_string(&rows[0]).unwrap();
    assert!(!text.contains("hunter2-session-value"), "{text}");
    assert!(!text.contains(&token[4..]), "{text}");
    let big = rows[0].output_json.as_ref().unwrap()["big"]
        .as_str()
        .unwrap();
    assert_eq!(big.chars().count(), TRACE_STRING_MAX_CHARS);
}

#[tokio::test]
async fn a_refused_batch_is_kept_in_order_and_written_once() {
    let sink = Arc::new(Flaky {
        fail: Mutex::new(2),
        ..Flaky::default()
    });
    let tracer = Tracer::new(sink.clone(), NodeAttribution::default(), Redactor::new());
    tracer.record(TraceEntry::event("a", json!(1)));
    assert_eq!(tracer.flush().await.pending, 1, "never fails the caller");
    tracer.record(TraceEntry::event("b", json!(2)));
    assert_eq!(tracer.flush().await.pending, 2);
    tracer.record(TraceEntry::event("c", json!(3)));
    let report = tracer.flush().await;
    assert_eq!((report.written, report.pending), (3, 0));
    assert_eq!(tracer.flush().await.written, 0, "nothing is offered twice");
    let seqs: Vec<u64> = sink.stored.lock().unwrap().iter().map(|r| r.seq).collect();
    assert_eq!(seqs, vec![0, 1, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_flushes_never_write_a_row_twice() {
    let sink = Arc::new(Flaky::default());
    let tracer = Arc::new(Tracer::new(
        sink.clone(),
        NodeAttribution::default(),
        Redactor::new(),
    ));
    let mut tasks = Vec::new();
    for t in 0..8 {
        let tracer = tracer.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..50 {
                tracer.record(TraceEntry::event("e", json!([t, i])));
                if i % 7 == 0 {
                    tracer.flush().await;
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    tracer.flush().await;
    let mut seqs: Vec<u64> = sink.stored.lock().unwrap().iter().map(|r| r.seq).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..400).collect::<Vec<_>>());
}
