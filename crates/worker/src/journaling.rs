//! The journaling dispatcher: answers every call the interpreter makes from the run's effect
//! history when the call was made before, and otherwise makes it through the inner dispatcher
//! and records the result under the run's lease before the interpreter sees it.
//!
//! A call is keyed by its recording id, its kind and which call of that kind for that recording
//! id it is; the interpreter's contract (a fixed call order per recording id) makes the key name
//! the same call on every replay. Two results are never recorded: a cancellation (the run or a
//! branch was stopped, which says nothing about the effect) and an abandoned wait.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use auto_swe_interpreter::{
    DispatchError, Dispatcher, HumanStepNotice, HumanStepResolution, SignalWait, SignalWake,
    StepDispatch, StepRecord,
};
use auto_swe_telemetry::NodeOutcome;
use auto_swe_telemetry::spans;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::engine::{EffectHistory, EffectKey, EffectKind, RecordedEffect};
use crate::error::WorkerError;

/// A result as the journal holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "camelCase")]
enum Recorded {
    /// A dispatch's output.
    Output { value: Value },
    /// A dispatch's or a record's failure.
    Failure { error: DispatchError },
    /// How a wait ended.
    Wake { wake: SignalWake },
    /// A clock reading.
    Time { ms: u64 },
    /// A call with no value.
    Done,
}

/// Counts of what a dispatcher did, for tests and traces.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JournalStats {
    /// Calls answered from the history.
    pub replayed: u64,
    /// Calls made through the inner dispatcher and recorded.
    pub executed: u64,
}

/// A [`Dispatcher`] that makes each effect at most once per run: replayed from the history when
/// it was recorded, else made and recorded (see the module docs).
pub struct JournalingDispatcher {
    inner: Arc<dyn Dispatcher>,
    history: Arc<dyn EffectHistory>,
    recorded: Mutex<HashMap<EffectKey, Value>>,
    calls: Mutex<HashMap<(String, EffectKind), i64>>,
    replayed: AtomicU64,
    executed: AtomicU64,
    lease_lost: CancellationToken,
    suspended: CancellationToken,
    run_id: String,
}

