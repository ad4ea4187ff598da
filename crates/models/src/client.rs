//! The `ModelClient` seam and the provider client behind it: builds the wire request, sends it
//! through the guarded HTTP client with retries, and decodes the SSE stream.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tracing::Instrument;

use auto_swe_scanners::UrlPolicy;
use futures_util::{Stream, StreamExt};
use url::Url;

use crate::ModelError;
use crate::capabilities::{
    Adjustment, CallPlan, Corrections, ResponseStorage, correction_for, plan_call,
};
use crate::http::{ApiKey, GuardedHttp, HttpConfig, HttpResponse, NameLookup, SystemLookup};
use crate::model::{ModelRequest, ModelResponse, ModelSpec, Provider};
use crate::providers::Built;
use crate::providers::{Api, Decoder, build, classify_http};
use crate::reasoning::Route;
use crate::retry::{RetryPolicy, random_u64};
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
#[non_exhaustive]
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
    /// Whether `OpenAI` Responses stores responses (`Stateless` for zero-data-retention
    /// organisations).
    pub storage: ResponseStorage,
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
            storage: ResponseStorage::Stored,
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
    first_byte_timeout: Duration,
    storage: ResponseStorage,
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
        let first_byte_timeout = config.http.first_byte_timeout;
        let http = GuardedHttp::with_lookup(&base, config.policy, config.http, config.lookup)?;
        Ok(Self {
            spec: config.spec,
            key: config.key,
            api,
            route,
            base,
            retry: config.retry,
            http,
            first_byte_timeout,
            storage: config.storage,
        })
    }

    /// The wire protocol this client speaks.
    #[must_use]
    pub fn api(&self) -> Api {
        self.api
    }
}

/// A shared client is a client (so a `MeteredClient` can wrap an `Arc<dyn ModelClient>`).
#[async_trait::async_trait]
impl<C: ModelClient + ?Sized> ModelClient for std::sync::Arc<C> {
    fn spec(&self) -> &ModelSpec {
        (**self).spec()
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        (**self).stream(request).await
    }
}

#[async_trait::async_trait]
impl ModelClient for ProviderClient {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let span = tracing::info_span!(
            "model.call",
            model = %self.spec,
            api = ?self.api,
            attempts = tracing::field::Empty,
        );
        let started = Instant::now();
        let deadline = request.retry_deadline.unwrap_or(self.retry.deadline);
        let mut corrections = Corrections::default();
        let mut corrected: Option<&'static str> = None;
        let mut plan = self.plan(request, corrections);
        let mut built = build(self.api, &self.base, &self.spec, &self.key, request, &plan)?;
        let mut retry = 0;
        loop {
            span.record("attempts", retry + 1);
            let error = match self.attempt(&built).instrument(span.clone()).await {
                Attempt::Streaming(stream) => {
                    let mut adjustments = plan.adjustments.clone();
                    if let Some(field) = corrected {
                        adjustments.push(Adjustment::CorrectedAfterRefusal {
                            field: field.to_owned(),
                        });
                    }
                    let notes = futures_util::stream::iter(
                        adjustments
                            .into_iter()
                            .map(|a| Ok(StreamEvent::Adjusted(a))),
                    );
                    return Ok(Box::pin(notes.chain(stream)));
                }
                Attempt::Final(error) => return Err(error),
                Attempt::Failed(error) => error,
            };
            // A capability entry the provider contradicts: one corrected resend.
            if let ModelError::InvalidRequest {
                status: 400,
                message,
            } = &error
                && corrected.is_none()
                && let Some((next, field)) = correction_for(message, &plan, corrections)
            {
                tracing::warn!(parent: &span, field, "provider refused a field; resending without it");
                corrections = next;
                corrected = Some(field);
                plan = self.plan(request, corrections);
                built = build(self.api, &self.base, &self.spec, &self.key, request, &plan)?;
                continue;
            }
            let elapsed = started.elapsed();
            match self
                .retry
                .delay(retry, &error, elapsed, deadline, random_u64())
            {
                Some(delay) => {
                    tracing::info!(parent: &span, code = error.code(), delay_ms = delay.as_millis(), "retrying");
                    tokio::time::sleep(delay).await;
                    retry += 1;
                }
                None => return Err(error),
            }
        }
    }
}

/// How one attempt ended.
enum Attempt {
    /// The response is streaming and has produced output (or ended cleanly).
    Streaming(ModelStream),
    /// Failed in a way that may be retried (nothing reached the caller).
    Failed(ModelError),
    /// Failed in a way that must not be retried (the request may have been billed).
    Final(ModelError),
}

impl ProviderClient {
    fn plan(&self, request: &ModelRequest, corrections: Corrections) -> CallPlan {
        let mut plan = plan_call(&self.spec, request, self.route, corrections);
        plan.storage = self.storage;
        plan
    }

    async fn attempt(&self, built: &Built) -> Attempt {
        let request =
            self.http
                .post_json(built.url.clone(), built.headers.clone(), built.body.clone());
        let Ok(sent) = tokio::time::timeout(self.first_byte_timeout, request).await else {
            return Attempt::Final(ModelError::Network {
                message: format!(
                    "timed out: no response within {:?} of sending",
                    self.first_byte_timeout
                ),
            });
        };
        let response = match sent {
            Ok(response) => response,
            // A failure after the request may have reached the provider is not retried: a
            // retried completion would be billed twice.
            Err(failure) if !failure.before_sending => return Attempt::Final(failure.error),
            Err(failure) => return Attempt::Failed(failure.error),
        };
        let status = response.status();
        let is_json = response
            .header("content-type")
            .is_some_and(|v| v.starts_with("application/json"));
        if !(200..300).contains(&status) || is_json {
            let headers = response.headers().clone();
            let body = read_capped(response, 64 * 1024).await;
            if (200..300).contains(&status) {
                // A 200 holding an error object instead of a stream: classified by the error
                // it holds (as a 4xx would be), never taken for an empty answer.
                let holds_error = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .is_some_and(|v| v.get("error").is_some());
                return Attempt::Failed(if holds_error {
                    classify_http(400, &headers, &body)
                } else {
                    ModelError::InvalidResponse {
                        message: "a 200 answer held JSON instead of an event stream".into(),
                    }
                });
            }
            return Attempt::Failed(classify_http(status, &headers, &body));
        }
        let mut stream = decode(self.api, response);
        // Read up to the first output: an error before it (Anthropic's `overloaded_error`
        // right after `message_start`) is retried as if the request had failed.
        let mut prelude = Vec::new();
        loop {
            match stream.next().await {
                Some(Ok(event)) if event.is_output() => {
                    prelude.push(Ok(event));
                    break;
                }
                Some(Ok(event)) => prelude.push(Ok(event)),
                Some(Err(error)) if error.is_retryable() => {
                    return Attempt::Failed(error);
                }
                Some(Err(error)) => {
                    prelude.push(Err(error));
                    break;
                }
                None => break,
            }
        }
        Attempt::Streaming(Box::pin(futures_util::stream::iter(prelude).chain(stream)))
    }
}

async fn read_capped(mut response: HttpResponse, cap: usize) -> Vec<u8> {
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
fn decode(api: Api, response: HttpResponse) -> ModelStream {
    decode_bytes(api, response.into_inner().bytes_stream())
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
