//! The GitHub provider against a fake GitHub on loopback.
#![expect(
    clippy::unwrap_used,
    clippy::panic,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    reason = "a test fails loudly on any unexpected error"
)]

mod auth;
mod checks;
mod end_to_end;
mod fake;
mod live;
mod pulls;
mod support;
mod webhooks;
