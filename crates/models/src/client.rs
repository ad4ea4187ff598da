//! The `ModelClient` seam and the provider client behind it: builds the wire request, sends it
//! through the guarded HTTP client with retries, and decodes the SSE stream.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use auto_swe_scanners::UrlPolicy;
use futures_util::{Stream, StreamExt};
use url::Url;

use crate::ModelError;
use crate::http::{ApiKey, GuardedHttp, HttpConfig, NameLookup, SystemLookup};
use crate::model::{ModelRequest, ModelResponse, ModelSpec, Provider};
use crate::providers::{Api, Decoder, build, classify_http};
use crate::reasoning::{Route, reasoning_call};
use crate::retry::RetryPolicy;
use crate::sse::SseParser;
use crate::stream::{ResponseBuilder, StreamEvent};

/// A stream of response increments. Dropping it cancels the call: the connection is closed.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, ModelError>> + Send>>;

/// A model that answers requests.
///
/// Implementors stream a response's increments in order and end the stream after the
/// provider's completion marker; any failure is a classified `ModelError` with no key-shaped
/// text. Dropping the stream must stop the call.
#[async_trait::async_trait]
pub trait ModelClient: Send + Sync + fmt::Debug {
    /// The model this client calls.
    fn spec(&self) -> &ModelSpec;

    /// Starts a call and returns its increments.
    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError>;

    /// Runs a call to the end and folds it into a response.
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        collect(self.stream(request).await?).await
    }
}

/// Folds a stream into a response.
pub async fn collect(mut stream: ModelStream) -> Result<ModelResponse, ModelError> {
    let mut builder = ResponseBuilder::new();
    while let Some(event) = stream.next().await {
        builder.push(event?);
    }
    Ok(builder.finish())
}

/// Where a provider is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Endpoint {
    /// The provider's public API.
    Default,
    /// The same API at another base URL (a regional endpoint, a mock).
    BaseUrl(Url),
    /// An `apiBase`: a gateway speaking `OpenAI` Chat Completions (`{apiBase}/chat/completions`).
    /// For `OpenAI` this selects Chat Completions and sends no reasoning setting; it is required
    /// for OpenAI-compatible providers.
    ApiBase(Url),
}

/// Everything a provider client needs.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The model.
    pub spec: ModelSpec,
    /// The credential.
    pub key: ApiKey,
    /// Where to reach it.
    pub endpoint: Endpoint,
    /// Retries.
    pub retry: RetryPolicy,
    /// Timeouts.
    pub http: HttpConfig,
    /// The outbound URL policy.
    pub policy: Arc<UrlPolicy>,
    /// Name resolution (the system resolver unless a test supplies answers).
    pub lookup: Arc<dyn NameLookup>,
}

impl ClientConfig {
    /// Defaults: the provider's public API, default retries and timeouts, the default policy.
    #[must_use]
    pub fn new(spec: ModelSpec, key: ApiKey) -> Self {
        Self {
            spec,
            key,
            endpoint: Endpoint::Default,
            retry: RetryPolicy::default(),
            http: HttpConfig::default(),
            policy: Arc::new(UrlPolicy::default()),
            lookup: Arc::new(SystemLookup),
        }
    }
}

/// Default public base URLs.
pub(crate) fn default_base(provider: Provider) -> Option<&'static str> {
    match provider {
        Provider::Anthropic => Some("https://api.anthropic.com"),
        Provider::Openai => Some("https://api.openai.com"),
        Provider::Google => Some("https://generativelanguage.googleapis.com"),
        Provider::OpenaiCompatible => None,
    }
}

/// A client for one model at one provider.
#[derive(Debug, Clone)]
pub struct ProviderClient {
    spec: ModelSpec,
    key: ApiKey,
    api: Api,
    route: Route,
    base: Url,
    retry: RetryPolicy,
    http: GuardedHttp,
}

