//! The memory-item reads and deletes both backends run with the same SQL. Adding and searching
//! differ (how the embedding is stored and compared), so each backend writes those itself and
//! its `MemoryStore` impl calls these for the rest.

macro_rules! impl_memory_shared {
    ($store:ty) => {
        impl $store {
            async fn memory_by_id(&self, id: &str) -> StoreResult<MemoryItem> {
                let row = sqlx::query(&format!(
                    "SELECT {MEMORY_COLUMNS} FROM memory_items WHERE id = $1"
                ))
                .bind(id)
                .fetch_optional(&self.pool)
                .await?
                .ok_or_else(|| StoreError::not_found("memory item", id))?;
                Self::memory_from_row(&row)
            }

            async fn memory_delete(&self, id: &str) -> StoreResult<()> {
                let done = sqlx::query("DELETE FROM memory_items WHERE id = $1")
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                if done.rows_affected() == 0 {
                    return Err(StoreError::not_found("memory item", id));
                }
                Ok(())
            }
        }
    };
}
