//! Triggers and their delivery ledger, written once for both backends.
//!
//! Admission serializes on the trigger's row: its first statement is a no-op update of that
//! row, which holds the row lock (`PostgreSQL`) or the database's write lock (`SQLite`) until
//! commit, so the ledger read, the limit count and the write that admits are one step.

macro_rules! impl_trigger_store {
    ($store:ty, $row:ty) => {
        impl $store {
            fn trigger_from_row(row: &$row) -> StoreResult<Trigger> {
                let event_types: Option<String> = row.try_get("event_types")?;
                let daily_limit: i64 = row.try_get("daily_limit")?;
                Ok(Trigger {
                    id: row.try_get("id")?,
                    template_id: row.try_get("template_id")?,
                    name: row.try_get("name")?,
                    created_by: row.try_get("created_by")?,
                    paused: row.try_get("paused")?,
                    daily_limit: u32::try_from(daily_limit).map_err(|_| {
                        StoreError::corrupt("triggers", format!("daily limit {daily_limit}"))
                    })?,
                    event_types: event_types
                        .map(|text| from_json_text("triggers", &text))
                        .transpose()?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                    updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
                })
            }

            fn trigger_delivery_from_row(row: &$row) -> StoreResult<TriggerDelivery> {
                let state: String = row.try_get("state")?;
                let reason: Option<String> = row.try_get("reason")?;
                Ok(TriggerDelivery {
                    webhook_id: row.try_get("webhook_id")?,
                    state: parse_stored("trigger_deliveries", &state)?,
                    event_type: row.try_get("event_type")?,
                    run_id: row.try_get("run_id")?,
                    reason: reason
                        .map(|r| parse_stored("trigger_deliveries", &r))
                        .transpose()?,
                    admitted_at: Timestamp::from_millis(row.try_get("admitted_at")?),
                })
            }

            fn trigger_secret_owner(id: &str) -> SecretOwner<'_> {
                SecretOwner {
                    table: "triggers",
                    column: "secret_envelope",
                    row_id: id,
                }
            }

            fn event_types_text(types: Option<&[String]>) -> StoreResult<Option<String>> {
                crate::records::triggers::validate_event_types(types)?;
                types.map(|t| to_json_text("event types", &t)).transpose()
            }

            fn check_trigger_secret(secret: &SecretString) -> StoreResult<()> {
                if secret.expose().is_empty() || secret.expose().len() > 1024 {
                    return Err(StoreError::invalid("trigger secret", "must be 1-1024 bytes"));
                }
                Ok(())
            }

            /// Records a skipped delivery (first seen, or taken again) and says so.
            async fn skip_delivery(
                tx: &mut sqlx::Transaction<'_, DbKind>,
                trigger_id: &str,
                webhook_id: &str,
                event_type: Option<&str>,
                reason: SkipReason,
                now: i64,
            ) -> StoreResult<Admission> {
                sqlx::query(
                    "INSERT INTO trigger_deliveries (trigger_id, webhook_id, state, event_type, \
                     run_id, reason, admitted_at, updated_at) \
                     VALUES ($1, $2, 'SKIPPED', $3, NULL, $4, $5, $5) \
                     ON CONFLICT (trigger_id, webhook_id) DO UPDATE SET state = 'SKIPPED', \
                     event_type = excluded.event_type, run_id = NULL, reason = excluded.reason, \
                     admitted_at = excluded.admitted_at, updated_at = excluded.updated_at",
                )
                .bind(trigger_id)
                .bind(webhook_id)
                .bind(event_type)
                .bind(reason.as_str())
                .bind(now)
                .execute(&mut **tx)
                .await?;
                Ok(Admission::Skipped { reason })
            }

            /// Runs counted against a window: started or starting, admitted after `since`,
            /// other than `webhook_id`; and the oldest of them.
            async fn counted_since(
                tx: &mut sqlx::Transaction<'_, DbKind>,
                trigger_id: &str,
                webhook_id: &str,
                since: i64,
            ) -> StoreResult<(i64, Option<i64>)> {
                let row = sqlx::query(
                    "SELECT COUNT(*) AS n, MIN(admitted_at) AS oldest FROM trigger_deliveries \
                     WHERE trigger_id = $1 AND webhook_id <> $2 \
                     AND state IN ('STARTING', 'STARTED') AND admitted_at > $3",
                )
                .bind(trigger_id)
                .bind(webhook_id)
                .bind(since)
                .fetch_one(&mut **tx)
                .await?;
                Ok((row.try_get("n")?, row.try_get("oldest")?))
            }
        }

        #[async_trait::async_trait]
        impl TriggerStore for $store {
            #[tracing::instrument(level = "debug", skip_all, fields(template_id = %trigger.template_id))]
            async fn create_trigger(
                &self,
                trigger: NewTrigger,
                secret: &SecretString,
            ) -> StoreResult<Trigger> {
                use crate::records::triggers::{
                    DEFAULT_TRIGGER_DAILY_LIMIT, MAX_TRIGGERS_PER_TEMPLATE, validate_daily_limit,
                    validate_name,
                };
                limits::short_text("template id", &trigger.template_id)?;
                limits::short_text("created by", &trigger.created_by)?;
                validate_name(&trigger.name)?;
                let daily = trigger.daily_limit.unwrap_or(DEFAULT_TRIGGER_DAILY_LIMIT);
                validate_daily_limit(daily)?;
                let event_types = Self::event_types_text(trigger.event_types.as_deref())?;
                Self::check_trigger_secret(secret)?;
                let id = new_id();
                let sealed = self
                    .keyring
                    .seal_string(Self::trigger_secret_owner(&id), secret)?;
                let now = Timestamp::now(&*self.clock).as_millis();
                let mut tx = self.pool.begin().await?;
                // Holds the template's row, so concurrent creations count one after another.
                let template: Option<String> = sqlx::query_scalar(
                    "UPDATE workflow_templates SET latest_version = latest_version WHERE id = $1 \
                     RETURNING id",
                )
                .bind(&trigger.template_id)
                .fetch_optional(&mut *tx)
                .await?;
                if template.is_none() {
                    return Err(StoreError::not_found("template", &trigger.template_id));
                }
                let existing: i64 =
                    sqlx::query_scalar("SELECT COUNT(*) FROM triggers WHERE template_id = $1")
                        .bind(&trigger.template_id)
                        .fetch_one(&mut *tx)
                        .await?;
                if existing >= MAX_TRIGGERS_PER_TEMPLATE {
                    return Err(StoreError::Conflict {
                        entity: "trigger",
                        detail: format!(
                            "a template has at most {MAX_TRIGGERS_PER_TEMPLATE} triggers"
                        ),
                    });
                }
                let row = sqlx::query(
                    "INSERT INTO triggers (id, template_id, name, created_by, paused, \
                     daily_limit, event_types, secret_envelope, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, FALSE, $5, $6, $7, $8, $8) RETURNING *",
                )
                .bind(&id)
                .bind(&trigger.template_id)
                .bind(&trigger.name)
                .bind(&trigger.created_by)
                .bind(i64::from(daily))
                .bind(event_types)
                .bind(&sealed)
                .bind(now)
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| map_write("trigger", &id, e))?;
                tx.commit().await?;
                Self::trigger_from_row(&row)
            }

            async fn get_trigger(&self, id: &str) -> StoreResult<Trigger> {
                let row = sqlx::query("SELECT * FROM triggers WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("trigger", id))?;
                Self::trigger_from_row(&row)
            }

            async fn list_triggers(&self, template_id: &str) -> StoreResult<Vec<Trigger>> {
                let rows = sqlx::query(
                    "SELECT * FROM triggers WHERE template_id = $1 ORDER BY created_at, id",
                )
                .bind(template_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::trigger_from_row).collect()
            }

            #[tracing::instrument(level = "debug", skip_all, fields(trigger_id = %id))]
            async fn update_trigger(&self, id: &str, update: TriggerUpdate) -> StoreResult<Trigger> {
                if let Some(name) = &update.name {
                    crate::records::triggers::validate_name(name)?;
                }
                if let Some(limit) = update.daily_limit {
                    crate::records::triggers::validate_daily_limit(limit)?;
                }
                let event_types = match &update.event_types {
                    Some(types) => Some(Self::event_types_text(types.as_deref())?),
                    None => None,
                };
                let row = sqlx::query(
                    "UPDATE triggers SET name = COALESCE($2, name), \
                     paused = COALESCE($3, paused), daily_limit = COALESCE($4, daily_limit), \
                     event_types = CASE WHEN $5 THEN $6 ELSE event_types END, updated_at = $7 \
                     WHERE id = $1 RETURNING *",
                )
                .bind(id)
                .bind(update.name.as_deref())
                .bind(update.paused)
                .bind(update.daily_limit.map(i64::from))
                .bind(event_types.is_some())
                .bind(event_types.flatten())
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| map_write("trigger", id, e))?
                .ok_or_else(|| StoreError::not_found("trigger", id))?;
                Self::trigger_from_row(&row)
            }

            #[tracing::instrument(level = "debug", skip_all, fields(trigger_id = %id))]
            async fn rotate_trigger_secret(
                &self,
                id: &str,
                secret: &SecretString,
            ) -> StoreResult<Trigger> {
                Self::check_trigger_secret(secret)?;
                let sealed = self
                    .keyring
                    .seal_string(Self::trigger_secret_owner(id), secret)?;
                let row = sqlx::query(
                    "UPDATE triggers SET secret_envelope = $2, updated_at = $3 \
                     WHERE id = $1 RETURNING *",
                )
                .bind(id)
                .bind(&sealed)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_optional(&self.pool)
                .await?
                .ok_or_else(|| StoreError::not_found("trigger", id))?;
                Self::trigger_from_row(&row)
            }

            async fn delete_trigger(&self, id: &str) -> StoreResult<()> {
                let done = sqlx::query("DELETE FROM triggers WHERE id = $1")
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                if done.rows_affected() == 0 {
                    return Err(StoreError::not_found("trigger", id));
                }
                Ok(())
            }

            async fn trigger_secret(&self, id: &str) -> StoreResult<SecretString> {
                let sealed: String =
                    sqlx::query_scalar("SELECT secret_envelope FROM triggers WHERE id = $1")
                        .bind(id)
                        .fetch_optional(&self.pool)
                        .await?
                        .ok_or_else(|| StoreError::not_found("trigger", id))?;
                self.keyring
                    .open_string(Self::trigger_secret_owner(id), &sealed)
            }

            #[tracing::instrument(level = "debug", skip_all, fields(trigger_id = %trigger_id))]
            async fn admit_delivery(
                &self,
                trigger_id: &str,
                webhook_id: &str,
                event_type: Option<&str>,
            ) -> StoreResult<Admission> {
                use crate::records::triggers::{
                    DAY, DELIVERY_RETENTION, DELIVERY_START_TIMEOUT, MINUTE,
                    TRIGGER_RUNS_PER_MINUTE, selects, validate_webhook_id, wait_until_out,
                };
                let millis = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
                limits::short_text("trigger id", trigger_id)?;
                validate_webhook_id(webhook_id)?;
                limits::optional_short_text("event type", event_type)?;
                let now = Timestamp::now(&*self.clock).as_millis();
                let mut tx = self.pool.begin().await?;
                let Some(trigger) = sqlx::query(
                    "UPDATE triggers SET paused = paused WHERE id = $1 RETURNING *",
                )
                .bind(trigger_id)
                .fetch_optional(&mut *tx)
                .await?
                else {
                    return Err(StoreError::not_found("trigger", trigger_id));
                };
                let trigger = Self::trigger_from_row(&trigger)?;
                sqlx::query(
                    "DELETE FROM trigger_deliveries WHERE trigger_id = $1 AND admitted_at <= $2",
                )
                .bind(trigger_id)
                .bind(now - millis(DELIVERY_RETENTION))
                .execute(&mut *tx)
                .await?;
                let seen = sqlx::query(
                    "SELECT * FROM trigger_deliveries WHERE trigger_id = $1 AND webhook_id = $2",
                )
                .bind(trigger_id)
                .bind(webhook_id)
                .fetch_optional(&mut *tx)
                .await?
                .map(|row| Self::trigger_delivery_from_row(&row))
                .transpose()?;
                if let Some(seen) = seen {
                    let decided = match seen.state {
                        DeliveryState::Started => Some(Admission::Replayed {
                            run_id: seen.run_id.ok_or_else(|| {
                                StoreError::corrupt("trigger_deliveries", "started without a run")
                            })?,
                        }),
                        DeliveryState::Skipped => Some(Admission::Skipped {
                            reason: seen.reason.ok_or_else(|| {
                                StoreError::corrupt("trigger_deliveries", "skipped without a reason")
                            })?,
                        }),
                        DeliveryState::Starting
                            if now - seen.admitted_at.as_millis()
                                < millis(DELIVERY_START_TIMEOUT) =>
                        {
                            Some(Admission::InProgress {
                                retry_after: wait_until_out(
                                    seen.admitted_at.as_millis(),
                                    DELIVERY_START_TIMEOUT,
                                    now,
                                ),
                            })
                        }
                        // Failed, or left starting too long: taken again.
                        _ => None,
                    };
                    if let Some(decided) = decided {
                        tx.commit().await?;
                        return Ok(decided);
                    }
                }
                let skip = if trigger.paused {
                    Some(SkipReason::Paused)
                } else if !selects(trigger.event_types.as_deref(), event_type) {
                    Some(SkipReason::EventType)
                } else {
                    None
                };
                if let Some(reason) = skip {
                    let skipped =
                        Self::skip_delivery(&mut tx, trigger_id, webhook_id, event_type, reason, now)
                            .await?;
                    tx.commit().await?;
                    return Ok(skipped);
                }
                for (limit, window, allowed) in [
                    (TriggerLimit::PerMinute, MINUTE, i64::from(TRIGGER_RUNS_PER_MINUTE)),
                    (TriggerLimit::Daily, DAY, i64::from(trigger.daily_limit)),
                ] {
                    let (counted, oldest) =
                        Self::counted_since(&mut tx, trigger_id, webhook_id, now - millis(window))
                            .await?;
                    if counted >= allowed {
                        tx.rollback().await?;
                        return Ok(Admission::Limited {
                            limit,
                            retry_after: wait_until_out(oldest.unwrap_or(now), window, now),
                        });
                    }
                }
                sqlx::query(
                    "INSERT INTO trigger_deliveries (trigger_id, webhook_id, state, event_type, \
                     run_id, reason, admitted_at, updated_at) \
                     VALUES ($1, $2, 'STARTING', $3, NULL, NULL, $4, $4) \
                     ON CONFLICT (trigger_id, webhook_id) DO UPDATE SET state = 'STARTING', \
                     event_type = excluded.event_type, run_id = NULL, reason = NULL, \
                     admitted_at = excluded.admitted_at, updated_at = excluded.updated_at",
                )
                .bind(trigger_id)
                .bind(webhook_id)
                .bind(event_type)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(Admission::Admitted)
            }

            async fn mark_delivery_started(
                &self,
                trigger_id: &str,
                webhook_id: &str,
                run_id: &str,
            ) -> StoreResult<()> {
                limits::short_text("run id", run_id)?;
                // A delivery taken again after its starter stopped reaches the same run (the
                // launch is idempotent by `webhook-id`), so a started row may be marked again.
                let done = sqlx::query(
                    "UPDATE trigger_deliveries SET state = 'STARTED', run_id = $3, \
                     updated_at = $4 WHERE trigger_id = $1 AND webhook_id = $2 \
                     AND (state = 'STARTING' OR (state = 'STARTED' AND run_id = $3))",
                )
                .bind(trigger_id)
                .bind(webhook_id)
                .bind(run_id)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .execute(&self.pool)
                .await?;
                if done.rows_affected() == 0 {
                    return Err(StoreError::Conflict {
                        entity: "trigger delivery",
                        detail: format!("{webhook_id} is not starting"),
                    });
                }
                Ok(())
            }

            async fn mark_delivery_failed(
                &self,
                trigger_id: &str,
                webhook_id: &str,
            ) -> StoreResult<()> {
                sqlx::query(
                    "UPDATE trigger_deliveries SET state = 'FAILED', updated_at = $3 \
                     WHERE trigger_id = $1 AND webhook_id = $2 AND state = 'STARTING'",
                )
                .bind(trigger_id)
                .bind(webhook_id)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn trigger_deliveries(
                &self,
                trigger_id: &str,
                limit: u32,
            ) -> StoreResult<Vec<TriggerDelivery>> {
                if limit == 0 || limit > 500 {
                    return Err(StoreError::invalid("limit", "must be between 1 and 500"));
                }
                let rows = sqlx::query(
                    "SELECT * FROM trigger_deliveries WHERE trigger_id = $1 \
                     ORDER BY admitted_at DESC, webhook_id LIMIT $2",
                )
                .bind(trigger_id)
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::trigger_delivery_from_row).collect()
            }
        }
    };
}
