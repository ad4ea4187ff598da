-- The agent library's own model is stored as it is: a version may name no prompt (the built-in
-- one), no tool keys and no runtime (no opinion), may inherit its model from another agent, bind
-- an MCP connection, and records its origin, who cut it and whether its prompt was verified.
-- Skills keep a live copy of their current revision's text with their flags; revisions keep
-- scan warnings, provenance and reference files. SQLite cannot relax NOT NULL in place, so the
-- agents table is rebuilt with its rows.
CREATE TABLE agents_next (
    id TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    scope TEXT NOT NULL CHECK (scope IN ('GLOBAL', 'ORGANIZATION', 'TEAM', 'CHANNEL',
        'WORKFLOW_TEMPLATE')),
    scope_id TEXT,
    scope_key TEXT NOT NULL,
    version BIGINT NOT NULL CHECK (version >= 1),
    is_current BOOLEAN NOT NULL,
    is_active BOOLEAN NOT NULL,
    model TEXT,
    inherits_model_from TEXT,
    system_prompt TEXT,
    credential_id TEXT REFERENCES provider_credentials(id) ON DELETE SET NULL,
    tool_keys TEXT,
    skill_ids TEXT NOT NULL,
    mcp_connection_id TEXT,
    runtime TEXT,
    reasoning TEXT CHECK (reasoning IS NULL OR reasoning IN ('off', 'low', 'medium', 'high')),
    origin TEXT,
    is_verified BOOLEAN NOT NULL DEFAULT FALSE,
    created_by TEXT,
    created_at BIGINT NOT NULL,
    CHECK ((scope = 'GLOBAL') = (scope_id IS NULL)),
    UNIQUE (key, scope, scope_key, version)
);
INSERT INTO agents_next (id, key, scope, scope_id, scope_key, version, is_current, is_active,
    model, system_prompt, credential_id, tool_keys, skill_ids, runtime, reasoning, created_at)
    SELECT id, key, scope, scope_id, scope_key, version, is_current, is_active, model,
        system_prompt, credential_id, tool_keys, skill_ids, runtime, reasoning, created_at
    FROM agents;
DROP TABLE agents;
ALTER TABLE agents_next RENAME TO agents;
CREATE UNIQUE INDEX agents_one_current ON agents (key, scope, scope_key) WHERE is_current;
CREATE UNIQUE INDEX agents_one_global ON agents (key) WHERE scope = 'GLOBAL' AND is_current;

ALTER TABLE skills ADD COLUMN org_id TEXT;
ALTER TABLE skills ADD COLUMN description TEXT NOT NULL DEFAULT '';
ALTER TABLE skills ADD COLUMN prompt_text TEXT NOT NULL DEFAULT '';
ALTER TABLE skills ADD COLUMN is_built_in BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE skills ADD COLUMN is_verified BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE skills ADD COLUMN provenance TEXT;
UPDATE skills SET description = r.description, prompt_text = r.text
    FROM skill_revisions r WHERE r.skill_id = skills.id AND r.revision = skills.current_revision;

ALTER TABLE skill_revisions ADD COLUMN scan_warnings TEXT NOT NULL DEFAULT '[]';
ALTER TABLE skill_revisions ADD COLUMN provenance TEXT;
ALTER TABLE skill_revisions ADD COLUMN reference_files TEXT NOT NULL DEFAULT '[]';

-- One row whose lock serializes the skill writes that check names across every skill.
CREATE TABLE library_lock (id INTEGER PRIMARY KEY CHECK (id = 1), writes BIGINT NOT NULL);
INSERT INTO library_lock (id, writes) VALUES (1, 0);
