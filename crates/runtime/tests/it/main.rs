//! Integration tests of the agent runtime against real `local` workspaces and the models
//! crate's loopback mock servers.

#![expect(
    clippy::unwrap_used,
    clippy::cast_precision_loss,
    clippy::too_many_lines,
    reason = "tests fail loudly and read as one scenario each"
)]

mod compaction;
mod harness;
mod loops;
mod mcp;
mod mcp_legacy;
mod mcp_live;
mod spans;
mod structured;
mod support;
mod tools;
mod tracer;
