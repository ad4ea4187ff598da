//! Webhooks and pull requests, written once for both backends.

macro_rules! impl_integration_store {
    ($store:ty, $row:ty) => {
        impl $store {
            fn outbound_from_row(row: &$row) -> StoreResult<OutboundWebhook> {
                let state: String = row.try_get("state")?;
                Ok(OutboundWebhook {
                    id: row.try_get("id")?,
                    target: row.try_get("target")?,
                    event: row.try_get("event")?,
                    payload: from_json_text(
                        "outbound_webhooks",
                        &row.try_get::<String, _>("payload")?,
                    )?,
                    state: parse_stored("outbound_webhooks", &state)?,
                    attempts: row.try_get("attempts")?,
                    max_attempts: row.try_get("max_attempts")?,
                    next_attempt_at: Timestamp::from_millis(row.try_get("next_attempt_at")?),
                    last_error: row.try_get("last_error")?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }

            fn pull_request_from_row(row: &$row) -> StoreResult<PullRequest> {
                let state: String = row.try_get("state")?;
                let ci: String = row.try_get("ci_status")?;
                Ok(PullRequest {
                    connection_id: row.try_get("connection_id")?,
                    number: row.try_get("number")?,
                    run_id: row.try_get("run_id")?,
                    url: row.try_get("url")?,
                    head_sha: row.try_get("head_sha")?,
                    state: parse_stored("pull_requests", &state)?,
                    ci_status: parse_stored("pull_requests", &ci)?,
                    updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
                })
            }
        }

        #[async_trait::async_trait]
        impl IntegrationStore for $store {
            async fn record_delivery(
                &self,
                provider: &str,
                delivery_id: &str,
                event: &str,
                payload: &serde_json::Value,
            ) -> StoreResult<DeliveryReceipt> {
                limits::short_text("provider", provider)?;
                limits::short_text("delivery id", delivery_id)?;
                limits::short_text("event", event)?;
                let payload = limits::json_text("delivery payload", payload)?;
                let inserted = sqlx::query(
                    "INSERT INTO webhook_deliveries (provider, delivery_id, event, payload, \
                     received_at) VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (provider, delivery_id) DO NOTHING",
                )
                .bind(provider)
                .bind(delivery_id)
                .bind(event)
                .bind(&payload)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .execute(&self.pool)
                .await
                .map_err(|e| map_write("webhook delivery", delivery_id, e))?;
                Ok(if inserted.rows_affected() == 1 {
                    DeliveryReceipt::New
                } else {
                    DeliveryReceipt::Duplicate
                })
            }

            async fn forget_delivery(&self, provider: &str, delivery_id: &str) -> StoreResult<bool> {
                limits::short_text("provider", provider)?;
                limits::short_text("delivery id", delivery_id)?;
                let deleted = sqlx::query(
                    "DELETE FROM webhook_deliveries WHERE provider = $1 AND delivery_id = $2",
                )
                .bind(provider)
                .bind(delivery_id)
                .execute(&self.pool)
                .await
                .map_err(|e| map_write("webhook delivery", delivery_id, e))?;
                Ok(deleted.rows_affected() == 1)
            }

            async fn enqueue_outbound(
                &self,
                webhook: NewOutboundWebhook,
            ) -> StoreResult<OutboundWebhook> {
                let payload = crate::records::integrations::validate_outbound(&webhook)?;
                let id = new_id();
                let row = sqlx::query(&format!(
                    "INSERT INTO outbound_webhooks (id, target, event, payload, state, \
                     max_attempts, next_attempt_at, created_at) \
                     VALUES ($1, $2, $3, $4, 'PENDING', $5, {now}, $6) RETURNING *",
                    now = Self::NOW_MS
                ))
                .bind(&id)
                .bind(&webhook.target)
                .bind(&webhook.event)
                .bind(&payload)
                .bind(i64::from(webhook.max_attempts))
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_one(&self.pool)
                .await
                .map_err(|e| map_write("outbound webhook", &id, e))?;
                Self::outbound_from_row(&row)
            }

            async fn take_due_outbound(
                &self,
                limit: u32,
                window: Duration,
            ) -> StoreResult<Vec<OutboundWebhook>> {
                let limit = validate_page(limit)?;
                crate::records::queue::validate_lease(window)?;
                let rows = sqlx::query(&format!(
                    "UPDATE outbound_webhooks SET next_attempt_at = {now} + $2 WHERE id IN (\
                     SELECT id FROM outbound_webhooks WHERE state = 'PENDING' \
                     AND next_attempt_at <= {now} ORDER BY next_attempt_at, id LIMIT $1{skip}) \
                     RETURNING *",
                    now = Self::NOW_MS,
                    skip = Self::SKIP_LOCKED
                ))
                .bind(limit)
                .bind(crate::records::queue::millis(window))
                .fetch_all(&self.pool)
                .await?;
                let mut taken = rows
                    .iter()
                    .map(Self::outbound_from_row)
                    .collect::<StoreResult<Vec<_>>>()?;
                taken.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
                Ok(taken)
            }

            async fn record_attempt(
                &self,
                id: &str,
                result: AttemptResult,
            ) -> StoreResult<OutboundWebhook> {
                let pending = "WHERE id = $1 AND state = 'PENDING' RETURNING *";
                let row = match &result {
                    AttemptResult::Delivered => {
                        sqlx::query(&format!(
                            "UPDATE outbound_webhooks SET attempts = attempts + 1, \
                             state = 'DELIVERED', delivered_at = $2, last_error = NULL {pending}"
                        ))
                        .bind(id)
                        .bind(Timestamp::now(&*self.clock).as_millis())
                        .fetch_optional(&self.pool)
                        .await?
                    }
                    AttemptResult::Retry { error, retry_after } => {
                        crate::records::queue::validate_delay(*retry_after)?;
                        limits::long_text("webhook error", error)?;
                        sqlx::query(&format!(
                            "UPDATE outbound_webhooks SET attempts = attempts + 1, \
                             state = CASE WHEN attempts + 1 >= max_attempts THEN 'FAILED' \
                             ELSE 'PENDING' END, last_error = $2, \
                             next_attempt_at = {now} + $3 {pending}",
                            now = Self::NOW_MS
                        ))
                        .bind(id)
                        .bind(error)
                        .bind(crate::records::queue::millis(*retry_after))
                        .fetch_optional(&self.pool)
                        .await?
                    }
                    AttemptResult::GiveUp { error } => {
                        limits::long_text("webhook error", error)?;
                        sqlx::query(&format!(
                            "UPDATE outbound_webhooks SET attempts = attempts + 1, \
                             state = 'FAILED', last_error = $2 {pending}"
                        ))
                        .bind(id)
                        .bind(error)
                        .fetch_optional(&self.pool)
                        .await?
                    }
                };
                if let Some(row) = row {
                    return Self::outbound_from_row(&row);
                }
                let exists: Option<String> =
                    sqlx::query_scalar("SELECT id FROM outbound_webhooks WHERE id = $1")
                        .bind(id)
                        .fetch_optional(&self.pool)
                        .await?;
                Err(match exists {
                    Some(_) => StoreError::Conflict {
                        entity: "outbound webhook",
                        detail: format!("{id} is no longer pending"),
                    },
                    None => StoreError::not_found("outbound webhook", id),
                })
            }

            async fn upsert_pull_request(
                &self,
                update: PullRequestUpdate,
            ) -> StoreResult<PullRequest> {
                crate::records::integrations::validate_pull_request(&update)?;
                let row = sqlx::query(
                    "INSERT INTO pull_requests (connection_id, number, run_id, url, head_sha, \
                     state, ci_status, updated_at) VALUES ($1, $2, $3, $4, $5, $6, 'UNKNOWN', $7) \
                     ON CONFLICT (connection_id, number) DO UPDATE SET \
                     run_id = COALESCE(pull_requests.run_id, excluded.run_id), \
                     url = excluded.url, state = excluded.state, \
                     ci_status = CASE WHEN pull_requests.head_sha = excluded.head_sha \
                       THEN pull_requests.ci_status ELSE 'UNKNOWN' END, \
                     head_sha = excluded.head_sha, updated_at = excluded.updated_at \
                     RETURNING *",
                )
                .bind(&update.connection_id)
                .bind(update.number)
                .bind(&update.run_id)
                .bind(&update.url)
                .bind(update.head_sha.to_ascii_lowercase())
                .bind(update.state.as_str())
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_one(&self.pool)
                .await
                .map_err(|e| map_write("pull request", &update.url, e))?;
                Self::pull_request_from_row(&row)
            }

            async fn get_pull_request(
                &self,
                connection_id: &str,
                number: i64,
            ) -> StoreResult<PullRequest> {
                let row = sqlx::query(
                    "SELECT * FROM pull_requests WHERE connection_id = $1 AND number = $2",
                )
                .bind(connection_id)
                .bind(number)
                .fetch_optional(&self.pool)
                .await?
                .ok_or_else(|| {
                    StoreError::not_found("pull request", format!("{connection_id}#{number}"))
                })?;
                Self::pull_request_from_row(&row)
            }

            async fn pull_request_by_head(
                &self,
                connection_id: &str,
                head_sha: &str,
            ) -> StoreResult<Option<PullRequest>> {
                crate::records::integrations::validate_sha(head_sha)?;
                let row = sqlx::query(
                    "SELECT * FROM pull_requests WHERE connection_id = $1 AND head_sha = $2 \
                     ORDER BY updated_at DESC, number DESC LIMIT 1",
                )
                .bind(connection_id)
                .bind(head_sha.to_ascii_lowercase())
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::pull_request_from_row).transpose()
            }

            async fn list_pull_requests(
                &self,
                query: &PullRequestQuery,
            ) -> StoreResult<Vec<PullRequest>> {
                if query.limit == 0 || query.limit > 500 {
                    return Err(StoreError::invalid("limit", "must be between 1 and 500"));
                }
                limits::optional_short_text("connection id", query.connection_id.as_deref())?;
                limits::optional_short_text("run id", query.run_id.as_deref())?;
                let rows = sqlx::query(
                    "SELECT * FROM pull_requests WHERE ($1 IS NULL OR connection_id = $1) \
                     AND ($2 IS NULL OR run_id = $2) AND ($3 IS NULL OR ci_status = $3) \
                     ORDER BY updated_at DESC, number DESC LIMIT $4",
                )
                .bind(query.connection_id.as_deref())
                .bind(query.run_id.as_deref())
                .bind(query.ci_status.map(CiStatus::as_str))
                .bind(i64::from(query.limit))
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::pull_request_from_row).collect()
            }

            async fn set_ci_status(
                &self,
                connection_id: &str,
                head_sha: &str,
                status: CiStatus,
            ) -> StoreResult<bool> {
                crate::records::integrations::validate_sha(head_sha)?;
                let done = sqlx::query(
                    "UPDATE pull_requests SET ci_status = $1, updated_at = $2 \
                     WHERE connection_id = $3 AND head_sha = $4",
                )
                .bind(status.as_str())
                .bind(Timestamp::now(&*self.clock).as_millis())
                .bind(connection_id)
                .bind(head_sha.to_ascii_lowercase())
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            #[tracing::instrument(level = "debug", skip(self))]
            async fn claim_ci_head(
                &self,
                connection_id: &str,
                head_sha: &str,
                worker: &str,
                lease: Duration,
            ) -> StoreResult<HeadClaim> {
                limits::short_text("connection id", connection_id)?;
                crate::records::integrations::validate_sha(head_sha)?;
                limits::short_text("worker", worker)?;
                crate::records::queue::validate_lease(lease)?;
                let head_sha = head_sha.to_ascii_lowercase();
                // One statement: concurrent claimants meet on the row, and only one finds it
                // free (never judged, lease passed) on the database's clock.
                let row = sqlx::query(&format!(
                    "INSERT INTO ci_judgments (connection_id, head_sha, worker, claim_count, \
                     lease_until, claimed_at) VALUES ($1, $2, $3, 1, {now} + $4, {now}) \
                     ON CONFLICT (connection_id, head_sha) DO UPDATE SET \
                     worker = excluded.worker, claim_count = ci_judgments.claim_count + 1, \
                     lease_until = excluded.lease_until, claimed_at = excluded.claimed_at \
                     WHERE ci_judgments.verdict IS NULL AND ci_judgments.lease_until <= {now} \
                     RETURNING claim_count, lease_until",
                    now = Self::NOW_MS
                ))
                .bind(connection_id)
                .bind(&head_sha)
                .bind(worker)
                .bind(crate::records::queue::millis(lease))
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| map_write("ci judgment", &head_sha, e))?;
                if let Some(row) = row {
                    return Ok(HeadClaim::Claimed(CiClaim {
                        connection_id: connection_id.to_owned(),
                        head_sha,
                        worker: worker.to_owned(),
                        epoch: row.try_get("claim_count")?,
                        lease_until: Timestamp::from_millis(row.try_get("lease_until")?),
                    }));
                }
                let row = sqlx::query(
                    "SELECT worker, lease_until, verdict FROM ci_judgments \
                     WHERE connection_id = $1 AND head_sha = $2",
                )
                .bind(connection_id)
                .bind(&head_sha)
                .fetch_optional(&self.pool)
                .await?
                .ok_or_else(|| {
                    StoreError::not_found("ci judgment", format!("{connection_id}@{head_sha}"))
                })?;
                let verdict: Option<String> = row.try_get("verdict")?;
                Ok(match verdict {
                    Some(verdict) => HeadClaim::Judged {
                        verdict: parse_stored("ci_judgments", &verdict)?,
                    },
                    None => HeadClaim::Held {
                        worker: row.try_get("worker")?,
                        lease_until: Timestamp::from_millis(row.try_get("lease_until")?),
                    },
                })
            }

            async fn renew_ci_claim(
                &self,
                claim: &CiClaim,
                lease: Duration,
            ) -> StoreResult<Option<CiClaim>> {
                crate::records::queue::validate_lease(lease)?;
                let lease_until: Option<i64> = sqlx::query_scalar(&format!(
                    "UPDATE ci_judgments SET lease_until = {now} + $5 \
                     WHERE connection_id = $1 AND head_sha = $2 AND worker = $3 \
                     AND claim_count = $4 AND verdict IS NULL AND lease_until > {now} \
                     RETURNING lease_until",
                    now = Self::NOW_MS
                ))
                .bind(&claim.connection_id)
                .bind(&claim.head_sha)
                .bind(&claim.worker)
                .bind(claim.epoch)
                .bind(crate::records::queue::millis(lease))
                .fetch_optional(&self.pool)
                .await?;
                Ok(lease_until.map(|until| CiClaim {
                    lease_until: Timestamp::from_millis(until),
                    ..claim.clone()
                }))
            }

            async fn release_ci_claim(&self, claim: &CiClaim) -> StoreResult<bool> {
                // The lease ends now: the next claimant takes the head.
                let done = sqlx::query(&format!(
                    "UPDATE ci_judgments SET lease_until = {now} \
                     WHERE connection_id = $1 AND head_sha = $2 AND worker = $3 \
                     AND claim_count = $4 AND verdict IS NULL AND lease_until > {now}",
                    now = Self::NOW_MS
                ))
                .bind(&claim.connection_id)
                .bind(&claim.head_sha)
                .bind(&claim.worker)
                .bind(claim.epoch)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() == 1)
            }

            #[tracing::instrument(level = "debug", skip(self, claim), fields(
                connection_id = %claim.connection_id, head = %claim.head_sha,
                worker = %claim.worker, verdict = verdict.as_str()))]
            async fn record_ci_verdict(
                &self,
                claim: &CiClaim,
                verdict: CiStatus,
            ) -> StoreResult<VerdictRecord> {
                crate::records::integrations::validate_verdict(verdict)?;
                // The claim is closed first: the transaction's first statement is a write, so
                // it holds the write lock from the start (no upgrade to wait on in SQLite).
                let mut tx = self.pool.begin().await?;
                let closed = sqlx::query(&format!(
                    "UPDATE ci_judgments SET verdict = $5, judged_at = {now} \
                     WHERE connection_id = $1 AND head_sha = $2 AND worker = $3 \
                     AND claim_count = $4 AND verdict IS NULL AND lease_until > {now}",
                    now = Self::NOW_MS
                ))
                .bind(&claim.connection_id)
                .bind(&claim.head_sha)
                .bind(&claim.worker)
                .bind(claim.epoch)
                .bind(verdict.as_str())
                .execute(&mut *tx)
                .await?;
                if closed.rows_affected() == 0 {
                    tx.rollback().await?;
                    return Ok(VerdictRecord::ClaimLost);
                }
                let rows = sqlx::query(
                    "UPDATE pull_requests SET ci_status = $1, updated_at = $2 \
                     WHERE connection_id = $3 AND head_sha = $4 AND ci_status = 'PENDING' \
                     RETURNING *",
                )
                .bind(verdict.as_str())
                .bind(Timestamp::now(&*self.clock).as_millis())
                .bind(&claim.connection_id)
                .bind(&claim.head_sha)
                .fetch_all(&mut *tx)
                .await?;
                tx.commit().await?;
                let mut pull_requests = rows
                    .iter()
                    .map(Self::pull_request_from_row)
                    .collect::<StoreResult<Vec<_>>>()?;
                pull_requests.sort_by_key(|pr| pr.number);
                Ok(VerdictRecord::Recorded { pull_requests })
            }

            async fn replay_ci_verdict(
                &self,
                connection_id: &str,
                head_sha: &str,
            ) -> StoreResult<Vec<PullRequest>> {
                crate::records::integrations::validate_sha(head_sha)?;
                // One conditional statement: of concurrent replayers (and a recorder), only
                // the first finds the pull request still `PENDING`.
                let rows = sqlx::query(
                    "UPDATE pull_requests SET ci_status = (SELECT j.verdict FROM ci_judgments j \
                     WHERE j.connection_id = $1 AND j.head_sha = $2), updated_at = $3 \
                     WHERE connection_id = $1 AND head_sha = $2 AND ci_status = 'PENDING' \
                     AND EXISTS (SELECT 1 FROM ci_judgments j WHERE j.connection_id = $1 \
                     AND j.head_sha = $2 AND j.verdict IS NOT NULL) RETURNING *",
                )
                .bind(connection_id)
                .bind(head_sha.to_ascii_lowercase())
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_all(&self.pool)
                .await?;
                let mut pull_requests = rows
                    .iter()
                    .map(Self::pull_request_from_row)
                    .collect::<StoreResult<Vec<_>>>()?;
                pull_requests.sort_by_key(|pr| pr.number);
                Ok(pull_requests)
            }
        }
    };
}
