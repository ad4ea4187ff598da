//! Test helpers (feature `testing`): a capture that installs the metrics and OpenTelemetry
//! layers over an in-memory exporter for the current thread, and an OTLP/HTTP sink on
//! loopback that decodes what an exporter sends it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use opentelemetry::Value;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use prost::Message as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tracing_subscriber::layer::SubscriberExt as _;

use crate::{Metrics, metrics_layer, otel_layer};

/// One exported span, as a test reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct CapturedSpan {
    /// The exported name (`chat claude-…`).
    pub name: String,
    /// Trace id, hex.
    pub trace_id: String,
    /// Span id, hex.
    pub span_id: String,
    /// Parent span id, hex; empty for a root.
    pub parent_span_id: String,
    /// Attributes, values as text.
    pub attributes: BTreeMap<String, String>,
}

impl CapturedSpan {
    /// An attribute's text.
    #[must_use]
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.as_str().to_owned(),
        other => other.to_string(),
    }
}

fn captured(span: &SpanData) -> CapturedSpan {
    CapturedSpan {
        name: span.name.to_string(),
        trace_id: span.span_context.trace_id().to_string(),
        span_id: span.span_context.span_id().to_string(),
        parent_span_id: if span.parent_span_id == opentelemetry::trace::SpanId::INVALID {
            String::new()
        } else {
            span.parent_span_id.to_string()
        },
        attributes: span
            .attributes
            .iter()
            .map(|kv| (kv.key.as_str().to_owned(), value_text(&kv.value)))
            .collect(),
    }
}

/// The metrics and OpenTelemetry layers over an in-memory exporter, installed for the current
/// thread while the capture lives (use a current-thread runtime), or for the whole process.
///
/// A thread-scoped capture loses a span whose last child handle is dropped on another thread:
/// the registry releases the parent through that thread's default subscriber, which is not the
/// capture's, so the parent never closes and is never exported. Database drivers drop spans on
/// their own worker threads (sqlx's `SQLite` connections do), so a test that judges spans
/// around store calls uses [`Capture::install_global`] in a test binary of its own.
pub struct Capture {
    exporter: InMemorySpanExporter,
    provider: SdkTracerProvider,
    metrics: Metrics,
    _guard: Option<tracing::subscriber::DefaultGuard>,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture").finish_non_exhaustive()
    }
}

impl Capture {
    /// Installs the capture.
    #[must_use]
    pub fn install() -> Self {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let metrics = Metrics::new();
        let subscriber = tracing_subscriber::registry()
            .with(otel_layer(&provider))
            .with(metrics_layer(&metrics));
        let guard = tracing::subscriber::set_default(subscriber);
        // A callsite another test's thread reached first with no subscriber may be cached as
        // uninteresting; ask every callsite again.
        tracing::callsite::rebuild_interest_cache();
        Self {
            exporter,
            provider,
            metrics,
            _guard: Some(guard),
        }
    }

    /// Installs the capture as the process's subscriber, for every thread: once per process
    /// (a test binary with one such test).
    ///
    /// # Panics
    /// When the process already has a global subscriber.
    #[must_use]
    pub fn install_global() -> Self {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let metrics = Metrics::new();
        let subscriber = tracing_subscriber::registry()
            .with(otel_layer(&provider))
            .with(metrics_layer(&metrics));
        assert!(
            tracing::subscriber::set_global_default(subscriber).is_ok(),
            "the process already has a global subscriber"
        );
        Self {
            exporter,
            provider,
            metrics,
            _guard: None,
        }
    }

    /// The spans finished so far.
    #[must_use]
    pub fn spans(&self) -> Vec<CapturedSpan> {
        let _ = self.provider.force_flush();
        self.exporter
            .get_finished_spans()
            .unwrap_or_default()
            .iter()
            .map(captured)
            .collect()
    }

    /// The metrics counted so far.
    #[must_use]
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}

