//! The legacy HTTP+SSE transport (MCP 2024-11-05), for servers that do not speak streamable
//! HTTP. `rmcp` no longer carries a client for it, so this is ours: a `GET` on the connection's
//! URL opens an event stream whose first `endpoint` event names where to `POST` messages; the
//! server's messages arrive as `message` events on the same stream.
//!
//! The same guards hold as for streamable HTTP — the caller's client follows no redirect, uses
//! no proxy and checks every resolved address — and one more: the endpoint the server names must
//! be on the connection's own origin, so a server cannot point the bearer token and headers at
//! another host.

use std::borrow::Cow;
use std::time::Duration;

use auto_swe_models::{SseEvent, SseParser};
use futures_util::StreamExt as _;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use url::Url;

/// Messages from the server waiting to be received.
const QUEUE: usize = 64;
/// The longest event the stream may carry.
const MAX_EVENT_BYTES: usize = 4 << 20;

/// Why the legacy transport failed.
#[derive(Debug, thiserror::Error)]
pub enum LegacySseError {
    /// The stream could not be opened, or did not name an endpoint in time.
    #[error("legacy SSE: {0}")]
    Connect(String),
    /// The endpoint the server named is not on the connection's origin.
    #[error("legacy SSE: the server named an endpoint on another origin ({0})")]
    ForeignEndpoint(String),
    /// A message could not be posted.
    #[error("legacy SSE: posting a message failed: {0}")]
    Post(String),
}

/// A connected legacy SSE session.
pub(crate) struct LegacySse {
    client: reqwest::Client,
    endpoint: Url,
    headers: http::HeaderMap,
    messages: mpsc::Receiver<ServerJsonRpcMessage>,
    reader: JoinHandle<()>,
}

impl Drop for LegacySse {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Whether two URLs share scheme, host and port.
fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

impl LegacySse {
    /// Opens the event stream at `url` and waits (at most `wait`) for the server to name its
    /// message endpoint.
    pub(crate) async fn connect(
        client: reqwest::Client,
        url: &Url,
        headers: http::HeaderMap,
        wait: Duration,
    ) -> Result<Self, LegacySseError> {
        let response = tokio::time::timeout(
            wait,
            client
                .get(url.clone())
                .headers(headers.clone())
                .header(http::header::ACCEPT, "text/event-stream")
                .send(),
        )
        .await
        .map_err(|_| LegacySseError::Connect("no answer".to_owned()))?
        .map_err(|e| LegacySseError::Connect(e.without_url().to_string()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(LegacySseError::Connect(format!("HTTP {status}")));
        }
        let is_stream = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_stream {
            return Err(LegacySseError::Connect("not an event stream".to_owned()));
        }
        let (endpoint_tx, endpoint_rx) = oneshot::channel();
        let (tx, messages) = mpsc::channel(QUEUE);
        let base = url.clone();
        let reader = tokio::spawn(read_events(response, base, endpoint_tx, tx));
        let endpoint = match tokio::time::timeout(wait, endpoint_rx).await {
            Ok(Ok(named)) => named,
            Ok(Err(_)) => {
                reader.abort();
                return Err(LegacySseError::Connect(
                    "the stream ended without naming an endpoint".to_owned(),
                ));
            }
            Err(_) => {
                reader.abort();
                return Err(LegacySseError::Connect("no endpoint named".to_owned()));
            }
        };
        let endpoint = match endpoint {
            Ok(endpoint) => endpoint,
            Err(error) => {
                reader.abort();
                return Err(error);
            }
        };
        Ok(Self {
            client,
            endpoint,
            headers,
            messages,
            reader,
        })
    }
}

/// Reads the event stream: the first `endpoint` event (resolved against the stream's URL and
/// held to its origin) goes to `endpoint`, `message` events to `messages`. Ends with the stream.
async fn read_events(
    response: reqwest::Response,
    base: Url,
    endpoint: oneshot::Sender<Result<Url, LegacySseError>>,
    messages: mpsc::Sender<ServerJsonRpcMessage>,
) {
    let mut endpoint = Some(endpoint);
    let mut parser = SseParser::new();
    let mut events: Vec<SseEvent> = Vec::new();
    let mut body = response.bytes_stream();
    // Bytes read since the last whole event: a server that never finishes one is cut off
    // before it can grow the parser's buffer without bound.
    let mut unfinished = 0_usize;
    while let Some(Ok(chunk)) = body.next().await {
        if parser.feed(&chunk, &mut events).is_err() {
            return;
        }
        unfinished = if events.is_empty() {
            unfinished.saturating_add(chunk.len())
        } else {
            chunk.len()
        };
        if unfinished > MAX_EVENT_BYTES {
            return;
        }
        for event in events.drain(..) {
            if event.data.len() > MAX_EVENT_BYTES {
                return;
            }
            match event.event.as_str() {
                "endpoint" => {
                    let Some(reply) = endpoint.take() else {
                        continue;
                    };
                    let named = match base.join(event.data.trim()) {
                        Ok(url) if same_origin(&url, &base) => Ok(url),
                        Ok(url) => Err(LegacySseError::ForeignEndpoint(
                            url.origin().ascii_serialization(),
                        )),
                        Err(e) => Err(LegacySseError::Connect(format!("bad endpoint: {e}"))),
                    };
                    let refused = named.is_err();
                    let _ = reply.send(named);
                    if refused {
                        return;
                    }
                }
                "message" | "" => {
                    if endpoint.is_some() {
                        // Nothing may arrive before the endpoint.
                        continue;
                    }
                    if let Ok(message) = serde_json::from_str::<ServerJsonRpcMessage>(&event.data)
                        && messages.send(message).await.is_err()
                    {
                        return;
                    }
                }
                _ => {}
            }
        }
    }
}

impl Transport<RoleClient> for LegacySse {
    type Error = LegacySseError;

    fn name() -> Cow<'static, str> {
        "legacy-sse".into()
    }

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let request = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .json(&item);
        async move {
            let response = request
                .send()
                .await
                .map_err(|e| LegacySseError::Post(e.without_url().to_string()))?;
            if response.status().is_success() {
                Ok(())
            } else {
                Err(LegacySseError::Post(format!("HTTP {}", response.status())))
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.messages.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_connections_own_origin_is_an_endpoint() {
        let base = Url::parse("http://127.0.0.1:8080/sse").unwrap();
        for (named, same) in [
            ("/message?sessionId=1", true),
            ("http://127.0.0.1:8080/m", true),
            ("http://127.0.0.1:8081/m", false),
            ("https://127.0.0.1:8080/m", false),
            ("http://localhost:8080/m", false),
            ("//evil.test/m", false),
        ] {
            let url = base.join(named).unwrap();
            assert_eq!(same_origin(&url, &base), same, "{named}");
        }
    }
}
