//! The server over real HTTP against `PostgreSQL`.
#![expect(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "a test fails loudly on any unexpected error and reads top to bottom"
)]

mod agents;
mod artifacts;
mod auth;
mod browser;
mod connections;
mod human;
mod isolation;
mod kubernetes;
mod orgs;
mod outcomes;
mod patterns;
mod pool;
mod repositories;
mod runs;
mod serving;
mod skills;
mod support;
mod team_agents;
mod team_egress;
mod template_versions;
mod temporal;
mod triggers;
mod viewer;
mod viewer_support;
mod webhooks;
