-- The version a template's runs start from, promoted explicitly; NULL follows the newest.
ALTER TABLE workflow_templates ADD COLUMN active_version BIGINT;
