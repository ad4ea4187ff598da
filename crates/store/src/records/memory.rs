//! Semantic memory: items with 1536-dimension embeddings and nearest-neighbour search.

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::error::{StoreError, StoreResult};

/// Embedding width every memory item carries: the models crate's, the width its embedding
/// client asks providers for.
pub use auto_swe_models::EMBEDDING_DIMENSIONS;
/// The most hits one search returns.
pub const MAX_SEARCH_LIMIT: u32 = 200;

/// A memory item to store.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct NewMemoryItem {
    /// Partition (`swe-lessons`, `channel-memory`, …).
    pub scope: String,
    /// Owning org; every search filters on it.
    pub org_id: String,
    /// Owning team.
    pub team_id: Option<String>,
    /// The repository/connection it was learned on.
    pub connection_id: Option<String>,
    /// The lesson text.
    pub content: String,
    /// Free-form metadata.
    pub metadata: serde_json::Value,
    /// Skills the memory writer itself ran with.
    pub skills_active: Vec<String>,
    /// The embedding (exactly [`EMBEDDING_DIMENSIONS`] finite values).
    pub embedding: Vec<f32>,
}

impl NewMemoryItem {
    /// An item with no team, connection, metadata or skills.
    #[must_use]
    pub fn new(
        scope: impl Into<String>,
        org_id: impl Into<String>,
        content: impl Into<String>,
        embedding: Vec<f32>,
    ) -> Self {
        Self {
            scope: scope.into(),
            org_id: org_id.into(),
            team_id: None,
            connection_id: None,
            content: content.into(),
            metadata: serde_json::Value::Null,
            skills_active: Vec::new(),
            embedding,
        }
    }

    /// Sets the team.
    #[must_use]
    pub fn with_team(mut self, team_id: impl Into<String>) -> Self {
        self.team_id = Some(team_id.into());
        self
    }

    /// Sets the connection.
    #[must_use]
    pub fn with_connection(mut self, connection_id: impl Into<String>) -> Self {
        self.connection_id = Some(connection_id.into());
        self
    }
}

/// A stored memory item (without its embedding).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct MemoryItem {
    /// Id.
    pub id: String,
    /// Partition.
    pub scope: String,
    /// Org.
    pub org_id: String,
    /// Team.
    pub team_id: Option<String>,
    /// Connection.
    pub connection_id: Option<String>,
    /// Text.
    pub content: String,
    /// Metadata.
    pub metadata: serde_json::Value,
    /// Writer's skills.
    pub skills_active: Vec<String>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// How a search finds neighbours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchMode {
    /// Exact: every candidate is compared.
    Exact,
    /// Through the approximate index where the backend has one (HNSW on `PostgreSQL`); exact
    /// elsewhere.
    Approximate,
}

/// A search.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryQuery {
    /// Partition.
    pub scope: String,
    /// Org (always filtered on).
    pub org_id: String,
    /// Only this team's items, when set.
    pub team_id: Option<String>,
    /// Only this connection's items, when set.
    pub connection_id: Option<String>,
    /// The query embedding.
    pub embedding: Vec<f32>,
    /// Number of hits (1..=200).
    pub limit: u32,
    /// Exact or approximate.
    pub mode: SearchMode,
}

/// One search hit.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryHit {
    /// The item.
    pub item: MemoryItem,
    /// Cosine distance (1 − cosine similarity), smallest first.
    pub distance: f64,
}

/// Memory items and nearest-neighbour search by cosine distance.
///
/// Implementors guarantee: `Exact` search returns the true nearest neighbours among items that
/// match the filters, ordered by distance; no item of another org is ever returned.
#[async_trait]
pub trait MemoryStore: Send + Sync {
    /// Stores an item.
    async fn add_memory(&self, item: NewMemoryItem) -> StoreResult<MemoryItem>;
    /// Reads an item.
    async fn get_memory(&self, id: &str) -> StoreResult<MemoryItem>;
    /// Deletes an item.
    async fn delete_memory(&self, id: &str) -> StoreResult<()>;
    /// Nearest neighbours.
    async fn search_memory(&self, query: &MemoryQuery) -> StoreResult<Vec<MemoryHit>>;
}

