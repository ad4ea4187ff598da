//! Integration tests of the telemetry crate.
#![expect(
    clippy::unwrap_used,
    clippy::float_cmp,
    clippy::panic,
    reason = "a test fails loudly on any unexpected error; counters hold exact small values"
)]

mod context;
mod metrics;
mod otlp;
mod spans;
