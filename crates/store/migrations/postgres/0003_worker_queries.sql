-- What the worker and the server read: run lists by keyset, reaper candidates, the inbox,
-- one-consumer signals, token use and the audit trail by actor.
ALTER TABLE workflow_runs ADD COLUMN reap_checked_at BIGINT NOT NULL DEFAULT 0;
CREATE INDEX workflow_runs_reap ON workflow_runs (reap_checked_at, created_at)
    WHERE ended_at IS NULL;
CREATE INDEX workflow_runs_newest ON workflow_runs (created_at, id);
CREATE INDEX workflow_runs_org_newest ON workflow_runs (org_id, created_at, id);
ALTER TABLE signals ADD COLUMN consumed_at BIGINT;
ALTER TABLE signals ADD COLUMN consumed_epoch BIGINT;
ALTER TABLE human_steps ADD COLUMN expires_at BIGINT;
CREATE INDEX human_steps_pending ON human_steps (created_at, id) WHERE status = 'PENDING';
ALTER TABLE api_tokens ADD COLUMN last_used_at BIGINT;
CREATE INDEX api_tokens_user ON api_tokens (user_id, created_at);
CREATE INDEX api_tokens_principal ON api_tokens (service_principal_id, created_at);
CREATE INDEX audit_log_actor ON audit_log (actor, at, seq);
