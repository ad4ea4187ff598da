//! Memberships and platform roles, written once for both backends.

macro_rules! impl_membership_store {
    ($store:ty, $row:ty) => {
        #[async_trait::async_trait]
        impl MembershipStore for $store {
            async fn list_teams(&self, org_id: &str) -> StoreResult<Vec<Team>> {
                let rows = sqlx::query("SELECT * FROM teams WHERE org_id = $1 ORDER BY name, id")
                    .bind(org_id)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::team_from_row).collect()
            }

            async fn list_org_members(&self, org_id: &str) -> StoreResult<Vec<OrgMember>> {
                let rows = sqlx::query(
                    "SELECT u.*, m.role FROM org_memberships m JOIN users u ON u.id = m.user_id \
                     WHERE m.org_id = $1 ORDER BY u.email",
                )
                .bind(org_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|row| {
                        let role: String = row.try_get("role")?;
                        Ok(OrgMember {
                            user: Self::user_from_row(row)?,
                            role: parse_stored("org_memberships", &role)?,
                        })
                    })
                    .collect()
            }

            async fn list_team_members(&self, team_id: &str) -> StoreResult<Vec<TeamMember>> {
                let rows = sqlx::query(
                    "SELECT u.*, m.role FROM team_memberships m JOIN users u ON u.id = m.user_id \
                     WHERE m.team_id = $1 ORDER BY u.email",
                )
                .bind(team_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|row| {
                        let role: String = row.try_get("role")?;
                        Ok(TeamMember {
                            user: Self::user_from_row(row)?,
                            role: parse_stored("team_memberships", &role)?,
                        })
                    })
                    .collect()
            }

            async fn remove_org_member(&self, org_id: &str, user_id: &str) -> StoreResult<()> {
                let mut tx = self.pool.begin().await?;
                let done =
                    sqlx::query("DELETE FROM org_memberships WHERE org_id = $1 AND user_id = $2")
                        .bind(org_id)
                        .bind(user_id)
                        .execute(&mut *tx)
                        .await?;
                if done.rows_affected() == 0 {
                    tx.rollback().await?;
                    return Err(StoreError::not_found(
                        "org membership",
                        format!("{user_id} in {org_id}"),
                    ));
                }
                sqlx::query(
                    "DELETE FROM team_memberships WHERE user_id = $1 \
                     AND team_id IN (SELECT id FROM teams WHERE org_id = $2)",
                )
                .bind(user_id)
                .bind(org_id)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn remove_team_member(&self, team_id: &str, user_id: &str) -> StoreResult<()> {
                let done =
                    sqlx::query("DELETE FROM team_memberships WHERE team_id = $1 AND user_id = $2")
                        .bind(team_id)
                        .bind(user_id)
                        .execute(&self.pool)
                        .await?;
                if done.rows_affected() == 0 {
                    return Err(StoreError::not_found(
                        "team membership",
                        format!("{user_id} in {team_id}"),
                    ));
                }
                Ok(())
            }

            async fn grant_platform_role(
                &self,
                user_id: &str,
                role: PlatformRole,
            ) -> StoreResult<()> {
                sqlx::query(
                    "INSERT INTO platform_roles (user_id, role) VALUES ($1, $2) \
                     ON CONFLICT (user_id) DO UPDATE SET role = excluded.role",
                )
                .bind(user_id)
                .bind(role.as_str())
                .execute(&self.pool)
                .await
                .map_err(|e| map_write("platform role", user_id, e))?;
                Ok(())
            }

            async fn revoke_platform_role(&self, user_id: &str) -> StoreResult<()> {
                sqlx::query("DELETE FROM platform_roles WHERE user_id = $1")
                    .bind(user_id)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn platform_role(&self, user_id: &str) -> StoreResult<Option<PlatformRole>> {
                let role: Option<String> =
                    sqlx::query_scalar("SELECT role FROM platform_roles WHERE user_id = $1")
                        .bind(user_id)
                        .fetch_optional(&self.pool)
                        .await?;
                role.map(|r| parse_stored("platform_roles", &r)).transpose()
            }
        }
    };
}
