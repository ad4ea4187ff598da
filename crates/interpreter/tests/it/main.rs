//! Integration tests of the interpreter: every node type, every failure rule, fan-out, signals,
//! replay determinism and the transition cap.

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail the test by panicking"
)]

mod context;
mod failures;
mod fanout;
mod nodes;
mod replay;
mod support;
mod waits;
