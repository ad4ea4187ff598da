-- Fenced leases: a run keeps its queue row (and so its lease epoch, `claim_count`) for its whole
-- life; `DONE` means released or ended, `ABANDONED` means dead-lettered after `max_attempts`
-- claims in a row ended without a release. While a run is LEASED, `available_at` is its lease
-- end, so one partial index orders everything a claim can take.
ALTER TABLE run_queue DROP CONSTRAINT run_queue_state_check;
ALTER TABLE run_queue ADD CONSTRAINT run_queue_state_check
    CHECK (state IN ('RUNNABLE', 'LEASED', 'PARKED', 'DONE', 'ABANDONED'));
ALTER TABLE run_queue ADD COLUMN attempts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE run_queue ADD COLUMN max_attempts BIGINT NOT NULL DEFAULT 5
    CHECK (max_attempts >= 1);
UPDATE run_queue SET available_at = lease_until WHERE state = 'LEASED';
DROP INDEX run_queue_runnable;
DROP INDEX run_queue_leased;
CREATE INDEX run_queue_due ON run_queue (available_at, run_id)
    WHERE state IN ('RUNNABLE', 'LEASED');
