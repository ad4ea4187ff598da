-- Which durable engine drives a run: 'EMBEDDED' (the store's queue and journal) or 'TEMPORAL'
-- (one Temporal workflow per run). Hosts write signals and stop requests here whatever the
-- engine; an engine that does not read them from the store gets each one forwarded by a relay:
-- 'PENDING' until it is, then 'FORWARDED' (NULL when the engine reads the store itself).
ALTER TABLE workflow_runs ADD COLUMN engine TEXT NOT NULL DEFAULT 'EMBEDDED'
    CHECK (engine IN ('EMBEDDED', 'TEMPORAL'));
ALTER TABLE workflow_runs ADD COLUMN cancel_relay TEXT CHECK (cancel_relay IN ('PENDING', 'FORWARDED'));
ALTER TABLE signals ADD COLUMN relay TEXT CHECK (relay IN ('PENDING', 'FORWARDED'));
CREATE INDEX signals_relay_pending ON signals (seq) WHERE relay = 'PENDING';
CREATE INDEX workflow_runs_cancel_relay_pending ON workflow_runs (id) WHERE cancel_relay = 'PENDING';
