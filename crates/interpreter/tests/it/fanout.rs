//! Fan-out.
