//! Model calls billed as they end, written once for both backends.

macro_rules! impl_spend_store {
    ($store:ty, $row:ty) => {
        #[async_trait::async_trait]
        impl SpendStore for $store {
            #[tracing::instrument(level = "debug", skip_all, fields(run_id = %token.run_id, epoch = token.epoch, recording_id = %call.recording_id, call_index = call.call_index))]
            async fn record_model_call(
                &self,
                token: &LeaseToken,
                call: NewModelCall,
            ) -> StoreResult<CallBilled> {
                crate::records::spend::validate_call(&call)?;
                let now = Timestamp::now(&*self.clock).as_millis();
                let mut tx = self.fenced(token).await?;
                let inserted = sqlx::query(
                    "INSERT INTO run_model_calls (run_id, epoch, execution_id, recording_id, \
                     attempt, call_index, model, cost_micros, input_tokens, output_tokens, \
                     created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                     ON CONFLICT (run_id, epoch, execution_id, recording_id, attempt, call_index) \
                     DO NOTHING",
                )
                .bind(&token.run_id)
                .bind(token.epoch)
                .bind(&call.execution_id)
                .bind(&call.recording_id)
                .bind(call.attempt)
                .bind(call.call_index)
                .bind(&call.model)
                .bind(call.usage.cost_micros)
                .bind(call.usage.input_tokens)
                .bind(call.usage.output_tokens)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(|e| map_write("model call", &token.run_id, e))?
                .rows_affected();
                // Only the write that stored the row adds to the run.
                let row = if inserted == 1 {
                    sqlx::query(
                        "UPDATE workflow_runs SET cost_micros = cost_micros + $1, \
                         input_tokens = input_tokens + $2, output_tokens = output_tokens + $3, \
                         updated_at = $4 WHERE id = $5 \
                         RETURNING cost_micros, input_tokens, output_tokens",
                    )
                    .bind(call.usage.cost_micros)
                    .bind(call.usage.input_tokens)
                    .bind(call.usage.output_tokens)
                    .bind(now)
                    .bind(&token.run_id)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(|e| map_write("run usage", &token.run_id, e))?
                } else {
                    sqlx::query(
                        "SELECT cost_micros, input_tokens, output_tokens FROM workflow_runs \
                         WHERE id = $1",
                    )
                    .bind(&token.run_id)
                    .fetch_one(&mut *tx)
                    .await?
                };
                let run_usage = Spend {
                    cost_micros: row.try_get("cost_micros")?,
                    input_tokens: row.try_get("input_tokens")?,
                    output_tokens: row.try_get("output_tokens")?,
                };
                tx.commit().await?;
                Ok(if inserted == 1 {
                    CallBilled::Billed { run_usage }
                } else {
                    CallBilled::AlreadyBilled { run_usage }
                })
            }

            async fn list_model_calls(&self, run_id: &str) -> StoreResult<Vec<ModelCall>> {
                limits::short_text("run id", run_id)?;
                let rows = sqlx::query(
                    "SELECT * FROM run_model_calls WHERE run_id = $1 \
                     ORDER BY epoch, execution_id, recording_id, attempt, call_index",
                )
                .bind(run_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|row: &$row| {
                        Ok(ModelCall {
                            run_id: row.try_get("run_id")?,
                            epoch: row.try_get("epoch")?,
                            execution_id: row.try_get("execution_id")?,
                            recording_id: row.try_get("recording_id")?,
                            attempt: row.try_get("attempt")?,
                            call_index: row.try_get("call_index")?,
                            model: row.try_get("model")?,
                            usage: Spend {
                                cost_micros: row.try_get("cost_micros")?,
                                input_tokens: row.try_get("input_tokens")?,
                                output_tokens: row.try_get("output_tokens")?,
                            },
                            created_at: Timestamp::from_millis(row.try_get("created_at")?),
                        })
                    })
                    .collect()
            }
        }
    };
}
