//! Shared helpers: clients pointed at a mock, requests, and runtime-free utilities.

use std::sync::Arc;
use std::time::Duration;

use auto_swe_models::testing::{MockServer, MockTurn};
use auto_swe_models::{
    Api, ApiKey, ClientConfig, Endpoint, ModelRequest, ModelSpec, ProviderClient,
};
use auto_swe_scanners::UrlPolicy;
use url::Url;

pub(crate) const KEY: &str = "sk-test-SECRETKEY0123456789abcdefXYZ";

/// Each protocol under test, with a model spec that routes to it.
pub(crate) fn cases() -> Vec<(Api, &'static str)> {
    vec![
        (
            Api::AnthropicMessages,
            "anthropic/claude-sonnet-4-5-20250929",
        ),
        (Api::OpenaiResponses, "openai/gpt-5"),
        (Api::OpenaiChat, "openai-compatible/llama-3.3-70b"),
        (Api::GoogleGemini, "google/gemini-2.5-flash"),
    ]
}

pub(crate) async fn mock(api: Api, script: Vec<MockTurn>) -> MockServer {
    MockServer::start(api, Some(KEY), script)
        .await
        .expect("mock starts")
}

pub(crate) fn config(api: Api, spec: &str, server: &MockServer) -> ClientConfig {
    let mut policy = UrlPolicy::default();
    policy
        .allow_private_origin(&server.origin())
        .expect("origin allowed");
    let base = Url::parse(&server.base_url()).unwrap();
    let endpoint = match api {
        Api::OpenaiChat => Endpoint::ApiBase(base.join("/v1").unwrap()),
        _ => Endpoint::BaseUrl(base),
    };
    let mut config = ClientConfig::new(ModelSpec::parse(spec).unwrap(), ApiKey::new(KEY));
    config.endpoint = endpoint;
    config.policy = Arc::new(policy);
    config.retry.max_attempts = 3;
    config.retry.base_delay = Duration::from_millis(1);
    config.retry.max_delay = Duration::from_millis(5);
    config.retry.retry_after_cap = Duration::from_secs(1);
    config
}

pub(crate) fn client(api: Api, spec: &str, server: &MockServer) -> ProviderClient {
    let client = ProviderClient::new(config(api, spec, server)).expect("client builds");
    assert_eq!(client.api(), api, "{spec} routes to {api:?}");
    client
}

pub(crate) fn ask(text: &str) -> ModelRequest {
    ModelRequest {
        system: Some("You are terse.".into()),
        messages: vec![auto_swe_models::Message::user(text)],
        max_tokens: Some(256),
        ..ModelRequest::default()
    }
}
