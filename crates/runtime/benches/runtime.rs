//! Benchmarks of the agent runtime (filled in below).

fn main() {}
