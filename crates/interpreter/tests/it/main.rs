//! Integration tests of the interpreter: every node type, every failure rule, fan-out, signals,
//! replay determinism and the transition cap.

mod failures;
mod fanout;
mod nodes;
mod replay;
mod support;
mod waits;
