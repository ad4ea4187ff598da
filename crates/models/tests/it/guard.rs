//! The guarded client: connect-time address checks, literal addresses, keys never shown,
//! embeddings through the same client.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use auto_swe_models::testing::{MockError, MockReply, MockTurn};
use auto_swe_models::{
    Api, ApiKey, ClientConfig, EMBEDDING_DIMENSIONS, EmbeddingClient, Endpoint, GuardedHttp,
    HttpConfig, HttpResponse, Meter, MeterConfig, ModelClient, ModelSpec, NameLookup, PriceCatalog,
    ProviderClient, Tier,
};
use auto_swe_scanners::UrlPolicy;
use url::Url;

use crate::support::{KEY, ask, cases, client, config, mock};

/// Answers every name with one fixed address, so a public-looking name can be made to
/// resolve to loopback without touching DNS.
#[derive(Debug)]
struct FixedLookup(IpAddr);

#[async_trait::async_trait]
impl NameLookup for FixedLookup {
    async fn lookup(&self, _host: &str) -> std::io::Result<Vec<IpAddr>> {
        Ok(vec![self.0])
    }
}

#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused_at_connect_time() {
    // The mock listens on loopback; the name passes the URL check (https, public-looking), and
    // only the resolved address 127.0.0.1 is refused, before any connection is made.
    let server = mock(
        Api::AnthropicMessages,
        vec![MockTurn::Reply(MockReply::text("unreachable"))],
    )
    .await;
    let port = server.origin().rsplit(':').next().unwrap().to_owned();
    let mut config = ClientConfig::new(
        ModelSpec::parse("anthropic/claude-haiku-4-5").unwrap(),
        ApiKey::new(KEY),
    );
    config.endpoint =
        Endpoint::BaseUrl(Url::parse(&format!("https://models.example.com:{port}")).unwrap());
    config.lookup = Arc::new(FixedLookup(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    config.retry = auto_swe_models::RetryPolicy::none();
    let client = ProviderClient::new(config).expect("the URL itself passes");
    let error = client.complete(&ask("hi")).await.unwrap_err();
    assert_eq!(error.code(), "MODEL_REFUSED_BY_POLICY", "{error}");
    assert!(error.to_string().contains("LOOPBACK"), "{error}");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_named_origin_opts_loopback_in() {
    let server = mock(
        Api::AnthropicMessages,
        vec![MockTurn::Reply(MockReply::text("reached"))],
    )
    .await;
    let port = server.origin().rsplit(':').next().unwrap().to_owned();
    let mut policy = UrlPolicy::default();
    policy
        .allow_private_origin(&format!("localhost:{port}"))
        .unwrap();
    let mut config = ClientConfig::new(
        ModelSpec::parse("anthropic/claude-haiku-4-5").unwrap(),
        ApiKey::new(KEY),
    );
    config.endpoint = Endpoint::BaseUrl(Url::parse(&format!("http://localhost:{port}")).unwrap());
    config.policy = Arc::new(policy);
    config.lookup = Arc::new(FixedLookup(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    let response = ProviderClient::new(config)
        .unwrap()
        .complete(&ask("hi"))
        .await
        .unwrap();
    assert_eq!(response.text(), "reached");
}

#[test]
fn literal_and_local_addresses_are_refused_before_anything_is_sent() {
    // Pure checks: these clients are never used, so nothing is sent to these ranges.
    let policy = Arc::new(UrlPolicy::default());
    for url in [
        "https://127.0.0.1:8080",
        "https://[::1]:8080",
        "https://169.254.169.254",
        "https://10.0.0.8",
        "https://192.168.1.10:11434",
        "https://metadata.google.internal",
        "http://api.example.com",
        "https://localhost:11434",
        "https://user:pass@api.example.com",
    ] {
        let error = GuardedHttp::new(
            &Url::parse(url).unwrap(),
            Arc::clone(&policy),
            HttpConfig::default(),
        )
        .unwrap_err();
        assert_eq!(error.code(), "MODEL_REFUSED_BY_POLICY", "{url}");
    }
    GuardedHttp::new(
        &Url::parse("https://api.anthropic.com").unwrap(),
        policy,
        HttpConfig::default(),
    )
    .unwrap();
}

#[tokio::test]
async fn plain_http_to_loopback_needs_the_origin_named() {
    let server = mock(
        Api::AnthropicMessages,
        vec![MockTurn::Reply(MockReply::text("x"))],
    )
    .await;
    let mut config = config(
        Api::AnthropicMessages,
        "anthropic/claude-haiku-4-5",
        &server,
    );
    config.policy = Arc::new(UrlPolicy::default());
    let error = ProviderClient::new(config).unwrap_err();
    assert_eq!(error.code(), "MODEL_REFUSED_BY_POLICY");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn keys_never_appear_in_errors_or_debug_output() {
    let mut seen = Vec::new();
    for (api, spec) in cases() {
        for turn in [
            MockTurn::Error(MockError::Auth),
            MockTurn::Error(MockError::InvalidRequest),
            MockTurn::Error(MockError::Server),
            MockTurn::MidStreamError(MockReply::text("partial"), MockError::Overloaded),
            MockTurn::Redirect(format!("https://attacker.example/?key={KEY}")),
            // A provider echoing the key back in its error text.
            MockTurn::Raw { status: 400, content_type: "application/json".into(), body: format!(r#"{{"error":{{"message":"bad key {KEY} and Bearer {KEY}","type":"invalid_request_error"}}}}"#).into_bytes() },
        ] {
            let server = mock(api, vec![turn]).await;
            let mut config = config(api, spec, &server);
            config.retry = auto_swe_models::RetryPolicy::none();
            seen.push(format!("{config:?}"));
            let client = ProviderClient::new(config).unwrap();
            seen.push(format!("{client:?}"));
            let error = client.complete(&ask("hi")).await.unwrap_err();
            seen.push(format!("{error} {error:?}"));
        }
    }
    let key_tail = &KEY[8..];
    for text in &seen {
        assert!(
            !text.contains(KEY) && !text.contains(key_tail),
            "a key leaked: {text}"
        );
    }
    assert!(
        seen.iter().any(|t| t.contains("[REDACTED]")),
        "the echoed key was scrubbed, not dropped silently"
    );
    assert_eq!(format!("{:?}", ApiKey::new(KEY)), "ApiKey([REDACTED])");
}

#[tokio::test]
async fn embeddings_enforce_1536_dimensions_and_are_metered() {
    let vector: Vec<f32> = (0..EMBEDDING_DIMENSIONS).map(|i| i as f32 / 1e4).collect();
    let body = serde_json::json!({"object": "list", "data": [
        {"object": "embedding", "index": 1, "embedding": vector.iter().rev().collect::<Vec<_>>()},
        {"object": "embedding", "index": 0, "embedding": vector}],
        "model": "text-embedding-3-small", "usage": {"prompt_tokens": 1_000_000, "total_tokens": 1_000_000}});
    let short = serde_json::json!({"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}], "model": "m", "usage": {"prompt_tokens": 2, "total_tokens": 2}});
    let raw = |v: &serde_json::Value| MockTurn::Raw {
        status: 200,
        content_type: "application/json".into(),
        body: v.to_string().into_bytes(),
    };
    let server = mock(Api::OpenaiResponses, vec![raw(&body), raw(&short)]).await;
    let config = config(
        Api::OpenaiResponses,
        "openai/text-embedding-3-small",
        &server,
    );
    let client = EmbeddingClient::new(config).unwrap();
    let meter = Meter::new(MeterConfig::tier(Tier::Standard), PriceCatalog::builtin());
    let result = client
        .embed(&["a".into(), "b".into()], &meter)
        .await
        .unwrap();
    assert_eq!(result.vectors.len(), 2);
    assert_eq!(result.vectors[0][1], 1e-4);
    assert_eq!(
        result.vectors[1][0],
        (EMBEDDING_DIMENSIONS - 1) as f32 / 1e4
    );
    assert!((result.cost_usd - 0.02).abs() < 1e-9);
    assert!((meter.totals().cost_usd - 0.02).abs() < 1e-9);
    assert_eq!(
        meter.totals().raw_input,
        0,
        "embeddings spend money, not run tokens"
    );
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/embeddings");
    assert_eq!(request.body["dimensions"], 1536);
    let error = client.embed(&["a".into()], &meter).await.unwrap_err();
    assert_eq!(error.code(), "MODEL_INVALID_RESPONSE");
}

#[tokio::test]
async fn the_client_trait_is_object_safe() {
    let server = mock(
        Api::OpenaiChat,
        vec![MockTurn::Reply(MockReply::text("dyn"))],
    )
    .await;
    let boxed: Box<dyn ModelClient> = Box::new(client(Api::OpenaiChat, "openai/gpt-4o", &server));
    assert_eq!(boxed.complete(&ask("x")).await.unwrap().text(), "dyn");
    assert_eq!(boxed.spec().to_string(), "openai/gpt-4o");
}

#[tokio::test]
async fn post_json_answers_with_the_crates_own_response_type() {
    // A loopback mock answering one JSON error: status, headers and body read through
    // `HttpResponse`, and a URL off the client's origin refused before anything is sent.
    let server = mock(
        Api::AnthropicMessages,
        vec![MockTurn::Error(MockError::RateLimited(Some(7)))],
    )
    .await;
    let port = server.origin().rsplit(':').next().unwrap().to_owned();
    let mut policy = UrlPolicy::default();
    policy
        .allow_private_origin(&format!("localhost:{port}"))
        .unwrap();
    let base = Url::parse(&format!("http://localhost:{port}")).unwrap();
    let http = GuardedHttp::with_lookup(
        &base,
        Arc::new(policy),
        HttpConfig::default(),
        Arc::new(FixedLookup(IpAddr::V4(Ipv4Addr::LOCALHOST))),
    )
    .unwrap();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("x-api-key", KEY.parse().unwrap());
    let response: HttpResponse = http
        .post_json(
            base.join("/v1/messages").unwrap(),
            headers,
            br#"{"model":"claude-haiku-4-5","max_tokens":8,"messages":[]}"#.to_vec(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    assert!(
        response
            .header("content-type")
            .is_some_and(|v| v.starts_with("application/json")),
        "{:?}",
        response.headers()
    );
    assert_eq!(response.header("retry-after"), Some("7"));
    let body = response.bytes().await.unwrap();
    assert!(String::from_utf8_lossy(&body).contains("rate_limit_error"));
    assert_eq!(server.requests().len(), 1);

    let elsewhere = http
        .post_json(
            Url::parse("https://api.anthropic.com/v1/messages").unwrap(),
            reqwest::header::HeaderMap::new(),
            Vec::new(),
        )
        .await
        .unwrap_err();
    assert!(elsewhere.before_sending);
    assert_eq!(elsewhere.error.code(), "MODEL_REFUSED_BY_POLICY");
    assert_eq!(server.requests().len(), 1);
}
