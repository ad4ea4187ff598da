//! auto-swe security scanners and guards: the checkpoints on every path that untrusted text
//! takes — what an agent runs, writes, remembers and is told — plus the outbound URL policy that
//! every HTTP client in the workspace applies.
//!
//! Everything here is pure: no I/O, no clock reads, no threads. Regular expressions use the
//! linear-time `regex` engine, so a scan always completes and needs no time budget.

mod url_policy;

pub use url_policy::{CheckedUrl, RequestKind, UrlPolicy, UrlRefusal};
