//! Integration tests of `auto-swe-scanners`, one module per feature.

mod patterns;
mod url_policy;
