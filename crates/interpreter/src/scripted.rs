//! [`ScriptedDispatcher`]: a deterministic dispatcher that answers from a [`Script`]. Embedders
//! use it to test their templates; `auto-swe spec simulate` runs the interpreter against it.
//!
//! Keys under `steps` are spec node ids (every branch and visit) or exact recording ids
//! (`fan[1]/build`, `review#2`); an exact recording id wins. Each list is consumed in order and
//! its last entry repeats. `default` answers unscripted dispatches; without it an unscripted
//! dispatch fails with `SIMULATION_UNSCRIPTED`. Signals are keyed by signal name and human
//! answers by recording id or node id, with the same consumption rule.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::dispatcher::{
    Dispatcher, HumanStepNotice, HumanStepResolution, SignalWait, SignalWake, StepDispatch,
    StepRecord, WaitKind,
};
use crate::error::DispatchError;

/// A script: what every dispatch, signal wait and human step answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct Script {
    /// Node id or recording id → answers, in order; the last repeats.
    #[serde(default)]
    pub steps: IndexMap<String, Vec<StepAnswer>>,
    /// Signal name → deliveries, in order; the last repeats.
    #[serde(default)]
    pub signals: IndexMap<String, Vec<SignalAnswer>>,
    /// Human node id or recording id → answers, in order; the last repeats.
    #[serde(default)]
    pub human: IndexMap<String, Vec<HumanAnswer>>,
    /// Answer for dispatches no key matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<StepAnswer>,
    /// Patch id → whether it applies (absent: applies). `false` pins the old behaviour.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub patches: IndexMap<String, bool>,
    /// Start of the simulated clock in milliseconds since the epoch (absent: 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_start_ms: Option<u64>,
}

/// One answer to a dispatch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum StepAnswer {
    /// `{"output": …}`: the step succeeds with this output.
    Output {
        /// The output.
        output: Value,
    },
    /// `{"error": {"message", "nonRetryable"?, "code"?}}`: the step fails.
    Error {
        /// The failure.
        error: StepFailureAnswer,
    },
    /// `{"cancel": true}`: the run is cancelled while the step runs.
    Cancel {
        /// Must be `true`.
        cancel: bool,
    },
}

/// A scripted step failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StepFailureAnswer {
    /// The error message.
    pub message: String,
    /// The error must not be retried.
    #[serde(default)]
    pub non_retryable: bool,
    /// Error code (absent: `STEP_FAILED`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// A word answer to a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum WaitWord {
    /// The wait times out (the clock moves on by the remaining timeout).
    Timeout,
    /// The waiter wakes to an empty slot (another waiter took the payload).
    Empty,
    /// Nothing arrives until the wait is abandoned (a block-mode cancel or run cancellation).
    Pending,
}

/// One delivery (or non-delivery) on a signal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum SignalAnswer {
    /// `"timeout"`, `"empty"` or `"pending"`.
    Word(WaitWord),
    /// `{"slotEmpty": true, "afterMs"?: n}`: after `afterMs`, the waiter wakes to an empty slot.
    SlotEmpty {
        /// Must be `true`.
        #[serde(rename = "slotEmpty")]
        slot_empty: bool,
        /// Simulated milliseconds before the wake-up.
        #[serde(default, rename = "afterMs", skip_serializing_if = "Option::is_none")]
        after_ms: Option<u64>,
    },
    /// `{"payload": …, "afterMs"?: n}`: a payload arrives after `afterMs` (absent: 0).
    Payload {
        /// The payload.
        payload: Value,
        /// Simulated milliseconds before it arrives.
        #[serde(default, rename = "afterMs", skip_serializing_if = "Option::is_none")]
        after_ms: Option<u64>,
    },
}

/// One answer to a human step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum HumanAnswer {
    /// `"timeout"` or `"pending"`.
    Word(WaitWord),
    /// The answer: `{"decision": "approve"|"reject"|"request_changes"}` for an approval,
    /// `{"option": id}` for a decision, `{"values": {…}}` for a form, any object for a review.
    Answer(Value),
}

/// A script that cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    /// The document does not have the script's shape.
    #[error("invalid script: {0}")]
    Invalid(#[from] serde_json::Error),
}

impl ScriptError {
    /// Stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "SCRIPT_INVALID",
        }
    }

    /// Never: a script is fixed text.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Invalid(_) => false,
        }
    }
}

