//! Who answered a human node. The wake-up of a human node is a signal anyone may send; the
//! person who answered is what the store recorded when the human step was answered. A human
//! node's output therefore carries `answeredBy` from the store (the signal's own claim is
//! overwritten), and `null` when no stored answer backs the signal, so a template that needs
//! different people (`four-eyes`) cannot be satisfied by a forged payload.

use auto_swe_interpreter::{DispatchError, HumanStepNotice, SignalWait, WaitKind};
use auto_swe_store::{HumanStep, HumanStepStatus, Store};
use serde_json::Value;

use super::store_failure;

/// The field a human node's output names its answerer in.
pub const ANSWERED_BY: &str = "answeredBy";

/// `payload` of the wake-up of `wait` with the answerer the store recorded. Signal waits pass
/// through unchanged; an answer that is not an object is left for the interpreter to refuse.
/// Every engine delivers a human node's answer through it (the embedded engine's dispatcher,
/// the Temporal engine's `StoreEffects`).
pub async fn stamp_answerer(
    store: &Store,
    run_id: &str,
    wait: &SignalWait,
    payload: Value,
) -> Result<Value, DispatchError> {
    if wait.kind != WaitKind::Human {
        return Ok(payload);
    }
    let Value::Object(mut answer) = payload else {
        return Ok(payload);
    };
    let steps = store
        .list_human_steps(run_id)
        .await
        .map_err(|e| store_failure(&e))?;
    let answered_by = steps
        .iter()
        .rev()
        .find(|step| {
            step.status == HumanStepStatus::ANSWERED
                && asks_for(step, &wait.spec_node_id, &wait.recording_id)
        })
        .and_then(|step| step.answered_by.clone());
    tracing::info!(
        node = %wait.spec_node_id,
        recording_id = %wait.recording_id,
        answered_by = answered_by.as_deref().unwrap_or("<no stored answer>"),
        "human answer delivered"
    );
    answer.insert(
        ANSWERED_BY.to_owned(),
        answered_by.map_or(Value::Null, Value::String),
    );
    Ok(Value::Object(answer))
}

/// Whether the run already holds the human step `notice` asks for (same node, same recording
/// id), answered or not.
pub(crate) async fn asked_before(
    store: &Store,
    run_id: &str,
    notice: &HumanStepNotice,
) -> Result<bool, DispatchError> {
    let steps = store
        .list_human_steps(run_id)
        .await
        .map_err(|e| store_failure(&e))?;
    Ok(steps
        .iter()
        .any(|step| asks_for(step, &notice.spec_node_id, &notice.recording_id)))
}

/// Whether `step` is the one a human node (`node_id`) asked under `recording_id`.
fn asks_for(step: &HumanStep, node_id: &str, recording_id: &str) -> bool {
    step.node_id == node_id
        && step.prompt.get("recordingId").and_then(Value::as_str) == Some(recording_id)
}
