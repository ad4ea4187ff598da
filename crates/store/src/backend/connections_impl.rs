//! Connections, the repositories they hold and their shares, written once for both backends.

macro_rules! impl_connection_store {
    ($store:ty, $row:ty) => {
        impl $store {
            fn connection_from_row(row: &$row) -> StoreResult<Connection> {
                let kind: String = row.try_get("type")?;
                let host: Option<String> = row.try_get("repo_host")?;
                let owner: Option<String> = row.try_get("repo_owner")?;
                let name: Option<String> = row.try_get("repo_name")?;
                let branch: Option<String> = row.try_get("default_branch")?;
                let repo = match (host, owner, name, branch) {
                    (Some(host), Some(owner), Some(name), Some(default_branch)) => {
                        Some(RepoCoordinates {
                            host,
                            owner,
                            name,
                            default_branch,
                        })
                    }
                    _ => None,
                };
                let token: Option<String> = row.try_get("token_envelope")?;
                Ok(Connection {
                    id: row.try_get("id")?,
                    team_id: row.try_get("team_id")?,
                    kind: parse_stored("connections", &kind)?,
                    name: row.try_get("name")?,
                    repo,
                    config: from_json_text("connections", &row.try_get::<String, _>("config")?)?,
                    has_token: token.is_some(),
                    repository_identity: row.try_get("repo_identity")?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }

            fn share_from_row(row: &$row) -> StoreResult<ConnectionShare> {
                Ok(ConnectionShare {
                    connection_id: row.try_get("connection_id")?,
                    team_id: row.try_get("team_id")?,
                    may_push: row.try_get("may_push")?,
                    created_by: row.try_get("created_by")?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }
        }

        #[async_trait::async_trait]
        impl ConnectionStore for $store {
            async fn create_connection(
                &self,
                connection: NewConnection,
            ) -> StoreResult<Connection> {
                limits::short_text("connection name", &connection.name)?;
                let config = limits::json_text("config", &connection.config)?;
                let repo = match (connection.kind, &connection.repo) {
                    (ConnectionType::GitRepo, Some(repo)) => {
                        limits::short_text("repository host", &repo.host)?;
                        limits::short_text("repository owner", &repo.owner)?;
                        limits::short_text("repository name", &repo.name)?;
                        limits::short_text("default branch", &repo.default_branch)?;
                        Some(repo)
                    }
                    (ConnectionType::GitRepo, None) => {
                        return Err(StoreError::invalid("repo", "a git_repo connection needs one"));
                    }
                    (_, Some(_)) => {
                        return Err(StoreError::invalid("repo", "only git_repo connections have one"));
                    }
                    (_, None) => None,
                };
                let identity = repository_identity(connection.kind, repo, &connection.config);
                let id = new_id();
                let row = sqlx::query(
                    "INSERT INTO connections (id, team_id, type, name, repo_host, repo_owner, \
                     repo_name, default_branch, config, created_at, repo_identity) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING *",
                )
                .bind(&id)
                .bind(&connection.team_id)
                .bind(connection.kind.as_str())
                .bind(&connection.name)
                .bind(repo.map(|r| r.host.to_lowercase()))
                .bind(repo.map(|r| r.owner.clone()))
                .bind(repo.map(|r| r.name.clone()))
                .bind(repo.map(|r| r.default_branch.clone()))
                .bind(&config)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .bind(&identity)
                .fetch_one(&self.pool)
                .await
                .map_err(|e| map_write("connection", &connection.name, e))?;
                Self::connection_from_row(&row)
            }

            async fn get_connection(&self, id: &str) -> StoreResult<Connection> {
                let row = sqlx::query("SELECT * FROM connections WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("connection", id))?;
                Self::connection_from_row(&row)
            }

            async fn list_connections(&self, team_id: Option<&str>) -> StoreResult<Vec<Connection>> {
                let rows = sqlx::query(
                    "SELECT * FROM connections WHERE ($1 IS NULL OR team_id = $1) \
                     ORDER BY created_at, id",
                )
                .bind(team_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::connection_from_row).collect()
            }

            async fn update_connection(
                &self,
                id: &str,
                update: &ConnectionUpdate,
            ) -> StoreResult<Connection> {
                let row = sqlx::query("SELECT * FROM connections WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("connection", id))?;
                let current = Self::connection_from_row(&row)?;
                let read_config: String = row.try_get("config")?;
                let name = update.name.as_deref().unwrap_or(&current.name);
                limits::short_text("connection name", name)?;
                let config = update.config.as_ref().unwrap_or(&current.config);
                let config_text = limits::json_text("config", config)?;
                if repository_identity(current.kind, current.repo.as_ref(), config)
                    != repository_identity(current.kind, current.repo.as_ref(), &current.config)
                {
                    return Err(StoreError::invalid(
                        "config.bareRepository",
                        "a connection's repository never changes: create another connection",
                    ));
                }
                if update.token == TokenChange::Keep
                    && current.has_token
                    && credential_destination(current.kind, &current.config)
                        != credential_destination(current.kind, config)
                {
                    return Err(StoreError::TokenOriginChange { id: id.to_owned() });
                }
                // One compare-and-set on the config and token presence that were read, so an edit
                // racing another cannot slip a token past the origin check.
                let guard = "WHERE id = $3 AND config = $4 AND (token_envelope IS NULL) = $5";
                let done = match &update.token {
                    TokenChange::Keep => {
                        sqlx::query(&format!(
                            "UPDATE connections SET name = $1, config = $2 {guard}"
                        ))
                        .bind(name)
                        .bind(&config_text)
                        .bind(id)
                        .bind(&read_config)
                        .bind(!current.has_token)
                        .execute(&self.pool)
                        .await
                    }
                    TokenChange::Clear => {
                        sqlx::query(&format!(
                            "UPDATE connections SET name = $1, config = $2, \
                             token_envelope = NULL {guard}"
                        ))
                        .bind(name)
                        .bind(&config_text)
                        .bind(id)
                        .bind(&read_config)
                        .bind(!current.has_token)
                        .execute(&self.pool)
                        .await
                    }
                    TokenChange::Set(token) => {
                        limits::short_text("token", token.expose()).map_err(|_| {
                            StoreError::invalid("token", "must be 1-512 bytes without NUL")
                        })?;
                        let sealed = self.keyring.seal_string(
                            SecretOwner {
                                table: "connections",
                                column: "token_envelope",
                                row_id: id,
                            },
                            token,
                        )?;
                        sqlx::query(&format!(
                            "UPDATE connections SET name = $1, config = $2, \
                             token_envelope = $6 {guard}"
                        ))
                        .bind(name)
                        .bind(&config_text)
                        .bind(id)
                        .bind(&read_config)
                        .bind(!current.has_token)
                        .bind(&sealed)
                        .execute(&self.pool)
                        .await
                    }
                }
                .map_err(|e| map_write("connection", name, e))?;
                if done.rows_affected() == 0 {
                    return Err(StoreError::Conflict {
                        entity: "connection",
                        detail: format!("connection {id} changed while it was being edited"),
                    });
                }
                self.get_connection(id).await
            }

            async fn find_repo_connection(
                &self,
                host: &str,
                owner: &str,
                name: &str,
            ) -> StoreResult<Option<Connection>> {
                let row = sqlx::query(
                    "SELECT * FROM connections WHERE type = 'git_repo' AND repo_host = $1 \
                     AND LOWER(repo_owner) = LOWER($2) AND LOWER(repo_name) = LOWER($3) \
                     ORDER BY created_at LIMIT 1",
                )
                .bind(host.to_lowercase())
                .bind(owner)
                .bind(name)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::connection_from_row).transpose()
            }

            async fn repository_holder(&self, identity: &str) -> StoreResult<Option<Connection>> {
                let row = sqlx::query("SELECT * FROM connections WHERE repo_identity = $1")
                    .bind(identity)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::connection_from_row).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all, fields(connection_id = %share.connection_id, team_id = %share.team_id))]
            async fn share_connection(
                &self,
                share: &NewConnectionShare,
            ) -> StoreResult<ConnectionShare> {
                limits::short_text("created by", &share.created_by)?;
                let connection = self.get_connection(&share.connection_id).await?;
                if connection.team_id == share.team_id {
                    return Err(StoreError::invalid(
                        "teamId",
                        "the owning team needs no share",
                    ));
                }
                let owner = self.get_team(&connection.team_id).await?;
                let team = self.get_team(&share.team_id).await?;
                if owner.org_id != team.org_id {
                    return Err(StoreError::invalid(
                        "teamId",
                        "a connection is shared only within its team's organization",
                    ));
                }
                let row = sqlx::query(
                    "INSERT INTO connection_shares (connection_id, team_id, may_push, created_by, \
                     created_at) VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (connection_id, team_id) DO UPDATE SET may_push = $3 \
                     RETURNING *",
                )
                .bind(&share.connection_id)
                .bind(&share.team_id)
                .bind(share.may_push)
                .bind(&share.created_by)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_one(&self.pool)
                .await
                .map_err(|e| map_write("connection share", &share.team_id, e))?;
                Self::share_from_row(&row)
            }

            async fn connection_shares(
                &self,
                connection_id: &str,
            ) -> StoreResult<Vec<ConnectionShare>> {
                let rows = sqlx::query(
                    "SELECT * FROM connection_shares WHERE connection_id = $1 \
                     ORDER BY created_at, team_id",
                )
                .bind(connection_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::share_from_row).collect()
            }

            async fn connection_share(
                &self,
                connection_id: &str,
                team_id: &str,
            ) -> StoreResult<Option<ConnectionShare>> {
                let row = sqlx::query(
                    "SELECT * FROM connection_shares WHERE connection_id = $1 AND team_id = $2",
                )
                .bind(connection_id)
                .bind(team_id)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::share_from_row).transpose()
            }

            #[tracing::instrument(level = "debug", skip(self))]
            async fn revoke_connection_share(
                &self,
                connection_id: &str,
                team_id: &str,
            ) -> StoreResult<bool> {
                let done = sqlx::query(
                    "DELETE FROM connection_shares WHERE connection_id = $1 AND team_id = $2",
                )
                .bind(connection_id)
                .bind(team_id)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn connections_shared_with(&self, team_id: &str) -> StoreResult<Vec<Connection>> {
                let rows = sqlx::query(
                    "SELECT c.* FROM connections c JOIN connection_shares s \
                     ON s.connection_id = c.id WHERE s.team_id = $1 \
                     ORDER BY c.created_at, c.id",
                )
                .bind(team_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::connection_from_row).collect()
            }

            async fn set_connection_token(&self, id: &str, token: &SecretString) -> StoreResult<()> {
                limits::short_text("token", token.expose()).map_err(|_| {
                    StoreError::invalid("token", "must be 1-512 bytes without NUL")
                })?;
                let sealed = self.keyring.seal_string(
                    SecretOwner {
                        table: "connections",
                        column: "token_envelope",
                        row_id: id,
                    },
                    token,
                )?;
                let done = sqlx::query("UPDATE connections SET token_envelope = $1 WHERE id = $2")
                    .bind(&sealed)
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                if done.rows_affected() == 0 {
                    return Err(StoreError::not_found("connection", id));
                }
                Ok(())
            }

            async fn connection_token(&self, id: &str) -> StoreResult<Option<SecretString>> {
                let row = sqlx::query("SELECT token_envelope FROM connections WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("connection", id))?;
                let sealed: Option<String> = row.try_get("token_envelope")?;
                sealed
                    .map(|s| {
                        self.keyring.open_string(
                            SecretOwner {
                                table: "connections",
                                column: "token_envelope",
                                row_id: id,
                            },
                            &s,
                        )
                    })
                    .transpose()
            }
        }
    };
}
