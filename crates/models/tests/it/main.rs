//! Integration tests for auto-swe-models: the client conformance suite against the loopback
//! mocks, fixture drift, the guarded client, keys, budgets, reasoning and replay.

mod budget;
mod conformance;
mod fixtures;
mod guard;
mod reasoning;
mod replay;
mod support;
