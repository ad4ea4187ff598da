//! Steps, human steps, signals, artifacts and traces, written once for both backends.

macro_rules! impl_execution_stores {
    ($store:ty, $row:ty) => {
        impl $store {
            async fn insert_traces(
                &self,
                mut tx: sqlx::Transaction<'_, DbKind>,
                traces: &[NewAgentTrace],
                payloads: &[String],
            ) -> StoreResult<()> {
                let now = Timestamp::now(&*self.clock).as_millis();
                for (trace, payload) in traces.iter().zip(payloads) {
                    sqlx::query(
                        "INSERT INTO agent_traces (run_id, workflow_id, node_id, recording_id, \
                         activity, kind, payload, spend_owner_org_id, model, cost_micros, \
                         input_tokens, output_tokens, created_at) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
                    )
                    .bind(&trace.run_id)
                    .bind(&trace.workflow_id)
                    .bind(&trace.node_id)
                    .bind(&trace.recording_id)
                    .bind(&trace.activity)
                    .bind(&trace.kind)
                    .bind(payload)
                    .bind(&trace.spend_owner_org_id)
                    .bind(&trace.model)
                    .bind(trace.usage.cost_micros)
                    .bind(trace.usage.input_tokens)
                    .bind(trace.usage.output_tokens)
                    .bind(now)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| map_write("trace", &trace.workflow_id, e))?;
                }
                tx.commit().await?;
                Ok(())
            }

            fn step_from_row(row: &$row) -> StoreResult<WorkflowStep> {
                let status: String = row.try_get("status")?;
                let ended_at: Option<i64> = row.try_get("ended_at")?;
                Ok(WorkflowStep {
                    id: row.try_get("id")?,
                    run_id: row.try_get("run_id")?,
                    recording_id: row.try_get("recording_id")?,
                    node_id: row.try_get("node_id")?,
                    attempt: row.try_get("attempt")?,
                    status: parse_stored("workflow_steps", &status)?,
                    output: from_json_text("workflow_steps", &row.try_get::<String, _>("output")?)?,
                    started_at: Timestamp::from_millis(row.try_get("started_at")?),
                    ended_at: ended_at.map(Timestamp::from_millis),
                })
            }

            fn human_step_from_row(row: &$row) -> StoreResult<HumanStep> {
                let kind: String = row.try_get("kind")?;
                let status: String = row.try_get("status")?;
                let answer: Option<String> = row.try_get("answer")?;
                Ok(HumanStep {
                    id: row.try_get("id")?,
                    run_id: row.try_get("run_id")?,
                    node_id: row.try_get("node_id")?,
                    kind: parse_stored("human_steps", &kind)?,
                    prompt: from_json_text("human_steps", &row.try_get::<String, _>("prompt")?)?,
                    status: parse_stored("human_steps", &status)?,
                    answer: answer.map(|a| from_json_text("human_steps", &a)).transpose()?,
                    answered_by: row.try_get("answered_by")?,
                    expires_at: row
                        .try_get::<Option<i64>, _>("expires_at")?
                        .map(Timestamp::from_millis),
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }

            fn signal_from_row(row: &$row) -> StoreResult<Signal> {
                Ok(Signal {
                    seq: row.try_get("seq")?,
                    run_id: row.try_get("run_id")?,
                    name: row.try_get("name")?,
                    payload: from_json_text("signals", &row.try_get::<String, _>("payload")?)?,
                    received_at: Timestamp::from_millis(row.try_get("received_at")?),
                    consumed_epoch: row.try_get("consumed_epoch")?,
                })
            }

            fn artifact_from_row(row: &$row) -> StoreResult<Artifact> {
                Ok(Artifact {
                    id: row.try_get("id")?,
                    run_id: row.try_get("run_id")?,
                    name: row.try_get("name")?,
                    content_type: row.try_get("content_type")?,
                    size: row.try_get("size")?,
                    sha256: row.try_get("sha256")?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }

            fn trace_from_row(row: &$row) -> StoreResult<AgentTrace> {
                Ok(AgentTrace {
                    seq: row.try_get("seq")?,
                    run_id: row.try_get("run_id")?,
                    workflow_id: row.try_get("workflow_id")?,
                    node_id: row.try_get("node_id")?,
                    recording_id: row.try_get("recording_id")?,
                    activity: row.try_get("activity")?,
                    kind: row.try_get("kind")?,
                    payload: from_json_text("agent_traces", &row.try_get::<String, _>("payload")?)?,
                    spend_owner_org_id: row.try_get("spend_owner_org_id")?,
                    model: row.try_get("model")?,
                    usage: Spend {
                        cost_micros: row.try_get("cost_micros")?,
                        input_tokens: row.try_get("input_tokens")?,
                        output_tokens: row.try_get("output_tokens")?,
                    },
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            }
        }

        #[async_trait::async_trait]
        impl StepStore for $store {
            async fn start_step(
                &self,
                token: &LeaseToken,
                recording_id: &str,
                node_id: &str,
                attempt: i64,
            ) -> StoreResult<WorkflowStep> {
                limits::short_text("recording id", recording_id)?;
                limits::short_text("node id", node_id)?;
                limits::non_negative("attempt", attempt)?;
                let id = new_id();
                let mut tx = self.fenced(token).await?;
                let inserted = sqlx::query(
                    "INSERT INTO workflow_steps (id, run_id, recording_id, node_id, attempt, \
                     status, output, started_at) VALUES ($1, $2, $3, $4, $5, 'RUNNING', 'null', $6) \
                     ON CONFLICT (run_id, recording_id, attempt) DO NOTHING RETURNING *",
                )
                .bind(&id)
                .bind(&token.run_id)
                .bind(recording_id)
                .bind(node_id)
                .bind(attempt)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| map_write("step", recording_id, e))?;
                let row = match inserted {
                    Some(row) => row,
                    // Started before: the same entry, as it stands.
                    None => sqlx::query(
                        "SELECT * FROM workflow_steps WHERE run_id = $1 AND recording_id = $2 \
                         AND attempt = $3",
                    )
                    .bind(&token.run_id)
                    .bind(recording_id)
                    .bind(attempt)
                    .fetch_one(&mut *tx)
                    .await?,
                };
                tx.commit().await?;
                let step = Self::step_from_row(&row)?;
                if step.node_id != node_id {
                    return Err(StoreError::Conflict {
                        entity: "step",
                        detail: format!(
                            "{recording_id} attempt {attempt} was started as node {}",
                            step.node_id
                        ),
                    });
                }
                Ok(step)
            }

            async fn finish_step(
                &self,
                token: &LeaseToken,
                id: &str,
                status: StepStatus,
                output: &serde_json::Value,
            ) -> StoreResult<WorkflowStep> {
                if status == StepStatus::Running {
                    return Err(StoreError::invalid("step status", "finish needs a final status"));
                }
                let output = limits::json_text("step output", output)?;
                let mut tx = self.fenced(token).await?;
                // The step must belong to the token's run: a lease on one run finishes nothing
                // of another.
                let row = sqlx::query(
                    "UPDATE workflow_steps SET status = $1, output = $2, ended_at = $3 \
                     WHERE id = $4 AND run_id = $5 AND ended_at IS NULL RETURNING *",
                )
                .bind(status.as_str())
                .bind(&output)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .bind(id)
                .bind(&token.run_id)
                .fetch_optional(&mut *tx)
                .await?;
                if let Some(row) = row {
                    tx.commit().await?;
                    return Self::step_from_row(&row);
                }
                let exists: Option<String> = sqlx::query_scalar(
                    "SELECT id FROM workflow_steps WHERE id = $1 AND run_id = $2",
                )
                .bind(id)
                .bind(&token.run_id)
                .fetch_optional(&mut *tx)
                .await?;
                tx.rollback().await?;
                match exists {
                    Some(_) => Err(StoreError::Conflict {
                        entity: "step",
                        detail: format!("step {id} has already finished"),
                    }),
                    None => Err(StoreError::not_found("step", id)),
                }
            }

            async fn list_steps(&self, run_id: &str) -> StoreResult<Vec<WorkflowStep>> {
                let rows = sqlx::query(
                    "SELECT * FROM workflow_steps WHERE run_id = $1 ORDER BY started_at, id",
                )
                .bind(run_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::step_from_row).collect()
            }
        }

        #[async_trait::async_trait]
        impl InteractionStore for $store {
            async fn create_human_step(
                &self,
                token: &LeaseToken,
                step: &NewHumanStep,
            ) -> StoreResult<HumanStep> {
                limits::short_text("node id", &step.node_id)?;
                let prompt = limits::json_text("prompt", &step.prompt)?;
                let expires_in = step
                    .expires_in
                    .map(|d| {
                        crate::records::queue::validate_delay(d)
                            .map(|()| crate::records::queue::millis(d))
                    })
                    .transpose()?;
                let id = new_id();
                let mut tx = self.fenced(token).await?;
                let row = sqlx::query(&format!(
                    "INSERT INTO human_steps (id, run_id, node_id, kind, prompt, status, \
                     created_at, expires_at) VALUES ($1, $2, $3, $4, $5, 'PENDING', $6, \
                     {now} + CAST($7 AS BIGINT)) RETURNING *",
                    now = Self::NOW_MS
                ))
                .bind(&id)
                .bind(&token.run_id)
                .bind(&step.node_id)
                .bind(step.kind.as_str())
                .bind(&prompt)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .bind(expires_in)
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| map_write("human step", &step.node_id, e))?;
                tx.commit().await?;
                Self::human_step_from_row(&row)
            }

            async fn time_out_human_steps(
                &self,
                token: &LeaseToken,
            ) -> StoreResult<Vec<HumanStep>> {
                let mut tx = self.fenced(token).await?;
                let rows = sqlx::query(&format!(
                    "UPDATE human_steps SET status = 'TIMED_OUT' WHERE run_id = $1 \
                     AND status = 'PENDING' AND expires_at <= {now} RETURNING *",
                    now = Self::NOW_MS
                ))
                .bind(&token.run_id)
                .fetch_all(&mut *tx)
                .await?;
                tx.commit().await?;
                let mut steps = rows
                    .iter()
                    .map(Self::human_step_from_row)
                    .collect::<StoreResult<Vec<_>>>()?;
                steps.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
                Ok(steps)
            }

            async fn answer_human_step(
                &self,
                id: &str,
                answered_by: &str,
                answer: &serde_json::Value,
            ) -> StoreResult<HumanStep> {
                limits::short_text("answered by", answered_by)?;
                let answer = limits::json_text("answer", answer)?;
                // Only a payload some engine cannot carry costs a look at the run's engine.
                if crate::RunEngine::Temporal.check_payload("the answer", &answer).is_err() {
                    let engine: Option<String> = sqlx::query_scalar(
                        "SELECT r.engine FROM human_steps h JOIN workflow_runs r \
                         ON r.id = h.run_id WHERE h.id = $1",
                    )
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?;
                    if let Some(engine) = engine {
                        engine
                            .parse::<crate::RunEngine>()?
                            .check_payload("the answer", &answer)?;
                    }
                }
                let mut tx = self.pool.begin().await?;
                let row = sqlx::query(&format!(
                    "UPDATE human_steps SET status = 'ANSWERED', answer = $1, answered_by = $2, \
                     answered_at = $3 WHERE id = $4 AND status = 'PENDING' \
                     AND (expires_at IS NULL OR expires_at > {now}) AND EXISTS (\
                     SELECT 1 FROM workflow_runs r WHERE r.id = human_steps.run_id \
                     AND r.ended_at IS NULL) RETURNING *",
                    now = Self::NOW_MS
                ))
                .bind(&answer)
                .bind(answered_by)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(row) = row else {
                    tx.rollback().await?;
                    let step = self.get_human_step(id).await?;
                    if let RunStanding::Ended { .. } = self.run_standing(&step.run_id).await? {
                        return Err(StoreError::RunEnded {
                            run_id: step.run_id,
                        });
                    }
                    return Err(StoreError::Conflict {
                        entity: "human step",
                        detail: format!("human step {id} is no longer pending"),
                    });
                };
                let step = Self::human_step_from_row(&row)?;
                self.wake_parked(&mut tx, &step.run_id, &WakeOn::HumanStep { id: id.to_owned() })
                    .await?;
                tx.commit().await?;
                self.woke();
                Ok(step)
            }

            async fn get_human_step(&self, id: &str) -> StoreResult<HumanStep> {
                let row = sqlx::query("SELECT * FROM human_steps WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("human step", id))?;
                Self::human_step_from_row(&row)
            }

            async fn list_human_steps(&self, run_id: &str) -> StoreResult<Vec<HumanStep>> {
                let rows = sqlx::query(
                    "SELECT * FROM human_steps WHERE run_id = $1 ORDER BY created_at, id",
                )
                .bind(run_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::human_step_from_row).collect()
            }

            async fn send_signal(
                &self,
                run_id: &str,
                name: &str,
                payload: &serde_json::Value,
            ) -> StoreResult<Signal> {
                limits::short_text("signal name", name)?;
                let payload = limits::json_text("signal payload", payload)?;
                // Only a payload some engine cannot carry costs a look at the run's engine.
                if crate::RunEngine::Temporal.check_payload("the signal's payload", &payload).is_err() {
                    let engine: Option<String> =
                        sqlx::query_scalar("SELECT engine FROM workflow_runs WHERE id = $1")
                            .bind(run_id)
                            .fetch_optional(&self.pool)
                            .await?;
                    if let Some(engine) = engine {
                        engine
                            .parse::<crate::RunEngine>()?
                            .check_payload("the signal's payload", &payload)?;
                    }
                }
                let mut tx = self.pool.begin().await?;
                let row = sqlx::query(
                    "INSERT INTO signals (run_id, name, payload, received_at, relay) \
                     SELECT id, $2, $3, $4, CASE WHEN engine = 'EMBEDDED' THEN NULL \
                     ELSE 'PENDING' END FROM workflow_runs WHERE id = $1 AND ended_at IS NULL \
                     RETURNING *",
                )
                .bind(run_id)
                .bind(name)
                .bind(&payload)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| map_write("signal", name, e))?;
                let Some(row) = row else {
                    tx.rollback().await?;
                    return Err(match self.run_standing(run_id).await? {
                        RunStanding::Missing => StoreError::not_found("run", run_id),
                        RunStanding::Ended { .. } | RunStanding::Live { .. } => {
                            StoreError::RunEnded {
                                run_id: run_id.to_owned(),
                            }
                        }
                    });
                };
                let signal = Self::signal_from_row(&row)?;
                self.wake_parked(&mut tx, run_id, &WakeOn::Signal { name: name.to_owned() })
                    .await?;
                tx.commit().await?;
                self.woke();
                Ok(signal)
            }

            async fn pending_relays(
                &self,
                engine: crate::records::runs::RunEngine,
                limit: u32,
            ) -> StoreResult<Vec<Relayed>> {
                let limit = validate_page(limit)?;
                let stops = sqlx::query(
                    "SELECT id, cancel_requested_at FROM workflow_runs \
                     WHERE cancel_relay = 'PENDING' AND engine = $1 ORDER BY cancel_requested_at \
                     LIMIT $2",
                )
                .bind(engine.as_str())
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
                let mut items = stops
                    .iter()
                    .map(|row| {
                        Ok(Relayed::Cancel {
                            run_id: row.try_get("id")?,
                            requested_at: Timestamp::from_millis(row.try_get("cancel_requested_at")?),
                        })
                    })
                    .collect::<StoreResult<Vec<_>>>()?;
                let left = limit - i64::try_from(items.len()).unwrap_or(limit);
                if left > 0 {
                    let rows = sqlx::query(
                        "SELECT s.* FROM signals s JOIN workflow_runs r ON r.id = s.run_id \
                         WHERE s.relay = 'PENDING' AND r.engine = $1 ORDER BY s.seq LIMIT $2",
                    )
                    .bind(engine.as_str())
                    .bind(left)
                    .fetch_all(&self.pool)
                    .await?;
                    for row in &rows {
                        items.push(Relayed::Signal(Self::signal_from_row(row)?));
                    }
                }
                Ok(items)
            }

            async fn mark_relayed(&self, item: &Relayed) -> StoreResult<bool> {
                let done = match item {
                    Relayed::Signal(signal) => sqlx::query(
                        "UPDATE signals SET relay = 'FORWARDED' WHERE seq = $1 AND run_id = $2 \
                         AND relay = 'PENDING'",
                    )
                    .bind(signal.seq)
                    .bind(&signal.run_id)
                    .execute(&self.pool)
                    .await?,
                    Relayed::Cancel { run_id, .. } => sqlx::query(
                        "UPDATE workflow_runs SET cancel_relay = 'FORWARDED' WHERE id = $1 \
                         AND cancel_relay = 'PENDING'",
                    )
                    .bind(run_id)
                    .execute(&self.pool)
                    .await?,
                };
                Ok(done.rows_affected() > 0)
            }

            async fn list_signals(&self, run_id: &str, name: &str) -> StoreResult<Vec<Signal>> {
                let rows = sqlx::query(
                    "SELECT * FROM signals WHERE run_id = $1 AND name = $2 ORDER BY seq",
                )
                .bind(run_id)
                .bind(name)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::signal_from_row).collect()
            }

            async fn consume_signal(
                &self,
                token: &LeaseToken,
                name: &str,
            ) -> StoreResult<Option<Signal>> {
                limits::short_text("signal name", name)?;
                let mut tx = self.fenced(token).await?;
                // Two consumers may pick the same oldest row; the loser's update then finds it
                // consumed and goes again for the next one.
                for _ in 0..64 {
                    let taken = sqlx::query(
                        "UPDATE signals SET consumed_at = $1, consumed_epoch = $2 \
                         WHERE seq = (SELECT seq FROM signals WHERE run_id = $3 AND name = $4 \
                           AND consumed_at IS NULL ORDER BY seq LIMIT 1) \
                         AND consumed_at IS NULL RETURNING *",
                    )
                    .bind(Timestamp::now(&*self.clock).as_millis())
                    .bind(token.epoch)
                    .bind(&token.run_id)
                    .bind(name)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if let Some(row) = taken {
                        tx.commit().await?;
                        return Self::signal_from_row(&row).map(Some);
                    }
                    let left: i64 = sqlx::query_scalar(
                        "SELECT COUNT(*) FROM signals WHERE run_id = $1 AND name = $2 \
                         AND consumed_at IS NULL",
                    )
                    .bind(&token.run_id)
                    .bind(name)
                    .fetch_one(&mut *tx)
                    .await?;
                    if left == 0 {
                        break;
                    }
                }
                tx.commit().await?;
                Ok(None)
            }
        }

        #[async_trait::async_trait]
        impl ArtifactStore for $store {
            async fn put_artifact(
                &self,
                token: &LeaseToken,
                name: &str,
                content_type: &str,
                body: &[u8],
            ) -> StoreResult<Artifact> {
                limits::short_text("artifact name", name)?;
                limits::short_text("content type", content_type)?;
                if body.len() > limits::MAX_ARTIFACT_BYTES {
                    return Err(StoreError::TooLarge {
                        field: "artifact body",
                        limit: limits::MAX_ARTIFACT_BYTES,
                        actual: body.len(),
                    });
                }
                let id = new_id();
                let size = i64::try_from(body.len())
                    .map_err(|_| StoreError::invalid("artifact body", "too large"))?;
                let mut tx = self.fenced(token).await?;
                let row = sqlx::query(
                    "INSERT INTO artifacts (id, run_id, name, content_type, size, sha256, body, \
                     created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
                     RETURNING id, run_id, name, content_type, size, sha256, created_at",
                )
                .bind(&id)
                .bind(&token.run_id)
                .bind(name)
                .bind(content_type)
                .bind(size)
                .bind(sha256_hex(body))
                .bind(body)
                .bind(Timestamp::now(&*self.clock).as_millis())
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| map_write("artifact", name, e))?;
                tx.commit().await?;
                Self::artifact_from_row(&row)
            }

            async fn get_artifact(&self, id: &str) -> StoreResult<(Artifact, Vec<u8>)> {
                let row = sqlx::query("SELECT * FROM artifacts WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| StoreError::not_found("artifact", id))?;
                let body: Vec<u8> = row.try_get("body")?;
                let artifact = Self::artifact_from_row(&row)?;
                if sha256_hex(&body) != artifact.sha256 {
                    return Err(StoreError::corrupt("artifacts", "body does not match its hash"));
                }
                Ok((artifact, body))
            }

            async fn list_artifacts(&self, run_id: &str) -> StoreResult<Vec<Artifact>> {
                let rows = sqlx::query(
                    "SELECT id, run_id, name, content_type, size, sha256, created_at \
                     FROM artifacts WHERE run_id = $1 ORDER BY created_at, id",
                )
                .bind(run_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::artifact_from_row).collect()
            }
        }

        #[async_trait::async_trait]
        impl TraceStore for $store {
            async fn append_traces(
                &self,
                token: &LeaseToken,
                traces: Vec<NewAgentTrace>,
            ) -> StoreResult<()> {
                let rows = crate::records::execution::validate_traces(&traces)?;
                for trace in &traces {
                    crate::records::queue::same_run(
                        token,
                        trace.run_id.as_deref().unwrap_or_default(),
                    )?;
                }
                let tx = self.fenced(token).await?;
                self.insert_traces(tx, &traces, &rows).await
            }

            async fn append_runless_traces(&self, traces: Vec<NewAgentTrace>) -> StoreResult<()> {
                let rows = crate::records::execution::validate_traces(&traces)?;
                if traces.iter().any(|trace| trace.run_id.is_some()) {
                    return Err(StoreError::invalid(
                        "trace run id",
                        "a run's traces are written under its lease (append_traces)",
                    ));
                }
                let tx = self.pool.begin().await?;
                self.insert_traces(tx, &traces, &rows).await
            }

            async fn list_traces(&self, run_id: &str, limit: u32) -> StoreResult<Vec<AgentTrace>> {
                let limit = i64::from(limit.clamp(1, 5_000));
                let rows = sqlx::query(
                    "SELECT * FROM (SELECT * FROM agent_traces WHERE run_id = $1 \
                     ORDER BY seq DESC LIMIT $2) AS newest ORDER BY seq",
                )
                .bind(run_id)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::trace_from_row).collect()
            }
        }
    };
}
