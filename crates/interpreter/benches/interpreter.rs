//! Interpreter throughput: internal transitions per second with a no-op dispatcher, and a
//! 10,000-item fan-out at concurrency 64.

use std::hint::black_box;

use async_trait::async_trait;
use auto_swe_interpreter::{
    CancellationToken, DispatchError, Dispatcher, RunOptions, SignalWait, SignalWake, StepDispatch,
    StepRecord, TerminalStatus, run_spec,
};
use auto_swe_spec::WorkflowSpec;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};

/// Answers every call at once.
struct Noop;

#[async_trait]
impl Dispatcher for Noop {
    async fn dispatch_step(
        &self,
        _request: &StepDispatch,
        _cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        Ok(Value::Null)
    }

    async fn wait_signal(
        &self,
        _wait: &SignalWait,
        _abandoned: &CancellationToken,
    ) -> Result<SignalWake, DispatchError> {
        Ok(SignalWake::TimedOut)
    }

    async fn record_step(&self, _record: &StepRecord) -> Result<(), DispatchError> {
        Ok(())
    }

    async fn now_ms(&self, _recording_id: &str) -> Result<u64, DispatchError> {
        Ok(0)
    }
}

#[expect(clippy::expect_used, reason = "a benchmark fixture")]
fn spec(value: &Value) -> WorkflowSpec {
    serde_json::from_value(value.clone()).expect("bench spec parses")
}

#[expect(clippy::expect_used, reason = "a benchmark fixture")]
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
}

fn transitions(c: &mut Criterion) {
    const ROUNDS: u64 = 10_000;
    let spec = spec(&json!({
        "entry": "inc",
        "nodes": [
            {"id": "inc", "type": "set", "values": {"context.i": {"expr": "$.context.i + 1"}}, "next": "check"},
            {"id": "check", "type": "cond", "expr": "$.context.i < $.input.rounds", "onTrue": "inc", "onFalse": "end"},
            {"id": "end", "type": "terminate", "status": "SUCCESS", "result": "$.context.i"}
        ]
    }));
    let runtime = runtime();
    let mut group = c.benchmark_group("interpreter");
    group.throughput(Throughput::Elements(2 * ROUNDS + 1));
    group.bench_function("internal_transitions", |b| {
        b.iter(|| {
            let options = RunOptions::default()
                .with_transition_cap(u32::MAX)
                .with_context(json!({"i": 0}));
            let outcome =
                runtime.block_on(run_spec(&spec, json!({"rounds": ROUNDS}), &Noop, options));
            assert_eq!(outcome.status, TerminalStatus::Success);
            black_box(outcome)
        });
    });
    group.finish();
}

fn fan_out(c: &mut Criterion) {
    let items: Vec<u32> = (0..10_000).collect();
    let spec = spec(&json!({
        "entry": "fan",
        "nodes": [
            {"id": "fan", "type": "fanOut", "over": "$.input.items", "concurrency": 64,
             "subgraph": {"entry": "work", "nodes": [
                 {"id": "work", "type": "step", "step": "implement", "inputs": {"item": "$.item"}}
             ]}}
        ]
    }));
    let input = json!({"items": items});
    let runtime = runtime();
    let mut group = c.benchmark_group("interpreter");
    group.sample_size(10);
    group.bench_function("fan_out_10k_concurrency_64", |b| {
        b.iter(|| {
            let outcome =
                runtime.block_on(run_spec(&spec, input.clone(), &Noop, RunOptions::default()));
            assert_eq!(outcome.status, TerminalStatus::Success);
            black_box(outcome)
        });
    });
    group.finish();
}

criterion_group!(benches, transitions, fan_out);
criterion_main!(benches);
