//! Retries and metering when things go wrong: stream errors before any output, jittered
//! backoff, every delay hint a provider gives, the total deadline, and the usage of failed and
//! cancelled calls.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use auto_swe_models::testing::{MockError, MockReply, MockTurn};
use auto_swe_models::{
    Api, Jitter, Meter, MeterConfig, MeteredClient, ModelClient, ModelError, PriceCatalog,
    RetryPolicy, StreamEvent, Usage, retry_after_at,
};
use futures_util::StreamExt;
use proptest::prelude::*;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::json;

use crate::support::{ask, client, config, mock};

fn sse(frames: &[(&str, serde_json::Value)]) -> Vec<u8> {
    frames
        .iter()
        .map(|(name, data)| {
            if name.is_empty() {
                format!("data: {data}\n\n")
            } else {
                format!("event: {name}\ndata: {data}\n\n")
            }
        })
        .collect::<String>()
        .into_bytes()
}

fn raw(body: Vec<u8>) -> MockTurn {
    MockTurn::Raw {
        status: 200,
        content_type: "text/event-stream".into(),
        body,
    }
}

fn anthropic_start(input: u64) -> (&'static str, serde_json::Value) {
    (
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "m", "content": [],
            "usage": {"input_tokens": input, "output_tokens": 1}}}),
    )
}

#[tokio::test]
async fn a_stream_error_before_any_output_is_retried() {
    let overloaded = raw(sse(&[
        anthropic_start(900),
        ("ping", json!({"type": "ping"})),
        (
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ]));
    let server = mock(
        Api::AnthropicMessages,
        vec![overloaded, MockTurn::Reply(MockReply::text("Recovered."))],
    )
    .await;
    let client = client(
        Api::AnthropicMessages,
        "anthropic/claude-haiku-4-5",
        &server,
    );
    let response = client.complete(&ask("hi")).await.unwrap();
    assert_eq!(response.text(), "Recovered.");
    assert_eq!(server.requests().len(), 2);
    // Once output has been delivered, the same error is not retried.
    server.set_script(vec![MockTurn::MidStreamError(
        MockReply::text("Half an answer"),
        MockError::Overloaded,
    )]);
    let error = client.complete(&ask("hi")).await.unwrap_err();
    assert_eq!(error.code(), "MODEL_OVERLOADED");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_200_holding_an_error_body_is_an_error_not_an_empty_answer() {
    let server = mock(
        Api::OpenaiChat,
        vec![MockTurn::Raw {
            status: 200,
            content_type: "application/json".into(),
            body: br#"{"error":{"message":"Invalid model","type":"invalid_request_error","code":"model_not_found"}}"#.to_vec(),
        }],
    )
    .await;
    let client = client(Api::OpenaiChat, "openai-compatible/llama-3.3-70b", &server);
    let error = client.complete(&ask("hi")).await.unwrap_err();
    assert_eq!(error.code(), "MODEL_INVALID_REQUEST", "{error}");
    assert!(error.to_string().contains("Invalid model"));
}

#[test]
fn full_jitter_spans_zero_to_the_ceiling() {
    let mut policy = RetryPolicy::default();
    policy.max_attempts = 10;
    policy.base_delay = Duration::from_millis(400);
    policy.max_delay = Duration::from_secs(5);
    let error = ModelError::Server {
        status: 500,
        message: String::new(),
    };
    let long = Duration::from_secs(3600);
    let at = |retry, random| policy.delay(retry, &error, Duration::ZERO, long, random);
    assert_eq!(at(0, 0), Some(Duration::ZERO));
    assert_eq!(at(0, u64::MAX), Some(Duration::from_millis(400)));
    assert_eq!(at(2, u64::MAX), Some(Duration::from_millis(1_600)));
    let half = at(2, u64::MAX / 2).unwrap();
    assert!(Duration::from_micros(799_999) <= half && half <= Duration::from_millis(800));
    // The ceiling stops at max_delay.
    assert_eq!(at(8, u64::MAX), Some(Duration::from_secs(5)));
    // No jitter: exactly the ceiling.
    let mut exact = policy;
    exact.jitter = Jitter::None;
    assert_eq!(
        exact.delay(1, &error, Duration::ZERO, long, 7),
        Some(Duration::from_millis(800))
    );
    // Attempts run out.
    assert_eq!(at(9, 1), None);
}

proptest! {
    #[test]
    fn jittered_delays_stay_within_bounds(retry in 0u32..12, random: u64) {
        let mut policy = RetryPolicy::default();
        policy.max_attempts = 20;
        let error = ModelError::Network { message: String::new() };
        let delay = policy
            .delay(retry, &error, Duration::ZERO, Duration::from_secs(3600), random)
            .unwrap();
        prop_assert!(delay <= policy.ceiling(retry));
        prop_assert!(delay <= policy.max_delay);
    }
}

#[test]
fn the_total_deadline_ends_retries() {
    let policy = RetryPolicy::default();
    let error = ModelError::RateLimited {
        status: 429,
        retry_after: Some(Duration::from_secs(10)),
        message: String::new(),
    };
    let deadline = Duration::from_secs(30);
    assert_eq!(
        policy.delay(0, &error, Duration::from_secs(15), deadline, 0),
        Some(Duration::from_secs(10))
    );
    assert_eq!(
        policy.delay(0, &error, Duration::from_secs(21), deadline, 0),
        None
    );
    // A hint above the cap ends the retries whatever the deadline.
    let far = ModelError::RateLimited {
        status: 429,
        retry_after: Some(Duration::from_secs(61)),
        message: String::new(),
    };
    assert_eq!(
        policy.delay(0, &far, Duration::ZERO, Duration::MAX, 0),
        None
    );
}

#[tokio::test]
async fn a_request_deadline_stops_a_client_retrying() {
    let server = mock(
        Api::AnthropicMessages,
        vec![MockTurn::Error(MockError::RateLimited(Some(1)))],
    )
    .await;
    let client = client(
        Api::AnthropicMessages,
        "anthropic/claude-haiku-4-5",
        &server,
    );
    let mut request = ask("hi");
    request.retry_deadline = Some(Duration::from_millis(200));
    let error = client.complete(&request).await.unwrap_err();
    assert_eq!(error.code(), "MODEL_RATE_LIMITED");
    // The one-second wait would pass the 200 ms deadline: no second request.
    assert_eq!(server.requests().len(), 1);
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, HeaderValue::from_str(value).unwrap());
    }
    map
}

