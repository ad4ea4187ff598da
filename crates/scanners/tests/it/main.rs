//! Integration tests of `auto-swe-scanners`, one module per feature.

mod url_policy;
