-- A user can be switched off without losing their history: an inactive user's tokens and
-- short-lived credentials stop authenticating at once.
ALTER TABLE users ADD COLUMN active BOOLEAN NOT NULL DEFAULT TRUE;

-- Team leads: above engineers (everyone signed in), below platform admins.
ALTER TABLE platform_roles DROP CONSTRAINT platform_roles_role_check;
ALTER TABLE platform_roles ADD CONSTRAINT platform_roles_role_check
    CHECK (role IN ('PLATFORM_ADMIN', 'PLATFORM_OPERATOR', 'LEAD'));
