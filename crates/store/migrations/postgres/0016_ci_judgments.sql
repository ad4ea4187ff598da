-- Local CI judges each head once, however many workers run it. A worker claims a head (its
-- repository connection and commit) for a lease of database time before it runs the gates,
-- renews the lease while they run, and closes the claim for good with the verdict. A claim
-- whose lease has passed (its worker died) can be taken again; a judged head never is.
CREATE TABLE ci_judgments (
    connection_id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
    head_sha TEXT NOT NULL,
    worker TEXT NOT NULL,
    claim_count BIGINT NOT NULL,
    lease_until BIGINT NOT NULL,
    claimed_at BIGINT NOT NULL,
    verdict TEXT CHECK (verdict IN ('SUCCESS', 'FAILURE')),
    judged_at BIGINT,
    PRIMARY KEY (connection_id, head_sha)
);
