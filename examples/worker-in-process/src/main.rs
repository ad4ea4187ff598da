//! The whole engine inside a host program: a `SQLite` store, the embedded durable engine and a
//! worker serving on the host's own tokio runtime. The host launches a run, receives an event
//! for every step its dispatcher makes and records, and reads how the run ended from the store.
//!
//! Run with `cargo run -p auto-swe-example-worker-in-process`.
#![expect(clippy::print_stdout, reason = "an example prints what it received")]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_interpreter::{
    CancellationToken, DispatchError, Dispatcher, SignalWait, SignalWake, StepDispatch, StepEnd,
    StepRecord,
};
use auto_swe_spec::{ValidateOptions, validate_value};
use auto_swe_store::{Keyring, NewRun, NewRunInput, RunStatus, Store, StoreConfig, TerminalStatus};
use auto_swe_worker::{EmbeddedEngine, Worker, WorkerConfig};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// What the host hears about a run while it runs.
#[derive(Debug)]
enum RunEvent {
    /// A step was dispatched (made for the first time: a replay is answered from the journal).
    Started { node: String },
    /// A node finished, as the interpreter recorded it.
    Recorded { node: String, status: StepEnd },
}

/// The host's steps; every call is also an event on `events`.
struct HostSteps {
    events: mpsc::UnboundedSender<RunEvent>,
}

#[async_trait]
impl Dispatcher for HostSteps {
    async fn dispatch_step(
        &self,
        call: &StepDispatch,
        cancel: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        let node = call.recording_id.clone();
        let _ = self.events.send(RunEvent::Started { node });
        match call.step.as_str() {
            "fetchTicket" => Ok(json!({ "title": "Fix the flaky login test", "points": 3 })),
            "estimate" => {
                // A step that takes a while stops when its run is cancelled.
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(20)) => {}
                    () = cancel.cancelled() => return Err(DispatchError::cancelled("stopped")),
                }
                let points = call.inputs["points"].as_u64().unwrap_or(0);
                Ok(json!({ "hours": points * 2 }))
            }
            other => Err(DispatchError::non_retryable(
                "UNKNOWN_STEP",
                format!("no step `{other}`"),
            )),
        }
    }

    async fn wait_signal(
        &self,
        _: &SignalWait,
        _: &CancellationToken,
    ) -> Result<SignalWake, DispatchError> {
        Ok(SignalWake::TimedOut)
    }

    async fn record_step(&self, record: &StepRecord) -> Result<(), DispatchError> {
        let node = record.recording_id.clone();
        let _ = self.events.send(RunEvent::Recorded {
            node,
            status: record.status,
        });
        Ok(())
    }

    async fn now_ms(&self, _: &str) -> Result<u64, DispatchError> {
        let since = std::time::UNIX_EPOCH.elapsed().unwrap_or_default();
        Ok(u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
    }
}

fn spec() -> Value {
    json!({
        "specVersion": 1,
        "name": "estimate-ticket",
        "entry": "fetch",
        "inputs": { "ticket": { "type": "string", "required": true } },
        "nodes": [
            { "id": "fetch", "type": "step", "step": "fetchTicket",
              "inputs": { "id": "$.input.ticket" }, "storeAs": "context.ticket", "next": "estimate" },
            { "id": "estimate", "type": "step", "step": "estimate",
              "inputs": { "points": "$.context.ticket.points" }, "next": "done" },
            { "id": "done", "type": "terminate", "status": "SUCCESS",
              "result": { "hours": "$.nodes.estimate.output.hours" } }
        ]
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The store: SQLite in a scratch directory; a real host keeps its database and loads its
    // keyring from its secret store.
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("engine.db").display());
    let store = Store::open(StoreConfig::new(url, Keyring::generate())).await?;

    // The engine and a worker serving on this program's runtime until `shutdown` fires.
    let engine = Arc::new(EmbeddedEngine::new(store.clone(), Duration::from_secs(30)));
    let (events, mut received) = mpsc::unbounded_channel();
    let steps = Arc::new(HostSteps { events });
    let config = WorkerConfig::new("host-worker-1", Duration::from_secs(5)).with_concurrency(2);
    let worker = Worker::new(engine, steps, config);
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { worker.serve(shutdown).await }
    });

    // Launch: validate, record the input, create the run with its frozen spec, queue it.
    let spec = spec();
    let report = validate_value(&spec, &ValidateOptions::default());
    anyhow::ensure!(report.is_valid(), "invalid spec: {:?}", report.codes());
    let (input, _) = store
        .submit_run_input(NewRunInput::new("example", json!({ "ticket": "T-42" })))
        .await?;
    let run = store
        .create_run(NewRun::new(spec).with_run_input(&input.id))
        .await?;
    store.enqueue(&run.id).await?;
    println!("launched {}", run.id);

    // Receive events until the run has ended.
    let (mut started, mut recorded) = (Vec::new(), Vec::new());
    let mut note = |event: RunEvent| {
        println!("  {event:?}");
        match event {
            RunEvent::Started { node } => started.push(node),
            RunEvent::Recorded { node, status } => recorded.push((node, status)),
        }
    };
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            tokio::select! {
                Some(event) = received.recv() => note(event),
                () = tokio::time::sleep(Duration::from_millis(50)) => {
                    let status = store.get_run(&run.id).await?.status;
                    if let RunStatus::Ended(end) = status {
                        while let Ok(event) = received.try_recv() {
                            note(event);
                        }
                        return Ok::<_, anyhow::Error>(end);
                    }
                }
            }
        }
    })
    .await??;
    shutdown.cancel();
    serving.await??;
    println!("run {} ended {ended:?}", run.id);
    anyhow::ensure!(ended == TerminalStatus::Success, "the run ended {ended:?}");
    let expected = [
        ("fetch".to_owned(), StepEnd::Completed),
        ("estimate".to_owned(), StepEnd::Completed),
    ];
    anyhow::ensure!(recorded.starts_with(&expected), "recorded {recorded:?}");
    anyhow::ensure!(started == ["fetch", "estimate"], "started {started:?}");
    Ok(())
}
