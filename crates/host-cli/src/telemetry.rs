//! The worker's telemetry: its `tracing` subscriber (logs when `AUTO_SWE_LOG` asks, the
//! metrics layer always, OTLP export when `OTEL_EXPORTER_OTLP_ENDPOINT` is set) and the
//! `--metrics-addr` listener serving `GET /metrics`.

use std::net::SocketAddr;

use anyhow::Context as _;
use auto_swe_telemetry::{
    METRICS_CONTENT_TYPE, Metrics, OtlpConfig, SdkTracerProvider, metrics_layer, otel_layer,
    otlp_provider,
};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::LOG_ENV;

/// What [`install`] set up, to be shut down before the runtime ends.
pub(crate) struct Installed {
    provider: Option<SdkTracerProvider>,
}

/// Installs the process's subscriber. Call inside the runtime (OTLP export sends from it).
pub(crate) fn install(metrics: &Metrics) -> anyhow::Result<Installed> {
    // As for every other command: a filter that does not parse is reported and ignored.
    let logs = match std::env::var(LOG_ENV) {
        Ok(directives) => match tracing_subscriber::EnvFilter::try_new(&directives) {
            Ok(filter) => Some(filter),
            Err(error) => {
                crate::output::print_diagnostic(&format!("{LOG_ENV} ignored: {error}"))?;
                None
            }
        },
        Err(_) => None,
    }
    .map(|filter| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .with_filter(filter)
    });
    let provider = OtlpConfig::from_env()
        .map_err(|e| anyhow::anyhow!("{e} ({})", e.code()))?
        .map(|config| otlp_provider(&config).map_err(|e| anyhow::anyhow!("{e} ({})", e.code())))
        .transpose()?;
    let export = provider.as_ref().map(otel_layer);
    // A subscriber already installed (tests embedding the command) keeps its place.
    let _ = tracing_subscriber::registry()
        .with(logs)
        .with(metrics_layer(metrics))
        .with(export)
        .try_init();
    Ok(Installed { provider })
}

impl Installed {
    /// Sends what the exporter still holds.
    pub(crate) async fn shutdown(self) {
        if let Some(provider) = self.provider {
            let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        }
    }
}

/// Serves `GET /metrics` on `listener` until `stop` fires; every other path is 404 and every
/// other method on `/metrics` 405.
pub(crate) async fn serve_metrics(
    listener: tokio::net::TcpListener,
    metrics: Metrics,
    stop: CancellationToken,
) {
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let metrics = metrics.clone();
            async move {
                match metrics.render() {
                    Ok(text) => (
                        axum::http::StatusCode::OK,
                        [(axum::http::header::CONTENT_TYPE, METRICS_CONTENT_TYPE)],
                        text,
                    ),
                    Err(error) => (
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                        [(axum::http::header::CONTENT_TYPE, "text/plain")],
                        error.to_string(),
                    ),
                }
            }
        }),
    );
    let _ = axum::serve(listener, app)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await;
}

/// Binds `address` for the metrics listener.
pub(crate) async fn bind(address: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("--metrics-addr {address}: cannot listen"))
}
