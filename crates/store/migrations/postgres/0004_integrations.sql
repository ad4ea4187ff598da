-- Webhooks in and out, pull requests the SCM providers track, and platform-wide roles.
CREATE TABLE webhook_deliveries (
    provider TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    event TEXT NOT NULL,
    payload TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    PRIMARY KEY (provider, delivery_id)
);

CREATE TABLE outbound_webhooks (
    id TEXT PRIMARY KEY,
    target TEXT NOT NULL,
    event TEXT NOT NULL,
    payload TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('PENDING', 'DELIVERED', 'FAILED')),
    attempts BIGINT NOT NULL DEFAULT 0,
    max_attempts BIGINT NOT NULL CHECK (max_attempts >= 1),
    next_attempt_at BIGINT NOT NULL,
    last_error TEXT,
    created_at BIGINT NOT NULL,
    delivered_at BIGINT
);
CREATE INDEX outbound_webhooks_due ON outbound_webhooks (next_attempt_at, id)
    WHERE state = 'PENDING';

CREATE TABLE pull_requests (
    connection_id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
    number BIGINT NOT NULL CHECK (number >= 1),
    run_id TEXT REFERENCES workflow_runs(id) ON DELETE SET NULL,
    url TEXT NOT NULL,
    head_sha TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('OPEN', 'CLOSED', 'MERGED')),
    ci_status TEXT NOT NULL CHECK (ci_status IN ('UNKNOWN', 'PENDING', 'SUCCESS', 'FAILURE')),
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (connection_id, number)
);
CREATE INDEX pull_requests_head ON pull_requests (connection_id, head_sha);
CREATE INDEX pull_requests_run ON pull_requests (run_id);

CREATE TABLE platform_roles (
    user_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('PLATFORM_ADMIN', 'PLATFORM_OPERATOR'))
);
