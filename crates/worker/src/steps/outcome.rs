//! External writes made at most once per run: a step claims the effect in the run's outcome
//! ledger before sending it and records what it returned after, so a retry (or a replay after a
//! crash) gets the recorded result instead of a second effect. A claim left pending — the worker
//! died, or lost its lease, after claiming and before recording — may or may not have reached
//! the provider; nothing here can tell which, so the run stops with `OUTCOME_AMBIGUOUS` for a
//! person to resolve instead of risking the effect twice.

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

impl StepContext<'_> {
    /// The ledger key of `effect` for this node: the node's recording id (stable across replays
    /// and retries of the same visit) and the effect's name.
    pub(crate) fn outcome_key(&self, effect: &str) -> String {
        format!("{}:{effect}", self.request.recording_id)
    }

    /// Sends `effect` at most once for this node visit of the run (see the module docs).
    pub(crate) async fn send_once<F, Fut>(
        &self,
        effect: &str,
        send: F,
    ) -> Result<Value, DispatchError>
    where
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = Result<Value, SendFailure>> + Send,
    {
        self.send_once_as(self.outcome_key(effect), send).await
    }

    /// Sends an effect at most once for the whole run under the ledger key `key` (an effect
    /// that is the same whichever node visit asks for it).
    pub(crate) async fn send_once_as<F, Fut>(
        &self,
        key: String,
        send: F,
    ) -> Result<Value, DispatchError>
    where
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = Result<Value, SendFailure>> + Send,
    {
        let span = tracing::info_span!("outcome", run_id = %self.run.run_id, key = %key);
        async {
            let store = &self.services.store;
            match store
                .claim_outcome(&self.run.token, &key)
                .await
                .map_err(|e| store_failure(&e))?
            {
                OutcomeClaim::Done(recorded) => {
                    tracing::info!("already sent; the recorded result is reused");
                    return Ok(recorded);
                }
                OutcomeClaim::Ambiguous => {
                    tracing::warn!("an earlier attempt claimed this effect and recorded nothing");
                    return Err(DispatchError::non_retryable(
                        OUTCOME_AMBIGUOUS,
                        format!(
                            "an earlier attempt at `{key}` may have reached the provider without \
                             recording its result; a person must check it before the work is \
                             sent again"
                        ),
                    ));
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
