//! auto-swe security scanners and guards: the checkpoints on every path that untrusted text
//! takes — what an agent runs, writes, remembers and is told — plus the outbound URL policy that
//! every HTTP client in the workspace applies.
//!
//! Everything here is pure: no I/O, no threads, and the clock only through an injected clock. Regular
//! expressions use the linear-time `regex` engine, so a scan always completes and needs no time
//! budget or quarantine.
//!
//! ```
//! use auto_swe_scanners::{CompiledPatterns, HarnessConfig, Verdict, builtin_patterns, scan_shell_command};
//!
//! let patterns = CompiledPatterns::compile(builtin_patterns());
//! let harmless = scan_shell_command(&patterns, "cargo test --workspace", HarnessConfig::Loaded);
//! assert_eq!(harmless.verdict, Verdict::Allow);
//! let wipe = scan_shell_command(&patterns, "rm -rf / --no-preserve-root", HarnessConfig::Loaded);
//! assert_eq!(wipe.verdict, Verdict::Block);
//! ```

mod builtin;
mod clock;
mod compile;
mod fence;
mod injection;
mod inner;
mod pattern;
mod prefilter;
mod redact;
mod result;
mod runs;
mod safe_path;
mod scanners;
mod secrets;
mod shell;
mod source;
mod url_policy;
mod view;

pub use builtin::{BuiltinPattern, builtin_patterns, builtin_table};
pub use clock::{Clock, ManualClock, SystemClock};
pub use compile::{CompiledPatterns, IncompleteReason};
pub use fence::{LEFT_ANGLE, RIGHT_ANGLE, fence_untrusted, neutralise_angle_brackets};
pub use injection::{
    Classifier, RulesOnly, scan_llm_output, scan_llm_output_with, scan_memory, scan_memory_with,
    scan_skill_content, scan_skill_content_with,
};
pub use pattern::{Pattern, PatternError, PatternType, Severity};
pub use redact::{REDACTED, Redactor, mask_credential_shapes};
pub use result::{
    EXCERPT_MAX_CHARS, Finding, FindingType, MAX_FINDINGS_PER_RULE, ScanResult, Verdict,
};
pub use safe_path::{PathRefusal, SafePath, safe_path};
pub use scanners::{
    HarnessConfig, MemoryAccess, format_code_findings, normalise_path_for_matching, scan_all,
    scan_code_diff, scan_content, scan_sensitive_path, scan_url,
};
pub use shell::{MAX_COMMAND_BYTES, scan_shell_command};
pub use source::{
    DEFAULT_PATTERN_TTL, InMemoryPatternSource, PatternCache, PatternSource, PatternSourceError,
    SourcePatterns, compile_with_source,
};
pub use url_policy::{CheckedUrl, RequestKind, UrlPolicy, UrlRefusal};
