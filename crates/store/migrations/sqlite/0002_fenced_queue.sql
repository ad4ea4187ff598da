-- Fenced leases: a run keeps its queue row (and so its lease epoch, `claim_count`) for its whole
-- life; `DONE` means released or ended, `ABANDONED` means dead-lettered after `max_attempts`
-- claims in a row ended without a release. While a run is LEASED, `available_at` is its lease
-- end, so one partial index orders everything a claim can take. SQLite cannot alter a CHECK
-- constraint, so the table is rebuilt.
CREATE TABLE run_queue_next (
    run_id TEXT PRIMARY KEY REFERENCES workflow_runs(id) ON DELETE CASCADE,
    state TEXT NOT NULL CHECK (state IN ('RUNNABLE', 'LEASED', 'PARKED', 'DONE', 'ABANDONED')),
    available_at BIGINT NOT NULL,
    worker TEXT,
    lease_until BIGINT,
    claim_count BIGINT NOT NULL DEFAULT 0,
    wake_kind TEXT CHECK (wake_kind IS NULL OR wake_kind IN ('SIGNAL', 'HUMAN_STEP')),
    wake_key TEXT,
    wake_pending BOOLEAN NOT NULL DEFAULT FALSE,
    enqueued_at BIGINT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    max_attempts BIGINT NOT NULL DEFAULT 5 CHECK (max_attempts >= 1)
);
INSERT INTO run_queue_next (run_id, state, available_at, worker, lease_until, claim_count,
    wake_kind, wake_key, wake_pending, enqueued_at)
SELECT run_id, state, CASE WHEN state = 'LEASED' THEN lease_until ELSE available_at END, worker,
    lease_until, claim_count, wake_kind, wake_key, wake_pending, enqueued_at FROM run_queue;
DROP TABLE run_queue;
ALTER TABLE run_queue_next RENAME TO run_queue;
CREATE INDEX run_queue_due ON run_queue (available_at, run_id)
    WHERE state IN ('RUNNABLE', 'LEASED');
