-- A repository belongs to one connection, hence one team. Its identity is the canonical path of
-- a local bare repository (`config.bareRepository`), else host/owner/name without regard to
-- case; a partial unique index holds it. Rows written before this rule keep their identity only
-- when they are the oldest to claim it: a later twin is left without one, and the server reports
-- it at start and refuses runs on it until it is removed.
ALTER TABLE connections ADD COLUMN repo_identity TEXT;

UPDATE connections SET repo_identity = CASE
    WHEN json_extract(config, '$.bareRepository') IS NOT NULL
        THEN 'local:' || json_extract(config, '$.bareRepository')
    ELSE 'git:' || lower(repo_host) || '/' || lower(repo_owner) || '/' || lower(repo_name)
END
WHERE type = 'git_repo';

UPDATE connections SET repo_identity = NULL
WHERE type = 'git_repo' AND EXISTS (
    SELECT 1 FROM connections older
    WHERE older.repo_identity = connections.repo_identity
      AND older.id <> connections.id
      AND (older.created_at < connections.created_at
           OR (older.created_at = connections.created_at AND older.id < connections.id))
);

CREATE UNIQUE INDEX connections_repository ON connections (repo_identity)
    WHERE repo_identity IS NOT NULL;

-- A further team of the owning team's organization that may see and launch runs on a
-- repository; `may_push` says whether its runs may push branches and open pull requests. The
-- owning team keeps management; revoking deletes the row (the audit log keeps the history).
CREATE TABLE connection_shares (
    connection_id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
    team_id TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    may_push BOOLEAN NOT NULL,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (connection_id, team_id)
);

CREATE INDEX connection_shares_team ON connection_shares (team_id);