impl std::fmt::Debug for JournalingDispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournalingDispatcher")
            .field("run_id", &self.run_id)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl JournalingDispatcher {
    /// Loads the run's history and wraps `inner`.
    pub async fn open(
        run_id: &str,
        inner: Arc<dyn Dispatcher>,
        history: Arc<dyn EffectHistory>,
    ) -> Result<Self, WorkerError> {
        let recorded = history
            .load()
            .await?
            .into_iter()
            .map(|effect| (effect.key, effect.result))
            .collect();
        Ok(Self {
            inner,
            history,
            recorded: Mutex::new(recorded),
            calls: Mutex::new(HashMap::new()),
            replayed: AtomicU64::new(0),
            executed: AtomicU64::new(0),
            lease_lost: CancellationToken::new(),
            suspended: CancellationToken::new(),
            run_id: run_id.to_owned(),
        })
    }

    /// Suspends the dispatcher when `suspended` fires (the run is parking): from then on a call
    /// the history does not answer is neither made nor recorded, and returns a cancellation, so
    /// the walk unwinds without leaving a trace in the journal and replays to the same point.
    #[must_use]
    pub fn with_suspension(mut self, suspended: CancellationToken) -> Self {
        self.suspended = suspended;
        self
    }

    /// What it has done so far.
    #[must_use]
    pub fn stats(&self) -> JournalStats {
        JournalStats {
            replayed: self.replayed.load(Ordering::Relaxed),
            executed: self.executed.load(Ordering::Relaxed),
        }
    }

    /// Fires when the history refused a write because the lease was lost: the run must stop
    /// and write nothing more.
    #[must_use]
    pub fn lease_lost(&self) -> &CancellationToken {
        &self.lease_lost
    }

    fn next_key(&self, recording_id: &str, kind: EffectKind) -> EffectKey {
        let mut calls = lock(&self.calls);
        let count = calls.entry((recording_id.to_owned(), kind)).or_insert(0);
        *count += 1;
        EffectKey {
            recording_id: recording_id.to_owned(),
            occurrence: *count,
            kind,
        }
    }

    fn decode(&self, key: &EffectKey, value: Value) -> Result<Recorded, DispatchError> {
        serde_json::from_value(value).map_err(|e| {
            let error = WorkerError::JournalCorrupt {
                run_id: self.run_id.clone(),
                recording_id: key.recording_id.clone(),
                kind: key.kind.as_str().to_owned(),
                reason: e.to_string(),
            };
            DispatchError::non_retryable(error.code(), error.to_string())
        })
    }

    /// Answers one call: from the history, or by `call` and then recording.
    async fn journaled<T, F, Fut>(
        &self,
        recording_id: &str,
        kind: EffectKind,
        call: F,
        encode: fn(&Result<T, DispatchError>) -> Option<Recorded>,
        replay: fn(Recorded) -> Option<Result<T, DispatchError>>,
    ) -> Result<T, DispatchError>
    where
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = Result<T, DispatchError>> + Send,
        T: Send,
    {
        let key = self.next_key(recording_id, kind);
        let span = tracing::debug_span!(
            "effect",
            run_id = %self.run_id,
            recording_id = %key.recording_id,
            kind = key.kind.as_str(),
            occurrence = key.occurrence,
            replayed = tracing::field::Empty,
        );
        async move {
            let known = lock(&self.recorded).remove(&key);
            if let Some(value) = known {
                tracing::Span::current().record("replayed", true);
                self.replayed.fetch_add(1, Ordering::Relaxed);
                return self.replayed_result(&key, value, replay);
            }
            tracing::Span::current().record("replayed", false);
            if self.suspended.is_cancelled() {
                return Err(DispatchError::cancelled(format!(
                    "run {} is parking",
                    self.run_id
                )));
            }
            // Once a write was refused, the run belongs to another worker: make no more calls.
            if self.lease_lost.is_cancelled() {
                return Err(DispatchError::non_retryable(
                    "LEASE_LOST",
                    format!("run {}: the lease was lost to another worker", self.run_id),
                ));
            }
            let result = call().await;
            let Some(recorded) = encode(&result) else {
                return result;
            };
            // Parking began while the call ran: its result is not the run's to keep.
            if self.suspended.is_cancelled() {
                return Err(DispatchError::cancelled(format!(
                    "run {} is parking",
                    self.run_id
                )));
            }
            let value = serde_json::to_value(&recorded).map_err(|e| {
                DispatchError::non_retryable("JOURNAL_CORRUPT", format!("unencodable result: {e}"))
            })?;
            let effect = RecordedEffect {
                key: key.clone(),
                result: value.clone(),
            };
            match self.history.record(effect).await {
                Ok(stored) if stored.result == value => {
                    self.executed.fetch_add(1, Ordering::Relaxed);
                    result
                }
                // Recorded first by someone else: the first result is the run's truth.
                Ok(stored) => self.replayed_result(&key, stored.result, replay),
                Err(error) => {
                    if matches!(
                        error,
                        WorkerError::LeaseLost { .. } | WorkerError::RunEnded { .. }
                    ) {
                        self.lease_lost.cancel();
                    }
                    Err(DispatchError::non_retryable(
                        error.code(),
                        error.to_string(),
                    ))
                }
            }
        }
        .instrument(span)
        .await
    }

    /// A dispatch being made (never one answered from the history: `journaled` calls this
    /// only on a miss), inside its `workflow.node` span with how it ended recorded.
    async fn observed(
        &self,
        request: &StepDispatch,
        activity: &str,
        call: impl Future<Output = Result<Value, DispatchError>> + Send,
    ) -> Result<Value, DispatchError> {
        let span = spans::workflow_node(
            &self.run_id,
            &request.spec_node_id,
            &request.recording_id,
            activity,
            request.attempt,
        );
        let result = call.instrument(span.clone()).await;
        let (outcome, code) = match &result {
            Ok(_) => (NodeOutcome::Success, None),
            Err(error) if self.inner.is_cancellation(error) => {
                (NodeOutcome::Cancelled, Some(error.code()))
            }
            Err(error) => (NodeOutcome::Failure, Some(error.code())),
        };
        spans::record_outcome(&span, outcome, code);
        result
    }

    fn replayed_result<T>(
        &self,
        key: &EffectKey,
        value: Value,
        replay: fn(Recorded) -> Option<Result<T, DispatchError>>,
    ) -> Result<T, DispatchError> {
        let recorded = self.decode(key, value)?;
        replay(recorded).unwrap_or_else(|| {
            Err(DispatchError::non_retryable(
                "JOURNAL_CORRUPT",
                format!(
                    "{}: the journal holds another kind of result for this {} call",
                    key.recording_id,
                    key.kind.as_str()
                ),
            ))
        })
    }
}

fn encode_output(result: &Result<Value, DispatchError>) -> Option<Recorded> {
    match result {
        Ok(value) => Some(Recorded::Output {
            value: value.clone(),
        }),
        Err(error) if error.is_cancellation() => None,
        Err(error) => Some(Recorded::Failure {
            error: error.clone(),
        }),
    }
}

fn replay_output(recorded: Recorded) -> Option<Result<Value, DispatchError>> {
    match recorded {
        Recorded::Output { value } => Some(Ok(value)),
        Recorded::Failure { error } => Some(Err(error)),
        Recorded::Wake { .. } | Recorded::Time { .. } | Recorded::Done => None,
    }
}