/// An OTLP/HTTP (protobuf) collector on loopback that keeps every span it is sent.
#[derive(Debug)]
pub struct OtlpSink {
    address: SocketAddr,
    spans: Arc<Mutex<Vec<CapturedSpan>>>,
    requests: Arc<Mutex<Vec<BTreeMap<String, String>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for OtlpSink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl OtlpSink {
    /// Starts the sink on `127.0.0.1`, a free port.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let address = listener.local_addr()?;
        let spans = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (kept, heads) = (Arc::clone(&spans), Arc::clone(&requests));
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (kept, heads) = (Arc::clone(&kept), Arc::clone(&heads));
                tokio::spawn(async move {
                    let _ = serve(stream, &kept, &heads).await;
                });
            }
        });
        Ok(Self {
            address,
            spans,
            requests,
            task,
        })
    }

    /// The traces URL to export to.
    #[must_use]
    pub fn endpoint(&self) -> String {
        format!("http://{}/v1/traces", self.address)
    }

    /// The spans received so far.
    #[must_use]
    pub fn spans(&self) -> Vec<CapturedSpan> {
        self.spans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The headers of each export request received (names lower-case).
    #[must_use]
    pub fn request_headers(&self) -> Vec<BTreeMap<String, String>> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits up to `max` until `done` holds of the spans received.
    pub async fn wait_for(
        &self,
        max: Duration,
        done: impl Fn(&[CapturedSpan]) -> bool,
    ) -> Vec<CapturedSpan> {
        let deadline = tokio::time::Instant::now() + max;
        loop {
            let spans = self.spans();
            if done(&spans) || tokio::time::Instant::now() >= deadline {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Reads one HTTP/1.1 request with a `content-length` body, keeps its spans, answers 200.
async fn serve(
    mut stream: tokio::net::TcpStream,
    kept: &Mutex<Vec<CapturedSpan>>,
    heads: &Mutex<Vec<BTreeMap<String, String>>>,
) -> std::io::Result<()> {
    loop {
        let mut buffer = Vec::new();
        let mut chunk = [0u8; 8192];
        let head_end = loop {
            if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            let read = stream.read(&mut chunk).await?;
            if read == 0 {
                return Ok(());
            }
            buffer.extend_from_slice(&chunk[..read]);
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
        let headers: BTreeMap<String, String> = head
            .lines()
            .skip(1)
            .filter_map(|line| line.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let length: usize = headers
            .get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buffer.len() < head_end + length {
            let read = stream.read(&mut chunk).await?;
            if read == 0 {
                return Ok(());
            }
            buffer.extend_from_slice(&chunk[..read]);
        }
        let body = &buffer[head_end..head_end + length];
        heads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(headers);
        let status = match ExportTraceServiceRequest::decode(body) {
            Ok(request) => {
                kept.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend(decoded(&request));
                "200 OK"
            }
            Err(_) => "400 Bad Request",
        };
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"
        );
        stream.write_all(response.as_bytes()).await?;
    }
}

fn decoded(request: &ExportTraceServiceRequest) -> Vec<CapturedSpan> {
    let hex = |bytes: &[u8]| {
        bytes.iter().fold(String::new(), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
    };
    let mut out = Vec::new();
    for resource in &request.resource_spans {
        for scope in &resource.scope_spans {
            for span in &scope.spans {
                let attributes = span
                    .attributes
                    .iter()
                    .map(|kv| {
                        let text = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                            Some(any_value::Value::StringValue(s)) => s.clone(),
                            Some(any_value::Value::IntValue(i)) => i.to_string(),
                            Some(any_value::Value::DoubleValue(d)) => d.to_string(),
                            Some(any_value::Value::BoolValue(b)) => b.to_string(),
                            Some(other) => format!("{other:?}"),
                            None => String::new(),
                        };
                        (kv.key.clone(), text)
                    })
                    .collect();
                out.push(CapturedSpan {
                    name: span.name.clone(),
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    attributes,
                });
            }
        }
    }
    out
}
