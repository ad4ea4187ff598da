-- A user can be switched off without losing their history: an inactive user's tokens and
-- short-lived credentials stop authenticating at once.
ALTER TABLE users ADD COLUMN active BOOLEAN NOT NULL DEFAULT TRUE;

-- Team leads: above engineers (everyone signed in), below platform admins. SQLite cannot alter
-- a CHECK, so the table is rebuilt.
CREATE TABLE platform_roles_next (
    user_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('PLATFORM_ADMIN', 'PLATFORM_OPERATOR', 'LEAD'))
);
INSERT INTO platform_roles_next (user_id, role) SELECT user_id, role FROM platform_roles;
DROP TABLE platform_roles;
ALTER TABLE platform_roles_next RENAME TO platform_roles;
