//! Honest outcomes: refusals with their text, `pause_turn` as its own finish, a blocked
//! prompt as a typed, non-retryable error.

use auto_swe_models::testing::{MockReply, MockTurn};
use auto_swe_models::{Api, FinishReason, ModelClient};
use serde_json::json;

use crate::support::{ask, cases, client, mock};

#[tokio::test]
async fn a_refusal_comes_back_with_its_text() {
    for (api, spec) in cases() {
        if api == Api::GoogleGemini {
            continue; // Gemini has no refusal channel; it blocks (below) or filters.
        }
        let mut reply = MockReply::text("I can't help with that.");
        reply.finish = FinishReason::Refusal;
        let server = mock(api, vec![MockTurn::Reply(reply)]).await;
        let response = client(api, spec, &server)
            .complete(&ask("hi"))
            .await
            .unwrap();
        assert_eq!(response.text(), "I can't help with that.", "{api:?}");
        assert_eq!(
            response.finish_reason,
            Some(FinishReason::Refusal),
            "{api:?}"
        );
    }
}

#[tokio::test]
async fn pause_turn_is_its_own_finish() {
    let mut reply = MockReply::text("Still searching");
    reply.finish = FinishReason::PauseTurn;
    let server = mock(Api::AnthropicMessages, vec![MockTurn::Reply(reply)]).await;
    let response = client(Api::AnthropicMessages, "anthropic/claude-opus-5-5", &server)
        .complete(&ask("hi"))
        .await
        .unwrap();
    assert_eq!(response.finish_reason, Some(FinishReason::PauseTurn));
    assert_eq!(FinishReason::PauseTurn.as_str(), "pause-turn");
}

#[tokio::test]
async fn a_blocked_prompt_is_a_typed_error_and_is_not_retried() {
    let blocked = MockTurn::Raw {
        status: 200,
        content_type: "text/event-stream".into(),
        body: format!(
            "data: {}\n\n",
            json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
                   "usageMetadata": {"promptTokenCount": 42, "totalTokenCount": 42}})
        )
        .into_bytes(),
    };
    let server = mock(Api::GoogleGemini, vec![blocked]).await;
    let error = client(Api::GoogleGemini, "google/gemini-2.5-flash", &server)
        .complete(&ask("hi"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), "MODEL_PROMPT_BLOCKED");
    assert!(!error.is_retryable());
    assert!(error.to_string().contains("PROHIBITED_CONTENT"));
    assert_eq!(server.requests().len(), 1);
}
