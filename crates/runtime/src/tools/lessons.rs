//! The memory tools' seam: lessons recalled for the session's repository. The repository is
//! bound here, in code; no argument the model passes can name another.

use async_trait::async_trait;
use serde::Serialize;

/// One recalled lesson.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LessonHit {
    /// The lesson's id (a UUID).
    pub lesson_id: String,
    /// One-line summary.
    pub summary: String,
    /// The failure type it records.
    pub failure_type: String,
    /// Confidence, 0–1.
    pub confidence: f64,
    /// Similarity to the query, 0–1.
    pub similarity: f64,
}

/// A memory failure (the tool reports it to the model; the turn goes on).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("memory unavailable: {message}")]
pub struct MemoryError {
    /// Why.
    pub message: String,
}

/// Lessons of repositories. Implementors answer for exactly the repository they are asked
/// about: `explain` of a lesson that belongs to another repository is `Ok(None)`, and fields
/// that match an injection pattern are withheld before they are returned.
#[async_trait]
pub trait LessonMemory: Send + Sync {
    /// Lessons of `repository` for `query`, at most `limit` (1–10), under the recall age limit.
    async fn search(
        &self,
        repository: &str,
        query: &str,
        limit: usize,
    ) -> Result<Vec<LessonHit>, MemoryError>;

    /// One lesson of `repository`, whatever its age.
    async fn explain(
        &self,
        repository: &str,
        lesson_id: &str,
    ) -> Result<Option<serde_json::Value>, MemoryError>;
}

/// Whether `id` is a UUID in its canonical textual form.
#[must_use]
pub(crate) fn is_uuid(id: &str) -> bool {
    let bytes = id.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}
