//! The server over real HTTP against `PostgreSQL`.
#![expect(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "a test fails loudly on any unexpected error and reads top to bottom"
)]

mod auth;
mod human;
mod orgs;
mod patterns;
mod pool;
mod runs;
mod support;
mod triggers;
mod webhooks;
