//! Organizations, users and tokens, written once for both backends.

macro_rules! impl_identity_stores {
    ($store:ty, $row:ty) => {
        impl $store {
            fn org_from_row(row: &$row) -> StoreResult<Organization> {
                Ok(Organization {
                    id: row.try_get("id")?,
                    slug: row.try_get("slug")?,
                    name: row.try_get("name")?,
                    monthly_budget_cents: row.try_get("monthly_budget_cents")?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }

            fn team_from_row(row: &$row) -> StoreResult<Team> {
                let egress: String = row.try_get("egress_allow")?;
                Ok(Team {
                    id: row.try_get("id")?,
                    org_id: row.try_get("org_id")?,
                    name: row.try_get("name")?,
                    egress_allow: crate::backend::shared::from_json_text("team", &egress)?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }

            fn user_from_row(row: &$row) -> StoreResult<User> {
                Ok(User {
                    id: row.try_get("id")?,
                    email: row.try_get("email")?,
                    name: row.try_get("name")?,
                    active: row.try_get("active")?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }

            fn principal_from_row(row: &$row) -> StoreResult<ServicePrincipal> {
                Ok(ServicePrincipal {
                    id: row.try_get("id")?,
                    team_id: row.try_get("team_id")?,
                    name: row.try_get("name")?,
                    allowed_connection_ids: from_json_text(
                        "service_principals",
                        &row.try_get::<String, _>("allowed_connection_ids")?,
                    )?,
                    allowed_template_ids: from_json_text(
                        "service_principals",
                        &row.try_get::<String, _>("allowed_template_ids")?,
                    )?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }

            fn token_from_row(row: &$row) -> StoreResult<ApiToken> {
                let user: Option<String> = row.try_get("user_id")?;
                let principal: Option<String> = row.try_get("service_principal_id")?;
                let owner = match (user, principal) {
                    (Some(user), None) => TokenOwner::User(user),
                    (None, Some(principal)) => TokenOwner::ServicePrincipal(principal),
                    _ => return Err(StoreError::corrupt("api_tokens", "token owner")),
                };
                let expires_at: Option<i64> = row.try_get("expires_at")?;
                let revoked_at: Option<i64> = row.try_get("revoked_at")?;
                Ok(ApiToken {
                    id: row.try_get("id")?,
                    owner,
                    name: row.try_get("name")?,
                    prefix: row.try_get("prefix")?,
                    expires_at: expires_at.map(Timestamp::from_millis),
                    revoked_at: revoked_at.map(Timestamp::from_millis),
                    last_used_at: row
                        .try_get::<Option<i64>, _>("last_used_at")?
                        .map(Timestamp::from_millis),
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }

        }

        #[async_trait::async_trait]
        impl OrganizationStore for $store {
            async fn create_org(&self, slug: &str, name: &str) -> StoreResult<Organization> {
                limits::short_text("slug", slug)?;
                limits::short_text("org name", name)?;
                let id = new_id();
                let row = sqlx::query(
                    "INSERT INTO organizations (id, slug, name, created_at) \
                     VALUES ($1, $2, $3, $4) RETURNING *",
                )
                .bind(&id)
                .bind(slug)
                .bind(name)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_one(&self.pool)
                .await
                .map_err(|e| map_write("organization", slug, e))?;
                Self::org_from_row(&row)
            }

            async fn get_org(&self, id: &str) -> StoreResult<Organization> {
                let row = sqlx::query("SELECT * FROM organizations WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("organization", id))?;
                Self::org_from_row(&row)
            }

            async fn find_org_by_slug(&self, slug: &str) -> StoreResult<Option<Organization>> {
                limits::short_text("org slug", slug)?;
                let row = sqlx::query("SELECT * FROM organizations WHERE slug = $1")
                    .bind(slug)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::org_from_row).transpose()
            }

            async fn set_org_budget(&self, id: &str, cents: Option<i64>) -> StoreResult<()> {
                if let Some(cents) = cents {
                    limits::non_negative("monthly budget", cents)?;
                }
                let done = sqlx::query(
                    "UPDATE organizations SET monthly_budget_cents = $1 WHERE id = $2",
                )
                .bind(cents)
                .bind(id)
                .execute(&self.pool)
                .await?;
                if done.rows_affected() == 0 {
                    return Err(StoreError::not_found("organization", id));
                }
                Ok(())
            }

            async fn create_team(&self, org_id: &str, name: &str) -> StoreResult<Team> {
                limits::short_text("team name", name)?;
                let id = new_id();
                let row = sqlx::query(
                    "INSERT INTO teams (id, org_id, name, created_at) VALUES ($1, $2, $3, $4) \
                     RETURNING *",
                )
                .bind(&id)
                .bind(org_id)
                .bind(name)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_one(&self.pool)
                .await
                .map_err(|e| map_write("team", name, e))?;
                Self::team_from_row(&row)
            }

            async fn get_team(&self, id: &str) -> StoreResult<Team> {
                let row = sqlx::query("SELECT * FROM teams WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("team", id))?;
                Self::team_from_row(&row)
            }

            async fn set_team_egress(&self, id: &str, allow: &[String]) -> StoreResult<()> {
                if allow.len() > crate::records::tenancy::MAX_TEAM_EGRESS_RULES {
                    return Err(StoreError::invalid(
                        "egress rules",
                        format!(
                            "at most {} rules",
                            crate::records::tenancy::MAX_TEAM_EGRESS_RULES
                        ),
                    ));
                }
                for rule in allow {
                    limits::short_text("egress rule", rule)?;
                }
                let text = crate::backend::shared::to_json_text("egress rules", &allow)?;
                let done = sqlx::query("UPDATE teams SET egress_allow = $1 WHERE id = $2")
                    .bind(text)
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                if done.rows_affected() == 0 {
                    return Err(StoreError::not_found("team", id));
                }
                Ok(())
            }

            async fn set_org_role(
                &self,
                org_id: &str,
                user_id: &str,
                role: OrgRole,
            ) -> StoreResult<()> {
                sqlx::query(
                    "INSERT INTO org_memberships (org_id, user_id, role) VALUES ($1, $2, $3) \
                     ON CONFLICT (org_id, user_id) DO UPDATE SET role = excluded.role",
                )
                .bind(org_id)
                .bind(user_id)
                .bind(role.as_str())
                .execute(&self.pool)
                .await
                .map_err(|e| map_write("org membership", user_id, e))?;
                Ok(())
            }

            async fn org_role(&self, org_id: &str, user_id: &str) -> StoreResult<Option<OrgRole>> {
                let role: Option<String> = sqlx::query_scalar(
                    "SELECT role FROM org_memberships WHERE org_id = $1 AND user_id = $2",
                )
                .bind(org_id)
                .bind(user_id)
                .fetch_optional(&self.pool)
                .await?;
                role.map(|r| parse_stored("org_memberships", &r)).transpose()
            }

            async fn set_team_role(
                &self,
                team_id: &str,
                user_id: &str,
                role: TeamRole,
            ) -> StoreResult<()> {
                sqlx::query(
                    "INSERT INTO team_memberships (team_id, user_id, role) VALUES ($1, $2, $3) \
                     ON CONFLICT (team_id, user_id) DO UPDATE SET role = excluded.role",
                )
                .bind(team_id)
                .bind(user_id)
                .bind(role.as_str())
                .execute(&self.pool)
                .await
                .map_err(|e| map_write("team membership", user_id, e))?;
                Ok(())
            }

            async fn team_role(
                &self,
                team_id: &str,
                user_id: &str,
            ) -> StoreResult<Option<TeamRole>> {
                let role: Option<String> = sqlx::query_scalar(
                    "SELECT role FROM team_memberships WHERE team_id = $1 AND user_id = $2",
                )
                .bind(team_id)
                .bind(user_id)
                .fetch_optional(&self.pool)
                .await?;
                role.map(|r| parse_stored("team_memberships", &r)).transpose()
            }
        }

        #[async_trait::async_trait]
        impl UserStore for $store {
            async fn create_user(&self, email: &str, name: &str) -> StoreResult<User> {
                limits::short_text("email", email)?;
                limits::short_text("user name", name)?;
                if !email.contains('@') {
                    return Err(StoreError::invalid("email", "must contain '@'"));
                }
                let email = email.trim().to_lowercase();
                let id = new_id();
                let row = sqlx::query(
                    "INSERT INTO users (id, email, name, created_at) VALUES ($1, $2, $3, $4) \
                     RETURNING *",
                )
                .bind(&id)
                .bind(&email)
                .bind(name)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_one(&self.pool)
                .await
                .map_err(|e| map_write("user", &email, e))?;
                Self::user_from_row(&row)
            }

            async fn get_user(&self, id: &str) -> StoreResult<User> {
                let row = sqlx::query("SELECT * FROM users WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("user", id))?;
                Self::user_from_row(&row)
            }

            async fn find_user_by_email(&self, email: &str) -> StoreResult<Option<User>> {
                let row = sqlx::query("SELECT * FROM users WHERE email = $1")
                    .bind(email.trim().to_lowercase())
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::user_from_row).transpose()
            }

            async fn set_user_active(&self, id: &str, active: bool) -> StoreResult<()> {
                let done = sqlx::query("UPDATE users SET active = $2 WHERE id = $1")
                    .bind(id)
                    .bind(active)
                    .execute(&self.pool)
                    .await?;
                if done.rows_affected() == 0 {
                    return Err(StoreError::not_found("user", id));
                }
                Ok(())
            }

            async fn list_users(&self, query: &UserListQuery) -> StoreResult<UserPage> {
                let limit = validate_page(query.limit)?;
                limits::optional_short_text("user search", query.search.as_deref())?;
                let after = query
                    .cursor
                    .as_deref()
                    .map(|c| decode_cursor("users", c))
                    .transpose()?;
                let (after_at, after_id) = match after {
                    Some((at, id)) => (Some(at), Some(id)),
                    None => (None, None),
                };
                // Emails are stored lower-cased; names are compared lower-cased on both sides
                // (ASCII case on SQLite, whose LOWER() folds nothing else).
                let pattern = query
                    .search
                    .as_deref()
                    .map(|text| crate::records::queries::like_contains(&text.to_lowercase()));
                let rows = sqlx::query(
                    "SELECT * FROM users \
                     WHERE (CAST($1 AS TEXT) IS NULL \
                            OR email LIKE $1 ESCAPE '\\' OR LOWER(name) LIKE $1 ESCAPE '\\') \
                     AND (CAST($2 AS BIGINT) IS NULL OR created_at < $2 \
                          OR (created_at = $2 AND id < $3)) \
                     ORDER BY created_at DESC, id DESC LIMIT $4",
                )
                .bind(pattern)
                .bind(after_at)
                .bind(after_id)
                .bind(limit + 1)
                .fetch_all(&self.pool)
                .await?;
                let mut users = rows
                    .iter()
                    .map(Self::user_from_row)
                    .collect::<StoreResult<Vec<_>>>()?;
                let more = users.len() > query.limit as usize;
                users.truncate(query.limit as usize);
                let next = match users.last() {
                    Some(last) if more => Some(encode_cursor(
                        "users",
                        last.created_at.as_millis(),
                        &last.id,
                    )),
                    _ => None,
                };
                Ok(UserPage { users, next })
            }
        }

        #[async_trait::async_trait]
        impl TokenStore for $store {
            async fn create_service_principal(
                &self,
                team_id: &str,
                name: &str,
                allowed_connection_ids: Vec<String>,
                allowed_template_ids: Vec<String>,
            ) -> StoreResult<ServicePrincipal> {
                limits::short_text("principal name", name)?;
                let id = new_id();
                let row = sqlx::query(
                    "INSERT INTO service_principals (id, team_id, name, allowed_connection_ids, \
                     allowed_template_ids, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING *",
                )
                .bind(&id)
                .bind(team_id)
                .bind(name)
                .bind(to_json_text("allowed connections", &allowed_connection_ids)?)
                .bind(to_json_text("allowed templates", &allowed_template_ids)?)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_one(&self.pool)
                .await
                .map_err(|e| map_write("service principal", name, e))?;
                Self::principal_from_row(&row)
            }

            async fn get_service_principal(&self, id: &str) -> StoreResult<ServicePrincipal> {
                let row = sqlx::query("SELECT * FROM service_principals WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("service principal", id))?;
                Self::principal_from_row(&row)
            }

            async fn create_token(
                &self,
                token: NewApiToken,
            ) -> StoreResult<(ApiToken, SecretString)> {
                limits::short_text("token name", &token.name)?;
                let (user, principal) = match &token.owner {
                    TokenOwner::User(id) => (Some(id.as_str()), None),
                    TokenOwner::ServicePrincipal(id) => (None, Some(id.as_str())),
                };
                let plaintext = crate::records::tokens::mint_token();
                let prefix: String = plaintext.expose().chars().take(10).collect();
                let id = new_id();
                let row = sqlx::query(
                    "INSERT INTO api_tokens (id, token_hash, prefix, user_id, \
                     service_principal_id, name, expires_at, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *",
                )
                .bind(&id)
                .bind(crate::records::tokens::hash_token(plaintext.expose()))
                .bind(&prefix)
                .bind(user)
                .bind(principal)
                .bind(&token.name)
                .bind(token.expires_at.map(Timestamp::as_millis))
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_one(&self.pool)
                .await
                .map_err(|e| map_write("api token", &id, e))?;
                Ok((Self::token_from_row(&row)?, plaintext))
            }

            async fn authenticate_token(
                &self,
                plaintext: &SecretString,
            ) -> StoreResult<Option<ApiToken>> {
                if plaintext.expose().len() > limits::MAX_SHORT_TEXT_BYTES {
                    return Ok(None);
                }
                let hash = crate::records::tokens::hash_token(plaintext.expose());
                let now = Timestamp::now(&*self.clock).as_millis();
                // A read on every request; the last use is written only when the stored one is
                // older than its resolution, so a busy token is not one hot row every request
                // of every server waits on.
                let row = sqlx::query(
                    "SELECT * FROM api_tokens WHERE token_hash = $1 \
                     AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2) \
                     AND (user_id IS NULL OR user_id IN (SELECT id FROM users WHERE active))",
                )
                .bind(&hash)
                .bind(now)
                .fetch_optional(&self.pool)
                .await?;
                let Some(mut token) = row.as_ref().map(Self::token_from_row).transpose()? else {
                    return Ok(None);
                };
                let resolution = i64::try_from(
                    crate::records::tokens::LAST_USE_RESOLUTION.as_millis(),
                )
                .unwrap_or(i64::MAX);
                let stale = token
                    .last_used_at
                    .is_none_or(|used| used.as_millis() <= now.saturating_sub(resolution));
                if stale {
                    sqlx::query(
                        "UPDATE api_tokens SET last_used_at = $2 WHERE token_hash = $1 \
                         AND (last_used_at IS NULL OR last_used_at < $2)",
                    )
                    .bind(&hash)
                    .bind(now)
                    .execute(&self.pool)
                    .await?;
                    token.last_used_at = Some(Timestamp::from_millis(now));
                }
                Ok(Some(token))
            }

            async fn list_tokens(&self, owner: &TokenOwner) -> StoreResult<Vec<ApiToken>> {
                let (column, id) = match owner {
                    TokenOwner::User(id) => ("user_id", id),
                    TokenOwner::ServicePrincipal(id) => ("service_principal_id", id),
                };
                let rows = sqlx::query(&format!(
                    "SELECT * FROM api_tokens WHERE {column} = $1 ORDER BY created_at, id"
                ))
                .bind(id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::token_from_row).collect()
            }

            async fn revoke_token(&self, id: &str) -> StoreResult<()> {
                let done = sqlx::query(
                    "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2",
                )
                .bind(Timestamp::now(&*self.clock).as_millis())
                .bind(id)
                .execute(&self.pool)
                .await?;
                if done.rows_affected() == 0 {
                    return Err(StoreError::not_found("api token", id));
                }
                Ok(())
            }
        }
    };
}
