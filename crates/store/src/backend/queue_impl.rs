//! The leased work queue and the lease fence, written once for both backends.
//!
//! Each backend supplies `NOW_MS` (its clock as milliseconds since the epoch: every lease, wake
//! time and timer is compared against it, never against the caller's clock), `CLAIM_SQL`
//! (`PostgreSQL` adds `FOR UPDATE SKIP LOCKED`; `SQLite` relies on its single writer), `FENCE_SQL`
//! (the first statement of every fenced write: it holds the run's queue row at the caller's epoch
//! until commit), `wake_in_tx` (`PostgreSQL` queues a `NOTIFY` that fires on commit) and `woke`
//! (`SQLite` wakes in-process waiters after commit).

/// The `SET` list of a claim, shared by both backends' `CLAIM_SQL`: `$1` worker, `$3` lease in
/// milliseconds, `{now}` the database's clock. A leased row found expired after `max_attempts`
/// claims in a row is abandoned instead of claimed; every other picked row gets a new epoch.
macro_rules! claim_set_sql {
    ($now:literal) => {
        concat!(
            "state = CASE WHEN state = 'LEASED' AND attempts >= max_attempts \
               THEN 'ABANDONED' ELSE 'LEASED' END, \
             worker = CASE WHEN state = 'LEASED' AND attempts >= max_attempts \
               THEN NULL ELSE $1 END, \
             lease_until = CASE WHEN state = 'LEASED' AND attempts >= max_attempts \
               THEN NULL ELSE ",
            $now,
            " + $3 END, \
             available_at = CASE WHEN state = 'LEASED' AND attempts >= max_attempts \
               THEN available_at ELSE ",
            $now,
            " + $3 END, \
             claim_count = CASE WHEN state = 'LEASED' AND attempts >= max_attempts \
               THEN claim_count ELSE claim_count + 1 END, \
             attempts = CASE WHEN state = 'LEASED' AND attempts >= max_attempts \
               THEN attempts ELSE attempts + 1 END, \
             wake_pending = FALSE, wake_kind = NULL, wake_key = NULL"
        )
    };
}

/// The rows a claim may take: runnable and due, or leased with the lease past its end, of runs
/// that `$4`'s engine drives. While a run is leased `available_at` is its lease end, so one
/// partial index on `(available_at, run_id) WHERE state IN ('RUNNABLE', 'LEASED')` serves the
/// scan, each candidate's engine read by its run's primary key.
macro_rules! claim_candidates_sql {
    ($now:literal) => {
        concat!(
            "SELECT run_id FROM run_queue WHERE state IN ('RUNNABLE', 'LEASED') \
             AND available_at <= ",
            $now,
            " AND EXISTS (SELECT 1 FROM workflow_runs r WHERE r.id = run_queue.run_id \
             AND r.engine = $4) ORDER BY available_at, run_id LIMIT $2"
        )
    };
}

