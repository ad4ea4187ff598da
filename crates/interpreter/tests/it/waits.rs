//! Signals and human nodes.
