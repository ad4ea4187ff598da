//! End-to-end tests of the `auto-swe` binary.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions fail loudly too"
)]

mod sandbox;
