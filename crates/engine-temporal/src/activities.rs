//! The run's activities: every effect the interpreter asks for, made on a worker by the same
//! executors as on the embedded engine (through [`RunEffects`]).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_interpreter::{
    CancellationToken, DispatchError, Dispatcher, RECORD_STRING_LIMIT, SignalWait,
};
use auto_swe_worker::RunEnd;
use serde_json::Value;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::Instrument;

use crate::wire::{
    AnswerCall, Bookkeeping, BookkeepingReply, SpillCall, StepCall, StepReply, oversized, too_large,
};

/// What makes a run's effects on a worker: the host's side of the Temporal engine.
///
/// Implementor's contract: `dispatcher` gives the dispatcher whose calls make `run_id`'s
/// effects (the worker's step executors, for a real host); `finish` records the run's end once
/// (a second call for an ended run succeeds without writing). Both may be called again for the
/// same effect when a worker was lost mid-activity, so an implementation makes an effect that
/// leaves the run (a pull request, a comment) through the outcome ledger, as on the embedded
/// engine.
#[async_trait]
pub trait RunEffects: Send + Sync {
    /// The dispatcher of `run_id`'s effects.
    async fn dispatcher(&self, run_id: &str) -> Result<Arc<dyn Dispatcher>, DispatchError>;
    /// Records the end of `run_id`.
    async fn finish(&self, run_id: &str, end: &RunEnd) -> Result<(), DispatchError>;
    /// What a human node's wait delivers, from the `payload` that woke it. The wake-up is a
    /// signal anyone able to reach the cluster may send, so a host with a store overwrites the
    /// answerer with the one the store recorded (`StoreEffects`); the default passes the payload
    /// through, for hosts without people.
    async fn human_answer(
        &self,
        run_id: &str,
        wait: &SignalWait,
        payload: Value,
    ) -> Result<Value, DispatchError> {
        let _ = (run_id, wait);
        Ok(payload)
    }
    /// Tells readers that `run_id` now waits (`true`: a human step was opened, or every effect
    /// in flight is a wait for a signal, a person or a timer), `on` naming the signal that wakes
    /// it when one can, or works again (`false`). Only what readers see changes; the run goes on
    /// whatever this answers. The default records nothing.
    async fn waiting(
        &self,
        run_id: &str,
        waiting: bool,
        on: Option<&str>,
    ) -> Result<(), DispatchError> {
        let _ = (run_id, waiting, on);
        Ok(())
    }
    /// Keeps `text`, a long string of `run_id`'s end document (`from_bytes` long before it was
    /// cut to fit a payload), where a person can read it, and returns what the document holds
    /// in its place. A host with a store makes it an artifact of the run and returns its
    /// placeholder, as the embedded engine's spill does (`StoreEffects`); the default keeps
    /// nothing and returns the text cut to a step record's length, saying so.
    async fn spill(
        &self,
        run_id: &str,
        text: &str,
        from_bytes: usize,
    ) -> Result<String, DispatchError> {
        let _ = run_id;
        let kept: String = text.chars().take(RECORD_STRING_LIMIT).collect();
        Ok(format!("{kept} [cut from {from_bytes} bytes]"))
    }
}

/// `reply`, or a typed refusal in its place when it is too large to be a Temporal payload.
fn fits(reply: StepReply) -> StepReply {
    let Some(bytes) = oversized(&reply) else {
        return reply;
    };
    let what = match &reply {
        Ok(_) => "output is".to_owned(),
        Err(error) => format!("{} failure is", error.code),
    };
    Err(too_large(&what, bytes))
}

/// The activities a worker registers.
pub struct RunActivities {
    effects: Arc<dyn RunEffects>,
}

impl RunActivities {
    /// Activities making their effects through `effects`.
    #[must_use]
    pub fn new(effects: Arc<dyn RunEffects>) -> Self {
        Self { effects }
    }
}

impl std::fmt::Debug for RunActivities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunActivities").finish_non_exhaustive()
    }
}

#[activities]
impl RunActivities {
    /// One step or shell dispatch. It heartbeats while the executor works, so a lost worker is
    /// noticed within the heartbeat timeout, and stops the executor when the run cancels it.
    #[activity(name = "auto-swe.step")]
    pub async fn step(
        self: Arc<Self>,
        ctx: ActivityContext,
        call: StepCall,
    ) -> Result<StepReply, ActivityError> {
        let span = tracing::info_span!(
            "temporal.step",
            run_id = %call.run_id,
            recording_id = %call.dispatch.recording_id,
            attempt = ctx.info().attempt,
        );
        async move {
            let dispatcher = match self.effects.dispatcher(&call.run_id).await {
                Ok(dispatcher) => dispatcher,
                Err(error) => return Ok(Err(error)),
            };
            let cancel = CancellationToken::new();
            let work = async {
                if call.shell {
                    dispatcher.dispatch_shell(&call.dispatch, &cancel).await
                } else {
                    dispatcher.dispatch_step(&call.dispatch, &cancel).await
                }
            };
            let every = Duration::from_millis(call.heartbeat_every_ms.max(100));
            let beat = async {
                loop {
                    // A heartbeat is how a cancellation reaches the activity.
                    let _ = ctx.record_heartbeat(()).await;
                    tokio::select! {
                        () = tokio::time::sleep(every) => {}
                        () = ctx.cancelled() => {
                            cancel.cancel();
                            std::future::pending::<()>().await;
                        }
                    }
                }
            };
            tokio::select! {
                reply = work => {
                    if ctx.is_cancelled() && reply.as_ref().is_err_and(DispatchError::is_cancellation) {
                        return Err(ActivityError::cancelled());
                    }
                    Ok(fits(reply))
                }
                () = beat => Ok(Err(DispatchError::cancelled("the heartbeat loop ended"))),
            }
        }
        .instrument(span)
        .await
    }

