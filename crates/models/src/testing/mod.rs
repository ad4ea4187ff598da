//! Loopback mock servers for every provider, speaking the published wire formats: SSE event
//! names and payload shapes, tool-call deltas, usage frames and error bodies. Each server is
//! driven by a script of turns and records the requests it receives.

mod cache;
mod cassette;
mod render;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::model::{FinishReason, Part, Usage};
use crate::providers::Api;

pub use render::{error_body, render_error_frame, render_reply};

/// What the mock answers with.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum MockTurn {
    /// A streamed reply rendered in the provider's format.
    Reply(MockReply),
    /// An HTTP error in the provider's error format.
    Error(MockError),
    /// The reply's opening frames, then the provider's in-stream error event.
    MidStreamError(MockReply, MockError),
    /// The reply's opening frames, then the connection is held open without completing; the
    /// server reports when the client goes away (`MockServer::disconnected`).
    Stall(MockReply),
    /// A redirect to `location` (which must never be followed).
    Redirect(String),
    /// Bytes as they are (a recorded fixture).
    Raw {
        /// HTTP status.
        status: u16,
        /// `content-type`.
        content_type: String,
        /// Body.
        body: Vec<u8>,
    },
}

/// A reply script: parts are rendered in order; text, reasoning and tool arguments are split
/// into `chunk`-character deltas so every delta path is exercised.
#[derive(Debug, Clone, PartialEq)]
pub struct MockReply {
    /// What the model says.
    pub parts: Vec<Part>,
    /// Why it stops.
    pub finish: FinishReason,
    /// Usage to report.
    pub usage: Usage,
    /// Characters per delta frame.
    pub chunk: usize,
}

impl MockReply {
    /// A text reply with a stop.
    #[must_use]
    pub fn text(text: &str) -> Self {
        Self {
            parts: vec![Part::text(text)],
            finish: FinishReason::Stop,
            usage: Usage {
                input: 12,
                output: 5,
                ..Usage::default()
            },
            chunk: 4,
        }
    }
}

/// Error classes a mock can answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MockError {
    /// Bad key (401; Google: 400 `API_KEY_INVALID`).
    Auth,
    /// Key lacks permission (403).
    Forbidden,
    /// 429 with an optional `retry-after` in seconds.
    RateLimited(Option<u32>),
    /// Overloaded (Anthropic 529, others 503).
    Overloaded,
    /// Prompt too long (400).
    ContextTooLong,
    /// Malformed request (400).
    InvalidRequest,
    /// 500.
    Server,
}

/// One request the mock received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// Method.
    pub method: String,
    /// Path.
    pub path: String,
    /// Query string.
    pub query: Option<String>,
    /// Headers, lowercased names (credentials included: tests assert on them).
    pub headers: BTreeMap<String, String>,
    /// Body as JSON (`Null` when not JSON).
    pub body: serde_json::Value,
}

#[derive(Debug)]
struct Shared {
    api: Api,
    key: Option<String>,
    script: Mutex<Vec<MockTurn>>,
    next: Mutex<usize>,
    requests: Mutex<Vec<RecordedRequest>>,
    disconnects: mpsc::UnboundedSender<()>,
    prompt_cache: Mutex<Option<cache::PromptCacheSim>>,
    cassette: Mutex<Option<Vec<crate::replay::Exchange>>>,
}