#[test]
fn each_delay_hint_is_read() {
    let now = UNIX_EPOCH + Duration::from_secs(1_796_304_600); // 2026-12-03T13:30:00Z
    let at = |pairs: &[(&'static str, &str)]| retry_after_at(&headers(pairs), now);
    assert_eq!(
        at(&[("retry-after-ms", "1500")]),
        Some(Duration::from_millis(1500))
    );
    assert_eq!(at(&[("retry-after", "7")]), Some(Duration::from_secs(7)));
    // retry-after-ms wins over retry-after; an HTTP date is not trusted.
    assert_eq!(
        at(&[("retry-after-ms", "250"), ("retry-after", "9")]),
        Some(Duration::from_millis(250))
    );
    assert_eq!(
        at(&[("retry-after", "Wed, 21 Oct 2026 07:28:00 GMT")]),
        None
    );
    // Anthropic: the exhausted limit's reset timestamp.
    assert_eq!(
        at(&[
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", "2026-12-03T13:30:12Z"),
            ("anthropic-ratelimit-tokens-remaining", "5000"),
            ("anthropic-ratelimit-tokens-reset", "2026-12-03T13:30:02Z"),
        ]),
        Some(Duration::from_secs(12))
    );
    // A reset already past is no wait.
    assert_eq!(
        at(&[(
            "anthropic-ratelimit-input-tokens-reset",
            "2026-12-03T13:29:00Z"
        )]),
        Some(Duration::ZERO)
    );
    // OpenAI: durations; the exhausted one decides.
    assert_eq!(
        at(&[
            ("x-ratelimit-remaining-requests", "12"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ]),
        Some(Duration::from_secs(360))
    );
    // Nothing exhausted: the earliest reset.
    assert_eq!(
        at(&[
            ("x-ratelimit-reset-requests", "120ms"),
            ("x-ratelimit-reset-tokens", "2s")
        ]),
        Some(Duration::from_millis(120))
    );
    assert_eq!(at(&[("x-ratelimit-reset-tokens", "later")]), None);
    let _ = SystemTime::now();
}

#[tokio::test]
async fn gemini_retry_info_is_honoured() {
    let exhausted = MockTurn::Raw {
        status: 429,
        content_type: "application/json".into(),
        body: json!({"error": {"code": 429, "message": "Resource has been exhausted",
            "status": "RESOURCE_EXHAUSTED", "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.05s"}]}})
        .to_string()
        .into_bytes(),
    };
    let server = mock(Api::GoogleGemini, vec![exhausted.clone()]).await;
    let mut once = config(Api::GoogleGemini, "google/gemini-2.5-flash", &server);
    once.retry = RetryPolicy::none();
    let error = auto_swe_models::ProviderClient::new(once)
        .unwrap()
        .complete(&ask("hi"))
        .await
        .unwrap_err();
    assert_eq!(error.retry_after(), Some(Duration::from_millis(50)));
    server.set_script(vec![exhausted, MockTurn::Reply(MockReply::text("ok"))]);
    let client = client(Api::GoogleGemini, "google/gemini-2.5-flash", &server);
    assert_eq!(client.complete(&ask("hi")).await.unwrap().text(), "ok");
}

fn meter() -> Arc<Meter> {
    Arc::new(Meter::new(
        MeterConfig::tier(auto_swe_models::Tier::Epic),
        PriceCatalog::builtin(),
    ))
}

/// A stream per protocol that reports usage, produces output, then fails.
fn failing(api: Api) -> MockTurn {
    match api {
        Api::AnthropicMessages => {
            let mut reply = MockReply::text("Partial answer");
            reply.usage = Usage {
                input: 1_000,
                output: 3,
                ..Usage::default()
            };
            MockTurn::MidStreamError(reply, MockError::Server)
        }
        Api::OpenaiResponses => raw(sse(&[
            (
                "response.created",
                json!({"type": "response.created", "response": {"id": "resp_1"}}),
            ),
            (
                "response.output_text.delta",
                json!({"type": "response.output_text.delta", "output_index": 0, "delta": "Partial"}),
            ),
            (
                "response.failed",
                json!({"type": "response.failed", "response": {"id": "resp_1",
                "status": "failed", "error": {"code": "server_error", "message": "boom"},
                "usage": {"input_tokens": 1_000, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 0}}}}),
            ),
        ])),
        // The usage chunk arrives, then the connection ends without `[DONE]`.
        Api::OpenaiChat => raw(sse(&[
            (
                "",
                json!({"id": "c1", "choices": [{"index": 0, "delta": {"content": "Partial"}}]}),
            ),
            (
                "",
                json!({"id": "c1", "choices": [], "usage": {"prompt_tokens": 1_000, "completion_tokens": 3}}),
            ),
        ])),
        Api::GoogleGemini => raw(sse(&[
            (
                "",
                json!({"candidates": [{"content": {"parts": [{"text": "Partial"}], "role": "model"}}],
                        "usageMetadata": {"promptTokenCount": 1_000, "candidatesTokenCount": 3}}),
            ),
            (
                "",
                json!({"error": {"code": 500, "message": "internal", "status": "INTERNAL"}}),
            ),
        ])),
        _ => unreachable!(),
    }
}