fn encode_unit(result: &Result<(), DispatchError>) -> Option<Recorded> {
    match result {
        Ok(()) => Some(Recorded::Done),
        Err(error) if error.is_cancellation() => None,
        Err(error) => Some(Recorded::Failure {
            error: error.clone(),
        }),
    }
}

fn replay_unit(recorded: Recorded) -> Option<Result<(), DispatchError>> {
    match recorded {
        Recorded::Done => Some(Ok(())),
        Recorded::Failure { error } => Some(Err(error)),
        Recorded::Output { .. } | Recorded::Wake { .. } | Recorded::Time { .. } => None,
    }
}

fn encode_wake(result: &Result<SignalWake, DispatchError>) -> Option<Recorded> {
    match result {
        Ok(SignalWake::Abandoned) => None,
        Ok(wake) => Some(Recorded::Wake { wake: wake.clone() }),
        Err(error) if error.is_cancellation() => None,
        Err(error) => Some(Recorded::Failure {
            error: error.clone(),
        }),
    }
}

fn replay_wake(recorded: Recorded) -> Option<Result<SignalWake, DispatchError>> {
    match recorded {
        Recorded::Wake { wake } => Some(Ok(wake)),
        Recorded::Failure { error } => Some(Err(error)),
        Recorded::Output { .. } | Recorded::Time { .. } | Recorded::Done => None,
    }
}

fn encode_time(result: &Result<u64, DispatchError>) -> Option<Recorded> {
    match result {
        Ok(ms) => Some(Recorded::Time { ms: *ms }),
        Err(error) if error.is_cancellation() => None,
        Err(error) => Some(Recorded::Failure {
            error: error.clone(),
        }),
    }
}

fn replay_time(recorded: Recorded) -> Option<Result<u64, DispatchError>> {
    match recorded {
        Recorded::Time { ms } => Some(Ok(ms)),
        Recorded::Failure { error } => Some(Err(error)),
        Recorded::Output { .. } | Recorded::Wake { .. } | Recorded::Done => None,
    }
}

#[async_trait]
impl Dispatcher for JournalingDispatcher {
    async fn dispatch_step(
        &self,
        request: &StepDispatch,
        cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        let inner = &self.inner;
        self.journaled(
            &request.recording_id,
            EffectKind::Step,
            || {
                self.observed(
                    request,
                    &request.step,
                    inner.dispatch_step(request, cancellation),
                )
            },
            encode_output,
            replay_output,
        )
        .await
    }

    async fn dispatch_shell(
        &self,
        request: &StepDispatch,
        cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        let inner = &self.inner;
        self.journaled(
            &request.recording_id,
            EffectKind::Shell,
            || {
                self.observed(
                    request,
                    "shell",
                    inner.dispatch_shell(request, cancellation),
                )
            },
            encode_output,
            replay_output,
        )
        .await
    }

    async fn wait_signal(
        &self,
        wait: &SignalWait,
        abandoned: &CancellationToken,
    ) -> Result<SignalWake, DispatchError> {
        let inner = &self.inner;
        self.journaled(
            &wait.recording_id,
            EffectKind::Wait,
            || inner.wait_signal(wait, abandoned),
            encode_wake,
            replay_wake,
        )
        .await
    }

    async fn record_step(&self, record: &StepRecord) -> Result<(), DispatchError> {
        let inner = &self.inner;
        self.journaled(
            &record.recording_id,
            EffectKind::Record,
            || inner.record_step(record),
            encode_unit,
            replay_unit,
        )
        .await
    }

    async fn notify_human_step(&self, notice: &HumanStepNotice) -> Result<(), DispatchError> {
        let inner = &self.inner;
        self.journaled(
            &notice.recording_id,
            EffectKind::Notify,
            || inner.notify_human_step(notice),
            encode_unit,
            replay_unit,
        )
        .await
    }

    async fn resolve_human_step(
        &self,
        resolution: &HumanStepResolution,
    ) -> Result<(), DispatchError> {
        let inner = &self.inner;
        self.journaled(
            &resolution.recording_id,
            EffectKind::Resolve,
            || inner.resolve_human_step(resolution),
            encode_unit,
            replay_unit,
        )
        .await
    }

    async fn now_ms(&self, recording_id: &str) -> Result<u64, DispatchError> {
        let inner = &self.inner;
        self.journaled(
            recording_id,
            EffectKind::Clock,
            || inner.now_ms(recording_id),
            encode_time,
            replay_time,
        )
        .await
    }

    fn is_cancellation(&self, error: &DispatchError) -> bool {
        self.inner.is_cancellation(error)
    }

    fn patched(&self, id: &str) -> bool {
        self.inner.patched(id)
    }
}
