-- Host scanner rules in the scanners' own shape (type, severity, flags, description), replacing
-- the earlier pattern table that nothing read. A row whose id is a built-in rule's replaces it
-- (enabled) or switches it off (disabled).
DROP TABLE scanner_patterns;

CREATE TABLE scanner_rules (
    id TEXT PRIMARY KEY,
    pattern_type TEXT NOT NULL CHECK (pattern_type IN ('INJECTION', 'EXFILTRATION',
        'SHELL_COMMAND', 'CODE_SECURITY', 'SENSITIVE_FILE', 'SECRET')),
    severity TEXT NOT NULL CHECK (severity IN ('PASS', 'INFO', 'WARNING', 'CRITICAL')),
    pattern TEXT NOT NULL,
    flags TEXT NOT NULL,
    description TEXT NOT NULL,
    enabled BOOLEAN NOT NULL,
    updated_by TEXT,
    updated_at BIGINT NOT NULL
);
