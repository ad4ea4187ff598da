//! External writes made at most once per run: a step claims the effect in the run's outcome
//! ledger before sending it and records what it returned after, so a retry (or a replay after a
//! crash) gets the recorded result instead of a second effect. A claim left pending — the worker
//! died, or lost its lease, after claiming and before recording — may or may not have reached
//! the provider. Where the provider can tell (the step hands a check), the worker asks it: an
//! effect it shows made is recorded with what it shows and the run goes on; one it shows not
//! made is given back and sent again, once. Where it cannot, the run stops with
//! `OUTCOME_AMBIGUOUS` for a person to resolve (`auto-swe runs resolve`) instead of risking the
//! effect twice.

use std::future::Future;

use auto_swe_interpreter::DispatchError;
use auto_swe_store::OutcomeClaim;
use serde_json::Value;
use tracing::Instrument;

use super::{StepContext, store_failure};

/// The code of a run stopped on a claim that may or may not have been sent.
pub const OUTCOME_AMBIGUOUS: &str = "OUTCOME_AMBIGUOUS";

/// How a send failed.
#[derive(Debug)]
pub(crate) enum SendFailure {
    /// The attempt failed before anything reached the provider: the claim is given back, so a
    /// retry may send it.
    NotSent(DispatchError),
    /// The attempt may have reached the provider: the claim stays pending, and a retry stops
    /// with [`OUTCOME_AMBIGUOUS`].
    MaybeSent(DispatchError),
}

/// What the provider shows of an effect whose claim was left pending.
#[derive(Debug)]
pub(crate) enum Checked {
    /// It was made: this is the result to record.
    Happened(Value),
    /// It was not made: it may be sent again.
    DidNotHappen,
    /// The provider cannot tell (or could not be asked).
    CannotTell,
}

fn ambiguous(key: &str) -> DispatchError {
    DispatchError::non_retryable(
        OUTCOME_AMBIGUOUS,
        format!(
            "an earlier attempt at `{key}` may have reached the provider without recording its \
             result; a person must check it and answer with `auto-swe runs resolve` before the \
             work is sent again"
        ),
    )
}

impl StepContext<'_> {
    /// The ledger key of `effect` for this node: the node's recording id (stable across replays
    /// and retries of the same visit) and the effect's name.
    pub(crate) fn outcome_key(&self, effect: &str) -> String {
        format!("{}:{effect}", self.request.recording_id)
    }

    /// Sends an effect at most once for the whole run under the ledger key `key` (an effect
    /// that is the same whichever node visit asks for it). A claim left pending stops the run.
    pub(crate) async fn send_once_as<F, Fut>(
        &self,
        key: String,
        send: F,
    ) -> Result<Value, DispatchError>
    where
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = Result<Value, SendFailure>> + Send,
    {
        self.send_once_checked(key, || async { Checked::CannotTell }, send)
            .await
    }

    /// Sends an effect at most once under the ledger key `key`; a claim left pending is
    /// resolved by `check` where the provider can tell (see the module docs).
    pub(crate) async fn send_once_checked<C, CheckFut, F, Fut>(
        &self,
        key: String,
        check: C,
        send: F,
    ) -> Result<Value, DispatchError>
    where
        C: FnOnce() -> CheckFut + Send,
        CheckFut: Future<Output = Checked> + Send,
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = Result<Value, SendFailure>> + Send,
    {
        let span = tracing::info_span!("outcome", run_id = %self.run.run_id, key = %key);
        async {
            let store = &self.services.store;
            let claim = |key: &str| {
                let key = key.to_owned();
                async move {
                    store
                        .claim_outcome(&self.run.token, &key)
                        .await
                        .map_err(|e| store_failure(&e))
                }
            };
            match claim(&key).await? {
                OutcomeClaim::Done(recorded) => {
                    tracing::info!("already sent; the recorded result is reused");
                    return Ok(recorded);
                }
                OutcomeClaim::Ambiguous => {
                    tracing::warn!("an earlier attempt claimed this effect and recorded nothing");
                    match check().await {
                        Checked::Happened(result) => {
                            tracing::info!("the provider shows it made; recorded as it stands");
                            store
                                .complete_outcome(&self.run.token, &key, &result)
                                .await
                                .map_err(|e| store_failure(&e))?;
                            self.tracer.record(auto_swe_runtime::TraceEntry::event(
                                "outcome.resolved",
                                serde_json::json!({ "key": key, "happened": true, "by": "provider" }),
                            ));
                            return Ok(result);
                        }
                        Checked::DidNotHappen => {
                            tracing::info!("the provider shows it not made; it is sent again");
                            store
                                .release_outcome(&self.run.token, &key)
                                .await
                                .map_err(|e| store_failure(&e))?;
                            self.tracer.record(auto_swe_runtime::TraceEntry::event(
                                "outcome.resolved",
                                serde_json::json!({ "key": key, "happened": false, "by": "provider" }),
                            ));
                            // Claimed again, once: anything but a fresh claim stops the run.
                            if claim(&key).await? != OutcomeClaim::Claimed {
                                return Err(ambiguous(&key));
                            }
                        }
                        Checked::CannotTell => return Err(ambiguous(&key)),
                    }
                }
                OutcomeClaim::Claimed => {}
                _ => {
                    return Err(DispatchError::non_retryable(
                        OUTCOME_AMBIGUOUS,
                        format!("the ledger answered `{key}` in a way this worker does not know"),
                    ));
                }
            }
            match send().await {
                Ok(result) => {
                    store
                        .complete_outcome(&self.run.token, &key, &result)
                        .await
                        .map_err(|e| store_failure(&e))?;
                    Ok(result)
                }
                Err(SendFailure::NotSent(error)) => {
                    store
                        .release_outcome(&self.run.token, &key)
                        .await
                        .map_err(|e| store_failure(&e))?;
                    Err(error)
                }
                Err(SendFailure::MaybeSent(error)) => Err(error),
            }
        }
        .instrument(span)
        .await
    }
}
