//! Reads over runs for the worker and the server, written once for both backends.
//!
//! Optional filters are written `(CAST($n AS TEXT) IS NULL OR column = $n)`, which both engines
//! plan and type the same way. Pages are keyset-ordered by (time, id) or `seq`.

macro_rules! impl_run_queries {
    ($store:ty, $row:ty) => {
        #[async_trait::async_trait]
        impl RunQueryStore for $store {
            async fn list_runs(&self, query: &RunListQuery) -> StoreResult<RunPage> {
                let limit = validate_page(query.limit)?;
                for value in [
                    &query.org_id,
                    &query.team_id,
                    &query.launched_by,
                    &query.template_version_id,
                    &query.id_prefix,
                ] {
                    limits::optional_short_text("run filter", value.as_deref())?;
                }
                let after = query
                    .cursor
                    .as_deref()
                    .map(|c| decode_cursor("runs", c))
                    .transpose()?;
                let (after_at, after_id) = match after {
                    Some((at, id)) => (Some(at), Some(id)),
                    None => (None, None),
                };
                let (viewer, viewer_user, viewer_team) =
                    crate::records::queries::visibility_params(query.visible_to.as_ref());
                let rows = sqlx::query(&format!(
                    "SELECT {columns} FROM workflow_runs r {joins} \
                     WHERE (CAST($1 AS TEXT) IS NULL OR r.org_id = $1) \
                     AND (CAST($2 AS TEXT) IS NULL OR r.team_id = $2) \
                     AND (CAST($3 AS TEXT) IS NULL OR r.status = $3) \
                     AND (CAST($4 AS TEXT) IS NULL OR r.launched_by = $4) \
                     AND (CAST($5 AS TEXT) IS NULL OR r.template_version_id = $5) \
                     AND (CAST($6 AS BIGINT) IS NULL OR r.created_at < $6 \
                          OR (r.created_at = $6 AND r.id < $7)) \
                     AND (CAST($9 AS TEXT) IS NULL OR r.id LIKE $9 ESCAPE '\\') \
                     AND {visible} \
                     ORDER BY r.created_at DESC, r.id DESC LIMIT $8",
                    columns = crate::records::queries::RUN_COLUMNS,
                    joins = crate::records::queries::RUN_VISIBILITY_JOINS,
                    visible = crate::records::queries::visible_to_sql(10, 11, 12),
                ))
                .bind(&query.org_id)
                .bind(&query.team_id)
                .bind(query.status.map(RunStatus::as_str))
                .bind(&query.launched_by)
                .bind(&query.template_version_id)
                .bind(after_at)
                .bind(after_id)
                .bind(limit + 1)
                .bind(query.id_prefix.as_deref().map(crate::records::queries::like_prefix))
                .bind(viewer)
                .bind(viewer_user)
                .bind(viewer_team)
                .fetch_all(&self.pool)
                .await?;
                let mut runs = rows
                    .iter()
                    .map(Self::run_from_row)
                    .collect::<StoreResult<Vec<_>>>()?;
                let more = runs.len() > query.limit as usize;
                runs.truncate(query.limit as usize);
                let next = match runs.last() {
                    Some(last) if more => Some(encode_cursor(
                        "runs",
                        last.created_at.as_millis(),
                        &last.id,
                    )),
                    _ => None,
                };
                Ok(RunPage { runs, next })
            }

            #[tracing::instrument(level = "debug", skip(self))]
            async fn visible_run(
                &self,
                run_id: &str,
                viewer: Option<&RunViewer>,
            ) -> StoreResult<Option<Run>> {
                limits::short_text("run id", run_id)?;
                let (viewer, viewer_user, viewer_team) =
                    crate::records::queries::visibility_params(viewer);
                let row = sqlx::query(&format!(
                    "SELECT {columns} FROM workflow_runs r {joins} WHERE r.id = $1 AND {visible}",
                    columns = crate::records::queries::RUN_COLUMNS,
                    joins = crate::records::queries::RUN_VISIBILITY_JOINS,
                    visible = crate::records::queries::visible_to_sql(2, 3, 4),
                ))
                .bind(run_id)
                .bind(viewer)
                .bind(viewer_user)
                .bind(viewer_team)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::run_from_row).transpose()
            }

            async fn run_visibility(&self, run_id: &str) -> StoreResult<RunVisibility> {
                let row = sqlx::query(
                    "SELECT r.id, r.org_id, r.team_id, \
                     COALESCE(r.launched_by, i.submitter) AS requester, \
                     i.connection_id, t.team_id AS template_team_id \
                     FROM workflow_runs r \
                     LEFT JOIN run_inputs i ON i.id = r.run_input_id \
                     LEFT JOIN workflow_template_versions v ON v.id = r.template_version_id \
                     LEFT JOIN workflow_templates t ON t.id = v.template_id \
                     WHERE r.id = $1",
                )
                .bind(run_id)
                .fetch_optional(&self.pool)
                .await?
                .ok_or_else(|| StoreError::not_found("run", run_id))?;
                Ok(RunVisibility {
                    run_id: row.try_get("id")?,
                    org_id: row.try_get("org_id")?,
                    team_id: row.try_get("team_id")?,
                    requester: row.try_get("requester")?,
                    repository_connection_id: row.try_get("connection_id")?,
                    template_owner_team_id: row.try_get("template_team_id")?,
                })
            }

            async fn reap_candidates(&self, query: &ReapQuery) -> StoreResult<Vec<Run>> {
                let limit = validate_page(query.limit)?;
                let now = Timestamp::now(&*self.clock);
                let cutoff = now
                    .as_millis()
                    .saturating_sub(crate::records::queue::millis(query.older_than));
                let rows = sqlx::query(&format!(
                    "UPDATE workflow_runs SET reap_checked_at = $1 WHERE id IN (\
                     SELECT id FROM workflow_runs WHERE ended_at IS NULL AND created_at <= $2 \
                     AND engine = $4 ORDER BY reap_checked_at, created_at LIMIT $3{}) RETURNING *",
                    Self::SKIP_LOCKED
                ))
                .bind(now.as_millis())
                .bind(cutoff)
                .bind(limit)
                .bind(query.engine.as_str())
                .fetch_all(&self.pool)
                .await?;
                let mut runs = rows
                    .iter()
                    .map(Self::run_from_row)
                    .collect::<StoreResult<Vec<_>>>()?;
                runs.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
                Ok(runs)
            }

            async fn org_month_spend(
                &self,
                org_id: &str,
                year_month: &str,
            ) -> StoreResult<OrgSpend> {
                let finalized = self.monthly_usage(org_id, year_month).await?;
                let row = sqlx::query(
                    "SELECT COUNT(*) AS runs, \
                     CAST(COALESCE(SUM(cost_micros), 0) AS BIGINT) AS cost_micros, \
                     CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT) AS input_tokens, \
                     CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT) AS output_tokens \
                     FROM workflow_runs WHERE org_id = $1 AND ended_at IS NULL",
                )
                .bind(org_id)
                .fetch_one(&self.pool)
                .await?;
                Ok(OrgSpend {
                    finalized,
                    in_flight: Spend {
                        cost_micros: row.try_get("cost_micros")?,
                        input_tokens: row.try_get("input_tokens")?,
                        output_tokens: row.try_get("output_tokens")?,
                    },
                    in_flight_runs: row.try_get("runs")?,
                })
            }

            async fn trace_page(
                &self,
                run_id: &str,
                since: i64,
                limit: u32,
            ) -> StoreResult<TracePage> {
                let page = validate_page(limit)?;
                limits::non_negative("since", since)?;
                let rows = sqlx::query(
                    "SELECT * FROM agent_traces WHERE run_id = $1 AND seq > $2 \
                     ORDER BY seq LIMIT $3",
                )
                .bind(run_id)
                .bind(since)
                .bind(page)
                .fetch_all(&self.pool)
                .await?;
                let total: i64 =
                    sqlx::query_scalar("SELECT COUNT(*) FROM agent_traces WHERE run_id = $1")
                        .bind(run_id)
                        .fetch_one(&self.pool)
                        .await?;
                let traces = rows
                    .iter()
                    .map(Self::trace_from_row)
                    .collect::<StoreResult<Vec<_>>>()?;
                let since = traces.last().map_or(since, |t| t.seq);
                Ok(TracePage {
                    traces,
                    total,
                    since,
                })
            }

            async fn human_inbox(&self, query: &InboxQuery) -> StoreResult<Vec<HumanStep>> {
                let limit = validate_page(query.limit)?;
                limits::short_text("org id", &query.org_id)?;
                limits::optional_short_text("team id", query.team_id.as_deref())?;
                let rows = sqlx::query(&format!(
                    "SELECT h.* FROM human_steps h JOIN workflow_runs r ON r.id = h.run_id \
                     WHERE h.status = 'PENDING' AND r.ended_at IS NULL AND r.org_id = $1 \
                     AND (CAST($2 AS TEXT) IS NULL OR r.team_id = $2) \
                     AND (h.expires_at IS NULL OR h.expires_at > {now}) \
                     ORDER BY h.created_at, h.id LIMIT $3",
                    now = Self::NOW_MS
                ))
                .bind(&query.org_id)
                .bind(&query.team_id)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::human_step_from_row).collect()
            }

            async fn list_audit(&self, query: &AuditQuery) -> StoreResult<AuditPage> {
                let limit = validate_page(query.limit)?;
                limits::optional_short_text("actor", query.actor.as_deref())?;
                let after = match query.cursor.as_deref() {
                    Some(cursor) => decode_cursor("audit", cursor)?.0,
                    None => 0,
                };
                let rows = sqlx::query(
                    "SELECT * FROM audit_log WHERE (CAST($1 AS TEXT) IS NULL OR actor = $1) \
                     AND (CAST($2 AS BIGINT) IS NULL OR at >= $2) \
                     AND (CAST($3 AS BIGINT) IS NULL OR at < $3) \
                     AND seq > $4 ORDER BY seq LIMIT $5",
                )
                .bind(&query.actor)
                .bind(query.since.map(Timestamp::as_millis))
                .bind(query.until.map(Timestamp::as_millis))
                .bind(after)
                .bind(limit + 1)
                .fetch_all(&self.pool)
                .await?;
                let mut entries = rows
                    .iter()
                    .map(Self::audit_from_row)
                    .collect::<StoreResult<Vec<_>>>()?;
                let more = entries.len() > query.limit as usize;
                entries.truncate(query.limit as usize);
                let next = match entries.last() {
                    Some(last) if more => Some(encode_cursor("audit", last.seq, "")),
                    _ => None,
                };
                Ok(AuditPage { entries, next })
            }
        }
    };
}