impl Script {
    /// Reads a script from a JSON value (YAML readers convert to JSON first).
    pub fn from_value(value: Value) -> Result<Self, ScriptError> {
        Ok(serde_json::from_value(value)?)
    }
}

/// One call the scripted dispatcher received, in arrival order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "call", rename_all = "camelCase")]
#[non_exhaustive]
pub enum ScriptedCall {
    /// `dispatch_step`.
    Step(StepDispatch),
    /// `dispatch_shell`.
    Shell(StepDispatch),
    /// `wait_signal`.
    Wait(SignalWait),
    /// `notify_human_step`.
    NotifyHuman(HumanStepNotice),
    /// `resolve_human_step`.
    ResolveHuman(HumanStepResolution),
}

#[derive(Default)]
struct State {
    consumed: HashMap<String, usize>,
    calls: Vec<ScriptedCall>,
    records: Vec<StepRecord>,
}

/// A dispatcher answering from a [`Script`], with a simulated clock. Deterministic: the same
/// calls in the same order get the same answers.
pub struct ScriptedDispatcher {
    script: Script,
    clock: AtomicU64,
    run_token: CancellationToken,
    state: Mutex<State>,
}

enum Picked<T> {
    Found(T),
    Missing,
}

impl ScriptedDispatcher {
    /// A dispatcher answering from `script`.
    #[must_use]
    pub fn new(script: Script) -> Self {
        let clock = AtomicU64::new(script.clock_start_ms.unwrap_or(0));
        Self {
            script,
            clock,
            run_token: CancellationToken::new(),
            state: Mutex::new(State::default()),
        }
    }

    /// Uses `token` as the run's cancellation token: a `{"cancel": true}` answer fires it. Pass
    /// the same token in [`RunOptions`](crate::RunOptions).
    #[must_use]
    pub fn with_run_token(mut self, token: CancellationToken) -> Self {
        self.run_token = token;
        self
    }

    /// The step records received so far, in order.
    #[must_use]
    pub fn records(&self) -> Vec<StepRecord> {
        self.lock().records.clone()
    }

    /// Every other call received so far, in order.
    #[must_use]
    pub fn calls(&self) -> Vec<ScriptedCall> {
        self.lock().calls.clone()
    }

    /// The calls and the step records received, taken out without copying them.
    #[must_use]
    pub fn into_calls_and_records(self) -> (Vec<ScriptedCall>, Vec<StepRecord>) {
        let state = self
            .state
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        (state.calls, state.records)
    }

    /// The simulated clock.
    #[must_use]
    pub fn now(&self) -> u64 {
        self.clock.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn advance(&self, ms: u64) {
        let _ = self
            .clock
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
                Some(now.saturating_add(ms))
            });
    }

    /// The next answer under the first of `keys` the table has, consuming it.
    fn pick<T: Clone>(
        &self,
        table: &IndexMap<String, Vec<T>>,
        section: &str,
        keys: &[&str],
    ) -> Picked<T> {
        let mut state = self.lock();
        for key in keys {
            if let Some(list) = table.get(*key)
                && let Some(last) = list.len().checked_sub(1)
            {
                let counter = state
                    .consumed
                    .entry(format!("{section}:{key}"))
                    .or_insert(0);
                let answer = list[(*counter).min(last)].clone();
                *counter += 1;
                return Picked::Found(answer);
            }
        }
        Picked::Missing
    }

    fn timed_out(&self, wait: &SignalWait) -> SignalWake {
        self.advance(wait.timeout_ms.unwrap_or(0));
        SignalWake::TimedOut
    }

    fn answer_step(&self, request: &StepDispatch) -> Result<Value, DispatchError> {
        let answer = match self.pick(
            &self.script.steps,
            "steps",
            &[&request.recording_id, &request.spec_node_id],
        ) {
            Picked::Found(answer) => answer,
            Picked::Missing => match &self.script.default {
                Some(answer) => answer.clone(),
                None => {
                    return Err(DispatchError::non_retryable(
                        "SIMULATION_UNSCRIPTED",
                        format!(
                            "no script entry for step {} (node {}) and no default",
                            request.recording_id, request.spec_node_id
                        ),
                    ));
                }
            },
        };
        match answer {
            StepAnswer::Output { output } => Ok(output),
            StepAnswer::Error { error } => {
                let code = error.code.unwrap_or_else(|| "STEP_FAILED".to_owned());
                Err(if error.non_retryable {
                    DispatchError::non_retryable(code, error.message)
                } else {
                    DispatchError::failure(code, error.message)
                })
            }
            StepAnswer::Cancel { .. } => {
                self.run_token.cancel();
                Err(DispatchError::cancelled(format!(
                    "run cancelled during {}",
                    request.recording_id
                )))
            }
        }
    }
}

