//! The crate's one error type.

/// What can go wrong setting up or using telemetry.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// The metrics registry could not be written as text.
    #[error("the metrics could not be rendered")]
    Render,
    /// An OTLP setting is not usable.
    #[error("{variable}: {reason}")]
    Config {
        /// The variable (or setting) at fault.
        variable: String,
        /// Why.
        reason: String,
    },
    /// The OTLP exporter could not be built.
    #[error("the OTLP exporter could not be built: {0}")]
    Exporter(String),
    /// The exporter needs a Tokio runtime to send from, and none is running.
    #[error("OTLP export needs a Tokio runtime; none is running")]
    NoRuntime,
    /// A `traceparent` value is not W3C trace context.
    #[error("not a W3C traceparent: {0}")]
    Traceparent(String),
}

impl TelemetryError {
    /// A stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Render => "METRICS_RENDER_FAILED",
            Self::Config { .. } => "TELEMETRY_CONFIG_INVALID",
            Self::Exporter(_) => "OTLP_EXPORTER_FAILED",
            Self::NoRuntime => "OTLP_NO_RUNTIME",
            Self::Traceparent(_) => "TRACEPARENT_INVALID",
        }
    }
}
