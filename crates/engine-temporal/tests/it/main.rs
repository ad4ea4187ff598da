//! The Temporal engine against a real Temporal server (the `temporal` CLI's dev server on
//! loopback, `AUTO_SWE_TEMPORAL_ADDRESS`).
#![expect(
    clippy::expect_used,
    reason = "a test fails loudly on any unexpected error"
)]

mod conformance;
mod crash;
mod errors;
mod host;
mod replay;
mod signals;
mod store;
mod support;
mod takeover;
mod ticket_to_merge;
