//! The GitHub provider against a fake GitHub on loopback.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    clippy::result_large_err,
    reason = "a test fails loudly on any unexpected error"
)]
#![allow(
    clippy::disallowed_methods,
    reason = "the tests run git and openssl to make fixtures: remotes, commits, the App's key"
)]

mod auth;
mod checks;
mod end_to_end;
mod fake;
mod live;
mod pulls;
mod support;
mod webhooks;
