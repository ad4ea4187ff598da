//! End-to-end tests of the `auto-swe` binary.

mod simulate;