#[async_trait]
impl Dispatcher for ScriptedDispatcher {
    async fn dispatch_step(
        &self,
        request: &StepDispatch,
        _cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        self.lock().calls.push(ScriptedCall::Step(request.clone()));
        self.answer_step(request)
    }

    async fn dispatch_shell(
        &self,
        request: &StepDispatch,
        _cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        self.lock().calls.push(ScriptedCall::Shell(request.clone()));
        self.answer_step(request)
    }

    async fn wait_signal(
        &self,
        wait: &SignalWait,
        abandoned: &CancellationToken,
    ) -> Result<SignalWake, DispatchError> {
        self.lock().calls.push(ScriptedCall::Wait(wait.clone()));
        let picked = match wait.kind {
            WaitKind::Signal => match self.pick(&self.script.signals, "signals", &[&wait.name]) {
                Picked::Found(SignalAnswer::Word(word)) => Picked::Found(Err(word)),
                Picked::Found(SignalAnswer::SlotEmpty { after_ms, .. }) => {
                    let after_ms = after_ms.unwrap_or(0);
                    if wait.timeout_ms.is_some_and(|limit| after_ms >= limit) {
                        return Ok(self.timed_out(wait));
                    }
                    self.advance(after_ms);
                    return Ok(SignalWake::SlotEmpty);
                }
                Picked::Found(SignalAnswer::Payload { payload, after_ms }) => {
                    Picked::Found(Ok((payload, after_ms.unwrap_or(0))))
                }
                Picked::Missing => Picked::Missing,
            },
            WaitKind::Human => match self.pick(
                &self.script.human,
                "human",
                &[&wait.recording_id, &wait.spec_node_id],
            ) {
                Picked::Found(HumanAnswer::Word(word)) => Picked::Found(Err(word)),
                Picked::Found(HumanAnswer::Answer(payload)) => Picked::Found(Ok((payload, 0))),
                Picked::Missing => Picked::Missing,
            },
        };
        match picked {
            Picked::Missing => Err(DispatchError::non_retryable(
                "SIMULATION_UNSCRIPTED",
                format!(
                    "no script entry for the wait on {} at {}",
                    wait.name, wait.recording_id
                ),
            )),
            Picked::Found(Ok((payload, after_ms))) => {
                if wait.timeout_ms.is_some_and(|limit| after_ms >= limit) {
                    return Ok(self.timed_out(wait));
                }
                self.advance(after_ms);
                Ok(SignalWake::Delivered { payload })
            }
            Picked::Found(Err(WaitWord::Timeout)) => Ok(self.timed_out(wait)),
            Picked::Found(Err(WaitWord::Empty)) => Ok(SignalWake::SlotEmpty),
            Picked::Found(Err(WaitWord::Pending)) => {
                abandoned.cancelled().await;
                Ok(SignalWake::Abandoned)
            }
        }
    }

    async fn record_step(&self, record: &StepRecord) -> Result<(), DispatchError> {
        self.lock().records.push(record.clone());
        Ok(())
    }

    async fn notify_human_step(&self, notice: &HumanStepNotice) -> Result<(), DispatchError> {
        self.lock()
            .calls
            .push(ScriptedCall::NotifyHuman(notice.clone()));
        Ok(())
    }

    async fn resolve_human_step(
        &self,
        resolution: &HumanStepResolution,
    ) -> Result<(), DispatchError> {
        self.lock()
            .calls
            .push(ScriptedCall::ResolveHuman(resolution.clone()));
        Ok(())
    }

    async fn now_ms(&self, _recording_id: &str) -> Result<u64, DispatchError> {
        Ok(self.now())
    }

    fn patched(&self, id: &str) -> bool {
        self.script.patches.get(id).copied().unwrap_or(true)
    }
}
