//! Domain records and one storage trait per aggregate.

pub(crate) mod admin;
pub(crate) mod connections;
pub(crate) mod execution;
pub(crate) mod integrations;
pub(crate) mod journal;
pub(crate) mod memory;
pub(crate) mod queries;
pub(crate) mod queue;
pub(crate) mod runs;
pub(crate) mod spend;
pub(crate) mod templates;
pub(crate) mod tenancy;
pub(crate) mod tokens;
pub(crate) mod triggers;
