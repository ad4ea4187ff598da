//! Provider credentials, host scanner rules, the outcome ledger, the audit log and key rotation,
//! written once for both backends (the agent library's own seams are in `agents_impl`).

macro_rules! impl_library_stores {
    ($store:ty, $row:ty) => {
        impl $store {
            fn credential_from_row(row: &$row) -> StoreResult<ProviderCredential> {
                let scope: String = row.try_get("scope")?;
                Ok(ProviderCredential {
                    id: row.try_get("id")?,
                    provider: row.try_get("provider")?,
                    scope: parse_scope_ref("provider_credentials", &scope, row.try_get("scope_id")?)?,
                    label: row.try_get("label")?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }

            fn pattern_from_row(row: &$row) -> StoreResult<StoredPattern> {
                let named = |column: &str| -> StoreResult<serde_json::Value> {
                    Ok(serde_json::Value::String(row.try_get(column)?))
                };
                let corrupt = |e: serde_json::Error| StoreError::corrupt("scanner_rules", e.to_string());
                Ok(StoredPattern {
                    pattern: Pattern {
                        id: row.try_get("id")?,
                        pattern_type: serde_json::from_value(named("pattern_type")?).map_err(corrupt)?,
                        severity: serde_json::from_value(named("severity")?).map_err(corrupt)?,
                        pattern: row.try_get("pattern")?,
                        flags: row.try_get("flags")?,
                        description: row.try_get("description")?,
                        enabled: row.try_get("enabled")?,
                    },
                    updated_by: row.try_get("updated_by")?,
                    updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
                })
            }

            fn audit_from_row(row: &$row) -> StoreResult<AuditEntry> {
                Ok(AuditEntry {
                    seq: row.try_get("seq")?,
                    at: Timestamp::from_millis(row.try_get("at")?),
                    actor: row.try_get("actor")?,
                    action: row.try_get("action")?,
                    target_kind: row.try_get("target_kind")?,
                    target_id: row.try_get("target_id")?,
                    detail: from_json_text("audit_log", &row.try_get::<String, _>("detail")?)?,
                })
            }

            async fn reseal_column(
                &self,
                table: &'static str,
                column: &'static str,
                select_sql: &str,
                update_sql: &str,
            ) -> StoreResult<u64> {
                let rows = sqlx::query(select_sql).fetch_all(&self.pool).await?;
                let mut resealed = 0;
                for row in rows {
                    let id: String = row.try_get("id")?;
                    let stored: String = row.try_get("sealed")?;
                    let envelope = crate::secret::Envelope::from_stored(&stored)?;
                    if envelope.version == self.keyring.current_version() {
                        continue;
                    }
                    let owner = SecretOwner {
                        table,
                        column,
                        row_id: &id,
                    };
                    let plaintext = self.keyring.open(owner, &envelope)?;
                    let sealed = self.keyring.seal(owner, &plaintext)?.to_stored()?;
                    // Only replace the value we opened; a concurrent write wins.
                    let done = sqlx::query(update_sql)
                        .bind(&sealed)
                        .bind(&id)
                        .bind(&stored)
                        .execute(&self.pool)
                        .await?;
                    resealed += done.rows_affected();
                }
                Ok(resealed)
            }
        }

        #[async_trait::async_trait]
        impl ProviderCredentialStore for $store {
            async fn create_provider_credential(
                &self,
                provider: &str,
                scope: &ScopeRef,
                label: &str,
                api_key: &SecretString,
            ) -> StoreResult<ProviderCredential> {
                limits::short_text("provider", provider)?;
                limits::short_text("label", label)?;
                if api_key.expose().is_empty() || api_key.expose().len() > 8 * 1024 {
                    return Err(StoreError::invalid("api key", "must be 1-8192 bytes"));
                }
                let (scope, scope_id, _) = scope_ref_columns(scope)?;
                let id = new_id();
                let sealed = self.keyring.seal_string(
                    SecretOwner {
                        table: "provider_credentials",
                        column: "key_envelope",
                        row_id: &id,
                    },
                    api_key,
                )?;
                let row = sqlx::query(
                    "INSERT INTO provider_credentials (id, provider, scope, scope_id, label, \
                     key_envelope, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *",
                )
                .bind(&id)
                .bind(provider)
                .bind(scope.as_str())
                .bind(scope_id)
                .bind(label)
                .bind(&sealed)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_one(&self.pool)
                .await
                .map_err(|e| map_write("provider credential", label, e))?;
                Self::credential_from_row(&row)
            }

            async fn list_provider_credentials(&self) -> StoreResult<Vec<ProviderCredential>> {
                let rows = sqlx::query("SELECT * FROM provider_credentials ORDER BY created_at, id")
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::credential_from_row).collect()
            }

            async fn replace_provider_key(
                &self,
                id: &str,
                api_key: &SecretString,
            ) -> StoreResult<()> {
                if api_key.expose().is_empty() || api_key.expose().len() > 8 * 1024 {
                    return Err(StoreError::invalid("api key", "must be 1-8192 bytes"));
                }
                let sealed = self.keyring.seal_string(
                    SecretOwner {
                        table: "provider_credentials",
                        column: "key_envelope",
                        row_id: id,
                    },
                    api_key,
                )?;
                let done = sqlx::query(
                    "UPDATE provider_credentials SET key_envelope = $1 WHERE id = $2",
                )
                .bind(&sealed)
                .bind(id)
                .execute(&self.pool)
                .await?;
                if done.rows_affected() == 0 {
                    return Err(StoreError::not_found("provider credential", id));
                }
                Ok(())
            }

            async fn get_provider_credential(&self, id: &str) -> StoreResult<ProviderCredential> {
                let row = sqlx::query("SELECT * FROM provider_credentials WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("provider credential", id))?;
                Self::credential_from_row(&row)
            }

            async fn open_provider_credential(&self, id: &str) -> StoreResult<SecretString> {
                let sealed: String = sqlx::query_scalar(
                    "SELECT key_envelope FROM provider_credentials WHERE id = $1",
                )
                .bind(id)
                .fetch_optional(&self.pool)
                .await?
                .ok_or_else(|| StoreError::not_found("provider credential", id))?;
                self.keyring.open_string(
                    SecretOwner {
                        table: "provider_credentials",
                        column: "key_envelope",
                        row_id: id,
                    },
                    &sealed,
                )
            }
        }

        #[async_trait::async_trait]
        impl SecretRotation for $store {
            async fn rotate_secrets(&self) -> StoreResult<u64> {
                let connections = self
                    .reseal_column(
                        "connections",
                        "token_envelope",
                        "SELECT id, token_envelope AS sealed FROM connections \
                         WHERE token_envelope IS NOT NULL",
                        "UPDATE connections SET token_envelope = $1 WHERE id = $2 \
                         AND token_envelope = $3",
                    )
                    .await?;
                let credentials = self
                    .reseal_column(
                        "provider_credentials",
                        "key_envelope",
                        "SELECT id, key_envelope AS sealed FROM provider_credentials",
                        "UPDATE provider_credentials SET key_envelope = $1 WHERE id = $2 \
                         AND key_envelope = $3",
                    )
                    .await?;
                let triggers = self
                    .reseal_column(
                        "triggers",
                        "secret_envelope",
                        "SELECT id, secret_envelope AS sealed FROM triggers",
                        "UPDATE triggers SET secret_envelope = $1 WHERE id = $2 \
                         AND secret_envelope = $3",
                    )
                    .await?;
                Ok(connections + credentials + triggers)
            }
        }

        #[async_trait::async_trait]
        impl ScannerPatternStore for $store {
            async fn put_pattern(
                &self,
                pattern: &Pattern,
                actor: Option<&str>,
            ) -> StoreResult<StoredPattern> {
                limits::short_text("pattern id", &pattern.id)?;
                limits::long_text("flags", &pattern.flags)?;
                if pattern.flags.len() > 16 {
                    return Err(StoreError::invalid("flags", "must be at most 16 letters"));
                }
                limits::long_text("description", &pattern.description)?;
                if pattern.pattern.is_empty() || pattern.pattern.len() > 4096 {
                    return Err(StoreError::invalid("pattern", "must be 1-4096 bytes"));
                }
                limits::long_text("pattern", &pattern.pattern)?;
                let row = sqlx::query(
                    "INSERT INTO scanner_rules (id, pattern_type, severity, pattern, flags, \
                     description, enabled, updated_by, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO UPDATE SET \
                     pattern_type = excluded.pattern_type, severity = excluded.severity, \
                     pattern = excluded.pattern, flags = excluded.flags, \
                     description = excluded.description, enabled = excluded.enabled, \
                     updated_by = excluded.updated_by, updated_at = excluded.updated_at \
                     RETURNING *",
                )
                .bind(&pattern.id)
                .bind(pattern.pattern_type.as_str())
                .bind(pattern.severity.as_str())
                .bind(&pattern.pattern)
                .bind(&pattern.flags)
                .bind(&pattern.description)
                .bind(pattern.enabled)
                .bind(actor)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_one(&self.pool)
                .await
                .map_err(|e| map_write("scanner rule", &pattern.id, e))?;
                Self::pattern_from_row(&row)
            }

            async fn list_patterns(&self) -> StoreResult<Vec<StoredPattern>> {
                let rows = sqlx::query("SELECT * FROM scanner_rules ORDER BY id")
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::pattern_from_row).collect()
            }

            async fn delete_pattern(&self, id: &str) -> StoreResult<bool> {
                let done = sqlx::query("DELETE FROM scanner_rules WHERE id = $1")
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                Ok(done.rows_affected() > 0)
            }
        }

        #[async_trait::async_trait]
        impl OutcomeLedger for $store {
            async fn claim_outcome(
                &self,
                token: &LeaseToken,
                effect_key: &str,
            ) -> StoreResult<OutcomeClaim> {
                limits::short_text("effect key", effect_key)?;
                let mut tx = self.fenced(token).await?;
                let inserted = sqlx::query(
                    "INSERT INTO outcome_ledger (run_id, effect_key, state, created_at) \
                     VALUES ($1, $2, 'PENDING', $3) ON CONFLICT (run_id, effect_key) DO NOTHING",
                )
                .bind(&token.run_id)
                .bind(effect_key)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .execute(&mut *tx)
                .await
                .map_err(|e| map_write("outcome", effect_key, e))?;
                if inserted.rows_affected() == 1 {
                    tx.commit().await?;
                    return Ok(OutcomeClaim::Claimed);
                }
                let row = sqlx::query(
                    "SELECT state, result FROM outcome_ledger WHERE run_id = $1 AND effect_key = $2",
                )
                .bind(&token.run_id)
                .bind(effect_key)
                .fetch_one(&mut *tx)
                .await?;
                tx.commit().await?;
                let state: String = row.try_get("state")?;
                let result: Option<String> = row.try_get("result")?;
                match (parse_stored::<OutcomeState>("outcome_ledger", &state)?, result) {
                    (OutcomeState::Done, Some(result)) => {
                        Ok(OutcomeClaim::Done(from_json_text("outcome_ledger", &result)?))
                    }
                    _ => Ok(OutcomeClaim::Ambiguous),
                }
            }

            async fn release_outcome(&self, token: &LeaseToken, effect_key: &str) -> StoreResult<()> {
                limits::short_text("effect key", effect_key)?;
                let mut tx = self.fenced(token).await?;
                let released = sqlx::query(
                    "DELETE FROM outcome_ledger \
                     WHERE run_id = $1 AND effect_key = $2 AND state = 'PENDING'",
                )
                .bind(&token.run_id)
                .bind(effect_key)
                .execute(&mut *tx)
                .await?;
                if released.rows_affected() != 1 {
                    tx.rollback().await?;
                    return Err(StoreError::Conflict {
                        entity: "outcome",
                        detail: format!("{effect_key} is not pending"),
                    });
                }
                tx.commit().await?;
                Ok(())
            }

            async fn outcomes_of(&self, run_id: &str) -> StoreResult<Vec<OutcomeRecord>> {
                limits::short_text("run id", run_id)?;
                let rows = sqlx::query(
                    "SELECT effect_key, state, result, created_at, done_at FROM outcome_ledger \
                     WHERE run_id = $1 ORDER BY created_at, effect_key",
                )
                .bind(run_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|row| {
                        let result: Option<String> = row.try_get("result")?;
                        let done_at: Option<i64> = row.try_get("done_at")?;
                        Ok(OutcomeRecord {
                            effect_key: row.try_get("effect_key")?,
                            state: parse_stored("outcome_ledger", &row.try_get::<String, _>("state")?)?,
                            result: result
                                .map(|text| from_json_text("outcome_ledger", &text))
                                .transpose()?,
                            claimed_at: Timestamp::from_millis(row.try_get("created_at")?),
                            done_at: done_at.map(Timestamp::from_millis),
                        })
                    })
                    .collect()
            }

            #[tracing::instrument(level = "info", skip(self, resolve), fields(run_id = %resolve.run_id, key = %resolve.effect_key))]
            async fn resolve_outcome(&self, resolve: &ResolveOutcome) -> StoreResult<OutcomeResolved> {
                let run_id = resolve.run_id.as_str();
                let key = resolve.effect_key.as_str();
                limits::short_text("run id", run_id)?;
                limits::short_text("effect key", key)?;
                let made = match &resolve.resolution {
                    OutcomeResolution::Happened(result) => {
                        Some(limits::json_text("outcome result", result)?)
                    }
                    OutcomeResolution::DidNotHappen => None,
                };
                let now = Timestamp::now(&*self.clock);
                let mut tx = self.pool.begin().await?;
                // The queue row first, held for the transaction: no worker takes the run while
                // its claim is being answered.
                sqlx::query("UPDATE run_queue SET state = state WHERE run_id = $1")
                    .bind(run_id)
                    .execute(&mut *tx)
                    .await?;
                let run = sqlx::query(
                    "SELECT status, ended_at, org_id, cost_micros, input_tokens, output_tokens \
                     FROM workflow_runs WHERE id = $1",
                )
                .bind(run_id)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(run) = run else {
                    tx.rollback().await?;
                    return Err(StoreError::not_found("run", run_id));
                };
                let state: Option<String> = sqlx::query_scalar(
                    "SELECT state FROM outcome_ledger WHERE run_id = $1 AND effect_key = $2",
                )
                .bind(run_id)
                .bind(key)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(state) = state else {
                    tx.rollback().await?;
                    return Err(StoreError::not_found("outcome", key));
                };
                if parse_stored::<OutcomeState>("outcome_ledger", &state)? != OutcomeState::Pending {
                    tx.rollback().await?;
                    return Err(StoreError::Conflict {
                        entity: "outcome",
                        detail: format!("{key} is not pending: its result was recorded"),
                    });
                }
                let held: Option<i64> = sqlx::query_scalar(&format!(
                    "SELECT claim_count FROM run_queue WHERE run_id = $1 AND state = 'LEASED' \
                     AND lease_until > {now}",
                    now = Self::NOW_MS
                ))
                .bind(run_id)
                .fetch_optional(&mut *tx)
                .await?;
                if held.is_some() {
                    tx.rollback().await?;
                    return Err(StoreError::Conflict {
                        entity: "outcome",
                        detail: format!(
                            "a worker holds run {run_id}; it may still record {key} itself"
                        ),
                    });
                }
                match &made {
                    Some(result) => {
                        sqlx::query(
                            "UPDATE outcome_ledger SET state = 'DONE', result = $1, done_at = $2 \
                             WHERE run_id = $3 AND effect_key = $4 AND state = 'PENDING'",
                        )
                        .bind(result)
                        .bind(now.as_millis())
                        .bind(run_id)
                        .bind(key)
                        .execute(&mut *tx)
                        .await?;
                    }
                    None => {
                        sqlx::query(
                            "DELETE FROM outcome_ledger \
                             WHERE run_id = $1 AND effect_key = $2 AND state = 'PENDING'",
                        )
                        .bind(run_id)
                        .bind(key)
                        .execute(&mut *tx)
                        .await?;
                    }
                }
                let status: String = run.try_get("status")?;
                let ended_at: Option<i64> = run.try_get("ended_at")?;
                let rewind = &resolve.rewind;
                let reopen = status == RunStatus::FAILED.as_str()
                    && ended_at.is_some()
                    && !rewind.journal_seqs.is_empty();
                let Some(ended_at) = ended_at.filter(|_| reopen) else {
                    tx.commit().await?;
                    return Ok(OutcomeResolved::Recorded);
                };
                for seq in &rewind.journal_seqs {
                    sqlx::query("DELETE FROM run_journal WHERE run_id = $1 AND seq = $2")
                        .bind(run_id)
                        .bind(seq)
                        .execute(&mut *tx)
                        .await?;
                }
                for recording_id in &rewind.recording_ids {
                    limits::short_text("recording id", recording_id)?;
                    sqlx::query(
                        "UPDATE workflow_steps SET status = 'RUNNING', output = 'null', \
                         ended_at = NULL WHERE run_id = $1 AND recording_id = $2 \
                         AND status = 'FAILED'",
                    )
                    .bind(run_id)
                    .bind(recording_id)
                    .execute(&mut *tx)
                    .await?;
                }
                // The end billed the run's totals to its org's month once; reopened, it is
                // billed again by its next end, so this end's billing is taken back.
                let org_id: Option<String> = run.try_get("org_id")?;
                if let Some(org_id) = &org_id {
                    sqlx::query(
                        "UPDATE org_monthly_usage SET cost_micros = cost_micros - $1, \
                         input_tokens = input_tokens - $2, output_tokens = output_tokens - $3, \
                         runs_finalized = runs_finalized - 1 \
                         WHERE org_id = $4 AND year_month = $5",
                    )
                    .bind(run.try_get::<i64, _>("cost_micros")?)
                    .bind(run.try_get::<i64, _>("input_tokens")?)
                    .bind(run.try_get::<i64, _>("output_tokens")?)
                    .bind(org_id)
                    .bind(Timestamp::from_millis(ended_at).year_month())
                    .execute(&mut *tx)
                    .await?;
                }
                sqlx::query(
                    "UPDATE workflow_runs SET status = $1, ended_at = NULL, result = NULL, \
                     updated_at = $2 WHERE id = $3",
                )
                .bind(RunStatus::Running.as_str())
                .bind(now.as_millis())
                .bind(run_id)
                .execute(&mut *tx)
                .await?;
                let queued = sqlx::query(&format!(
                    "UPDATE run_queue SET state = 'RUNNABLE', worker = NULL, lease_until = NULL, \
                     attempts = 0, available_at = {now} WHERE run_id = $1",
                    now = Self::NOW_MS
                ))
                .bind(run_id)
                .execute(&mut *tx)
                .await?;
                if queued.rows_affected() != 1 {
                    tx.rollback().await?;
                    return Err(StoreError::Conflict {
                        entity: "run",
                        detail: format!("run {run_id} was never queued: it cannot be resumed"),
                    });
                }
                self.wake_in_tx(&mut tx, run_id).await?;
                tx.commit().await?;
                self.woke();
                Ok(OutcomeResolved::Resumed)
            }

            async fn complete_outcome(
                &self,
                token: &LeaseToken,
                effect_key: &str,
                result: &serde_json::Value,
            ) -> StoreResult<()> {
                limits::short_text("effect key", effect_key)?;
                let result = limits::json_text("outcome result", result)?;
                let mut tx = self.fenced(token).await?;
                let done = sqlx::query(
                    "UPDATE outcome_ledger SET state = 'DONE', result = $1, done_at = $2 \
                     WHERE run_id = $3 AND effect_key = $4 AND state = 'PENDING'",
                )
                .bind(&result)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .bind(&token.run_id)
                .bind(effect_key)
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() != 1 {
                    tx.rollback().await?;
                    return Err(StoreError::Conflict {
                        entity: "outcome",
                        detail: format!("{effect_key} is not pending"),
                    });
                }
                tx.commit().await?;
                Ok(())
            }
        }

        #[async_trait::async_trait]
        impl AuditLog for $store {
            async fn append_audit(&self, entry: NewAuditEntry) -> StoreResult<AuditEntry> {
                limits::short_text("actor", &entry.actor)?;
                limits::short_text("action", &entry.action)?;
                limits::short_text("target kind", &entry.target_kind)?;
                limits::short_text("target id", &entry.target_id)?;
                let detail = limits::json_text("audit detail", &entry.detail)?;
                let row = sqlx::query(
                    "INSERT INTO audit_log (at, actor, action, target_kind, target_id, detail) \
                     VALUES ($1, $2, $3, $4, $5, $6) RETURNING *",
                )
                .bind(Timestamp::now(&*self.clock).as_millis())
                .bind(&entry.actor)
                .bind(&entry.action)
                .bind(&entry.target_kind)
                .bind(&entry.target_id)
                .bind(&detail)
                .fetch_one(&self.pool)
                .await?;
                Self::audit_from_row(&row)
            }

            async fn audit_for(
                &self,
                target_kind: &str,
                target_id: &str,
            ) -> StoreResult<Vec<AuditEntry>> {
                let rows = sqlx::query(
                    "SELECT * FROM audit_log WHERE target_kind = $1 AND target_id = $2 ORDER BY seq",
                )
                .bind(target_kind)
                .bind(target_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::audit_from_row).collect()
            }
        }
    };
}
