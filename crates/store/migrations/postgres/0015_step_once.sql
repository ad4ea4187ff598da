-- A step is recorded once per run, recording id and attempt: a record made again (a Temporal
-- activity retried after its worker died between the write and the report) finds its row. Rows
-- that were written twice before this index keep the earliest.
DELETE FROM workflow_steps WHERE id IN (
    SELECT later.id FROM workflow_steps AS later JOIN workflow_steps AS first
        ON first.run_id = later.run_id AND first.recording_id = later.recording_id
        AND first.attempt = later.attempt
        AND (first.started_at < later.started_at
            OR (first.started_at = later.started_at AND first.id < later.id))
);
CREATE UNIQUE INDEX workflow_steps_once ON workflow_steps (run_id, recording_id, attempt);
