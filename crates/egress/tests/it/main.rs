//! Integration tests of the egress proxy, against servers on loopback.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers outside #[test] functions fail loudly too"
)]

mod clients;
mod credential;
mod git_server;
mod handoff;
mod host_key;
mod intercept;
mod proxy;
mod support;
mod unix;
