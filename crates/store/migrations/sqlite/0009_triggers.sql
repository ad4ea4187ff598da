-- Triggers: signed webhooks that start runs of a stored template under their creator's launch
-- authorization. The secret is sealed to the row (secret_envelope), never stored in the clear.
CREATE TABLE triggers (
    id TEXT PRIMARY KEY,
    template_id TEXT NOT NULL REFERENCES workflow_templates(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    created_by TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    paused BOOLEAN NOT NULL DEFAULT FALSE,
    daily_limit BIGINT NOT NULL CHECK (daily_limit BETWEEN 1 AND 1000),
    event_types TEXT,
    secret_envelope TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX triggers_template ON triggers (template_id, created_at);

-- Each delivery by its webhook-id, kept seven days: a retry of one that started a run answers
-- that run, one of a skipped delivery stays skipped, and the started and starting rows are what
-- the per-minute and daily limits count.
CREATE TABLE trigger_deliveries (
    trigger_id TEXT NOT NULL REFERENCES triggers(id) ON DELETE CASCADE,
    webhook_id TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('STARTING', 'STARTED', 'SKIPPED', 'FAILED')),
    event_type TEXT,
    run_id TEXT,
    reason TEXT,
    admitted_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (trigger_id, webhook_id)
);
CREATE INDEX trigger_deliveries_window ON trigger_deliveries (trigger_id, admitted_at);