/// A running mock server on `127.0.0.1`. Stops when dropped.
#[derive(Debug)]
pub struct MockServer {
    address: SocketAddr,
    shared: Arc<Shared>,
    disconnects: tokio::sync::Mutex<mpsc::UnboundedReceiver<()>>,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

impl MockServer {
    /// Starts a server for `api` answering `script` in order (the last turn repeats). When
    /// `key` is set, a request without it gets the provider's authentication error.
    pub async fn start(
        api: Api,
        key: Option<&str>,
        script: Vec<MockTurn>,
    ) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let address = listener.local_addr()?;
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            api,
            key: key.map(str::to_owned),
            script: Mutex::new(script),
            next: Mutex::new(0),
            requests: Mutex::new(Vec::new()),
            disconnects: tx,
            prompt_cache: Mutex::new(None),
            cassette: Mutex::new(None),
        });
        let app_shared = Arc::clone(&shared);
        let app = axum::Router::new().fallback(move |method, uri, headers, body| {
            let shared = Arc::clone(&app_shared);
            async move { handle(&shared, &method, &uri, &headers, &body) }
        });
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Self {
            address,
            shared,
            disconnects: tokio::sync::Mutex::new(rx),
            _shutdown: shutdown,
        })
    }

    /// `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// `127.0.0.1:PORT`, the origin to allow.
    #[must_use]
    pub fn origin(&self) -> String {
        self.address.to_string()
    }

    /// The requests received so far.
    #[must_use]
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the script and restarts it.
    pub fn set_script(&self, script: Vec<MockTurn>) {
        *self
            .shared
            .script
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = script;
        *self
            .shared
            .next
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = 0;
    }

    /// From now on, an Anthropic mock reports input usage the way the provider's prompt cache
    /// would: the prefixes each request marks with `cache_control` are kept, and a later
    /// request's `cache_read_input_tokens` / `cache_creation_input_tokens` follow from them
    /// (the scripted usage keeps only its output figures). Other protocols are unaffected.
    pub fn simulate_prompt_cache(&self) {
        *self
            .shared
            .prompt_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(cache::PromptCacheSim::default());
    }

    /// From now on, answers every request from `cassette` by matching (as a matched
    /// [`crate::ReplayClient`] does, on the request body the provider received), instead of the
    /// script: the first exchange whose matchers all hold, rendered in the provider's format;
    /// a request no exchange matches gets the provider's server error. Anthropic Messages and
    /// `OpenAI` Chat Completions only.
    pub fn replay(&self, cassette: &crate::Cassette) {
        *self
            .shared
            .cassette
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(cassette.exchanges.clone());
    }

    /// Waits until a client drops a stalled stream.
    pub async fn disconnected(&self) {
        let _ = self.disconnects.lock().await.recv().await;
    }
}

fn expected_path(api: Api, path: &str, query: Option<&str>) -> bool {
    match api {
        Api::AnthropicMessages => path == "/v1/messages",
        Api::OpenaiResponses => path == "/v1/responses" || path == "/v1/embeddings",
        Api::OpenaiChat => path.ends_with("/chat/completions") || path.ends_with("/embeddings"),
        Api::GoogleGemini => {
            path.starts_with("/v1beta/models/")
                && path.ends_with(":streamGenerateContent")
                && query.is_some_and(|q| q.split('&').any(|p| p == "alt=sse"))
        }
    }
}

fn presented_key(api: Api, headers: &HeaderMap) -> Option<String> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    match api {
        Api::AnthropicMessages => get("x-api-key"),
        Api::GoogleGemini => get("x-goog-api-key"),
        Api::OpenaiResponses | Api::OpenaiChat => {
            get("authorization").and_then(|v| v.strip_prefix("Bearer ").map(str::to_owned))
        }
    }
}

impl RecordedRequest {
    fn of(method: &Method, uri: &Uri, headers: &HeaderMap, body: &Bytes) -> Self {
        Self {
            method: method.to_string(),
            path: uri.path().to_owned(),
            query: uri.query().map(str::to_owned),
            headers: headers
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body: serde_json::from_slice(body).unwrap_or(serde_json::Value::Null),
        }
    }
}

/// The answer from the cassette, when the server replays one.
fn replayed(shared: &Shared, api: Api, model: &str, body: &serde_json::Value) -> Option<Response> {
    let exchanges = shared
        .cassette
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let exchanges = exchanges.as_deref()?;
    Some(match cassette::answer(exchanges, api, body) {
        Some(exchange) => {
            let reply = MockReply {
                parts: exchange.parts.clone(),
                finish: exchange.finish_reason,
                usage: exchange.usage,
                chunk: 64,
            };
            let (frames, _) = render_reply(api, model, &reply);
            sse(Body::from(frames.concat()))
        }
        None => error_response(api, MockError::Server),
    })
}

