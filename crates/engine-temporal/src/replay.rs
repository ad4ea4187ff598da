//! Replaying recorded histories against the current code, as Temporal's replayer does.

use serde_json::Value;
use temporalio_client::WorkflowHistory;
use temporalio_sdk::workflow_replayer::{WorkflowReplayer, WorkflowReplayerOptions};

use crate::error::TemporalError;
use crate::workflow::RunWorkflow;

/// Replays a run workflow's history, exported as JSON by
/// [`TemporalEngine::history_json`](crate::TemporalEngine::history_json), against this code. `REPLAY_DIVERGED` when this code would have made other commands than the history
/// holds (Temporal's message names the activity, whose id is the recording id).
pub async fn replay_history(workflow_id: &str, json: &[u8]) -> Result<(), TemporalError> {
    let diverged = |reason: String| TemporalError::ReplayDiverged {
        workflow_id: workflow_id.to_owned(),
        recording_id: recorded_activity(&reason).or_else(|| event_activity(json, &reason)),
        reason,
    };
    let history = WorkflowHistory::from_json(json).map_err(|error| diverged(error.to_string()))?;
    let options = WorkflowReplayerOptions::new()
        .register_workflow::<RunWorkflow>()
        .map_err(|error| TemporalError::Config(error.to_string()))?
        .build();
    let replayer =
        WorkflowReplayer::new(options).map_err(|error| TemporalError::Config(error.to_string()))?;
    replayer
        .replay_workflow(history)
        .await
        .map_err(|error| diverged(error.to_string()))
}

/// The activity id Temporal's non-determinism message names as the history's ("… of scheduled
/// event 'fan[1]/build' does not match …").
fn recorded_activity(message: &str) -> Option<String> {
    let (_, rest) = message.split_once("scheduled event '")?;
    let (id, _) = rest.split_once('\'')?;
    Some(id.to_owned())
}

/// The activity id of the history event Temporal's message names (`No command scheduled for
/// event HistoryEvent(id: 19, ActivityTaskScheduled)`).
fn event_activity(json: &[u8], message: &str) -> Option<String> {
    let (_, rest) = message.split_once("HistoryEvent(id: ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let id: u64 = digits.parse().ok()?;
    let history: Value = serde_json::from_slice(json).ok()?;
    let event = history["events"]
        .as_array()?
        .iter()
        .find(|event| event["event_id"].as_u64() == Some(id))?;
    event["attributes"]
        .as_object()?
        .values()
        .find_map(|attributes| attributes["activity_id"].as_str())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::{event_activity, recorded_activity};

    #[test]
    fn the_recording_id_is_read_from_the_non_determinism_message() {
        let message = "[TMPRL1100] Nondeterminism error: Activity id of scheduled event \
                       'fan[1]/build' does not match activity id of activity command 'begin'";
        assert_eq!(recorded_activity(message).as_deref(), Some("fan[1]/build"));
        assert_eq!(recorded_activity("a history that does not parse"), None);
    }

    #[test]
    fn the_recording_id_is_read_from_the_event_the_message_names() {
        let history = br#"{"events": [
            {"event_id": 18, "attributes": {"MarkerRecordedEventAttributes": {}}},
            {"event_id": 19, "attributes":
                {"ActivityTaskScheduledEventAttributes": {"activity_id": "fan[2]/build"}}}
        ]}"#;
        let message = "Nondeterminism error: No command scheduled for event \
                       HistoryEvent(id: 19, ActivityTaskScheduled)";
        assert_eq!(
            event_activity(history, message).as_deref(),
            Some("fan[2]/build")
        );
        let other = "No command scheduled for event HistoryEvent(id: 18, MarkerRecorded)";
        assert_eq!(event_activity(history, other), None);
    }
}
