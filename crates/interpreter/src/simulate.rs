//! [`simulate`]: runs a spec against a [`ScriptedDispatcher`] to its end on the calling thread.
//!
//! The scripted dispatcher never waits on the outside world, so a poll that leaves the run
//! pending without waking it means every live branch waits on a `"pending"` entry: the
//! simulation then cancels the run, which ends it `CANCELLED` and is reported as `stalled`.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use auto_swe_spec::WorkflowSpec;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::dispatcher::StepRecord;
use crate::error::RunError;
use auto_swe_spec::TerminalStatus;

use crate::run::{RunOptions, RunOutcome, run_spec};
use crate::scripted::{Script, ScriptedCall, ScriptedDispatcher};
use crate::shared::ContextSnapshot;

/// The result of [`simulate`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Simulation {
    /// How the run ended.
    pub outcome: RunOutcome,
    /// Every step record, in the order they were made.
    pub records: Vec<StepRecord>,
    /// Every other dispatcher call, in order.
    pub calls: Vec<ScriptedCall>,
    /// The run could not go on (every live wait was `"pending"`) and was cancelled.
    pub stalled: bool,
}

struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Runs `spec` with `input` against `script` and returns the outcome with every call made.
#[must_use]
pub fn simulate(
    spec: &WorkflowSpec,
    input: Value,
    script: Script,
    options: RunOptions,
) -> Simulation {
    let token = CancellationToken::new();
    let dispatcher = ScriptedDispatcher::new(script).with_run_token(token.clone());
    let options = options.with_cancellation(token.clone());
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(Arc::clone(&flag));
    let mut cx = Context::from_waker(&waker);
    let mut stalled = false;
    let outcome = {
        let mut run = pin!(run_spec(spec, input, &dispatcher, options));
        loop {
            flag.0.store(false, Ordering::SeqCst);
            if let Poll::Ready(outcome) = run.as_mut().poll(&mut cx) {
                break outcome;
            }
            if flag.0.load(Ordering::SeqCst) {
                continue;
            }
            if stalled {
                // Cancelling did not wake anything: a dispatcher contract was broken.
                break RunOutcome {
                    status: TerminalStatus::Cancelled,
                    result: Arc::new(Value::Null),
                    error: Some(RunError::Cancelled {
                        message: "simulation stalled".into(),
                    }),
                    context: Value::Null,
                    nodes: ContextSnapshot::default(),
                    transitions: 0,
                };
            }
            stalled = true;
            token.cancel();
        }
    };
    let (calls, records) = dispatcher.into_calls_and_records();
    Simulation {
        outcome,
        records,
        calls,
        stalled,
    }
}
