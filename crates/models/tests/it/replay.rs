//! The replay provider serves a cassette recorded from a real client run.

use auto_swe_models::testing::{MockReply, MockTurn};
use auto_swe_models::{Api, Cassette, ModelClient, ReplayClient};

use crate::support::{ask, client, mock};

#[tokio::test]
async fn a_recorded_session_replays_exactly() {
    let server = mock(
        Api::AnthropicMessages,
        vec![
            MockTurn::Reply(MockReply::text("first")),
            MockTurn::Reply(MockReply::text("second")),
        ],
    )
    .await;
    let live = client(
        Api::AnthropicMessages,
        "anthropic/claude-haiku-4-5",
        &server,
    );
    let mut cassette = Cassette {
        version: 1,
        model: "anthropic/claude-haiku-4-5".into(),
        exchanges: vec![],
    };
    let mut originals = Vec::new();
    for prompt in ["one", "two"] {
        let response = live.complete(&ask(prompt)).await.unwrap();
        cassette.record(&ask(prompt), &response);
        originals.push(response);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.json");
    std::fs::write(&path, serde_json::to_string_pretty(&cassette).unwrap()).unwrap();

    let replay = ReplayClient::new(Cassette::load(&path).unwrap()).unwrap();
    for (prompt, original) in ["one", "two"].into_iter().zip(&originals) {
        let replayed = replay.complete(&ask(prompt)).await.unwrap();
        assert_eq!(replayed.parts, original.parts);
        assert_eq!(replayed.usage, original.usage);
        assert_eq!(replayed.finish_reason, original.finish_reason);
    }
    let exhausted = replay.complete(&ask("three")).await.unwrap_err();
    assert_eq!(exhausted.code(), "MODEL_CONFIGURATION");
}

#[tokio::test]
async fn a_replay_that_drifts_from_the_recording_fails() {
    let cassette: Cassette = serde_json::from_value(serde_json::json!({
        "version": 1, "model": "openai/gpt-5",
        "exchanges": [{"prompt": "expected", "parts": [{"type": "text", "text": "hi"}], "finishReason": "stop"}]
    })).unwrap();
    let replay = ReplayClient::new(cassette).unwrap();
    assert_eq!(
        replay
            .complete(&ask("something else"))
            .await
            .unwrap_err()
            .code(),
        "MODEL_CONFIGURATION"
    );
}
