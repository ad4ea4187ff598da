-- The agent library's own model is stored as it is: a version may name no prompt (the built-in
-- one), no tool keys and no runtime (no opinion), may inherit its model from another agent, bind
-- an MCP connection, and records its origin, who cut it and whether its prompt was verified.
-- Skills keep a live copy of their current revision's text with their flags; revisions keep
-- scan warnings, provenance and reference files.
ALTER TABLE agents ALTER COLUMN system_prompt DROP NOT NULL;
ALTER TABLE agents ALTER COLUMN tool_keys DROP NOT NULL;
ALTER TABLE agents ALTER COLUMN runtime DROP NOT NULL;
ALTER TABLE agents ADD COLUMN inherits_model_from TEXT;
ALTER TABLE agents ADD COLUMN mcp_connection_id TEXT;
ALTER TABLE agents ADD COLUMN origin TEXT;
ALTER TABLE agents ADD COLUMN is_verified BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE agents ADD COLUMN created_by TEXT;

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
