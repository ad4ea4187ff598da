//! Integration tests for auto-swe-models: the client conformance suite against the loopback
//! mocks, fixture drift, the guarded client, keys, budgets, reasoning and replay.

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::float_cmp,
    clippy::too_many_lines,
    clippy::panic,
    clippy::cast_precision_loss,
    reason = "tests fail loudly, compare exact prices and read as one scenario each"
)]

mod budget;
mod caching;
mod conformance;
mod fixtures;
mod guard;
mod outcomes;
mod prices;
mod reasoning;
mod replay;
mod requests;
mod resilience;
mod serde_round_trip;
mod sse;
mod support;