macro_rules! impl_queue_store {
    ($store:ty, $row:ty) => {
        #[async_trait::async_trait]
        impl QueueStore for $store {
            #[tracing::instrument(level = "debug", skip_all, fields(run_id = %enqueue.run_id))]
            async fn enqueue_with(&self, enqueue: &Enqueue) -> StoreResult<()> {
                crate::records::queue::validate_enqueue(enqueue)?;
                let run_id = enqueue.run_id.as_str();
                let mut tx = self.pool.begin().await?;
                // Only a live run is inserted; a run released as done is queued again with its
                // epoch kept, so no epoch is ever handed out twice.
                let done = sqlx::query(&format!(
                    "INSERT INTO run_queue (run_id, state, available_at, enqueued_at, \
                     max_attempts) \
                     SELECT id, 'RUNNABLE', {now} + $2, $3, $4 FROM workflow_runs \
                     WHERE id = $1 AND ended_at IS NULL \
                     ON CONFLICT (run_id) DO UPDATE SET state = 'RUNNABLE', \
                     available_at = excluded.available_at, enqueued_at = excluded.enqueued_at, \
                     max_attempts = excluded.max_attempts, attempts = 0, worker = NULL, \
                     lease_until = NULL, wake_kind = NULL, wake_key = NULL, \
                     wake_pending = FALSE WHERE run_queue.state = 'DONE'",
                    now = Self::NOW_MS
                ))
                .bind(run_id)
                .bind(crate::records::queue::millis(enqueue.delay))
                .bind(Timestamp::now(&*self.clock).as_millis())
                .bind(i64::from(enqueue.max_attempts))
                .execute(&mut *tx)
                .await
                .map_err(|e| map_write("queue entry", run_id, e))?;
                if done.rows_affected() == 0 {
                    tx.rollback().await?;
                    // Nothing written: say why, or accept that it is already queued.
                    return match self.run_standing(run_id).await? {
                        RunStanding::Missing => Err(StoreError::not_found("run", run_id)),
                        RunStanding::Ended { .. } => Err(StoreError::RunEnded {
                            run_id: run_id.to_owned(),
                        }),
                        RunStanding::Live { state, .. } if state.as_deref() == Some("ABANDONED") => {
                            Err(StoreError::RunAbandoned {
                                run_id: run_id.to_owned(),
                            })
                        }
                        RunStanding::Live { .. } => Ok(()),
                    };
                }
                self.wake_in_tx(&mut tx, run_id).await?;
                tx.commit().await?;
                self.woke();
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all, fields(worker = %request.worker, limit = request.limit))]
            async fn claim(&self, request: &ClaimRequest) -> StoreResult<Vec<Claim>> {
                crate::records::queue::validate_claim(request)?;
                let lease = crate::records::queue::millis(request.lease);
                // Abandoning dead runs takes slots from a claim; go again (bounded) so a claim
                // that found work never comes back empty only because of them.
                for _ in 0..16 {
                    let rows = sqlx::query(Self::CLAIM_SQL)
                        .bind(&request.worker)
                        .bind(i64::from(request.limit))
                        .bind(lease)
                        .bind(request.engine.as_str())
                        .fetch_all(&self.pool)
                        .await?;
                    let mut claims = Vec::with_capacity(rows.len());
                    let mut abandoned = 0_usize;
                    for row in &rows {
                        let state: String = row.try_get("state")?;
                        if state == "ABANDONED" {
                            abandoned += 1;
                            let run_id: String = row.try_get("run_id")?;
                            tracing::warn!(run_id = %run_id, "run abandoned after its attempt limit");
                            continue;
                        }
                        let lease_until: Option<i64> = row.try_get("lease_until")?;
                        claims.push(Claim {
                            run_id: row.try_get("run_id")?,
                            worker: request.worker.clone(),
                            lease_until: Timestamp::from_millis(lease_until.unwrap_or_default()),
                            epoch: row.try_get("claim_count")?,
                        });
                    }
                    if abandoned == 0 || !claims.is_empty() {
                        claims.sort_by(|a, b| a.run_id.cmp(&b.run_id));
                        return Ok(claims);
                    }
                }
                Ok(Vec::new())
            }

            #[tracing::instrument(level = "debug", skip_all, fields(run_id = %claim.run_id, epoch = claim.epoch))]
            async fn heartbeat(&self, claim: &Claim, lease: Duration) -> StoreResult<Claim> {
                crate::records::queue::validate_lease(lease)?;
                let row = sqlx::query(&format!(
                    "UPDATE run_queue SET lease_until = {now} + $1, available_at = {now} + $1 \
                     WHERE run_id = $2 AND state = 'LEASED' AND worker = $3 AND claim_count = $4 \
                     RETURNING lease_until",
                    now = Self::NOW_MS
                ))
                .bind(crate::records::queue::millis(lease))
                .bind(&claim.run_id)
                .bind(&claim.worker)
                .bind(claim.epoch)
                .fetch_optional(&self.pool)
                .await?;
                let Some(row) = row else {
                    return Err(self.fence_refusal(&claim.token()).await);
                };
                let lease_until: i64 = row.try_get("lease_until")?;
                Ok(Claim {
                    lease_until: Timestamp::from_millis(lease_until),
                    ..claim.clone()
                })
            }

            #[tracing::instrument(level = "debug", skip_all, fields(run_id = %claim.run_id, epoch = claim.epoch))]
            async fn release(&self, claim: &Claim, release: Release) -> StoreResult<()> {
                // One statement, no transaction round trips: the release and (when the run
                // becomes claimable) the wake-up commit together.
                let guard = "WHERE run_id = $1 AND state = 'LEASED' AND worker = $2 \
                             AND claim_count = $3";
                let released = match &release {
                    Release::Done => {
                        sqlx::query(&Self::released_sql(
                            &format!(
                                "UPDATE run_queue SET state = 'DONE', worker = NULL, \
                                 lease_until = NULL, attempts = 0, wake_pending = FALSE {guard}"
                            ),
                            false,
                        ))
                        .bind(&claim.run_id)
                        .bind(&claim.worker)
                        .bind(claim.epoch)
                        .fetch_optional(&self.pool)
                        .await?
                    }
                    Release::Park(wake) => {
                        let (kind, key) = crate::records::queue::wake_columns(wake);
                        limits::short_text("wake key", key)?;
                        // A wake condition written while the run was leased makes it runnable
                        // at once instead of parking it.
                        sqlx::query(&Self::released_sql(
                            &format!(
                                "UPDATE run_queue SET \
                                 state = CASE WHEN wake_pending THEN 'RUNNABLE' ELSE 'PARKED' END, \
                                 wake_kind = CASE WHEN wake_pending THEN NULL ELSE $4 END, \
                                 wake_key = CASE WHEN wake_pending THEN NULL ELSE $5 END, \
                                 available_at = {now}, worker = NULL, lease_until = NULL, \
                                 attempts = 0, wake_pending = FALSE {guard}",
                                now = Self::NOW_MS
                            ),
                            true,
                        ))
                        .bind(&claim.run_id)
                        .bind(&claim.worker)
                        .bind(claim.epoch)
                        .bind(kind)
                        .bind(key)
                        .fetch_optional(&self.pool)
                        .await?
                    }
                    Release::ParkUntil { wake, deadline } => {
                        let (kind, key) = crate::records::queue::wake_columns(wake);
                        limits::short_text("wake key", key)?;
                        crate::records::queue::validate_delay(*deadline)?;
                        // Runnable at the deadline, with its wake condition kept so that writing
                        // it makes the run runnable at once (see `wake_parked`).
                        sqlx::query(&Self::released_sql(
                            &format!(
                                "UPDATE run_queue SET state = 'RUNNABLE', \
                                 available_at = CASE WHEN wake_pending THEN {now} \
                                   ELSE {now} + $6 END, \
                                 wake_kind = CASE WHEN wake_pending THEN NULL ELSE $4 END, \
                                 wake_key = CASE WHEN wake_pending THEN NULL ELSE $5 END, \
                                 worker = NULL, lease_until = NULL, \
                                 attempts = 0, wake_pending = FALSE {guard}",
                                now = Self::NOW_MS
                            ),
                            true,
                        ))
                        .bind(&claim.run_id)
                        .bind(&claim.worker)
                        .bind(claim.epoch)
                        .bind(kind)
                        .bind(key)
                        .bind(crate::records::queue::millis(*deadline))
                        .fetch_optional(&self.pool)
                        .await?
                    }
                    Release::RunAfter(delay) => {
                        crate::records::queue::validate_delay(*delay)?;
                        sqlx::query(&Self::released_sql(
                            &format!(
                                "UPDATE run_queue SET state = 'RUNNABLE', \
                                 available_at = {now} + $4, worker = NULL, lease_until = NULL, \
                                 attempts = 0, wake_pending = FALSE {guard}",
                                now = Self::NOW_MS
                            ),
                            true,
                        ))
                        .bind(&claim.run_id)
                        .bind(&claim.worker)
                        .bind(claim.epoch)
                        .bind(crate::records::queue::millis(*delay))
                        .fetch_optional(&self.pool)
                        .await?
                    }
                };
                if released.is_none() {
                    return Err(self.fence_refusal(&claim.token()).await);
                }
                self.woke();
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all, fields(run_id = %run_id, worker = %worker))]
            async fn claim_run(
                &self,
                run_id: &str,
                worker: &str,
                lease: Duration,
                engine: crate::RunEngine,
            ) -> StoreResult<Claim> {
                limits::short_text("run id", run_id)?;
                limits::short_text("worker", worker)?;
                crate::records::queue::validate_lease(lease)?;
                let row = sqlx::query(&format!(
                    "INSERT INTO run_queue (run_id, state, available_at, enqueued_at, worker, \
                     lease_until, claim_count, attempts) \
                     SELECT id, 'LEASED', {now} + $3, $4, $2, {now} + $3, 1, 1 \
                     FROM workflow_runs WHERE id = $1 AND ended_at IS NULL AND engine = $5 \
                     ON CONFLICT (run_id) DO UPDATE SET state = 'LEASED', \
                     worker = excluded.worker, lease_until = excluded.lease_until, \
                     available_at = excluded.available_at, \
                     claim_count = run_queue.claim_count + 1, \
                     attempts = run_queue.attempts + 1, wake_pending = FALSE, \
                     wake_kind = NULL, wake_key = NULL \
                     WHERE run_queue.state <> 'LEASED' OR run_queue.lease_until <= {now} \
                     RETURNING claim_count, lease_until",
                    now = Self::NOW_MS
                ))
                .bind(run_id)
                .bind(worker)
                .bind(crate::records::queue::millis(lease))
                .bind(Timestamp::now(&*self.clock).as_millis())
                .bind(engine.as_str())
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| map_write("queue entry", run_id, e))?;
                let Some(row) = row else {
                    return Err(match self.run_standing(run_id).await? {
                        RunStanding::Missing => StoreError::not_found("run", run_id),
                        RunStanding::Ended { .. } => StoreError::RunEnded {
                            run_id: run_id.to_owned(),
                        },
                        RunStanding::Live { engine: other, .. } if other != engine => {
                            StoreError::OtherEngine {
                                run_id: run_id.to_owned(),
                                engine: other,
                            }
                        }
                        RunStanding::Live { .. } => StoreError::LeaseLost {
                            run_id: run_id.to_owned(),
                        },
                    });
                };
                let lease_until: Option<i64> = row.try_get("lease_until")?;
                Ok(Claim {
                    run_id: run_id.to_owned(),
                    worker: worker.to_owned(),
                    lease_until: Timestamp::from_millis(lease_until.unwrap_or_default()),
                    epoch: row.try_get("claim_count")?,
                })
            }

            async fn requeue_abandoned(&self, run_id: &str) -> StoreResult<()> {
                let mut tx = self.pool.begin().await?;
                let done = sqlx::query(&format!(
                    "UPDATE run_queue SET state = 'RUNNABLE', attempts = 0, \
                     available_at = {now} WHERE run_id = $1 AND state = 'ABANDONED' \
                     AND EXISTS (SELECT 1 FROM workflow_runs r WHERE r.id = $1 \
                     AND r.ended_at IS NULL)",
                    now = Self::NOW_MS
                ))
                .bind(run_id)
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() != 1 {
                    tx.rollback().await?;
                    return Err(match self.run_standing(run_id).await? {
                        RunStanding::Missing => StoreError::not_found("run", run_id),
                        RunStanding::Ended { .. } => StoreError::RunEnded {
                            run_id: run_id.to_owned(),
                        },
                        RunStanding::Live { .. } => StoreError::Conflict {
                            entity: "queue entry",
                            detail: format!("run {run_id} is not abandoned"),
                        },
                    });
                }
                self.wake_in_tx(&mut tx, run_id).await?;
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
                crate::records::queue::queue_state_from_row(crate::records::queue::QueueRow {
                    state: row.try_get("state")?,
                    available_at: row.try_get("available_at")?,
                    worker: row.try_get("worker")?,
                    lease_until: row.try_get("lease_until")?,
                    epoch: row.try_get("claim_count")?,
                    wake_kind: row.try_get("wake_kind")?,
                    wake_key: row.try_get("wake_key")?,
                })
                .map(Some)
            }

            async fn database_time(&self) -> StoreResult<Timestamp> {
                let now: i64 = sqlx::query_scalar(&format!("SELECT {}", Self::NOW_MS))
                    .fetch_one(&self.pool)
                    .await?;
                Ok(Timestamp::from_millis(now))
            }

            async fn claim_plan(&self) -> StoreResult<Vec<String>> {
                let rows = sqlx::query(&format!("{}{}", Self::EXPLAIN, Self::CLAIM_SQL))
                    .bind("plan")
                    .bind(1_i64)
                    .bind(60_000_i64)
                    .bind(crate::RunEngine::Embedded.as_str())
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter()
                    .map(|row| Ok(row.try_get::<String, _>(Self::EXPLAIN_COLUMN)?))
                    .collect()
            }

            async fn subscribe(&self) -> StoreResult<Box<dyn WorkWaiter>> {
                self.work_waiter().await
            }
        }

        impl $store {
            /// Begins a transaction whose first statement holds the run's queue row at the
            /// token's epoch until commit (`PostgreSQL`: `FOR SHARE`, so a claim skips the row
            /// and a concurrent re-claim waits; `SQLite`: the write lock). A write made in it
            /// can only commit while the token is current. Refused with `LEASE_LOST`,
            /// `RUN_ENDED`, `RUN_ABANDONED` or `STORE_NOT_FOUND`, nothing written.
            async fn fenced(
                &self,
                token: &LeaseToken,
            ) -> StoreResult<sqlx::Transaction<'_, DbKind>> {
                limits::short_text("run id", &token.run_id)?;
                let mut tx = self.pool.begin().await?;
                let held = sqlx::query(Self::FENCE_SQL)
                    .bind(&token.run_id)
                    .bind(token.epoch)
                    .fetch_optional(&mut *tx)
                    .await?;
                if held.is_none() {
                    tx.rollback().await?;
                    return Err(self.fence_refusal(token).await);
                }
                Ok(tx)
            }

            /// Why a token does not hold its run, read after the refused write.
            async fn fence_refusal(&self, token: &LeaseToken) -> StoreError {
                let refusal = self.explain_refusal(token).await;
                tracing::debug!(
                    run_id = %token.run_id,
                    epoch = token.epoch,
                    code = refusal.code(),
                    "fenced write refused"
                );
                refusal
            }

            async fn explain_refusal(&self, token: &LeaseToken) -> StoreError {
                let run_id = token.run_id.clone();
                match self.run_standing(&token.run_id).await {
                    Err(error) => error,
                    Ok(RunStanding::Missing) => StoreError::not_found("run", run_id),
                    Ok(RunStanding::Live { epoch, .. } | RunStanding::Ended { epoch })
                        if epoch != Some(token.epoch) =>
                    {
                        StoreError::LeaseLost { run_id }
                    }
                    Ok(RunStanding::Ended { .. }) => StoreError::RunEnded { run_id },
                    Ok(RunStanding::Live { state, .. }) if state.as_deref() == Some("ABANDONED") => {
                        StoreError::RunAbandoned { run_id }
                    }
                    Ok(RunStanding::Live { .. }) => StoreError::LeaseLost { run_id },
                }
            }

            /// Whether a run exists, has ended, and where its queue row stands.
            async fn run_standing(&self, run_id: &str) -> StoreResult<RunStanding> {
                let row = sqlx::query(
                    "SELECT r.ended_at, r.engine, q.state, q.claim_count FROM workflow_runs r \
                     LEFT JOIN run_queue q ON q.run_id = r.id WHERE r.id = $1",
                )
                .bind(run_id)
                .fetch_optional(&self.pool)
                .await?;
                let Some(row) = row else {
                    return Ok(RunStanding::Missing);
                };
                let ended_at: Option<i64> = row.try_get("ended_at")?;
                let epoch: Option<i64> = row.try_get("claim_count")?;
                Ok(match ended_at {
                    Some(_) => RunStanding::Ended { epoch },
                    None => RunStanding::Live {
                        state: row.try_get("state")?,
                        epoch,
                        engine: row.try_get::<String, _>("engine")?.parse()?,
                    },
                })
            }

            /// Makes a run parked on `wake` runnable, or marks a leased run so that its next park
            /// turns into a wake-up. Runs inside the caller's transaction.
            async fn wake_parked(
                &self,
                tx: &mut sqlx::Transaction<'_, DbKind>,
                run_id: &str,
                wake: &WakeOn,
            ) -> StoreResult<()> {
                let (kind, key) = crate::records::queue::wake_columns(wake);
                let woke = sqlx::query(&format!(
                    "UPDATE run_queue SET state = 'RUNNABLE', available_at = {now}, \
                     wake_kind = NULL, wake_key = NULL \
                     WHERE run_id = $1 AND state IN ('PARKED', 'RUNNABLE') \
                     AND wake_kind = $2 AND wake_key = $3",
                    now = Self::NOW_MS
                ))
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
