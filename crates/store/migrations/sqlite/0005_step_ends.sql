-- Steps and human steps end as the interpreter says they do: a step can also end CANCELLED or
-- TIMED_OUT, a human step CANCELLED. SKIPPED was never written and is no longer a step status.
-- SQLite cannot change a CHECK in place, so both tables are rebuilt with their rows.
CREATE TABLE workflow_steps_next (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES workflow_runs(id) ON DELETE CASCADE,
    recording_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    attempt BIGINT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('RUNNING', 'SUCCESS', 'FAILED', 'CANCELLED',
        'TIMED_OUT')),
    output TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    ended_at BIGINT
);
INSERT INTO workflow_steps_next (id, run_id, recording_id, node_id, attempt, status, output,
    started_at, ended_at)
    SELECT id, run_id, recording_id, node_id, attempt, status, output, started_at, ended_at
    FROM workflow_steps;
DROP TABLE workflow_steps;
ALTER TABLE workflow_steps_next RENAME TO workflow_steps;
CREATE INDEX workflow_steps_run ON workflow_steps (run_id, started_at);

CREATE TABLE human_steps_next (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES workflow_runs(id) ON DELETE CASCADE,
    node_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('APPROVAL', 'DECISION', 'INPUT', 'REVIEW')),
    prompt TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('PENDING', 'ANSWERED', 'TIMED_OUT', 'CANCELLED')),
    answer TEXT,
    answered_by TEXT,
    answered_at BIGINT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT
);
INSERT INTO human_steps_next (id, run_id, node_id, kind, prompt, status, answer, answered_by,
    answered_at, created_at, expires_at)
    SELECT id, run_id, node_id, kind, prompt, status, answer, answered_by, answered_at,
        created_at, expires_at
    FROM human_steps;
DROP TABLE human_steps;
ALTER TABLE human_steps_next RENAME TO human_steps;
CREATE INDEX human_steps_pending ON human_steps (created_at, id) WHERE status = 'PENDING';
