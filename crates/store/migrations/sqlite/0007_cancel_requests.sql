-- A person's request to stop a run that a worker is driving: the worker sees it at its next
-- heartbeat, stops the walk and finalizes the run CANCELLED.
ALTER TABLE workflow_runs ADD COLUMN cancel_requested_at BIGINT;