    /// One long string of the run's end document kept aside (see [`RunEffects::spill`]).
    #[activity(name = "auto-swe.spill")]
    pub async fn spill(
        self: Arc<Self>,
        _ctx: ActivityContext,
        call: SpillCall,
    ) -> Result<Result<String, DispatchError>, ActivityError> {
        let span = tracing::info_span!("temporal.spill", run_id = %call.run_id, bytes = call.bytes);
        Ok(self
            .effects
            .spill(&call.run_id, &call.text, call.bytes)
            .instrument(span)
            .await)
    }

    /// The answer a human node's wait delivers (see [`RunEffects::human_answer`]).
    #[activity(name = "auto-swe.answer")]
    pub async fn answer(
        self: Arc<Self>,
        _ctx: ActivityContext,
        call: AnswerCall,
    ) -> Result<Result<Value, DispatchError>, ActivityError> {
        let span = tracing::info_span!(
            "temporal.answer",
            run_id = %call.run_id,
            recording_id = %call.wait.recording_id,
        );
        Ok(self
            .effects
            .human_answer(&call.run_id, &call.wait, call.payload)
            .instrument(span)
            .await)
    }

    /// One bookkeeping effect: a step record, a human step opened or closed, the run only
    /// waiting or working again, the run's end.
    #[activity(name = "auto-swe.bookkeeping")]
    pub async fn bookkeeping(
        self: Arc<Self>,
        _ctx: ActivityContext,
        effect: Bookkeeping,
    ) -> Result<BookkeepingReply, ActivityError> {
        let span = tracing::info_span!("temporal.bookkeeping", run_id = %effect.run_id());
        async move {
            match &effect {
                Bookkeeping::Finish { run_id, end } => {
                    return Ok(self.effects.finish(run_id, end).await);
                }
                Bookkeeping::Waiting {
                    run_id,
                    waiting,
                    on,
                } => {
                    return Ok(self.effects.waiting(run_id, *waiting, on.as_deref()).await);
                }
                _ => {}
            }
            let dispatcher = match self.effects.dispatcher(effect.run_id()).await {
                Ok(dispatcher) => dispatcher,
                Err(error) => return Ok(Err(error)),
            };
            let run_id = effect.run_id();
            Ok(match &effect {
                Bookkeeping::Record { record, .. } => dispatcher.record_step(record).await,
                Bookkeeping::Notify { notice, .. } => {
                    match dispatcher.notify_human_step(notice).await {
                        Ok(()) => {
                            self.effects
                                .waiting(run_id, true, Some(&notice.signal))
                                .await
                        }
                        Err(error) => Err(error),
                    }
                }
                Bookkeeping::Resolve { resolution, .. } => {
                    match dispatcher.resolve_human_step(resolution).await {
                        Ok(()) => self.effects.waiting(run_id, false, None).await,
                        Err(error) => Err(error),
                    }
                }
                Bookkeeping::Waiting { .. } | Bookkeeping::Finish { .. } => Ok(()),
            })
        }
        .instrument(span)
        .await
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::wire::{MAX_PAYLOAD_BYTES, encoded_len};

    /// An output whose reply encodes to exactly `bytes` bytes.
    fn output_of(bytes: usize) -> StepReply {
        let frame = encoded_len::<StepReply>(&Ok(json!("")));
        let reply = Ok(json!("x".repeat(bytes - frame)));
        assert_eq!(encoded_len(&reply), bytes);
        reply
    }

    #[test]
    fn a_reply_at_the_ceiling_goes_through_and_one_byte_more_is_a_typed_refusal() {
        let at = output_of(MAX_PAYLOAD_BYTES);
        assert_eq!(fits(at.clone()), at);
        let over = fits(output_of(MAX_PAYLOAD_BYTES + 1)).expect_err("refused");
        assert_eq!(over.code, "ENGINE_PAYLOAD_TOO_LARGE");
        assert!(over.non_retryable, "the same step answers the same again");
        assert!(
            over.message
                .contains(&format!("output is {} bytes", MAX_PAYLOAD_BYTES + 1)),
            "{}",
            over.message
        );
    }

    #[test]
    fn a_failure_too_large_to_carry_is_refused_naming_its_code() {
        let failure = Err(DispatchError::failure("NOISY", "e".repeat(3 * 1024 * 1024)));
        let refused = fits(failure).expect_err("refused");
        assert_eq!(refused.code, "ENGINE_PAYLOAD_TOO_LARGE");
        assert!(
            refused.message.contains("NOISY failure"),
            "{}",
            refused.message
        );
        let small = Err(DispatchError::failure("NOISY", "short"));
        assert_eq!(fits(small.clone()), small);
    }
}
