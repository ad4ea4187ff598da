//! Runs a workflow spec with a host's own `Dispatcher`: the interpreter walks the graph, every
//! effect (a step, a record, the clock) is a call on the dispatcher.
//!
//! Run with `cargo run -p auto-swe-example-embed-interpreter`.
#![expect(clippy::print_stdout, reason = "an example prints what it did")]

use std::sync::Mutex;

use async_trait::async_trait;
use auto_swe_interpreter::{
    CancellationToken, DispatchError, Dispatcher, RunOptions, SignalWait, SignalWake, StepDispatch,
    StepRecord, TerminalStatus, run_spec,
};
use auto_swe_spec::{ReadMode, SourceFormat, ValidateOptions, read_spec, validate};
use serde_json::{Value, json};

const SPEC: &str = r#"
specVersion: 1
name: greet-and-count
entry: greet
inputs:
  name: { type: string, required: true }
nodes:
  - { id: greet, type: step, step: greet, inputs: { who: $.input.name }, storeAs: context.greeting, next: count }
  - { id: count, type: step, step: wordCount, inputs: { text: $.context.greeting }, next: long }
  - { id: long, type: cond, expr: "$.nodes.count.output.words > 2", onTrue: done, onFalse: short }
  - { id: done, type: terminate, status: SUCCESS, result: { greeting: $.context.greeting, words: $.nodes.count.output.words } }
  - { id: short, type: terminate, status: FAILED, result: { reason: { literal: too short } } }
"#;

/// The host's steps: two pure functions, and a log of what each node did.
#[derive(Default)]
struct Steps {
    log: Mutex<Vec<String>>,
}

#[async_trait]
impl Dispatcher for Steps {
    async fn dispatch_step(
        &self,
        call: &StepDispatch,
        _: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        let text = |key: &str| call.inputs[key].as_str().unwrap_or_default().to_owned();
        match call.step.as_str() {
            "greet" => Ok(json!(format!("Hello there, {}!", text("who")))),
            "wordCount" => Ok(json!({ "words": text("text").split_whitespace().count() })),
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
        Ok(SignalWake::TimedOut) // This spec has no waits.
    }

    async fn record_step(&self, record: &StepRecord) -> Result<(), DispatchError> {
        let line = format!("{} {}", record.recording_id, record.status.as_str());
        self.log
            .lock()
            .map_err(|_| DispatchError::failure("LOG", "poisoned"))?
            .push(line);
        Ok(())
    }

    async fn now_ms(&self, _: &str) -> Result<u64, DispatchError> {
        let since = std::time::UNIX_EPOCH.elapsed().unwrap_or_default();
        Ok(u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let spec = read_spec(SPEC, SourceFormat::Yaml, ReadMode::Strict)?;
    let report = validate(&spec, &ValidateOptions::default());
    anyhow::ensure!(report.is_valid(), "invalid spec: {:?}", report.codes());
    let input = spec.prepare_input(&json!({ "name": "Ada" }))?;

    let steps = Steps::default();
    let outcome = run_spec(&spec, input, &steps, RunOptions::default()).await;
    println!("{:?}: {}", outcome.status, outcome.result);
    for line in steps
        .log
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .iter()
    {
        println!("  {line}");
    }
    anyhow::ensure!(
        outcome.status == TerminalStatus::Success,
        "{:?}",
        outcome.error
    );
    anyhow::ensure!(
        outcome.result["words"] == 3 && outcome.result["greeting"] == "Hello there, Ada!"
    );
    Ok(())
}
