//! auto-swe security scanners and guards: the checkpoints on every path that untrusted text
//! takes — what an agent runs, writes, remembers and is told — plus the outbound URL policy that
//! every HTTP client in the workspace applies.
//!
//! Everything here is pure: no I/O, no threads, and the clock only through an injected clock. Regular
//! expressions use the linear-time `regex` engine, so a scan always completes and needs no time
//! budget or quarantine.

mod builtin;
mod compile;
mod pattern;
mod redact;
mod result;
mod url_policy;

pub use builtin::{BuiltinPattern, builtin_patterns, builtin_table};
pub use compile::{CompiledPatterns, IncompleteReason};
pub use pattern::{Pattern, PatternError, PatternType, Severity};
pub use redact::{REDACTED, Redactor, mask_credential_shapes};
pub use result::{EXCERPT_MAX_CHARS, Finding, FindingType, ScanResult, Verdict};
pub use url_policy::{CheckedUrl, RequestKind, UrlPolicy, UrlRefusal};
