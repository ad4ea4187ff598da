//! Integration tests of `auto-swe-spec`: the fixture corpus with snapshots, property tests and
//! the public API end to end.

mod api;
mod fixtures;
mod never_panic;
mod roundtrip;
mod strategies;
