//! Spend as it is spent: each model call's usage, written under the run's lease when the call
//! ends and added to the run's totals once.

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::error::StoreResult;
use crate::records::queue::LeaseToken;
use crate::records::runs::Spend;

/// One ended model call of a leased run's step. With the token's run and epoch, the execution
/// id, recording id, attempt and index are the call's idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewModelCall {
    /// The execution that made the call: one id per dispatcher of a held run, so two executions
    /// of one step under one lease (a Temporal activity retried on another worker) never share
    /// a key, while one execution's write made again does.
    pub execution_id: String,
    /// The step's recording id.
    pub recording_id: String,
    /// The step's attempt.
    pub attempt: i64,
    /// The call's place among the calls of this step attempt under this lease, from 0.
    pub call_index: i64,
    /// The model called (`provider/model`); `None` for a cost-only call (embeddings).
    pub model: Option<String>,
    /// What it spent.
    pub usage: Spend,
}

/// A stored model call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelCall {
    /// The run.
    pub run_id: String,
    /// The lease epoch the call was made under.
    pub epoch: i64,
    /// The execution that made it.
    pub execution_id: String,
    /// The step's recording id.
    pub recording_id: String,
    /// The step's attempt.
    pub attempt: i64,
    /// The call's index.
    pub call_index: i64,
    /// The model.
    pub model: Option<String>,
    /// What it spent.
    pub usage: Spend,
    /// When it was written.
    pub created_at: Timestamp,
}

/// What writing a model call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallBilled {
    /// This write stored the call and added it to the run's totals, now `run_usage`.
    Billed {
        /// The run's totals after the call.
        run_usage: Spend,
    },
    /// The call was stored before under the same key; nothing was added.
    AlreadyBilled {
        /// The run's totals.
        run_usage: Spend,
    },
}

/// Model calls, billed as they end.
///
/// Implementors guarantee: a call is written under the run's lease (a token whose epoch is not
/// current is refused with `LEASE_LOST`, an ended run with `RUN_ENDED`, nothing written); the
/// row and the addition to the run's totals are one transaction, so a call counts toward the
/// run's usage, the in-flight spend of its org's month and, at finalize, the month's bill
/// exactly once; a second write with the same key (the token's run and epoch, the execution id,
/// recording id, attempt and index) adds nothing.
#[async_trait]
pub trait SpendStore: Send + Sync {
    /// Stores one ended call of the leased run and adds its spend to the run, once per key.
    async fn record_model_call(
        &self,
        token: &LeaseToken,
        call: NewModelCall,
    ) -> StoreResult<CallBilled>;
    /// A run's stored calls, in key order (epoch, execution id, recording id, attempt, index).
    async fn list_model_calls(&self, run_id: &str) -> StoreResult<Vec<ModelCall>>;
}

/// Checks a call before it is written.
pub(crate) fn validate_call(call: &NewModelCall) -> StoreResult<()> {
    crate::limits::short_text("execution id", &call.execution_id)?;
    crate::limits::short_text("recording id", &call.recording_id)?;
    crate::limits::non_negative("attempt", call.attempt)?;
    crate::limits::non_negative("call index", call.call_index)?;
    if let Some(model) = &call.model {
        crate::limits::short_text("model", model)?;
    }
    crate::records::runs::validate_usage(&call.usage)
}
