//! Integration tests of the `auto-swe` binary.

#![expect(clippy::unwrap_used, reason = "tests fail loudly")]

mod models_check;
