//! Integration tests of the agent library, one module per concern.

#![expect(
    clippy::unwrap_used,
    clippy::type_complexity,
    clippy::too_many_lines,
    reason = "table-driven tests: helpers unwrap, and case tables are tuples"
)]

mod builtins;
mod cascade;
mod pins;
mod reference;
mod skill_md;
mod skills;
mod support;
mod tools;
mod versioning;
