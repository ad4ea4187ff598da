//! Agents, skills, credentials, scanner patterns, the outcome ledger, the audit log and key
//! rotation, written once for both backends.

macro_rules! impl_library_stores {
    ($store:ty, $row:ty) => {
        impl $store {
            fn agent_from_row(row: &$row) -> StoreResult<AgentVersion> {
                let scope: String = row.try_get("scope")?;
                let reasoning: Option<String> = row.try_get("reasoning")?;
                Ok(AgentVersion {
                    id: row.try_get("id")?,
                    key: row.try_get("key")?,
                    scope: parse_scope("agents", &scope)?,
                    scope_id: row.try_get("scope_id")?,
                    version: row.try_get("version")?,
                    is_active: row.try_get("is_active")?,
                    definition: AgentDefinition {
                        model: row.try_get("model")?,
                        system_prompt: row.try_get("system_prompt")?,
                        credential_id: row.try_get("credential_id")?,
                        tool_keys: from_json_text("agents", &row.try_get::<String, _>("tool_keys")?)?,
                        skill_ids: from_json_text("agents", &row.try_get::<String, _>("skill_ids")?)?,
                        runtime: row.try_get("runtime")?,
                        reasoning: reasoning
                            .map(|r| {
                                Reasoning::parse(&r).ok_or_else(|| {
                                    StoreError::corrupt("agents", format!("unexpected value {r:?}"))
                                })
                            })
                            .transpose()?,
                    },
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }

            fn skill_from_row(row: &$row) -> StoreResult<Skill> {
                let scope: String = row.try_get("scope")?;
                Ok(Skill {
                    id: row.try_get("id")?,
                    name: row.try_get("name")?,
                    scope: parse_scope("skills", &scope)?,
                    scope_id: row.try_get("scope_id")?,
                    is_active: row.try_get("is_active")?,
                    current_revision: row.try_get("current_revision")?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }

            fn skill_revision_from_row(row: &$row) -> StoreResult<SkillRevision> {
                Ok(SkillRevision {
                    skill_id: row.try_get("skill_id")?,
                    revision: row.try_get("revision")?,
                    text: row.try_get("text")?,
                    description: row.try_get("description")?,
                    hash: row.try_get("hash")?,
                    author: row.try_get("author")?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }

            fn credential_from_row(row: &$row) -> StoreResult<ProviderCredential> {
                let scope: String = row.try_get("scope")?;
                Ok(ProviderCredential {
                    id: row.try_get("id")?,
                    provider: row.try_get("provider")?,
                    scope: parse_scope("provider_credentials", &scope)?,
                    scope_id: row.try_get("scope_id")?,
                    label: row.try_get("label")?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
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

            fn validate_definition(definition: &AgentDefinition) -> StoreResult<(String, String)> {
                limits::optional_short_text("model", definition.model.as_deref())?;
                limits::long_text("system prompt", &definition.system_prompt)?;
                limits::short_text("runtime", &definition.runtime)?;
                for key in definition.tool_keys.iter().chain(&definition.skill_ids) {
                    limits::short_text("tool or skill key", key)?;
                }
                Ok((
                    to_json_text("tool keys", &definition.tool_keys)?,
                    to_json_text("skill ids", &definition.skill_ids)?,
                ))
            }

            async fn insert_agent_version(
                &self,
                tx: &mut sqlx::Transaction<'_, DbKind>,
                key: &str,
                scope: Scope,
                scope_id: Option<&str>,
                version: i64,
                definition: &AgentDefinition,
            ) -> StoreResult<AgentVersion> {
                let (tool_keys, skill_ids) = Self::validate_definition(definition)?;
                let scope_key = scope_key(scope, scope_id)?;
                let id = new_id();
                let row = sqlx::query(
                    "INSERT INTO agents (id, key, scope, scope_id, scope_key, version, is_current, \
                     is_active, model, system_prompt, credential_id, tool_keys, skill_ids, \
                     runtime, reasoning, created_at) VALUES ($1, $2, $3, $4, $5, $6, TRUE, TRUE, \
                     $7, $8, $9, $10, $11, $12, $13, $14) RETURNING *",
                )
                .bind(&id)
                .bind(key)
                .bind(scope.as_str())
                .bind(scope_id)
                .bind(&scope_key)
                .bind(version)
                .bind(&definition.model)
                .bind(&definition.system_prompt)
                .bind(&definition.credential_id)
                .bind(&tool_keys)
                .bind(&skill_ids)
                .bind(&definition.runtime)
                .bind(definition.reasoning.map(Reasoning::as_str))
                .bind(self.clock.now().as_millis())
                .fetch_one(&mut **tx)
                .await
                .map_err(|e| map_write("agent", key, e))?;
                Self::agent_from_row(&row)
            }

            async fn set_agent_active(
                &self,
                key: &str,
                scope: Scope,
                scope_id: Option<&str>,
                active: bool,
            ) -> StoreResult<()> {
                let scope_key = scope_key(scope, scope_id)?;
                let done = sqlx::query(
                    "UPDATE agents SET is_active = $1 WHERE key = $2 AND scope = $3 \
                     AND scope_key = $4 AND is_current",
                )
                .bind(active)
                .bind(key)
                .bind(scope.as_str())
                .bind(&scope_key)
                .execute(&self.pool)
                .await?;
                if done.rows_affected() == 0 {
                    return Err(StoreError::not_found("agent", key));
                }
                Ok(())
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
        impl AgentStore for $store {
            async fn create_agent(
                &self,
                key: &str,
                scope: Scope,
                scope_id: Option<&str>,
                definition: AgentDefinition,
            ) -> StoreResult<AgentVersion> {
                limits::short_text("agent key", key)?;
                let mut tx = self.pool.begin().await?;
                let agent = self
                    .insert_agent_version(&mut tx, key, scope, scope_id, 1, &definition)
                    .await?;
                tx.commit().await?;
                Ok(agent)
            }

            async fn update_agent(
                &self,
                key: &str,
                scope: Scope,
                scope_id: Option<&str>,
                expected_version: i64,
                definition: AgentDefinition,
            ) -> StoreResult<AgentVersion> {
                limits::short_text("agent key", key)?;
                let scope_key = scope_key(scope, scope_id)?;
                let mut tx = self.pool.begin().await?;
                // Retiring the expected current version first is the optimistic check: a
                // concurrent edit already retired it and this update then touches no row.
                let retired = sqlx::query(
                    "UPDATE agents SET is_current = FALSE WHERE key = $1 AND scope = $2 \
                     AND scope_key = $3 AND version = $4 AND is_current AND is_active",
                )
                .bind(key)
                .bind(scope.as_str())
                .bind(&scope_key)
                .bind(expected_version)
                .execute(&mut *tx)
                .await?;
                if retired.rows_affected() != 1 {
                    tx.rollback().await?;
                    let current = self.current_agent(key, scope, scope_id).await?;
                    let detail = if current.is_active {
                        format!(
                            "AGENT_CHANGED: current version is {}, not {expected_version}",
                            current.version
                        )
                    } else {
                        "AGENT_INACTIVE: the agent is deactivated".to_owned()
                    };
                    return Err(StoreError::Conflict {
                        entity: "agent",
                        detail,
                    });
                }
                let agent = self
                    .insert_agent_version(
                        &mut tx,
                        key,
                        scope,
                        scope_id,
                        expected_version + 1,
                        &definition,
                    )
                    .await?;
                tx.commit().await?;
                Ok(agent)
            }

            async fn deactivate_agent(
                &self,
                key: &str,
                scope: Scope,
                scope_id: Option<&str>,
            ) -> StoreResult<()> {
                self.set_agent_active(key, scope, scope_id, false).await
            }

            async fn reactivate_agent(
                &self,
                key: &str,
                scope: Scope,
                scope_id: Option<&str>,
            ) -> StoreResult<()> {
                self.set_agent_active(key, scope, scope_id, true).await
            }

            async fn current_agent(
                &self,
                key: &str,
                scope: Scope,
                scope_id: Option<&str>,
            ) -> StoreResult<AgentVersion> {
                let scope_key = scope_key(scope, scope_id)?;
                let row = sqlx::query(
                    "SELECT * FROM agents WHERE key = $1 AND scope = $2 AND scope_key = $3 \
                     AND is_current",
                )
                .bind(key)
                .bind(scope.as_str())
                .bind(&scope_key)
                .fetch_optional(&self.pool)
                .await?
                .ok_or_else(|| StoreError::not_found("agent", key))?;
                Self::agent_from_row(&row)
            }

            async fn get_agent_version(&self, id: &str) -> StoreResult<AgentVersion> {
                let row = sqlx::query("SELECT * FROM agents WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("agent version", id))?;
                Self::agent_from_row(&row)
            }
        }

        #[async_trait::async_trait]
        impl SkillStore for $store {
            async fn create_skill(
                &self,
                name: &str,
                scope: Scope,
                scope_id: Option<&str>,
                text: &str,
                description: &str,
                author: Option<&str>,
            ) -> StoreResult<(Skill, SkillRevision)> {
                limits::short_text("skill name", name)?;
                limits::long_text("skill text", text)?;
                limits::long_text("skill description", description)?;
                limits::optional_short_text("author", author)?;
                let scope_key = scope_key(scope, scope_id)?;
                let id = new_id();
                let now = self.clock.now().as_millis();
                let mut tx = self.pool.begin().await?;
                let skill = sqlx::query(
                    "INSERT INTO skills (id, name, scope, scope_id, scope_key, is_active, \
                     current_revision, created_at) VALUES ($1, $2, $3, $4, $5, TRUE, 1, $6) \
                     RETURNING *",
                )
                .bind(&id)
                .bind(name)
                .bind(scope.as_str())
                .bind(scope_id)
                .bind(&scope_key)
                .bind(now)
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| map_write("skill", name, e))?;
                let revision = sqlx::query(
                    "INSERT INTO skill_revisions (skill_id, revision, text, description, hash, \
                     author, created_at) VALUES ($1, 1, $2, $3, $4, $5, $6) RETURNING *",
                )
                .bind(&id)
                .bind(text)
                .bind(description)
                .bind(sha256_hex(text.as_bytes()))
                .bind(author)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok((Self::skill_from_row(&skill)?, Self::skill_revision_from_row(&revision)?))
            }

            async fn revise_skill(
                &self,
                skill_id: &str,
                expected_revision: i64,
                text: &str,
                description: &str,
                author: Option<&str>,
            ) -> StoreResult<SkillRevision> {
                limits::long_text("skill text", text)?;
                limits::long_text("skill description", description)?;
                limits::optional_short_text("author", author)?;
                let mut tx = self.pool.begin().await?;
                let bumped = sqlx::query(
                    "UPDATE skills SET current_revision = current_revision + 1 \
                     WHERE id = $1 AND current_revision = $2",
                )
                .bind(skill_id)
                .bind(expected_revision)
                .execute(&mut *tx)
                .await?;
                if bumped.rows_affected() != 1 {
                    tx.rollback().await?;
                    let skill = self.get_skill(skill_id).await?;
                    return Err(StoreError::Conflict {
                        entity: "skill",
                        detail: format!(
                            "SKILL_CHANGED: current revision is {}, not {expected_revision}",
                            skill.current_revision
                        ),
                    });
                }
                let row = sqlx::query(
                    "INSERT INTO skill_revisions (skill_id, revision, text, description, hash, \
                     author, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *",
                )
                .bind(skill_id)
                .bind(expected_revision + 1)
                .bind(text)
                .bind(description)
                .bind(sha256_hex(text.as_bytes()))
                .bind(author)
                .bind(self.clock.now().as_millis())
                .fetch_one(&mut *tx)
                .await?;
                tx.commit().await?;
                Self::skill_revision_from_row(&row)
            }

            async fn get_skill(&self, id: &str) -> StoreResult<Skill> {
                let row = sqlx::query("SELECT * FROM skills WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("skill", id))?;
                Self::skill_from_row(&row)
            }

            async fn get_skill_revision(
                &self,
                skill_id: &str,
                revision: i64,
            ) -> StoreResult<SkillRevision> {
                let row = sqlx::query(
                    "SELECT * FROM skill_revisions WHERE skill_id = $1 AND revision = $2",
                )
                .bind(skill_id)
                .bind(revision)
                .fetch_optional(&self.pool)
                .await?
                .ok_or_else(|| StoreError::not_found("skill revision", format!("{skill_id}@{revision}")))?;
                Self::skill_revision_from_row(&row)
            }
        }

        #[async_trait::async_trait]
        impl ProviderCredentialStore for $store {
            async fn create_provider_credential(
                &self,
                provider: &str,
                scope: Scope,
                scope_id: Option<&str>,
                label: &str,
                api_key: &SecretString,
            ) -> StoreResult<ProviderCredential> {
                limits::short_text("provider", provider)?;
                limits::short_text("label", label)?;
                if api_key.expose().is_empty() || api_key.expose().len() > 8 * 1024 {
                    return Err(StoreError::invalid("api key", "must be 1-8192 bytes"));
                }
                scope_key(scope, scope_id)?;
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
                .bind(self.clock.now().as_millis())
                .fetch_one(&self.pool)
                .await
                .map_err(|e| map_write("provider credential", label, e))?;
                Self::credential_from_row(&row)
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
                Ok(connections + credentials)
            }
        }

        #[async_trait::async_trait]
        impl ScannerPatternStore for $store {
            async fn upsert_pattern(&self, pattern: &ScannerPattern) -> StoreResult<()> {
                limits::short_text("pattern key", &pattern.key)?;
                limits::short_text("severity", &pattern.severity)?;
                if pattern.pattern.is_empty() || pattern.pattern.len() > 4096 {
                    return Err(StoreError::invalid("pattern", "must be 1-4096 bytes"));
                }
                limits::long_text("pattern", &pattern.pattern)?;
                sqlx::query(
                    "INSERT INTO scanner_patterns (key, category, pattern, severity, is_active) \
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key) DO UPDATE SET \
                     category = excluded.category, pattern = excluded.pattern, \
                     severity = excluded.severity, is_active = excluded.is_active",
                )
                .bind(&pattern.key)
                .bind(pattern.category.as_str())
                .bind(&pattern.pattern)
                .bind(&pattern.severity)
                .bind(pattern.is_active)
                .execute(&self.pool)
                .await
                .map_err(|e| map_write("scanner pattern", &pattern.key, e))?;
                Ok(())
            }

            async fn active_patterns(
                &self,
                category: PatternCategory,
            ) -> StoreResult<Vec<ScannerPattern>> {
                let rows = sqlx::query(
                    "SELECT * FROM scanner_patterns WHERE category = $1 AND is_active ORDER BY key",
                )
                .bind(category.as_str())
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|row| {
                        let category: String = row.try_get("category")?;
                        Ok(ScannerPattern {
                            key: row.try_get("key")?,
                            category: parse_stored("scanner_patterns", &category)?,
                            pattern: row.try_get("pattern")?,
                            severity: row.try_get("severity")?,
                            is_active: row.try_get("is_active")?,
                        })
                    })
                    .collect()
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
                .bind(self.clock.now().as_millis())
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
                .bind(self.clock.now().as_millis())
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
                .bind(self.clock.now().as_millis())
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