pub(crate) fn validate_embedding(embedding: &[f32]) -> StoreResult<()> {
    if embedding.len() != EMBEDDING_DIMENSIONS {
        return Err(StoreError::invalid(
            "embedding",
            format!(
                "expected {EMBEDDING_DIMENSIONS} dimensions, got {}",
                embedding.len()
            ),
        ));
    }
    if !embedding.iter().all(|v| v.is_finite()) {
        return Err(StoreError::invalid("embedding", "values must be finite"));
    }
    if embedding.iter().all(|v| *v == 0.0) {
        return Err(StoreError::invalid(
            "embedding",
            "must not be the zero vector",
        ));
    }
    Ok(())
}

pub(crate) fn validate_item(item: &NewMemoryItem) -> StoreResult<()> {
    crate::limits::short_text("memory scope", &item.scope)?;
    crate::limits::short_text("org id", &item.org_id)?;
    crate::limits::optional_short_text("team id", item.team_id.as_deref())?;
    crate::limits::optional_short_text("connection id", item.connection_id.as_deref())?;
    crate::limits::long_text("memory content", &item.content)?;
    for skill in &item.skills_active {
        crate::limits::short_text("skill", skill)?;
    }
    validate_embedding(&item.embedding)
}

pub(crate) fn validate_query(query: &MemoryQuery) -> StoreResult<()> {
    crate::limits::short_text("memory scope", &query.scope)?;
    crate::limits::short_text("org id", &query.org_id)?;
    if query.limit == 0 || query.limit > MAX_SEARCH_LIMIT {
        return Err(StoreError::invalid("limit", "must be between 1 and 200"));
    }
    validate_embedding(&query.embedding)
}

/// Cosine distance in `f64`, as the search orders by.
#[must_use]
pub fn cosine_distance(a: &[f32], b: &[f32]) -> f64 {
    let mut dot = 0.0_f64;
    let mut norm_a = 0.0_f64;
    let mut norm_b = 0.0_f64;
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        norm_a += x * x;
        norm_b += y * y;
    }
    let denominator = (norm_a * norm_b).sqrt();
    if denominator == 0.0 {
        return 1.0;
    }
    1.0 - dot / denominator
}

/// The Euclidean norm, in `f64`.
#[cfg(feature = "sqlite")]
pub(crate) fn norm(v: &[f32]) -> f64 {
    v.iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt()
}

/// Cosine distance between `query` (with its precomputed norm) and a stored little-endian
/// embedding, without decoding it into a vector first.
#[cfg(feature = "sqlite")]
pub(crate) fn cosine_distance_bytes(
    query: &[f32],
    query_norm: f64,
    bytes: &[u8],
) -> StoreResult<f64> {
    if bytes.len() != query.len() * 4 {
        return Err(StoreError::corrupt(
            "memory_items",
            "embedding has the wrong length",
        ));
    }
    let mut dot = 0.0_f64;
    let mut norm = 0.0_f64;
    for (x, c) in query.iter().zip(bytes.chunks_exact(4)) {
        let y = f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        dot += f64::from(*x) * y;
        norm += y * y;
    }
    let denominator = query_norm * norm.sqrt();
    if denominator == 0.0 {
        return Ok(1.0);
    }
    Ok(1.0 - dot / denominator)
}

/// Little-endian `f32` bytes, the `SQLite` column encoding.
#[cfg(feature = "sqlite")]
pub(crate) fn embedding_to_bytes(embedding: &[f32]) -> Vec<u8> {
    embedding.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::*;

    #[test]
    fn byte_distance_matches_vector_distance() {
        let a: Vec<f32> = (0..EMBEDDING_DIMENSIONS)
            .map(|i| f32::from(u16::try_from(i).unwrap()).sin())
            .collect();
        let b: Vec<f32> = (0..EMBEDDING_DIMENSIONS)
            .map(|i| (f32::from(u16::try_from(i).unwrap()) * 0.7).cos())
            .collect();
        let from_bytes = cosine_distance_bytes(&a, norm(&a), &embedding_to_bytes(&b)).unwrap();
        assert!((from_bytes - cosine_distance(&a, &b)).abs() < 1e-12);
        assert!((cosine_distance(&a, &a)).abs() < 1e-12);
        assert_eq!(
            cosine_distance_bytes(&a, norm(&a), &[0; 3])
                .unwrap_err()
                .code(),
            "STORE_CORRUPT_ROW"
        );
    }
}
