//! Store benchmark.
fn main() {}