#[tokio::test]
async fn failed_streams_are_metered_for_every_client() {
    for (api, spec) in crate::support::cases() {
        let server = mock(api, vec![failing(api)]).await;
        let meter = meter();
        let metered = MeteredClient::new(client(api, spec, &server), Arc::clone(&meter));
        let error = metered.complete(&ask("hi")).await.unwrap_err();
        assert!(
            matches!(error.code(), "MODEL_SERVER_ERROR" | "MODEL_NETWORK_ERROR"),
            "{api:?}: {error}"
        );
        let totals = meter.totals();
        assert_eq!(
            totals.raw_input, 1_000,
            "{api:?} debits the failed call's input"
        );
        // Anthropic's final output count comes with the `message_delta` the failure cut off:
        // what was reported before it (the opening count) is what is debited.
        let output = if api == Api::AnthropicMessages { 1 } else { 3 };
        assert_eq!(totals.output, output, "{api:?}");
        assert_eq!(totals.calls, 1, "{api:?}");
    }
}

#[tokio::test]
async fn cancelled_streams_are_metered_for_every_client() {
    for (api, spec) in crate::support::cases() {
        let mut reply = MockReply::text("A long answer that never finishes");
        reply.usage = Usage {
            input: 2_000,
            output: 9,
            ..Usage::default()
        };
        // Anthropic reports input usage when the message starts; the mock's other protocols
        // report usage only with the end, so a call cancelled before it has nothing to debit.
        let server = mock(api, vec![MockTurn::Stall(reply)]).await;
        let meter = meter();
        let metered = MeteredClient::new(client(api, spec, &server), Arc::clone(&meter));
        let mut stream = metered.stream(&ask("hi")).await.unwrap();
        let mut seen = 0;
        while let Some(event) = stream.next().await {
            if matches!(event.unwrap(), StreamEvent::TextDelta(_)) {
                seen += 1;
                if seen == 3 {
                    break;
                }
            }
        }
        drop(stream);
        server.disconnected().await;
        let totals = meter.totals();
        assert_eq!(totals.calls, 1, "{api:?}: a cancelled call is still a call");
        let expected = match api {
            Api::AnthropicMessages => 2_000,
            _ => 0,
        };
        assert_eq!(totals.raw_input, expected, "{api:?}");
    }
}

#[tokio::test]
async fn a_server_that_never_answers_hits_the_first_byte_timeout_once() {
    // Accepts, reads the request, never answers.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let origin = listener.local_addr().unwrap().to_string();
    let (accepted, mut accepts) = tokio::sync::mpsc::unbounded_channel();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            let _ = accepted.send(());
            open.push(socket);
        }
    });
    let mut policy = auto_swe_scanners::UrlPolicy::default();
    policy.allow_private_origin(&origin).unwrap();
    let mut config = auto_swe_models::ClientConfig::new(
        auto_swe_models::ModelSpec::parse("anthropic/claude-haiku-4-5").unwrap(),
        auto_swe_models::ApiKey::new("sk-test-key-0000000000"),
    );
    config.endpoint =
        auto_swe_models::Endpoint::BaseUrl(url::Url::parse(&format!("http://{origin}")).unwrap());
    config.policy = Arc::new(policy);
    config.http.first_byte_timeout = Duration::from_millis(300);
    let client = auto_swe_models::ProviderClient::new(config).unwrap();
    let error = client.complete(&ask("hi")).await.unwrap_err();
    assert_eq!(error.code(), "MODEL_NETWORK_ERROR");
    assert!(
        error.to_string().contains("no response within 300ms"),
        "{error}"
    );
    // The request may have reached the provider: it is not sent again.
    accepts.recv().await.unwrap();
    assert!(accepts.try_recv().is_err());
    held.abort();
}