fn handle(
    shared: &Arc<Shared>,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let recorded = RecordedRequest::of(method, uri, headers, body);
    shared
        .requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(recorded.clone());
    let api = shared.api;
    if *method != Method::POST || !expected_path(api, uri.path(), uri.query()) {
        return respond(
            404,
            "application/json",
            Body::from(r#"{"error":{"message":"not found","type":"not_found_error"}}"#),
        );
    }
    if let Some(key) = &shared.key
        && presented_key(api, headers).as_deref() != Some(key.as_str())
    {
        return error_response(api, MockError::Auth);
    }
    let model = model_of(api, &recorded);
    if let Some(response) = replayed(shared, api, &model, &recorded.body) {
        return response;
    }
    let turn = {
        let script = shared.script.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next = shared.next.lock().unwrap_or_else(PoisonError::into_inner);
        let turn = script
            .get((*next).min(script.len().saturating_sub(1)))
            .cloned();
        *next += 1;
        turn
    };
    match turn {
        None => error_response(api, MockError::Server),
        Some(MockTurn::Reply(mut reply)) => {
            if api == Api::AnthropicMessages
                && let Some(sim) = shared
                    .prompt_cache
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .as_mut()
            {
                let output = reply.usage.output;
                reply.usage = Usage {
                    output,
                    ..sim.account(&recorded.body)
                };
            }
            let (frames, _) = render_reply(api, &model, &reply);
            sse(Body::from(frames.concat()))
        }
        Some(MockTurn::Error(error)) => error_response(api, error),
        Some(MockTurn::MidStreamError(reply, error)) => {
            let (mut frames, tail) = render_reply(api, &model, &reply);
            frames.truncate(frames.len() - tail);
            frames.push(render_error_frame(api, error));
            sse(Body::from(frames.concat()))
        }
        Some(MockTurn::Stall(reply)) => {
            let (mut frames, tail) = render_reply(api, &model, &reply);
            frames.truncate(frames.len() - tail);
            let guard = DropSignal(shared.disconnects.clone());
            let stream = futures_util::stream::iter(
                frames
                    .into_iter()
                    .map(|f| Ok::<_, std::convert::Infallible>(Bytes::from(f))),
            )
            .chain(futures_util::stream::pending())
            .map(move |item| {
                let _ = &guard;
                item
            });
            sse(Body::from_stream(stream))
        }
        Some(MockTurn::Redirect(location)) => {
            let mut response = respond(307, "text/plain", Body::from("redirect"));
            if let Ok(value) = location.parse() {
                response.headers_mut().insert("location", value);
            }
            response
        }
        Some(MockTurn::Raw {
            status,
            content_type,
            body,
        }) => respond(status, &content_type, Body::from(body)),
    }
}

struct DropSignal(mpsc::UnboundedSender<()>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

fn model_of(api: Api, request: &RecordedRequest) -> String {
    match api {
        Api::GoogleGemini => request
            .path
            .strip_prefix("/v1beta/models/")
            .and_then(|p| p.split(':').next())
            .unwrap_or("gemini")
            .to_owned(),
        _ => request
            .body
            .get("model")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("model")
            .to_owned(),
    }
}

fn respond(status: u16, content_type: &str, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(value) = content_type.parse() {
        response.headers_mut().insert("content-type", value);
    }
    response
}

fn sse(body: Body) -> Response {
    let mut response = respond(200, "text/event-stream", body);
    response.headers_mut().insert(
        "cache-control",
        axum::http::HeaderValue::from_static("no-cache"),
    );
    response
}

fn error_response(api: Api, error: MockError) -> Response {
    let (status, body, retry_after) = error_body(api, error);
    let mut response = respond(status, "application/json", Body::from(body));
    if let Some(seconds) = retry_after
        && let Ok(value) = seconds.to_string().parse()
    {
        response.headers_mut().insert("retry-after", value);
    }
    response
}
