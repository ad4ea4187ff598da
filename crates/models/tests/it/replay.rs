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

#[tokio::test]
async fn a_matched_cassette_answers_by_system_prompt_user_text_and_turn() {
    use auto_swe_models::{Message, ModelRequest, Part, Role};
    let cassette: Cassette = serde_json::from_value(serde_json::json!({
        "version": 1, "model": "openai/gpt-5",
        "exchanges": [
            {"systemContains": "security", "parts": [{"type": "text", "text": "sec"}], "finishReason": "stop"},
            {"systemContains": "domain", "promptContains": "round 2", "parts": [{"type": "text", "text": "dom-2"}], "finishReason": "stop"},
            {"systemContains": "domain", "turn": 0, "parts": [{"type": "text", "text": "dom-first"}], "finishReason": "stop"},
            {"systemContains": "domain", "turn": 1, "parts": [{"type": "text", "text": "dom-second"}], "finishReason": "stop"}
        ]
    }))
    .unwrap();
    let replay = ReplayClient::new(cassette).unwrap();
    let request = |system: &str, prompt: &str, turns: usize| {
        let mut messages = vec![Message::user(prompt.to_owned())];
        for _ in 0..turns {
            messages.push(Message {
                role: Role::Assistant,
                parts: vec![Part::Text { text: "…".into() }],
            });
            messages.push(Message::user("go on".to_owned()));
        }
        ModelRequest {
            system: Some(system.to_owned()),
            messages,
            ..ModelRequest::default()
        }
    };
    let text = |r: auto_swe_models::ModelResponse| r.text();
    // Nothing is used up: the same request gets the same answer, in any order.
    for _ in 0..2 {
        assert_eq!(
            text(
                replay
                    .complete(&request("a domain reviewer", "round 1", 1))
                    .await
                    .unwrap()
            ),
            "dom-second"
        );
        assert_eq!(
            text(
                replay
                    .complete(&request("a domain reviewer", "round 1", 0))
                    .await
                    .unwrap()
            ),
            "dom-first"
        );
        assert_eq!(
            text(
                replay
                    .complete(&request("a security reviewer", "x", 3))
                    .await
                    .unwrap()
            ),
            "sec"
        );
        assert_eq!(
            text(
                replay
                    .complete(&request("a domain reviewer", "round 2", 5))
                    .await
                    .unwrap()
            ),
            "dom-2"
        );
    }
    let unmatched = replay
        .complete(&request("a domain reviewer", "round 1", 2))
        .await
        .unwrap_err();
    assert_eq!(unmatched.code(), "MODEL_CONFIGURATION");
}
