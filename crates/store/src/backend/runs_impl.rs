//! Runs, run inputs, journal and templates, written once for both backends.
//!
//! The SQL here is portable between `SQLite` and `PostgreSQL` (numbered `$n` parameters, `RETURNING`,
//! `ON CONFLICT`); each backend expands the macro over its own pool and row types.

macro_rules! impl_run_stores {
    ($store:ty, $row:ty) => {
        impl $store {
            fn run_from_row(row: &$row) -> StoreResult<Run> {
                let status: String = row.try_get("status")?;
                let ended_at: Option<i64> = row.try_get("ended_at")?;
                Ok(Run {
                    id: row.try_get("id")?,
                    org_id: row.try_get("org_id")?,
                    team_id: row.try_get("team_id")?,
                    template_version_id: row.try_get("template_version_id")?,
                    run_input_id: row.try_get("run_input_id")?,
                    launched_by: row.try_get("launched_by")?,
                    status: parse_stored("workflow_runs", &status)?,
                    spec_snapshot: from_json_text(
                        "workflow_runs",
                        &row.try_get::<String, _>("spec_snapshot")?,
                    )?,
                    pins: from_json_text("workflow_runs", &row.try_get::<String, _>("pins")?)?,
                    authorized_connection_ids: from_json_text(
                        "workflow_runs",
                        &row.try_get::<String, _>("authorized_connection_ids")?,
                    )?,
                    usage: Spend {
                        cost_micros: row.try_get("cost_micros")?,
                        input_tokens: row.try_get("input_tokens")?,
                        output_tokens: row.try_get("output_tokens")?,
                    },
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                    ended_at: ended_at.map(Timestamp::from_millis),
                    cancel_requested_at: row
                        .try_get::<Option<i64>, _>("cancel_requested_at")?
                        .map(Timestamp::from_millis),
                    engine: parse_stored("workflow_runs", &row.try_get::<String, _>("engine")?)?,
                })
            }

            fn run_input_from_row(row: &$row) -> StoreResult<RunInput> {
                Ok(RunInput {
                    id: row.try_get("id")?,
                    submitter: row.try_get("submitter")?,
                    idempotency_key: row.try_get("idempotency_key")?,
                    template_id: row.try_get("template_id")?,
                    connection_id: row.try_get("connection_id")?,
                    billing_org_id: row.try_get("billing_org_id")?,
                    payload: from_json_text("run_inputs", &row.try_get::<String, _>("payload")?)?,
                    request_hash: row.try_get("request_hash")?,
                    started_run_id: row.try_get("started_run_id")?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }

            fn journal_from_row(row: &$row) -> StoreResult<JournalEntry> {
                Ok(JournalEntry {
                    seq: row.try_get("seq")?,
                    run_id: row.try_get("run_id")?,
                    recording_id: row.try_get("recording_id")?,
                    attempt: row.try_get("attempt")?,
                    kind: row.try_get("kind")?,
                    result: from_json_text("run_journal", &row.try_get::<String, _>("result")?)?,
                    recorded_at: Timestamp::from_millis(row.try_get("recorded_at")?),
                })
            }

            fn template_from_row(row: &$row) -> StoreResult<WorkflowTemplate> {
                Ok(WorkflowTemplate {
                    id: row.try_get("id")?,
                    team_id: row.try_get("team_id")?,
                    name: row.try_get("name")?,
                    description: row.try_get("description")?,
                    latest_version: row.try_get("latest_version")?,
                    active_version: row.try_get("active_version")?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }

            fn template_version_from_row(row: &$row) -> StoreResult<TemplateVersion> {
                Ok(TemplateVersion {
                    id: row.try_get("id")?,
                    template_id: row.try_get("template_id")?,
                    version: row.try_get("version")?,
                    spec: from_json_text(
                        "workflow_template_versions",
                        &row.try_get::<String, _>("spec")?,
                    )?,
                    input_schema: from_json_text(
                        "workflow_template_versions",
                        &row.try_get::<String, _>("input_schema")?,
                    )?,
                    spec_hash: row.try_get("spec_hash")?,
                    created_by: row.try_get("created_by")?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }
        }

        #[async_trait::async_trait]
        impl RunStore for $store {
            async fn create_run(&self, run: NewRun) -> StoreResult<Run> {
                limits::optional_short_text("org id", run.org_id.as_deref())?;
                limits::optional_short_text("team id", run.team_id.as_deref())?;
                limits::optional_short_text("launched by", run.launched_by.as_deref())?;
                let spec = limits::json_text("spec snapshot", &run.spec_snapshot)?;
                let pins = to_json_text("pins", &run.pins)?;
                let connections = to_json_text("connection ids", &run.authorized_connection_ids)?;
                let id = new_id();
                let now = Timestamp::now(&*self.clock).as_millis();
                let row = sqlx::query(
                    "INSERT INTO workflow_runs (id, org_id, team_id, template_version_id, \
                     run_input_id, launched_by, status, spec_snapshot, pins, \
                     authorized_connection_ids, created_at, updated_at, engine) \
                     VALUES ($1, $2, $3, $4, $5, $6, 'PENDING', $7, $8, $9, $10, $10, $11) RETURNING *",
                )
                .bind(&id)
                .bind(&run.org_id)
                .bind(&run.team_id)
                .bind(&run.template_version_id)
                .bind(&run.run_input_id)
                .bind(&run.launched_by)
                .bind(&spec)
                .bind(&pins)
                .bind(&connections)
                .bind(now)
                .bind(run.engine.as_str())
                .fetch_one(&self.pool)
                .await
                .map_err(|e| map_write("run", &id, e))?;
                Self::run_from_row(&row)
            }

            async fn get_run(&self, id: &str) -> StoreResult<Run> {
                let row = sqlx::query(&format!(
                    "SELECT {} FROM workflow_runs r WHERE r.id = $1",
                    crate::records::queries::RUN_COLUMNS
                ))
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("run", id))?;
                Self::run_from_row(&row)
            }

            async fn set_run_status(
                &self,
                token: &LeaseToken,
                status: RunStatus,
            ) -> StoreResult<()> {
                if status.is_terminal() {
                    return Err(StoreError::invalid(
                        "run status",
                        "terminal statuses are set by finalize_run",
                    ));
                }
                let mut tx = self.fenced(token).await?;
                sqlx::query("UPDATE workflow_runs SET status = $1, updated_at = $2 WHERE id = $3")
                    .bind(status.as_str())
                    .bind(Timestamp::now(&*self.clock).as_millis())
                    .bind(&token.run_id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn add_run_usage(&self, token: &LeaseToken, usage: Spend) -> StoreResult<Spend> {
                crate::records::runs::validate_usage(&usage)?;
                let mut tx = self.fenced(token).await?;
                let row = sqlx::query(
                    "UPDATE workflow_runs SET cost_micros = cost_micros + $1, \
                     input_tokens = input_tokens + $2, output_tokens = output_tokens + $3, \
                     updated_at = $4 WHERE id = $5 \
                     RETURNING cost_micros, input_tokens, output_tokens",
                )
                .bind(usage.cost_micros)
                .bind(usage.input_tokens)
                .bind(usage.output_tokens)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .bind(&token.run_id)
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| map_write("run usage", &token.run_id, e))?;
                tx.commit().await?;
                Ok(Spend {
                    cost_micros: row.try_get("cost_micros")?,
                    input_tokens: row.try_get("input_tokens")?,
                    output_tokens: row.try_get("output_tokens")?,
                })
            }

            #[tracing::instrument(level = "debug", skip(self))]
            async fn request_cancel(&self, run_id: &str) -> StoreResult<Timestamp> {
                limits::short_text("run id", run_id)?;
                let mut tx = self.pool.begin().await?;
                let row = sqlx::query(
                    "UPDATE workflow_runs SET cancel_requested_at = \
                     COALESCE(cancel_requested_at, $2), cancel_relay = CASE \
                     WHEN engine = 'EMBEDDED' OR cancel_relay IS NOT NULL THEN cancel_relay \
                     ELSE 'PENDING' END WHERE id = $1 AND ended_at IS NULL \
                     RETURNING cancel_requested_at",
                )
                .bind(run_id)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_optional(&mut *tx)
                .await?;
                let Some(row) = row else {
                    tx.rollback().await?;
                    return Err(match self.run_standing(run_id).await? {
                        RunStanding::Missing => StoreError::not_found("run", run_id),
                        _ => StoreError::RunEnded {
                            run_id: run_id.to_owned(),
                        },
                    });
                };
                // A waiting run (parked, or runnable only at its wait's deadline) is runnable
                // now; a held one that parks before its worker saw the request is made runnable
                // as it parks.
                let woke = sqlx::query(&format!(
                    "UPDATE run_queue SET state = 'RUNNABLE', \
                     available_at = CASE WHEN available_at < {now} THEN available_at ELSE {now} END, \
                     wake_kind = NULL, wake_key = NULL \
                     WHERE run_id = $1 AND state IN ('PARKED', 'RUNNABLE')",
                    now = Self::NOW_MS
                ))
                .bind(run_id)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "UPDATE run_queue SET wake_pending = TRUE WHERE run_id = $1 AND state = 'LEASED'",
                )
                .bind(run_id)
                .execute(&mut *tx)
                .await?;
                if woke.rows_affected() > 0 {
                    self.wake_in_tx(&mut tx, run_id).await?;
                }
                tx.commit().await?;
                self.woke();
                Ok(Timestamp::from_millis(row.try_get("cancel_requested_at")?))
            }

            #[tracing::instrument(level = "debug", skip_all, fields(run_id = %token.run_id, epoch = token.epoch))]
            async fn finalize_run(
                &self,
                token: &LeaseToken,
                finalize: FinalizeRun,
            ) -> StoreResult<FinalizeOutcome> {
                if !finalize.status.is_terminal() {
                    return Err(StoreError::invalid("run status", "finalize needs a terminal status"));
                }
                crate::records::runs::validate_usage(&finalize.usage)?;
                limits::short_text("run id", &token.run_id)?;
                let result = finalize
                    .result
                    .as_ref()
                    .map(|value| limits::json_text("run result", value))
                    .transpose()?;
                let now = Timestamp::now(&*self.clock);
                let mut tx = self.pool.begin().await?;
                // The fence and the end of the lease in one write: only the holder of the
                // current epoch gets past it, and it takes the run out of the queue for good.
                let fenced = sqlx::query(&format!(
                    "UPDATE run_queue SET state = 'DONE', worker = NULL, lease_until = NULL, \
                     attempts = 0, wake_pending = FALSE, wake_kind = NULL, wake_key = NULL \
                     WHERE run_id = $1 AND claim_count = $2 AND state = 'LEASED' \
                     AND lease_until > {now}",
                    now = Self::NOW_MS
                ))
                .bind(&token.run_id)
                .bind(token.epoch)
                .execute(&mut *tx)
                .await?;
                if fenced.rows_affected() != 1 {
                    tx.rollback().await?;
                    return match self.fence_refusal(token).await {
                        // The holder's own retry of a finalize that already went through.
                        StoreError::RunEnded { .. } => Ok(FinalizeOutcome::AlreadyFinalized),
                        refusal => Err(refusal),
                    };
                }
                // Only the write that sets ended_at passes this filter, so only it bills.
                let row = sqlx::query(
                    "UPDATE workflow_runs SET status = $1, ended_at = $2, updated_at = $2, \
                     cost_micros = cost_micros + $3, input_tokens = input_tokens + $4, \
                     output_tokens = output_tokens + $5, result = $6 \
                     WHERE id = $7 AND ended_at IS NULL \
                     RETURNING org_id, cost_micros, input_tokens, output_tokens",
                )
                .bind(finalize.status.as_str())
                .bind(now.as_millis())
                .bind(finalize.usage.cost_micros)
                .bind(finalize.usage.input_tokens)
                .bind(finalize.usage.output_tokens)
                .bind(result)
                .bind(&token.run_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| map_write("run usage", &token.run_id, e))?;
                let Some(row) = row else {
                    tx.rollback().await?;
                    return Ok(FinalizeOutcome::AlreadyFinalized);
                };
                let org_id: Option<String> = row.try_get("org_id")?;
                let usage = Spend {
                    cost_micros: row.try_get("cost_micros")?,
                    input_tokens: row.try_get("input_tokens")?,
                    output_tokens: row.try_get("output_tokens")?,
                };
                let year_month = now.year_month();
                if let Some(org_id) = &org_id {
                    let completed = i64::from(finalize.status == RunStatus::SUCCESS);
                    sqlx::query(
                        "INSERT INTO org_monthly_usage (org_id, year_month, cost_micros, \
                         input_tokens, output_tokens, runs_completed, runs_finalized) \
                         VALUES ($1, $2, $3, $4, $5, $6, 1) \
                         ON CONFLICT (org_id, year_month) DO UPDATE SET \
                         cost_micros = org_monthly_usage.cost_micros + excluded.cost_micros, \
                         input_tokens = org_monthly_usage.input_tokens + excluded.input_tokens, \
                         output_tokens = org_monthly_usage.output_tokens + excluded.output_tokens, \
                         runs_completed = org_monthly_usage.runs_completed + excluded.runs_completed, \
                         runs_finalized = org_monthly_usage.runs_finalized + 1",
                    )
                    .bind(org_id)
                    .bind(&year_month)
                    .bind(usage.cost_micros)
                    .bind(usage.input_tokens)
                    .bind(usage.output_tokens)
                    .bind(completed)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| map_write("monthly usage", org_id, e))?;
                }
                tx.commit().await?;
                Ok(FinalizeOutcome::Billed {
                    usage,
                    org_id,
                    year_month,
                })
            }

            async fn monthly_usage(
                &self,
                org_id: &str,
                year_month: &str,
            ) -> StoreResult<MonthlyUsage> {
                let row = sqlx::query(
                    "SELECT * FROM org_monthly_usage WHERE org_id = $1 AND year_month = $2",
                )
                .bind(org_id)
                .bind(year_month)
                .fetch_optional(&self.pool)
                .await?;
                let Some(row) = row else {
                    return Ok(MonthlyUsage::default());
                };
                Ok(MonthlyUsage {
                    usage: Spend {
                        cost_micros: row.try_get("cost_micros")?,
                        input_tokens: row.try_get("input_tokens")?,
                        output_tokens: row.try_get("output_tokens")?,
                    },
                    runs_completed: row.try_get("runs_completed")?,
                    runs_finalized: row.try_get("runs_finalized")?,
                })
            }

            #[tracing::instrument(level = "debug", skip(self))]
            async fn run_result(&self, run_id: &str) -> StoreResult<Option<serde_json::Value>> {
                limits::short_text("run id", run_id)?;
                let result: Option<String> =
                    sqlx::query_scalar("SELECT result FROM workflow_runs WHERE id = $1")
                        .bind(run_id)
                        .fetch_optional(&self.pool)
                        .await?
                        .ok_or_else(|| StoreError::not_found("run", run_id))?;
                result
                    .map(|text| from_json_text("workflow_runs", &text))
                    .transpose()
            }

            async fn runtime_pins(
                &self,
                run_id: &str,
            ) -> StoreResult<std::collections::BTreeMap<String, Option<Runtime>>> {
                limits::short_text("run id", run_id)?;
                let pins: String = sqlx::query_scalar("SELECT pins FROM workflow_runs WHERE id = $1")
                    .bind(run_id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("run", run_id))?;
                Ok(from_json_text::<RunPins>("workflow_runs", &pins)?.agent_runtimes)
            }

            #[tracing::instrument(level = "debug", skip_all, fields(run_id = %token.run_id, epoch = token.epoch))]
            async fn compare_and_set_runtime_pins(
                &self,
                token: &LeaseToken,
                expected: &std::collections::BTreeMap<String, Option<Runtime>>,
                next: &std::collections::BTreeMap<String, Option<Runtime>>,
            ) -> StoreResult<bool> {
                for key in next.keys() {
                    limits::short_text("agent key", key)?;
                }
                let mut tx = self.fenced(token).await?;
                // The fence holds the run's queue row, so no other holder writes in between;
                // the text comparison below still refuses a write that raced a reader.
                let stored: String =
                    sqlx::query_scalar("SELECT pins FROM workflow_runs WHERE id = $1")
                        .bind(&token.run_id)
                        .fetch_one(&mut *tx)
                        .await?;
                let mut pins: RunPins = from_json_text("workflow_runs", &stored)?;
                if &pins.agent_runtimes != expected {
                    tx.rollback().await?;
                    return Ok(false);
                }
                pins.agent_runtimes.clone_from(next);
                let written = sqlx::query(
                    "UPDATE workflow_runs SET pins = $1 WHERE id = $2 AND pins = $3",
                )
                .bind(to_json_text("pins", &pins)?)
                .bind(&token.run_id)
                .bind(&stored)
                .execute(&mut *tx)
                .await?;
                if written.rows_affected() != 1 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                tx.commit().await?;
                Ok(true)
            }
        }

        #[async_trait::async_trait]
        impl RunInputStore for $store {
            async fn submit_run_input(
                &self,
                input: NewRunInput,
            ) -> StoreResult<(RunInput, SubmitOutcome)> {
                limits::short_text("submitter", &input.submitter)?;
                limits::optional_short_text("idempotency key", input.idempotency_key.as_deref())?;
                let payload = limits::json_text("payload", &input.payload)?;
                let hash = crate::records::runs::request_hash(&input);
                let id = new_id();
                let inserted = sqlx::query(
                    "INSERT INTO run_inputs (id, submitter, idempotency_key, template_id, \
                     connection_id, billing_org_id, payload, request_hash, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                     ON CONFLICT (submitter, idempotency_key) WHERE idempotency_key IS NOT NULL \
                     DO NOTHING RETURNING *",
                )
                .bind(&id)
                .bind(&input.submitter)
                .bind(&input.idempotency_key)
                .bind(&input.template_id)
                .bind(&input.connection_id)
                .bind(&input.billing_org_id)
                .bind(&payload)
                .bind(&hash)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| map_write("run input", &id, e))?;
                if let Some(row) = inserted {
                    return Ok((Self::run_input_from_row(&row)?, SubmitOutcome::Created));
                }
                let row = sqlx::query(
                    "SELECT * FROM run_inputs WHERE submitter = $1 AND idempotency_key = $2",
                )
                .bind(&input.submitter)
                .bind(&input.idempotency_key)
                .fetch_one(&self.pool)
                .await?;
                let existing = Self::run_input_from_row(&row)?;
                if existing.request_hash != hash {
                    return Err(StoreError::IdempotencyKeyMismatch);
                }
                Ok((existing, SubmitOutcome::Existing))
            }

            async fn get_run_input(&self, id: &str) -> StoreResult<RunInput> {
                let row = sqlx::query("SELECT * FROM run_inputs WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("run input", id))?;
                Self::run_input_from_row(&row)
            }

            async fn mark_run_input_started(&self, id: &str, run_id: &str) -> StoreResult<()> {
                let done = sqlx::query(
                    "UPDATE run_inputs SET started_run_id = $1 WHERE id = $2 \
                     AND (started_run_id IS NULL OR started_run_id = $1)",
                )
                .bind(run_id)
                .bind(id)
                .execute(&self.pool)
                .await?;
                if done.rows_affected() == 1 {
                    return Ok(());
                }
                self.get_run_input(id).await?;
                Err(StoreError::Conflict {
                    entity: "run input",
                    detail: format!("run input {id} already started another run"),
                })
            }
        }

        #[async_trait::async_trait]
        impl JournalStore for $store {
            async fn append_journal(
                &self,
                token: &LeaseToken,
                entry: JournalAppend,
            ) -> StoreResult<(JournalEntry, AppendOutcome)> {
                let result = crate::records::journal::validate_append(&entry)?;
                crate::records::queue::same_run(token, &entry.run_id)?;
                // The common case in one statement (one round trip, one commit): a new entry
                // under a held lease.
                let inserted = sqlx::query(Self::JOURNAL_INSERT_SQL)
                    .bind(&entry.run_id)
                    .bind(&entry.recording_id)
                    .bind(entry.attempt)
                    .bind(&entry.kind)
                    .bind(&result)
                    .bind(Timestamp::now(&*self.clock).as_millis())
                    .bind(token.epoch)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(|e| map_write("journal entry", &entry.recording_id, e))?;
                if let Some(row) = inserted {
                    return Ok((Self::journal_from_row(&row)?, AppendOutcome::Inserted));
                }
                // Nothing written: say why under the fence (the lease is gone, or the entry was
                // recorded first — by this holder's retry or another writer).
                let mut tx = self.fenced(token).await?;
                let inserted = sqlx::query(
                    "INSERT INTO run_journal (run_id, recording_id, attempt, kind, result, \
                     recorded_at) VALUES ($1, $2, $3, $4, $5, $6) \
                     ON CONFLICT (run_id, recording_id, attempt, kind) DO NOTHING RETURNING *",
                )
                .bind(&entry.run_id)
                .bind(&entry.recording_id)
                .bind(entry.attempt)
                .bind(&entry.kind)
                .bind(&result)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| map_write("journal entry", &entry.recording_id, e))?;
                if let Some(row) = inserted {
                    tx.commit().await?;
                    return Ok((Self::journal_from_row(&row)?, AppendOutcome::Inserted));
                }
                let row = sqlx::query(
                    "SELECT * FROM run_journal WHERE run_id = $1 AND recording_id = $2 \
                     AND attempt = $3 AND kind = $4",
                )
                .bind(&entry.run_id)
                .bind(&entry.recording_id)
                .bind(entry.attempt)
                .bind(&entry.kind)
                .fetch_one(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok((Self::journal_from_row(&row)?, AppendOutcome::AlreadyRecorded))
            }

            async fn read_journal(&self, run_id: &str) -> StoreResult<Vec<JournalEntry>> {
                let rows = sqlx::query("SELECT * FROM run_journal WHERE run_id = $1 ORDER BY seq")
                    .bind(run_id)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::journal_from_row).collect()
            }
        }

        #[async_trait::async_trait]
        impl TemplateStore for $store {
            async fn create_template(&self, template: NewTemplate) -> StoreResult<WorkflowTemplate> {
                limits::short_text("template name", &template.name)?;
                limits::long_text("description", &template.description)?;
                let id = new_id();
                let row = sqlx::query(
                    "INSERT INTO workflow_templates (id, team_id, name, description, created_at) \
                     VALUES ($1, $2, $3, $4, $5) RETURNING *",
                )
                .bind(&id)
                .bind(&template.team_id)
                .bind(&template.name)
                .bind(&template.description)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_one(&self.pool)
                .await
                .map_err(|e| map_write("template", &id, e))?;
                Self::template_from_row(&row)
            }

            async fn get_template(&self, id: &str) -> StoreResult<WorkflowTemplate> {
                let row = sqlx::query("SELECT * FROM workflow_templates WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("template", id))?;
                Self::template_from_row(&row)
            }

            async fn add_template_version(
                &self,
                version: NewTemplateVersion,
            ) -> StoreResult<TemplateVersion> {
                let spec = limits::json_text("spec", &version.spec)?;
                let schema = limits::json_text("input schema", &version.input_schema)?;
                limits::optional_short_text("created by", version.created_by.as_deref())?;
                let mut tx = self.pool.begin().await?;
                // Bumping the counter first takes the row's write lock, so versions never collide.
                let number: Option<i64> = sqlx::query_scalar(
                    "UPDATE workflow_templates SET latest_version = latest_version + 1 \
                     WHERE id = $1 RETURNING latest_version",
                )
                .bind(&version.template_id)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(number) = number else {
                    return Err(StoreError::not_found("template", &version.template_id));
                };
                let id = new_id();
                let row = sqlx::query(
                    "INSERT INTO workflow_template_versions (id, template_id, version, spec, \
                     input_schema, spec_hash, created_by, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *",
                )
                .bind(&id)
                .bind(&version.template_id)
                .bind(number)
                .bind(&spec)
                .bind(&schema)
                .bind(sha256_hex(spec.as_bytes()))
                .bind(&version.created_by)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| map_write("template version", &id, e))?;
                tx.commit().await?;
                Self::template_version_from_row(&row)
            }

            async fn get_template_version(&self, id: &str) -> StoreResult<TemplateVersion> {
                let row = sqlx::query("SELECT * FROM workflow_template_versions WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("template version", id))?;
                Self::template_version_from_row(&row)
            }

            async fn list_templates(&self) -> StoreResult<Vec<WorkflowTemplate>> {
                let rows = sqlx::query("SELECT * FROM workflow_templates ORDER BY created_at, id")
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::template_from_row).collect()
            }

            async fn activate_template_version(
                &self,
                template_id: &str,
                version: Option<i64>,
            ) -> StoreResult<WorkflowTemplate> {
                // One statement: the version must exist when it is promoted.
                let row = sqlx::query(
                    "UPDATE workflow_templates SET active_version = $2 WHERE id = $1 \
                     AND ($2 IS NULL OR EXISTS (SELECT 1 FROM workflow_template_versions v \
                     WHERE v.template_id = $1 AND v.version = $2)) RETURNING *",
                )
                .bind(template_id)
                .bind(version)
                .fetch_optional(&self.pool)
                .await?;
                match row {
                    Some(row) => Self::template_from_row(&row),
                    None => Err(StoreError::not_found(
                        "template version",
                        &format!("{template_id} v{}", version.unwrap_or_default()),
                    )),
                }
            }

            async fn list_template_versions(
                &self,
                template_id: &str,
            ) -> StoreResult<Vec<TemplateVersion>> {
                let rows = sqlx::query(
                    "SELECT * FROM workflow_template_versions WHERE template_id = $1 \
                     ORDER BY version",
                )
                .bind(template_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::template_version_from_row).collect()
            }
        }
    };
}
