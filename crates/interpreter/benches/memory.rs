//! Peak heap of runs over a large run context: fan-outs of 10,000 and 100,000 branches and a
//! chain of steps, each over a context of 10,000 objects. Each is run twice: answered by a
//! dispatcher that keeps nothing (what the interpreter itself holds), and through `simulate`
//! (the `ScriptedDispatcher` keeps every call and step record, and the simulation returns them).
//!
//! The baseline is the heap the context itself takes, measured in the same run. The target is a
//! peak below three times that plus 1 KiB per dispatch, for what the interpreter holds (the runs
//! answered by a dispatcher that keeps nothing); each row also shows what a dispatch costs
//! against that 1 KiB (the peak less three contexts, per dispatch) and what it costs in all (the
//! peak less one context, per dispatch). The simulated runs are reported beside them for
//! information: a simulation returns every call and record by design, so it is not held to the
//! target. Sizes can be chosen with `--fan-out N` (one fan-out of N instead of the two),
//! `--chain N` and `--objects N`; the run exits non-zero when a target is missed.

use std::process::ExitCode;

use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use auto_swe_interpreter::{
    CancellationToken, DispatchError, Dispatcher, RunOptions, Script, SignalWait, SignalWake,
    StepDispatch, StepRecord, TerminalStatus, run_spec, simulate,
};
use auto_swe_spec::WorkflowSpec;
use peak_alloc::PeakAlloc;
use serde_json::{Value, json};

#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

struct Sizes {
    fan_outs: Vec<usize>,
    chain: usize,
    objects: usize,
}

fn sizes() -> Sizes {
    let mut sizes = Sizes {
        fan_outs: vec![10_000, 100_000],
        chain: 1_000,
        objects: 10_000,
    };
    let args: Vec<String> = std::env::args().collect();
    for pair in args.windows(2) {
        let value = pair[1].parse().ok();
        match (pair[0].as_str(), value) {
            ("--fan-out", Some(n)) => sizes.fan_outs = vec![n],
            ("--chain", Some(n)) => sizes.chain = n,
            ("--objects", Some(n)) => sizes.objects = n,
            _ => {}
        }
    }
    sizes
}

/// A context of `count` ticket-like objects.
fn context(count: usize) -> Value {
    let tickets: Vec<Value> = (0..count)
        .map(|i| {
            json!({
                "id": format!("T-{i}"),
                "title": format!("Ticket number {i} needs attention"),
                "body": "x".repeat(120),
                "labels": ["bug", "backend"],
                "priority": i % 5,
            })
        })
        .collect();
    json!({ "tickets": tickets })
}

#[expect(clippy::expect_used, reason = "a benchmark fixture")]
fn spec(value: Value) -> WorkflowSpec {
    serde_json::from_value(value).expect("bench spec parses")
}

#[expect(clippy::expect_used, reason = "a benchmark fixture")]
fn script() -> Script {
    Script::from_value(json!({"default": {"output": {"ok": true}}})).expect("bench script")
}

/// Answers every dispatch with `{"ok": true}` and keeps nothing but a count.
#[derive(Default)]
struct Counting(AtomicUsize);

#[async_trait]
impl Dispatcher for Counting {
    async fn dispatch_step(
        &self,
        _request: &StepDispatch,
        _cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(json!({"ok": true}))
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

/// Which dispatcher answers the run.
#[derive(Clone, Copy)]
enum Answered {
    /// [`Counting`], through `run_spec`.
    KeepingNothing,
    /// The `ScriptedDispatcher`, through `simulate`.
    Simulated,
}

impl Answered {
    fn name(self) -> &'static str {
        match self {
            Self::KeepingNothing => "run_spec, nothing kept",
            Self::Simulated => "simulate, calls and records kept",
        }
    }
}

struct Measured {
    name: String,
    dispatches: usize,
    context_bytes: usize,
    peak_bytes: usize,
}

/// What the target allows each dispatch, above three times the context.
const PER_DISPATCH: usize = 1024;

impl Measured {
    fn target(&self) -> usize {
        3 * self.context_bytes + PER_DISPATCH * self.dispatches
    }

