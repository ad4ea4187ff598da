//! The memory-item SQL both backends share. Only how an embedding is stored (the `$encode`
//! expression, from `Vec<f32>` to a bindable value) and how neighbours are searched differ, so
//! each backend's `MemoryStore` impl writes `search_memory` itself and calls these for the rest.

macro_rules! impl_memory_shared {
    ($store:ty, $encode:expr) => {
        const MEMORY_COLUMNS: &str =
            "id, scope, org_id, team_id, connection_id, content, metadata, skills_active, created_at";

        impl $store {
            async fn memory_add(&self, item: NewMemoryItem) -> StoreResult<MemoryItem> {
                crate::records::memory::validate_item(&item)?;
                let metadata = limits::json_text("metadata", &item.metadata)?;
                let skills = to_json_text("skills", &item.skills_active)?;
                let id = new_id();
                let row = sqlx::query(&format!(
                    "INSERT INTO memory_items (id, scope, org_id, team_id, connection_id, content, \
                     metadata, skills_active, embedding, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING {MEMORY_COLUMNS}"
                ))
                .bind(&id)
                .bind(&item.scope)
                .bind(&item.org_id)
                .bind(&item.team_id)
                .bind(&item.connection_id)
                .bind(&item.content)
                .bind(&metadata)
                .bind(&skills)
                .bind(($encode)(item.embedding))
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_one(&self.pool)
                .await
                .map_err(|e| map_write("memory item", &id, e))?;
                Self::memory_from_row(&row)
            }

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
