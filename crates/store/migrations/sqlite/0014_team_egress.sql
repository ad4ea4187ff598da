-- Allow rules a team adds to its proxied workspaces' egress policy (`[METHODS ]HOST:PORT`), as
-- a JSON array of strings. The host's policy and its deny rules still apply.
ALTER TABLE teams ADD COLUMN egress_allow TEXT NOT NULL DEFAULT '[]';
