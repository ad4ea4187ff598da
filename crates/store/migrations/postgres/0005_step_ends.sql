-- Steps and human steps end as the interpreter says they do: a step can also end CANCELLED or
-- TIMED_OUT, a human step CANCELLED. SKIPPED was never written and is no longer a step status.
ALTER TABLE workflow_steps DROP CONSTRAINT workflow_steps_status_check;
ALTER TABLE workflow_steps ADD CONSTRAINT workflow_steps_status_check
    CHECK (status IN ('RUNNING', 'SUCCESS', 'FAILED', 'CANCELLED', 'TIMED_OUT'));
ALTER TABLE human_steps DROP CONSTRAINT human_steps_status_check;
ALTER TABLE human_steps ADD CONSTRAINT human_steps_status_check
    CHECK (status IN ('PENDING', 'ANSWERED', 'TIMED_OUT', 'CANCELLED'));