    /// Bytes per dispatch of the peak above `contexts` times the context (0 without dispatches,
    /// or when the peak is below that).
    #[expect(clippy::cast_precision_loss, reason = "a figure for people to read")]
    fn per_dispatch(&self, contexts: usize) -> f64 {
        if self.dispatches == 0 {
            return 0.0;
        }
        let above = self.peak_bytes as f64 - (contexts * self.context_bytes) as f64;
        (above / self.dispatches as f64).max(0.0)
    }
}

/// Builds the context, then runs `spec` over it; returns the heap the context took and the
/// peak above the heap in use before the context was built.
#[expect(clippy::expect_used, reason = "a benchmark fixture")]
fn measure(
    name: &str,
    answered: Answered,
    spec: &WorkflowSpec,
    input: Value,
    objects: usize,
) -> Measured {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let before = HEAP.current_usage();
    let context = context(objects);
    let context_bytes = HEAP.current_usage().saturating_sub(before);
    HEAP.reset_peak_usage();
    let options = RunOptions::default()
        .with_transition_cap(u32::MAX)
        .with_context(context);
    let (status, dispatches) = match answered {
        Answered::KeepingNothing => {
            let dispatcher = Counting::default();
            let outcome = runtime.block_on(run_spec(spec, input, &dispatcher, options));
            (outcome.status, dispatcher.0.load(Ordering::Relaxed))
        }
        Answered::Simulated => {
            let run = simulate(spec, input, script(), options);
            (run.outcome.status, run.calls.len())
        }
    };
    let peak_bytes = HEAP.peak_usage().saturating_sub(before);
    assert_eq!(status, TerminalStatus::Success, "{name}");
    Measured {
        name: format!("{name} ({})", answered.name()),
        dispatches,
        context_bytes,
        peak_bytes,
    }
}

fn fan_out(items: usize, objects: usize, answered: Answered) -> Measured {
    let spec = spec(json!({
        "entry": "fan",
        "nodes": [
            {"id": "fan", "type": "fanOut", "over": "$.input.items", "concurrency": 64,
             "subgraph": {"entry": "work", "nodes": [
                 {"id": "work", "type": "step", "step": "implement",
                  "inputs": {"item": "$.item"}, "storeAs": "context.result"}
             ]}}
        ]
    }));
    let input = json!({ "items": (0..items).collect::<Vec<_>>() });
    measure(
        &format!("fan-out of {items} over {objects} objects"),
        answered,
        &spec,
        input,
        objects,
    )
}

fn chain(steps: usize, objects: usize, answered: Answered) -> Measured {
    let nodes: Vec<Value> = (0..steps)
        .map(|i| {
            let mut node = json!({
                "id": format!("s{i}"), "type": "step", "step": "implement",
                "inputs": {"ticket": "$.context.tickets[0].id"}, "storeAs": "context.last"
            });
            if i + 1 < steps {
                node["next"] = json!(format!("s{}", i + 1));
            }
            node
        })
        .collect();
    let spec = spec(json!({ "entry": "s0", "nodes": nodes }));
    measure(
        &format!("chain of {steps} steps over {objects} objects"),
        answered,
        &spec,
        json!({}),
        objects,
    )
}

#[expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
fn main() -> ExitCode {
    let sizes = sizes();
    let mut missed = false;
    println!(
        "| run | dispatches | context | peak | peak / context | target | met \
         | per dispatch above 3× context (target {PER_DISPATCH} B) | per dispatch above context |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |");
    for answered in [Answered::KeepingNothing, Answered::Simulated] {
        let runs = sizes
            .fan_outs
            .iter()
            .map(|&items| fan_out(items, sizes.objects, answered))
            .chain([chain(sizes.chain, sizes.objects, answered)]);
        for measured in runs {
            let held = matches!(answered, Answered::KeepingNothing);
            let met = measured.peak_bytes <= measured.target();
            missed |= held && !met;
            #[expect(clippy::cast_precision_loss, reason = "a ratio for people to read")]
            let ratio = measured.peak_bytes as f64 / measured.context_bytes.max(1) as f64;
            println!(
                "| {} | {} | {:.1} MiB | {:.1} MiB | {ratio:.2} | {:.1} MiB | {} | {:.0} B | {:.0} B |",
                measured.name,
                measured.dispatches,
                mib(measured.context_bytes),
                mib(measured.peak_bytes),
                mib(measured.target()),
                match (held, met) {
                    (false, _) => "(not held to it)",
                    (true, true) => "yes",
                    (true, false) => "no",
                },
                measured.per_dispatch(3),
                measured.per_dispatch(1),
            );
        }
    }
    if missed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

#[expect(clippy::cast_precision_loss, reason = "sizes for people to read")]
fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
