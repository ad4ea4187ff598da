//! Integration tests of `auto-swe-spec`: the fixture corpus with snapshots, property tests and
//! the public API end to end.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::too_many_lines,
    reason = "test helpers fail loudly; strategy builders list every node kind in one place"
)]

mod api;
mod fixtures;
mod never_panic;
mod roundtrip;
mod strategies;
