//! The leased work queue, written once for both backends.
//!
//! Each backend supplies `CLAIM_SQL` (`PostgreSQL` adds `FOR UPDATE SKIP LOCKED`; `SQLite` relies on
//! its single writer), `wake_in_tx` (`PostgreSQL` queues a `NOTIFY` that fires on commit) and
//! `woke` (`SQLite` wakes in-process waiters after commit).

macro_rules! impl_queue_store {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl QueueStore for $store {
            async fn enqueue(&self, run_id: &str) -> StoreResult<()> {
                self.enqueue_at(run_id, self.clock.now()).await
            }

            async fn enqueue_at(&self, run_id: &str, at: Timestamp) -> StoreResult<()> {
                limits::short_text("run id", run_id)?;
                let mut tx = self.pool.begin().await?;
                sqlx::query(
                    "INSERT INTO run_queue (run_id, state, available_at, enqueued_at) \
                     VALUES ($1, 'RUNNABLE', $2, $3) ON CONFLICT (run_id) DO NOTHING",
                )
                .bind(run_id)
                .bind(at.as_millis())
                .bind(self.clock.now().as_millis())
                .execute(&mut *tx)
                .await
                .map_err(|e| map_write("queue entry", run_id, e))?;
                self.wake_in_tx(&mut tx, run_id).await?;
                tx.commit().await?;
                self.woke();
                Ok(())
            }

            async fn claim(&self, request: &ClaimRequest) -> StoreResult<Vec<Claim>> {
                crate::records::queue::validate_claim(request)?;
                let now = self.clock.now();
                let lease_until = now.plus(request.lease);
                let rows = sqlx::query(Self::CLAIM_SQL)
                    .bind(&request.worker)
                    .bind(lease_until.as_millis())
                    .bind(now.as_millis())
                    .bind(i64::from(request.limit))
                    .fetch_all(&self.pool)
                    .await?;
                let mut claims = rows
                    .iter()
                    .map(|row| {
                        Ok(Claim {
                            run_id: row.try_get("run_id")?,
                            worker: request.worker.clone(),
                            lease_until,
                            claim_count: row.try_get("claim_count")?,
                        })
                    })
                    .collect::<StoreResult<Vec<_>>>()?;
                claims.sort_by(|a, b| a.run_id.cmp(&b.run_id));
                Ok(claims)
            }

            async fn heartbeat(&self, claim: &Claim, lease: Duration) -> StoreResult<Claim> {
                crate::records::queue::validate_lease(lease)?;
                let now = self.clock.now();
                let lease_until = now.plus(lease);
                let done = sqlx::query(
                    "UPDATE run_queue SET lease_until = $1 WHERE run_id = $2 AND state = 'LEASED' \
                     AND worker = $3 AND claim_count = $4 AND lease_until > $5",
                )
                .bind(lease_until.as_millis())
                .bind(&claim.run_id)
                .bind(&claim.worker)
                .bind(claim.claim_count)
                .bind(now.as_millis())
                .execute(&self.pool)
                .await?;
                if done.rows_affected() != 1 {
                    return Err(StoreError::LeaseLost {
                        run_id: claim.run_id.clone(),
                    });
                }
                Ok(Claim {
                    lease_until,
                    ..claim.clone()
                })
            }

            async fn release(&self, claim: &Claim, release: Release) -> StoreResult<()> {
                let now = self.clock.now().as_millis();
                let mut tx = self.pool.begin().await?;
                let done = match &release {
                    Release::Done => {
                        sqlx::query(
                            "DELETE FROM run_queue WHERE run_id = $1 AND state = 'LEASED' \
                             AND worker = $2 AND claim_count = $3 AND lease_until > $4",
                        )
                        .bind(&claim.run_id)
                        .bind(&claim.worker)
                        .bind(claim.claim_count)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?
                    }
                    Release::Park(wake) => {
                        let (kind, key) = crate::records::queue::wake_columns(wake);
                        limits::short_text("wake key", key)?;
                        // A wake condition written while the run was leased makes it runnable
                        // at once instead of parking it.
                        sqlx::query(
                            "UPDATE run_queue SET \
                             state = CASE WHEN wake_pending THEN 'RUNNABLE' ELSE 'PARKED' END, \
                             wake_kind = CASE WHEN wake_pending THEN NULL ELSE $1 END, \
                             wake_key = CASE WHEN wake_pending THEN NULL ELSE $2 END, \
                             available_at = $3, worker = NULL, lease_until = NULL, \
                             wake_pending = FALSE \
                             WHERE run_id = $4 AND state = 'LEASED' AND worker = $5 \
                             AND claim_count = $6 AND lease_until > $3",
                        )
                        .bind(kind)
                        .bind(key)
                        .bind(now)
                        .bind(&claim.run_id)
                        .bind(&claim.worker)
                        .bind(claim.claim_count)
                        .execute(&mut *tx)
                        .await?
                    }
                    Release::RunAt(at) => {
                        sqlx::query(
                            "UPDATE run_queue SET state = 'RUNNABLE', available_at = $1, \
                             worker = NULL, lease_until = NULL, wake_pending = FALSE \
                             WHERE run_id = $2 AND state = 'LEASED' AND worker = $3 \
                             AND claim_count = $4 AND lease_until > $5",
                        )
                        .bind(at.as_millis())
                        .bind(&claim.run_id)
                        .bind(&claim.worker)
                        .bind(claim.claim_count)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?
                    }
                };
                if done.rows_affected() != 1 {
                    return Err(StoreError::LeaseLost {
                        run_id: claim.run_id.clone(),
                    });
                }
                if !matches!(release, Release::Done) {
                    self.wake_in_tx(&mut tx, &claim.run_id).await?;
                }
                tx.commit().await?;
                self.woke();
                Ok(())
            }

            async fn queue_state(&self, run_id: &str) -> StoreResult<Option<QueueState>> {
                let row = sqlx::query("SELECT * FROM run_queue WHERE run_id = $1")
                    .bind(run_id)
                    .fetch_optional(&self.pool)
                    .await?;
                let Some(row) = row else {
                    return Ok(None);
                };
                let state: String = row.try_get("state")?;
                crate::records::queue::queue_state_from_row(
                    &state,
                    row.try_get("available_at")?,
                    row.try_get("worker")?,
                    row.try_get("lease_until")?,
                    row.try_get::<Option<String>, _>("wake_kind")?.as_deref(),
                    row.try_get("wake_key")?,
                )
                .map(Some)
            }

            async fn subscribe(&self) -> StoreResult<Box<dyn WorkWaiter>> {
                self.work_waiter().await
            }
        }

        impl $store {
            /// Makes a run parked on `wake` runnable, or marks a leased run so that its next park
            /// turns into a wake-up. Runs inside the caller's transaction.
            async fn wake_parked(
                &self,
                tx: &mut sqlx::Transaction<'_, DbKind>,
                run_id: &str,
                wake: &WakeOn,
            ) -> StoreResult<()> {
                let (kind, key) = crate::records::queue::wake_columns(wake);
                let now = self.clock.now().as_millis();
                let woke = sqlx::query(
                    "UPDATE run_queue SET state = 'RUNNABLE', available_at = $1, \
                     wake_kind = NULL, wake_key = NULL \
                     WHERE run_id = $2 AND state = 'PARKED' AND wake_kind = $3 AND wake_key = $4",
                )
                .bind(now)
                .bind(run_id)
                .bind(kind)
                .bind(key)
                .execute(&mut **tx)
                .await?;
                sqlx::query(
                    "UPDATE run_queue SET wake_pending = TRUE WHERE run_id = $1 AND state = 'LEASED'",
                )
                .bind(run_id)
                .execute(&mut **tx)
                .await?;
                if woke.rows_affected() > 0 {
                    self.wake_in_tx(tx, run_id).await?;
                }
                Ok(())
            }
        }
    };
}
