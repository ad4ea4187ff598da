//! OTLP export over HTTP/protobuf, on only when configured: `OTEL_EXPORTER_OTLP_ENDPOINT`
//! (the collector's base URL; traces go to `/v1/traces`) or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full traces URL). `OTEL_EXPORTER_OTLP_HEADERS`
//! (`k=v,k2=v2`) adds headers, for a collector's credentials; their values are never logged or
//! shown in `Debug`. `OTEL_SERVICE_NAME` names the service (`auto-swe` by default).

use std::collections::HashMap;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;
use url::Url;

use crate::error::TelemetryError;

/// The base endpoint variable.
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The traces endpoint variable (used as it is, no path added).
pub const TRACES_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The headers variable.
pub const HEADERS_ENV: &str = "OTEL_EXPORTER_OTLP_HEADERS";
/// The service-name variable.
pub const SERVICE_NAME_ENV: &str = "OTEL_SERVICE_NAME";

/// Where and how spans are exported.
#[derive(Clone)]
pub struct OtlpConfig {
    /// The traces URL (`…/v1/traces`).
    pub endpoint: Url,
    /// Headers sent with every export.
    pub headers: HashMap<String, String>,
    /// `service.name`.
    pub service_name: String,
    /// How long one export may take.
    pub timeout: Duration,
}

impl std::fmt::Debug for OtlpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.headers.keys().collect();
        names.sort();
        f.debug_struct("OtlpConfig")
            .field("endpoint", &self.endpoint.as_str())
            .field("headers", &names)
            .field("service_name", &self.service_name)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl OtlpConfig {
    /// Export to `endpoint` (the full traces URL).
    #[must_use]
    pub fn new(endpoint: Url) -> Self {
        Self {
            endpoint,
            headers: HashMap::new(),
            service_name: "auto-swe".to_owned(),
            timeout: Duration::from_secs(10),
        }
    }

    /// Reads the configuration from the process environment; `None` when export is not asked
    /// for.
    pub fn from_env() -> Result<Option<Self>, TelemetryError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Reads the configuration through `var` (a variable's value, `None` when unset).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, TelemetryError> {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let endpoint = if let Some(traces) = set(TRACES_ENDPOINT_ENV) {
            parse_url(TRACES_ENDPOINT_ENV, &traces)?
        } else if let Some(base) = set(ENDPOINT_ENV) {
            let base = parse_url(ENDPOINT_ENV, &base)?;
            let path = format!("{}/v1/traces", base.path().trim_end_matches('/'));
            let mut url = base;
            url.set_path(&path);
            url
        } else {
            return Ok(None);
        };
        let mut config = Self::new(endpoint);
        if let Some(headers) = set(HEADERS_ENV) {
            config.headers = parse_headers(&headers)?;
        }
        if let Some(name) = set(SERVICE_NAME_ENV) {
            config.service_name = name;
        }
        Ok(Some(config))
    }
}

fn parse_url(variable: &str, value: &str) -> Result<Url, TelemetryError> {
    let refuse = |reason: String| TelemetryError::Config {
        variable: variable.to_owned(),
        reason,
    };
    let url = Url::parse(value.trim()).map_err(|e| refuse(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refuse(
            "only http and https endpoints are supported".to_owned(),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse(format!(
            "credentials belong in {HEADERS_ENV}, not in the URL"
        )));
    }
    Ok(url)
}

fn parse_headers(value: &str) -> Result<HashMap<String, String>, TelemetryError> {
    let mut headers = HashMap::new();
    for pair in value.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((name, value)) = pair.split_once('=') else {
            return Err(TelemetryError::Config {
                variable: HEADERS_ENV.to_owned(),
                reason: "each entry must be name=value".to_owned(),
            });
        };
        let name = name.trim();
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(TelemetryError::Config {
                variable: HEADERS_ENV.to_owned(),
                reason: format!("`{name}` is not a header name"),
            });
        }
        headers.insert(name.to_owned(), value.trim().to_owned());
    }
    Ok(headers)
}

/// Sends exports with the workspace's HTTP client on the Tokio runtime that built it: the
/// batch processor exports from its own thread, so each request is spawned onto the runtime
/// and awaited from there. Redirects are not followed and no proxy is used.
#[derive(Debug)]
struct RuntimeClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for RuntimeClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let task = self.runtime.spawn(async move {
            let (parts, body) = request.into_parts();
            let url = parts.uri.to_string();
            let response = client
                .request(parts.method, url)
                .headers(parts.headers)
                .body(body)
                .send()
                .await?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, headers, body))
        });
        let (status, headers, body) = task.await??;
        let mut response = Response::new(body);
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        Ok(response)
    }
}

/// Builds a tracer provider exporting to `config` in batches. Call it inside a Tokio runtime;
/// call [`SdkTracerProvider::shutdown`] before the runtime ends to send what is queued.
pub fn otlp_provider(config: &OtlpConfig) -> Result<SdkTracerProvider, TelemetryError> {
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| TelemetryError::NoRuntime)?;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(config.timeout)
        .build()
        .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(RuntimeClient { client, runtime })
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(config.endpoint.as_str())
        .with_headers(config.headers.clone())
        .with_timeout(config.timeout)
        .build()
        .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(service_resource(&config.service_name))
        .build())
}

/// The `service.name` resource.
#[must_use]
pub fn service_resource(service_name: &str) -> Resource {
    Resource::builder_empty()
        .with_attributes([KeyValue::new("service.name", service_name.to_owned())])
        .build()
}

/// The layer that turns the workspace's spans into OpenTelemetry spans of `provider`. It
/// exports spans of the `auto_swe*` crates at `INFO` and above only, whatever a log filter
/// elsewhere in the subscriber says.
#[must_use]
pub fn otel_layer<S>(provider: &SdkTracerProvider) -> impl Layer<S> + Send + Sync + 'static
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let tracer = provider.tracer("auto-swe");
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_tracked_inactivity(false)
        .with_filter(tracing_subscriber::filter::filter_fn(|metadata| {
            metadata.is_span()
                && metadata.target().starts_with("auto_swe")
                && *metadata.level() <= tracing::Level::INFO
        }))
}
