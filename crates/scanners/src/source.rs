//! Where a host's own patterns come from, and a time-to-live cache of the compiled set.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::clock::{Clock, SystemClock};

use crate::builtin::builtin_patterns;
use crate::compile::CompiledPatterns;
use crate::pattern::Pattern;

/// How long a compiled set is reused before the source is read again.
pub const DEFAULT_PATTERN_TTL: Duration = Duration::from_secs(60);

/// What a host's store adds to the built-in pack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SourcePatterns {
    /// Patterns to add; one with a built-in's id replaces that built-in.
    pub patterns: Vec<Pattern>,
    /// Ids of built-in patterns the host has disabled.
    pub disabled_builtin_ids: Vec<String>,
}

impl SourcePatterns {
    /// Host patterns and disabled built-in ids.
    #[must_use]
    pub fn new(patterns: Vec<Pattern>, disabled_builtin_ids: Vec<String>) -> Self {
        Self {
            patterns,
            disabled_builtin_ids,
        }
    }
}

/// The source could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("PATTERN_SOURCE_UNAVAILABLE: {message}")]
pub struct PatternSourceError {
    message: String,
}

impl PatternSourceError {
    /// A failure with a message for the operator (never scanned text).
    #[must_use]
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The stable code, `PATTERN_SOURCE_UNAVAILABLE`.
    #[must_use]
    pub fn code(&self) -> &'static str {
        "PATTERN_SOURCE_UNAVAILABLE"
    }

    /// A store outage may pass.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        true
    }
}

/// A host's pattern store.
///
/// Contract for implementors: `load` returns the complete current set of the host's patterns
/// and disabled built-in ids (not a delta); it may be called from any thread and should be
/// cheap enough to call once per TTL; an `Err` means nothing could be read, and scans then run
/// the built-in pack alone and report `incomplete` with reason `load-failed`. A source must not
/// block indefinitely: callers hold no lock while it runs, but a scan waits for it.
pub trait PatternSource: Send + Sync {
    /// Reads the host's patterns.
    fn load(&self) -> Result<SourcePatterns, PatternSourceError>;
}

impl<S: PatternSource + ?Sized> PatternSource for Arc<S> {
    fn load(&self) -> Result<SourcePatterns, PatternSourceError> {
        (**self).load()
    }
}

/// A source held in memory, for hosts without a store and for tests.
#[derive(Debug)]
pub struct InMemoryPatternSource {
    state: Mutex<Result<SourcePatterns, PatternSourceError>>,
}

impl InMemoryPatternSource {
    /// A source that returns `patterns`.
    #[must_use]
    pub fn new(patterns: SourcePatterns) -> Self {
        Self {
            state: Mutex::new(Ok(patterns)),
        }
    }

    /// Replaces what the next `load` returns (a pattern set or a failure).
    pub fn set(&self, next: Result<SourcePatterns, PatternSourceError>) {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *state = next;
    }
}

impl Default for InMemoryPatternSource {
    fn default() -> Self {
        Self::new(SourcePatterns::default())
    }
}

impl PatternSource for InMemoryPatternSource {
    fn load(&self) -> Result<SourcePatterns, PatternSourceError> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// Built-in pack plus a host's patterns, compiled once per time-to-live.
///
/// A successful load is cached for the TTL (default 60 s) or until [`PatternCache::invalidate`].
/// A failed load is not cached: the built-in pack is returned marked `load-failed`, and the next
/// call tries the source again.
pub struct PatternCache<S, C = SystemClock> {
    source: S,
    clock: C,
    ttl: Duration,
    cached: Mutex<Option<(Instant, Arc<CompiledPatterns>)>>,
    builtin_only: Mutex<Option<Arc<CompiledPatterns>>>,
}

impl<S: PatternSource> PatternCache<S> {
    /// A cache over `source` with the default TTL and the process clock.
    pub fn new(source: S) -> Self {
        Self::with_clock(source, SystemClock, DEFAULT_PATTERN_TTL)
    }
}

impl<S: PatternSource, C: Clock> PatternCache<S, C> {
    /// A cache with an explicit clock and TTL.
    pub fn with_clock(source: S, clock: C, ttl: Duration) -> Self {
        Self {
            source,
            clock,
            ttl,
            cached: Mutex::new(None),
            builtin_only: Mutex::new(None),
        }
    }

    /// The compiled set, loading and compiling when the cached one is missing or expired.
    pub fn get(&self) -> Arc<CompiledPatterns> {
        let now = self.clock.now();
        {
            let cached = self
                .cached
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((loaded_at, set)) = cached.as_ref()
                && now.saturating_duration_since(*loaded_at) < self.ttl
            {
                return Arc::clone(set);
            }
        }
        match self.source.load() {
            Ok(loaded) => {
                let set = Arc::new(compile_with_source(loaded));
                let mut cached = self
                    .cached
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                *cached = Some((now, Arc::clone(&set)));
                set
            }
            Err(_) => self.builtin_fallback(),
        }
    }

    /// Drops the cached set so the next [`PatternCache::get`] reads the source again (call it
    /// after a pattern is saved).
    pub fn invalidate(&self) {
        let mut cached = self
            .cached
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *cached = None;
    }

    fn builtin_fallback(&self) -> Arc<CompiledPatterns> {
        let mut fallback = self
            .builtin_only
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(fallback.get_or_insert_with(|| {
            Arc::new(CompiledPatterns::compile(builtin_patterns()).with_load_failure())
        }))
    }
}

impl<S, C> std::fmt::Debug for PatternCache<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PatternCache")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

/// The built-in pack with a host's additions and disablings applied.
#[must_use]
pub fn compile_with_source(loaded: SourcePatterns) -> CompiledPatterns {
    let mut patterns = builtin_patterns();
    for pattern in &mut patterns {
        if loaded.disabled_builtin_ids.contains(&pattern.id) {
            pattern.enabled = false;
        }
    }
    patterns.extend(loaded.patterns);
    CompiledPatterns::compile(patterns)
}
