//! The run journal: each completed effect of a run, stored exactly once.

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::error::{StoreError, StoreResult};

/// An effect to record.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalAppend {
    /// The run.
    pub run_id: String,
    /// The stable, branch-prefixed recording id of the dispatch.
    pub recording_id: String,
    /// The step attempt.
    pub attempt: i64,
    /// The kind of effect (`step`, `signal`, `clock`, …): lower-case letters, digits, `._-`.
    pub kind: String,
    /// The effect's result.
    pub result: serde_json::Value,
}

/// A recorded effect.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalEntry {
    /// Position in the run's journal (increasing, not dense).
    pub seq: i64,
    /// The run.
    pub run_id: String,
    /// The recording id.
    pub recording_id: String,
    /// The attempt.
    pub attempt: i64,
    /// The kind.
    pub kind: String,
    /// The result.
    pub result: serde_json::Value,
    /// When it was recorded.
    pub recorded_at: Timestamp,
}

/// Whether an append stored a new entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOutcome {
    /// This call stored the entry.
    Inserted,
    /// An entry with the same key was already stored; it is returned unchanged.
    AlreadyRecorded,
}

/// The durable-execution journal.
///
/// Implementors guarantee: an append is fenced by the run's lease (`LEASE_LOST` for a token that
/// is not current, `RUN_ENDED` after finalize, nothing written); at most one entry per (run,
/// recording id, attempt, kind), whatever the concurrency; a repeated append returns the first
/// entry (its result, not the new one); reading returns entries in append order.
#[async_trait]
pub trait JournalStore: Send + Sync {
    /// Appends an effect exactly once, under the run's lease.
    async fn append_journal(
        &self,
        token: &crate::records::queue::LeaseToken,
        entry: JournalAppend,
    ) -> StoreResult<(JournalEntry, AppendOutcome)>;
    /// A run's journal in order.
    async fn read_journal(&self, run_id: &str) -> StoreResult<Vec<JournalEntry>>;
}

pub(crate) fn validate_append(entry: &JournalAppend) -> StoreResult<String> {
    crate::limits::short_text("run id", &entry.run_id)?;
    crate::limits::short_text("recording id", &entry.recording_id)?;
    if entry.attempt < 0 {
        return Err(StoreError::invalid("attempt", "must not be negative"));
    }
    if entry.kind.is_empty()
        || entry.kind.len() > 64
        || !entry
            .kind
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
    {
        return Err(StoreError::invalid(
            "effect kind",
            "use 1-64 lower-case letters, digits, '.', '_' or '-'",
        ));
    }
    crate::limits::json_text("journal result", &entry.result)
}
