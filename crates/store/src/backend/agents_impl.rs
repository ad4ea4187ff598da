//! The agent library's storage seams (`auto_swe_agents::{AgentStore, SkillStore,
//! CredentialStore}`) over the agents, skills and provider credentials tables, written once for
//! both backends. The rows hold the agents crate's own model; nothing is copied into a second
//! shape on the way.

macro_rules! impl_agent_library {
    ($store:ty, $row:ty) => {
        impl $store {
            fn library_agent_from_row(row: &$row) -> StoreResult<AgentVersion> {
                let scope: String = row.try_get("scope")?;
                let scope = parse_scope_ref("agents", &scope, row.try_get("scope_id")?)?;
                let key: String = row.try_get("key")?;
                let mut version = AgentVersion::new(&key, scope);
                version.version = stored_number("agents", row.try_get("version")?)?;
                version.model_spec = row.try_get::<Option<String>, _>("model")?.map(ModelName);
                version.inherits_model_from = row.try_get("inherits_model_from")?;
                version.system_prompt = row.try_get("system_prompt")?;
                version.credential_id = row.try_get("credential_id")?;
                version.skill_refs =
                    from_json_text("agents", &row.try_get::<String, _>("skill_ids")?)?;
                version.tool_keys = row
                    .try_get::<Option<String>, _>("tool_keys")?
                    .map(|text| from_json_text("agents", &text))
                    .transpose()?;
                version.mcp_connection_id = row.try_get("mcp_connection_id")?;
                // An unknown stored runtime is no opinion, as the resolver reads it.
                version.runtime = row
                    .try_get::<Option<String>, _>("runtime")?
                    .and_then(|r| Runtime::parse_lenient(&r));
                // No opinion is stored as NULL; the column holds nothing else but a level.
                version.reasoning = match row.try_get::<Option<String>, _>("reasoning")? {
                    None => ReasoningLevel::None,
                    Some(r) => ReasoningLevel::parse(&r)
                        .filter(|level| level.is_set())
                        .ok_or_else(|| {
                            StoreError::corrupt("agents", format!("unexpected reasoning {r:?}"))
                        })?,
                };
                version.origin = row.try_get("origin")?;
                version.is_verified = row.try_get("is_verified")?;
                version.created_by = row.try_get("created_by")?;
                Ok(version)
            }

            fn library_skill_from_row(row: &$row) -> StoreResult<Skill> {
                let scope: String = row.try_get("scope")?;
                let scope =
                    parse_skill_scope(&scope, row.try_get("scope_id")?, row.try_get("org_id")?)?;
                let id: String = row.try_get("id")?;
                let name: String = row.try_get("name")?;
                let mut skill = Skill::new(&id, &name, scope);
                skill.description = row.try_get("description")?;
                skill.prompt_text = row.try_get("prompt_text")?;
                skill.is_built_in = row.try_get("is_built_in")?;
                skill.is_verified = row.try_get("is_verified")?;
                skill.is_active = row.try_get("is_active")?;
                skill.current_revision =
                    stored_number("skills", row.try_get("current_revision")?)?;
                skill.provenance = row
                    .try_get::<Option<String>, _>("provenance")?
                    .map(|text| from_json_text("skills", &text))
                    .transpose()?;
                Ok(skill)
            }

            fn library_revision_from_row(row: &$row) -> StoreResult<SkillRevision> {
                let skill_id: String = row.try_get("skill_id")?;
                let number = stored_number("skill_revisions", row.try_get("revision")?)?;
                let description: String = row.try_get("description")?;
                let text: String = row.try_get("text")?;
                let mut revision = SkillRevision::new(&skill_id, number, &description, &text);
                revision.content_hash = row.try_get("hash")?;
                revision.scan_warnings =
                    from_json_text("skill_revisions", &row.try_get::<String, _>("scan_warnings")?)?;
                revision.author = row.try_get("author")?;
                revision.provenance = row
                    .try_get::<Option<String>, _>("provenance")?
                    .map(|text| from_json_text("skill_revisions", &text))
                    .transpose()?;
                revision.reference_files = from_json_text(
                    "skill_revisions",
                    &row.try_get::<String, _>("reference_files")?,
                )?;
                Ok(revision)
            }

            async fn library_append(
                &self,
                next: &AgentVersion,
                expected_latest: Option<u32>,
            ) -> StoreResult<()> {
                limits::short_text("agent key", &next.key)?;
                let (scope, scope_id, scope_key) = scope_ref_columns(&next.scope)?;
                let expected = expected_latest.unwrap_or(0);
                if next.version != expected + 1 {
                    return Err(StoreError::Conflict {
                        entity: "agent",
                        detail: format!("version {} does not follow {expected}", next.version),
                    });
                }
                let model = next.model_spec.as_ref().map(|m| m.0.as_str());
                limits::optional_short_text("model", model)?;
                limits::optional_short_text(
                    "inherits model from",
                    next.inherits_model_from.as_deref(),
                )?;
                if let Some(prompt) = &next.system_prompt {
                    limits::long_text("system prompt", prompt)?;
                }
                limits::optional_short_text("credential id", next.credential_id.as_deref())?;
                limits::optional_short_text("mcp connection id", next.mcp_connection_id.as_deref())?;
                limits::optional_short_text("origin", next.origin.as_deref())?;
                limits::optional_short_text("created by", next.created_by.as_deref())?;
                for key in next.tool_keys.iter().flatten().chain(&next.skill_refs) {
                    limits::short_text("tool or skill key", key)?;
                }
                let tool_keys = next
                    .tool_keys
                    .as_ref()
                    .map(|keys| to_json_text("tool keys", keys))
                    .transpose()?;
                let skill_ids = to_json_text("skill ids", &next.skill_refs)?;
                let mut tx = self.pool.begin().await?;
                // Retiring the expected newest version first is the compare-and-set: a
                // concurrent append already retired it, and this one then touches no row. The
                // lineage's activation carries over to its new head.
                let active = match expected_latest {
                    None => true,
                    Some(latest) => {
                        let retired: Option<bool> = sqlx::query_scalar(
                            "UPDATE agents SET is_current = FALSE WHERE key = $1 AND scope = $2 \
                             AND scope_key = $3 AND version = $4 AND is_current \
                             RETURNING is_active",
                        )
                        .bind(&next.key)
                        .bind(scope.as_str())
                        .bind(&scope_key)
                        .bind(i64::from(latest))
                        .fetch_optional(&mut *tx)
                        .await?;
                        let Some(active) = retired else {
                            tx.rollback().await?;
                            return Err(StoreError::Conflict {
                                entity: "agent",
                                detail: format!("{} is no longer at version {latest}", next.key),
                            });
                        };
                        active
                    }
                };
                sqlx::query(
                    "INSERT INTO agents (id, key, scope, scope_id, scope_key, version, is_current, \
                     is_active, model, inherits_model_from, system_prompt, credential_id, \
                     tool_keys, skill_ids, mcp_connection_id, runtime, reasoning, origin, \
                     is_verified, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, TRUE, \
                     $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)",
                )
                .bind(new_id())
                .bind(&next.key)
                .bind(scope.as_str())
                .bind(scope_id)
                .bind(&scope_key)
                .bind(i64::from(next.version))
                .bind(active)
                .bind(model)
                .bind(&next.inherits_model_from)
                .bind(&next.system_prompt)
                .bind(&next.credential_id)
                .bind(&tool_keys)
                .bind(&skill_ids)
                .bind(&next.mcp_connection_id)
                .bind(next.runtime.map(Runtime::as_str))
                .bind(next.reasoning.is_set().then(|| next.reasoning.as_str()))
                .bind(&next.origin)
                .bind(next.is_verified)
                .bind(&next.created_by)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .execute(&mut *tx)
                .await
                .map_err(|e| map_write("agent", &next.key, e))?;
                tx.commit().await?;
                Ok(())
            }

            async fn library_lineage(
                &self,
                key: &str,
                scope: &ScopeRef,
                version: Option<u32>,
            ) -> StoreResult<Vec<$row>> {
                limits::short_text("agent key", key)?;
                let (scope, _, scope_key) = scope_ref_columns(scope)?;
                Ok(sqlx::query(
                    "SELECT * FROM agents WHERE key = $1 AND scope = $2 AND scope_key = $3 \
                     AND ($4 IS NULL OR version = $4) ORDER BY version",
                )
                .bind(key)
                .bind(scope.as_str())
                .bind(&scope_key)
                .bind(version.map(i64::from))
                .fetch_all(&self.pool)
                .await?)
            }

            /// Takes the library's write lock inside `tx`: skill writes that check names across
            /// every skill run one at a time.
            async fn library_lock(tx: &mut sqlx::Transaction<'_, DbKind>) -> StoreResult<()> {
                sqlx::query("UPDATE library_lock SET writes = writes + 1 WHERE id = 1")
                    .execute(&mut **tx)
                    .await?;
                Ok(())
            }

            async fn library_skills(
                tx: &mut sqlx::Transaction<'_, DbKind>,
                except: Option<&str>,
            ) -> StoreResult<Vec<Skill>> {
                let rows = sqlx::query("SELECT * FROM skills WHERE ($1 IS NULL OR id <> $1)")
                    .bind(except)
                    .fetch_all(&mut **tx)
                    .await?;
                rows.iter().map(Self::library_skill_from_row).collect()
            }

            async fn library_write_revision(
                &self,
                tx: &mut sqlx::Transaction<'_, DbKind>,
                revision: &SkillRevision,
            ) -> StoreResult<()> {
                limits::short_text("skill id", &revision.skill_id)?;
                limits::long_text("skill text", &revision.prompt_text)?;
                limits::long_text("skill description", &revision.description)?;
                limits::short_text("content hash", &revision.content_hash)?;
                limits::optional_short_text("author", revision.author.as_deref())?;
                let provenance = revision
                    .provenance
                    .as_ref()
                    .map(|p| to_json_text("provenance", p))
                    .transpose()?;
                sqlx::query(
                    "INSERT INTO skill_revisions (skill_id, revision, text, description, hash, \
                     author, scan_warnings, provenance, reference_files, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                )
                .bind(&revision.skill_id)
                .bind(i64::from(revision.revision))
                .bind(&revision.prompt_text)
                .bind(&revision.description)
                .bind(&revision.content_hash)
                .bind(&revision.author)
                .bind(to_json_text("scan warnings", &revision.scan_warnings)?)
                .bind(&provenance)
                .bind(to_json_text("reference files", &revision.reference_files)?)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .execute(&mut **tx)
                .await
                .map_err(|e| {
                    map_write("skill revision", &format!("{}@{}", revision.skill_id, revision.revision), e)
                })?;
                Ok(())
            }

            /// Writes `skill` (inserting it when `insert`, else replacing its row).
            async fn library_write_skill(
                &self,
                tx: &mut sqlx::Transaction<'_, DbKind>,
                skill: &Skill,
                insert: bool,
            ) -> StoreResult<()> {
                limits::short_text("skill id", &skill.id)?;
                limits::short_text("skill name", &skill.name)?;
                limits::long_text("skill text", &skill.prompt_text)?;
                limits::long_text("skill description", &skill.description)?;
                let (scope, scope_id, org_id) = skill_scope_columns(&skill.scope)?;
                let scope_key = scope_key(scope, scope_id)?;
                let provenance = skill
                    .provenance
                    .as_ref()
                    .map(|p| to_json_text("provenance", p))
                    .transpose()?;
                let sql = if insert {
                    "INSERT INTO skills (id, name, scope, scope_id, scope_key, org_id, \
                     description, prompt_text, is_built_in, is_verified, is_active, \
                     current_revision, provenance, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
                } else {
                    "UPDATE skills SET name = $2, scope = $3, scope_id = $4, scope_key = $5, \
                     org_id = $6, description = $7, prompt_text = $8, is_built_in = $9, \
                     is_verified = $10, is_active = $11, current_revision = $12, \
                     provenance = $13 WHERE id = $1"
                };
                let query = sqlx::query(sql)
                    .bind(&skill.id)
                    .bind(&skill.name)
                    .bind(scope.as_str())
                    .bind(scope_id)
                    .bind(&scope_key)
                    .bind(org_id)
                    .bind(&skill.description)
                    .bind(&skill.prompt_text)
                    .bind(skill.is_built_in)
                    .bind(skill.is_verified)
                    .bind(skill.is_active)
                    .bind(i64::from(skill.current_revision))
                    .bind(&provenance);
                let query = if insert {
                    query.bind(Timestamp::now(&*self.clock).as_millis())
                } else {
                    query
                };
                query
                    .execute(&mut **tx)
                    .await
                    .map_err(|e| map_write("skill", &skill.name, e))?;
                Ok(())
            }

            async fn library_create_skill(
                &self,
                skill: &Skill,
                first: &SkillRevision,
                conflicts: &(dyn for<'s> Fn(&'s [Skill]) -> Vec<String> + Send + Sync),
            ) -> StoreResult<Vec<String>> {
                limits::short_text("skill id", &skill.id)?;
                let mut tx = self.pool.begin().await?;
                Self::library_lock(&mut tx).await?;
                let taken: Option<String> = sqlx::query_scalar("SELECT id FROM skills WHERE id = $1")
                    .bind(&skill.id)
                    .fetch_optional(&mut *tx)
                    .await?;
                if taken.is_some() {
                    tx.rollback().await?;
                    return Err(StoreError::Conflict {
                        entity: "skill",
                        detail: format!("{} already exists", skill.id),
                    });
                }
                let found = conflicts(&Self::library_skills(&mut tx, None).await?);
                if !found.is_empty() {
                    tx.rollback().await?;
                    return Ok(found);
                }
                self.library_write_skill(&mut tx, skill, true).await?;
                self.library_write_revision(&mut tx, first).await?;
                tx.commit().await?;
                Ok(Vec::new())
            }

            async fn library_update_skill(
                &self,
                skill: &Skill,
                expected_revision: u32,
                revision: Option<&SkillRevision>,
                conflicts: &(dyn for<'s> Fn(&'s [Skill]) -> Vec<String> + Send + Sync),
            ) -> StoreResult<Vec<String>> {
                limits::short_text("skill id", &skill.id)?;
                let mut tx = self.pool.begin().await?;
                Self::library_lock(&mut tx).await?;
                let current: Option<i64> =
                    sqlx::query_scalar("SELECT current_revision FROM skills WHERE id = $1")
                        .bind(&skill.id)
                        .fetch_optional(&mut *tx)
                        .await?;
                let Some(current) = current else {
                    tx.rollback().await?;
                    return Err(StoreError::not_found("skill", &skill.id));
                };
                if current != i64::from(expected_revision) {
                    tx.rollback().await?;
                    return Err(StoreError::Conflict {
                        entity: "skill",
                        detail: format!("current revision is {current}, not {expected_revision}"),
                    });
                }
                let found = conflicts(&Self::library_skills(&mut tx, Some(&skill.id)).await?);
                if !found.is_empty() {
                    tx.rollback().await?;
                    return Ok(found);
                }
                if let Some(revision) = revision {
                    if revision.skill_id != skill.id {
                        tx.rollback().await?;
                        return Err(StoreError::invalid("skill revision", "names another skill"));
                    }
                    self.library_write_revision(&mut tx, revision).await?;
                }
                self.library_write_skill(&mut tx, skill, false).await?;
                tx.commit().await?;
                Ok(Vec::new())
            }

            async fn library_credential(
                &self,
                row: Option<$row>,
            ) -> StoreResult<Option<CredentialRef>> {
                let Some(row) = row else {
                    return Ok(None);
                };
                let id: String = row.try_get("id")?;
                let sealed: String = row.try_get("key_envelope")?;
                let owner = SecretOwner {
                    table: "provider_credentials",
                    column: "key_envelope",
                    row_id: &id,
                };
                // A credential whose key no longer opens is as good as absent.
                if self.keyring.open_string(owner, &sealed).is_err() {
                    tracing::warn!(credential_id = %id, "provider credential does not open");
                    return Ok(None);
                }
                let scope: String = row.try_get("scope")?;
                let scope =
                    parse_scope_ref("provider_credentials", &scope, row.try_get("scope_id")?)?;
                let provider: String = row.try_get("provider")?;
                Ok(Some(CredentialRef::new(&id, &provider, scope)))
            }
        }

        #[async_trait::async_trait]
        impl auto_swe_agents::AgentStore for $store {
            async fn heads(
                &self,
                key: &str,
                scopes: &[ScopeRef],
            ) -> Result<Vec<(ScopeRef, AgentLineageHead)>, LibraryStoreError> {
                limits::short_text("agent key", key)?;
                let rows = sqlx::query("SELECT * FROM agents WHERE key = $1 AND is_current")
                    .bind(key)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(StoreError::from)?;
                let mut heads = Vec::new();
                for row in &rows {
                    let latest = Self::library_agent_from_row(row)?;
                    if scopes.contains(&latest.scope) {
                        let active: bool = row.try_get("is_active").map_err(StoreError::from)?;
                        heads.push((latest.scope.clone(), AgentLineageHead { active, latest }));
                    }
                }
                Ok(heads)
            }

            async fn version(
                &self,
                key: &str,
                scope: &ScopeRef,
                version: u32,
            ) -> Result<Option<AgentVersion>, LibraryStoreError> {
                let rows = self.library_lineage(key, scope, Some(version)).await?;
                Ok(rows.first().map(Self::library_agent_from_row).transpose()?)
            }

            async fn history(
                &self,
                key: &str,
                scope: &ScopeRef,
            ) -> Result<Option<(bool, Vec<AgentVersion>)>, LibraryStoreError> {
                let rows = self.library_lineage(key, scope, None).await?;
                let Some(head) = rows.last() else {
                    return Ok(None);
                };
                let active: bool = head.try_get("is_active").map_err(StoreError::from)?;
                let versions = rows
                    .iter()
                    .map(Self::library_agent_from_row)
                    .collect::<StoreResult<Vec<_>>>()?;
                Ok(Some((active, versions)))
            }

            #[tracing::instrument(level = "debug", skip_all, fields(key = %next.key, scope = %next.scope, version = next.version))]
            async fn append(
                &self,
                next: AgentVersion,
                expected_latest: Option<u32>,
            ) -> Result<(), LibraryStoreError> {
                Ok(self.library_append(&next, expected_latest).await?)
            }

            #[tracing::instrument(level = "debug", skip_all, fields(key = %key, scope = %scope, active))]
            async fn set_active(
                &self,
                key: &str,
                scope: &ScopeRef,
                active: bool,
            ) -> Result<(), LibraryStoreError> {
                limits::short_text("agent key", key)?;
                let (scope, _, scope_key) = scope_ref_columns(scope)?;
                let done = sqlx::query(
                    "UPDATE agents SET is_active = $1 WHERE key = $2 AND scope = $3 \
                     AND scope_key = $4 AND is_current",
                )
                .bind(active)
                .bind(key)
                .bind(scope.as_str())
                .bind(&scope_key)
                .execute(&self.pool)
                .await
                .map_err(StoreError::from)?;
                if done.rows_affected() == 0 {
                    return Err(LibraryStoreError::NotFound);
                }
                Ok(())
            }

            async fn keys(&self) -> Result<Vec<String>, LibraryStoreError> {
                Ok(sqlx::query_scalar("SELECT DISTINCT key FROM agents ORDER BY key")
                    .fetch_all(&self.pool)
                    .await
                    .map_err(StoreError::from)?)
            }

            async fn lineages(&self) -> Result<Vec<AgentLineageHead>, LibraryStoreError> {
                let rows = sqlx::query(
                    "SELECT * FROM agents WHERE is_current ORDER BY key, scope, scope_key",
                )
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::from)?;
                let mut heads = Vec::with_capacity(rows.len());
                for row in &rows {
                    let latest = Self::library_agent_from_row(row)?;
                    let active: bool = row.try_get("is_active").map_err(StoreError::from)?;
                    heads.push(AgentLineageHead { active, latest });
                }
                Ok(heads)
            }
        }

        #[async_trait::async_trait]
        impl auto_swe_agents::SkillStore for $store {
            async fn list(&self) -> Result<Vec<Skill>, LibraryStoreError> {
                let rows = sqlx::query("SELECT * FROM skills ORDER BY id")
                    .fetch_all(&self.pool)
                    .await
                    .map_err(StoreError::from)?;
                Ok(rows
                    .iter()
                    .map(Self::library_skill_from_row)
                    .collect::<StoreResult<_>>()?)
            }

            async fn get(&self, id: &str) -> Result<Option<Skill>, LibraryStoreError> {
                limits::short_text("skill id", id)?;
                let row = sqlx::query("SELECT * FROM skills WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(StoreError::from)?;
                Ok(row.as_ref().map(Self::library_skill_from_row).transpose()?)
            }

            async fn revision(
                &self,
                id: &str,
                revision: u32,
            ) -> Result<Option<SkillRevision>, LibraryStoreError> {
                limits::short_text("skill id", id)?;
                let row = sqlx::query(
                    "SELECT * FROM skill_revisions WHERE skill_id = $1 AND revision = $2",
                )
                .bind(id)
                .bind(i64::from(revision))
                .fetch_optional(&self.pool)
                .await
                .map_err(StoreError::from)?;
                Ok(row.as_ref().map(Self::library_revision_from_row).transpose()?)
            }

            async fn revisions(&self, id: &str) -> Result<Vec<SkillRevision>, LibraryStoreError> {
                limits::short_text("skill id", id)?;
                let rows = sqlx::query(
                    "SELECT * FROM skill_revisions WHERE skill_id = $1 ORDER BY revision",
                )
                .bind(id)
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::from)?;
                Ok(rows
                    .iter()
                    .map(Self::library_revision_from_row)
                    .collect::<StoreResult<_>>()?)
            }

            #[tracing::instrument(level = "debug", skip_all, fields(skill_id = %skill.id))]
            async fn create(
                &self,
                skill: Skill,
                first: SkillRevision,
                conflicts: &(dyn for<'s> Fn(&'s [Skill]) -> Vec<String> + Send + Sync),
            ) -> Result<Vec<String>, LibraryStoreError> {
                Ok(self.library_create_skill(&skill, &first, conflicts).await?)
            }

            #[tracing::instrument(level = "debug", skip_all, fields(skill_id = %skill.id, expected_revision))]
            async fn update(
                &self,
                skill: Skill,
                expected_revision: u32,
                revision: Option<SkillRevision>,
                conflicts: &(dyn for<'s> Fn(&'s [Skill]) -> Vec<String> + Send + Sync),
            ) -> Result<Vec<String>, LibraryStoreError> {
                Ok(self
                    .library_update_skill(&skill, expected_revision, revision.as_ref(), conflicts)
                    .await?)
            }
        }

        #[async_trait::async_trait]
        impl auto_swe_agents::CredentialStore for $store {
            async fn by_id(&self, id: &str) -> Result<Option<CredentialRef>, LibraryStoreError> {
                limits::short_text("credential id", id)?;
                let row = sqlx::query("SELECT * FROM provider_credentials WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(StoreError::from)?;
                Ok(self.library_credential(row).await?)
            }

            async fn for_scope(
                &self,
                scope: &ScopeRef,
                provider: &str,
            ) -> Result<Option<CredentialRef>, LibraryStoreError> {
                limits::short_text("provider", provider)?;
                let (scope, _, scope_key) = scope_ref_columns(scope)?;
                // The newest credential that still opens wins.
                let rows = sqlx::query(
                    "SELECT * FROM provider_credentials WHERE provider = $1 AND scope = $2 \
                     AND COALESCE(scope_id, '') = $3 ORDER BY created_at DESC, id DESC",
                )
                .bind(provider)
                .bind(scope.as_str())
                .bind(&scope_key)
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::from)?;
                for row in rows {
                    if let Some(found) = self.library_credential(Some(row)).await? {
                        return Ok(Some(found));
                    }
                }
                Ok(None)
            }
        }
    };
}
