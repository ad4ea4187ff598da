//! Ids of the behaviours the interpreter gates behind [`Dispatcher::patched`](crate::Dispatcher).
//!
//! A run recorded before one of these behaviours existed answers `false` for its id and replays
//! the way it originally ran. New runs answer `true` (the dispatcher's default).

/// A signal waiter woken to an empty shared slot waits again for the rest of its own timeout.
/// Unpatched: it takes `onTimeout` at once.
pub const SHARED_SIGNAL_WAIT_REWAITS_ON_EMPTY_SLOT: &str =
    "shared-signal-wait-rewaits-on-empty-slot";

/// `onFail: {retry}` does not retry an error that is non-retryable (itself or its cause).
/// Unpatched: every failure is retried while attempts remain.
pub const NON_RETRYABLE_SKIPS_RETRY: &str = "non-retryable-skips-retry";

/// A cancellation bypasses `onFail`, `onError: continue` and `onBranchFail`.
/// Unpatched: a cancellation error is handled like any other failure; the run still ends
/// `CANCELLED` at the next node once the run's token has fired.
pub const CANCELLATION_BYPASSES_FAILURE_HANDLING: &str = "cancellation-bypasses-failure-handling";

/// Step records carry every string cut to 8,000 characters.
/// Unpatched: step records carry full strings.
pub const STEP_RECORD_STRINGS_CUT: &str = "step-record-strings-cut";

/// Every patch id, in the order they were introduced.
pub const ALL: [&str; 4] = [
    NON_RETRYABLE_SKIPS_RETRY,
    CANCELLATION_BYPASSES_FAILURE_HANDLING,
    SHARED_SIGNAL_WAIT_REWAITS_ON_EMPTY_SLOT,
    STEP_RECORD_STRINGS_CUT,
];