impl ProviderClient {
    /// Builds the client; the base URL is checked against the policy now.
    pub fn new(config: ClientConfig) -> Result<Self, ModelError> {
        let provider = config.spec.provider();
        let (base, route) = match (&config.endpoint, default_base(provider)) {
            (Endpoint::Default, Some(base)) => (
                Url::parse(base).map_err(|_| ModelError::Configuration {
                    message: "bad built-in base URL".into(),
                })?,
                Route::Direct,
            ),
            (Endpoint::Default, None) => {
                return Err(ModelError::Configuration {
                    message: format!("{} needs an apiBase", provider.as_str()),
                });
            }
            (Endpoint::BaseUrl(url), _) => (url.clone(), Route::Direct),
            (Endpoint::ApiBase(url), _) => (url.clone(), Route::ApiBase),
        };
        let api = match provider {
            Provider::Anthropic => Api::AnthropicMessages,
            Provider::Google => Api::GoogleGemini,
            Provider::Openai if route == Route::Direct => Api::OpenaiResponses,
            Provider::Openai | Provider::OpenaiCompatible => Api::OpenaiChat,
        };
        if config.key.is_empty() && provider != Provider::OpenaiCompatible {
            return Err(ModelError::Configuration {
                message: format!(
                    "no API key for {} ({})",
                    provider.as_str(),
                    provider.key_variable()
                ),
            });
        }
        let http = GuardedHttp::with_lookup(&base, config.policy, config.http, config.lookup)?;
        Ok(Self {
            spec: config.spec,
            key: config.key,
            api,
            route,
            base,
            retry: config.retry,
            http,
        })
    }

    /// The wire protocol this client speaks.
    #[must_use]
    pub fn api(&self) -> Api {
        self.api
    }
}

#[async_trait::async_trait]
impl ModelClient for ProviderClient {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let reasoning = reasoning_call(&self.spec, request.reasoning, self.route);
        let built = build(
            self.api, &self.base, &self.spec, &self.key, request, reasoning,
        )?;
        let mut retry = 0;
        loop {
            let sent = self
                .http
                .post_json(built.url.clone(), built.headers.clone(), built.body.clone())
                .await;
            let error = match sent {
                Ok(response) if response.status().is_success() => {
                    return Ok(decode(self.api, response));
                }
                Ok(response) => {
                    let status = response.status().as_u16();
                    let headers = response.headers().clone();
                    let body = read_capped(response, 64 * 1024).await;
                    classify_http(status, &headers, &body)
                }
                // A failure after the request may have reached the provider is not retried: a
                // retried completion would be billed twice.
                Err(failure) if !failure.before_sending => return Err(failure.error),
                Err(failure) => failure.error,
            };
            match self.retry.delay(retry, &error) {
                Some(delay) => {
                    tokio::time::sleep(delay).await;
                    retry += 1;
                }
                None => return Err(error),
            }
        }
    }
}

async fn read_capped(mut response: reqwest::Response, cap: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = cap.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= cap {
            break;
        }
    }
    body
}

/// The decoding stream: bytes in, SSE frames, provider events out. Polled directly rather
/// than through an `unfold` so its buffers stay in place between items.
struct DecodeStream<S> {
    bytes: Pin<Box<S>>,
    parser: SseParser,
    decoder: Decoder,
    events: Vec<StreamEvent>,
    pending: VecDeque<StreamEvent>,
    failure: Option<ModelError>,
    done: bool,
}

impl<S, B, E> Stream for DecodeStream<S>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: Into<ModelError>,
{
    type Item = Result<StreamEvent, ModelError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.pending.pop_front() {
                return Poll::Ready(Some(Ok(event)));
            }
            // Events decoded before a failure are delivered first, then the failure.
            if let Some(error) = this.failure.take() {
                return Poll::Ready(Some(Err(error)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            match this.bytes.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    let decoder = &mut this.decoder;
                    let events = &mut this.events;
                    let fed = this.parser.feed_with(chunk.as_ref(), &mut |name, data| {
                        decoder.event(name, data, events)
                    });
                    this.pending.extend(this.events.drain(..));
                    if let Err(error) = fed {
                        this.done = true;
                        this.failure = Some(error);
                    }
                }
                Poll::Ready(Some(Err(error))) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(error.into())));
                }
                Poll::Ready(None) => {
                    this.done = true;
                    if let Err(error) = this.decoder.end() {
                        return Poll::Ready(Some(Err(error)));
                    }
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// Turns a successful streaming response into events.
fn decode(api: Api, response: reqwest::Response) -> ModelStream {
    decode_bytes(api, response.bytes_stream())
}

/// Decodes any byte stream of SSE in `api`'s format (used for recorded streams too).
pub fn decode_bytes<S, B, E>(api: Api, bytes: S) -> ModelStream
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: AsRef<[u8]> + Send + 'static,
    E: Into<ModelError> + Send + 'static,
{
    Box::pin(DecodeStream {
        bytes: Box::pin(bytes),
        parser: SseParser::new(),
        decoder: Decoder::new(api),
        events: Vec::new(),
        pending: VecDeque::new(),
        failure: None,
        done: false,
    })
}

impl From<reqwest::Error> for ModelError {
    fn from(error: reqwest::Error) -> Self {
        Self::network(&error)
    }
}

impl From<std::convert::Infallible> for ModelError {
    fn from(error: std::convert::Infallible) -> Self {
        match error {}
    }
}
