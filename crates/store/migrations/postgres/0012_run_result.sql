-- What a run came to (result, final context, error), written once by the finalize that ends it;
-- strings too long for the row are spilled to artifacts and replaced by placeholders.
ALTER TABLE workflow_runs ADD COLUMN result TEXT;
