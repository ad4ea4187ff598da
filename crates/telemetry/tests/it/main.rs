//! Integration tests of the telemetry crate.

mod context;
mod metrics;
mod otlp;
mod spans;
