//! Spend written as it is spent: each model call of a step is handed, as it ends, to a writer
//! task that stores it under the run's lease ([`auto_swe_store::SpendStore::record_model_call`]).
//! The calls of an attempt killed mid-step — its task aborted, or its lease taken by another
//! worker — are therefore billed to the run, its org's month and the budget checks like any
//! other; the step's end only waits for the writer, and adds nothing itself.
//!
//! Each call is keyed by the execution that made it (one id per dispatcher of a held run), the
//! step's recording id and attempt and its index among that execution's calls of the attempt
//! (the store adds the run and the lease epoch), so a write made again after a failed commit
//! adds nothing, while the calls of another execution of the step — the worker that takes the
//! run over, or a Temporal activity retried on another worker under the run's shared lease —
//! are new spend.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use auto_swe_models::{CallLedger, MeteredCall};
use auto_swe_store::{LeaseToken, NewModelCall, Store, StoreError};
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

/// How many times one call's write is tried while the store answers with a retryable error.
const WRITE_TRIES: u32 = 3;
/// The pause between two tries.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// The calls of one dispatcher of a held run: its execution id (fresh for each dispatcher, so
/// two executions of a step under one lease — a Temporal activity retried on another worker —
/// never share a key) and the next call index of each step attempt. Indices continue across the
/// meters of one attempt (a step run again after a budget raise).
#[derive(Debug)]
pub(crate) struct CallIndexes {
    execution_id: String,
    next: Mutex<BTreeMap<(String, u32), Arc<AtomicI64>>>,
}

impl Default for CallIndexes {
    fn default() -> Self {
        Self {
            execution_id: uuid::Uuid::now_v7().simple().to_string(),
            next: Mutex::default(),
        }
    }
}

impl CallIndexes {
    fn of(&self, recording_id: &str, attempt: u32) -> Arc<AtomicI64> {
        let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(next.entry((recording_id.to_owned(), attempt)).or_default())
    }
}

enum Message {
    Call(NewModelCall),
    Settle(oneshot::Sender<Result<(), StoreError>>),
}

/// One step attempt's model calls on their way to the store: the meter's [`CallLedger`].
#[derive(Debug)]
pub(crate) struct StepLedger {
    execution_id: String,
    recording_id: String,
    attempt: i64,
    next: Arc<AtomicI64>,
    sender: mpsc::UnboundedSender<Message>,
}

impl StepLedger {
    /// A ledger for `recording_id`'s `attempt`, with its writer started. The writer is a task of
    /// its own: it outlives the step's task, so a step aborted mid-call still has its calls
    /// stored, and it stops once the ledger is dropped and every call is written.
    pub(crate) fn start(
        store: Store,
        token: LeaseToken,
        indexes: &CallIndexes,
        recording_id: &str,
        attempt: u32,
    ) -> Arc<Self> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let span = tracing::debug_span!(
            "model_calls",
            run_id = %token.run_id,
            epoch = token.epoch,
            recording_id,
            attempt,
        );
        tokio::spawn(write_calls(store, token, receiver).instrument(span));
        Arc::new(Self {
            execution_id: indexes.execution_id.clone(),
            recording_id: recording_id.to_owned(),
            attempt: i64::from(attempt),
            next: indexes.of(recording_id, attempt),
            sender,
        })
    }

    /// Waits until every call reported so far is stored. The first refusal (`LEASE_LOST`,
    /// `RUN_ENDED`, …) or lasting failure since the last settle is the error; calls whose
    /// writes failed for a reason that may pass are tried again first.
    pub(crate) async fn settle(&self) -> Result<(), StoreError> {
        let (reply, answer) = oneshot::channel();
        if self.sender.send(Message::Settle(reply)).is_err() {
            tracing::warn!("the model call writer stopped early");
            return Ok(());
        }
        answer.await.unwrap_or(Ok(()))
    }
}

impl CallLedger for StepLedger {
    fn call_ended(&self, call: MeteredCall) {
        let call = NewModelCall {
            execution_id: self.execution_id.clone(),
            recording_id: self.recording_id.clone(),
            attempt: self.attempt,
            call_index: self.next.fetch_add(1, Ordering::Relaxed),
            model: call.model.map(|spec| spec.to_string()),
            usage: call.spend,
        };
        if let Err(unsent) = self.sender.send(Message::Call(call))
            && let Message::Call(call) = unsent.0
        {
            tracing::error!(
                call_index = call.call_index,
                cost_micros = call.usage.cost_micros,
                "model call not stored: its writer has stopped"
            );
        }
    }
}

/// Stores the calls in the order they ended, and answers each settle once the calls before it
/// are written.
async fn write_calls(
    store: Store,
    token: LeaseToken,
    mut receiver: mpsc::UnboundedReceiver<Message>,
) {
    let mut unstored: Vec<NewModelCall> = Vec::new();
    let mut refusal: Option<StoreError> = None;
    while let Some(message) = receiver.recv().await {
        match message {
            Message::Call(call) => match write(&store, &token, &call).await {
                Ok(()) => {}
                Err(error) if error.is_retryable() => unstored.push(call),
                Err(error) => {
                    tracing::warn!(
                        code = error.code(),
                        call_index = call.call_index,
                        cost_micros = call.usage.cost_micros,
                        "model call refused"
                    );
                    refusal.get_or_insert(error);
                }
            },
            Message::Settle(reply) => {
                let mut outcome = refusal.take().map_or(Ok(()), Err);
                for call in std::mem::take(&mut unstored) {
                    if let Err(error) = write(&store, &token, &call).await {
                        tracing::error!(
                            code = error.code(),
                            call_index = call.call_index,
                            cost_micros = call.usage.cost_micros,
                            "model call not stored"
                        );
                        if outcome.is_ok() {
                            outcome = Err(error);
                        }
                    }
                }
                let _ = reply.send(outcome);
            }
        }
    }
    for call in unstored {
        if let Err(error) = write(&store, &token, &call).await {
            tracing::error!(
                code = error.code(),
                call_index = call.call_index,
                cost_micros = call.usage.cost_micros,
                "model call not stored"
            );
        }
    }
}

/// One call's write, tried again while the store's error may pass (the key makes a repeat of
/// a write that did commit add nothing).
async fn write(store: &Store, token: &LeaseToken, call: &NewModelCall) -> Result<(), StoreError> {
    let mut tries = 1;
    loop {
        match store.record_model_call(token, call.clone()).await {
            Ok(_) => return Ok(()),
            Err(error) if error.is_retryable() && tries < WRITE_TRIES => {
                tries += 1;
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Err(error) => return Err(error),
        }
    }
}
