-- Spend is written as it is spent: each model call's usage is a row written, under the run's
-- lease, when the call ends, and added to the run's totals in the same transaction. The key is
-- the call's identity (the run, the lease epoch and the execution that made it, the recording
-- id and attempt of its step, and its index among that execution's calls of the step), so a
-- write made again (a retry after a failed commit) finds its row and adds nothing. Another
-- execution of the step (a later holder, or a Temporal activity retried on another worker under
-- the run's shared lease) makes new calls under its own id: new spend, billed as such.
CREATE TABLE run_model_calls (
    run_id TEXT NOT NULL REFERENCES workflow_runs(id) ON DELETE CASCADE,
    epoch BIGINT NOT NULL,
    execution_id TEXT NOT NULL,
    recording_id TEXT NOT NULL,
    attempt BIGINT NOT NULL,
    call_index BIGINT NOT NULL,
    model TEXT,
    cost_micros BIGINT NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (run_id, epoch, execution_id, recording_id, attempt, call_index)
);
