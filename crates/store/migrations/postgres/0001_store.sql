-- auto-swe store schema (PostgreSQL + pgvector). Timestamps are milliseconds since the epoch;
-- JSON is stored as text so both backends read and write the same values.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE organizations (
    id TEXT PRIMARY KEY,
    slug TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    monthly_budget_cents BIGINT CHECK (monthly_budget_cents IS NULL OR monthly_budget_cents >= 0),
    created_at BIGINT NOT NULL
);

CREATE TABLE teams (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (org_id, name)
);

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE org_memberships (
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('ORG_ADMIN', 'ORG_MEMBER')),
    PRIMARY KEY (org_id, user_id)
);

CREATE TABLE team_memberships (
    team_id TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('OWNER', 'ADMIN', 'MEMBER')),
    PRIMARY KEY (team_id, user_id)
);

CREATE TABLE service_principals (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    allowed_connection_ids TEXT NOT NULL,
    allowed_template_ids TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (team_id, name)
);

CREATE TABLE api_tokens (
    id TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    prefix TEXT NOT NULL,
    user_id TEXT REFERENCES users(id) ON DELETE CASCADE,
    service_principal_id TEXT REFERENCES service_principals(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    expires_at BIGINT,
    revoked_at BIGINT,
    created_at BIGINT NOT NULL,
    CHECK ((user_id IS NULL) <> (service_principal_id IS NULL))
);

CREATE TABLE connections (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    type TEXT NOT NULL CHECK (type IN ('git_repo', 'issue_tracker', 'notion', 'confluence',
        'zendesk', 'hubspot', 'slack_workspace', 'http_api', 'mcp')),
    name TEXT NOT NULL,
    repo_host TEXT,
    repo_owner TEXT,
    repo_name TEXT,
    default_branch TEXT,
    config TEXT NOT NULL,
    token_envelope TEXT,
    created_at BIGINT NOT NULL,
    CHECK ((type = 'git_repo') = (repo_host IS NOT NULL AND repo_owner IS NOT NULL
        AND repo_name IS NOT NULL AND default_branch IS NOT NULL))
);
CREATE UNIQUE INDEX connections_git_repo_unique ON connections (repo_host, repo_owner, repo_name)
    WHERE type = 'git_repo';

CREATE TABLE workflow_templates (
    id TEXT PRIMARY KEY,
    team_id TEXT REFERENCES teams(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    latest_version BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL
);

CREATE TABLE workflow_template_versions (
    id TEXT PRIMARY KEY,
    template_id TEXT NOT NULL REFERENCES workflow_templates(id) ON DELETE CASCADE,
    version BIGINT NOT NULL CHECK (version >= 1),
    spec TEXT NOT NULL,
    input_schema TEXT NOT NULL,
    spec_hash TEXT NOT NULL,
    created_by TEXT,
    created_at BIGINT NOT NULL,
    UNIQUE (template_id, version)
);

CREATE TABLE run_inputs (
    id TEXT PRIMARY KEY,
    submitter TEXT NOT NULL,
    idempotency_key TEXT,
    template_id TEXT REFERENCES workflow_templates(id) ON DELETE SET NULL,
    connection_id TEXT REFERENCES connections(id) ON DELETE SET NULL,
    billing_org_id TEXT REFERENCES organizations(id) ON DELETE SET NULL,
    payload TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    started_run_id TEXT,
    created_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX run_inputs_idempotency ON run_inputs (submitter, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE workflow_runs (
    id TEXT PRIMARY KEY,
    org_id TEXT REFERENCES organizations(id) ON DELETE SET NULL,
    team_id TEXT REFERENCES teams(id) ON DELETE SET NULL,
    template_version_id TEXT REFERENCES workflow_template_versions(id) ON DELETE SET NULL,
    run_input_id TEXT REFERENCES run_inputs(id) ON DELETE SET NULL,
    launched_by TEXT,
    status TEXT NOT NULL CHECK (status IN ('PENDING', 'RUNNING', 'WAITING', 'SUCCESS', 'FAILED',
        'CANCELLED', 'TIMED_OUT')),
    spec_snapshot TEXT NOT NULL,
    pins TEXT NOT NULL,
    authorized_connection_ids TEXT NOT NULL,
    cost_micros BIGINT NOT NULL DEFAULT 0,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    ended_at BIGINT
);
CREATE INDEX workflow_runs_org ON workflow_runs (org_id) WHERE ended_at IS NULL;

CREATE TABLE org_monthly_usage (
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    year_month TEXT NOT NULL,
    cost_micros BIGINT NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    runs_completed BIGINT NOT NULL,
    runs_finalized BIGINT NOT NULL,
    PRIMARY KEY (org_id, year_month)
);

CREATE TABLE run_journal (
    seq BIGSERIAL PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES workflow_runs(id) ON DELETE CASCADE,
    recording_id TEXT NOT NULL,
    attempt BIGINT NOT NULL,
    kind TEXT NOT NULL,
    result TEXT NOT NULL,
    recorded_at BIGINT NOT NULL,
    UNIQUE (run_id, recording_id, attempt, kind)
);

CREATE TABLE run_queue (
    run_id TEXT PRIMARY KEY REFERENCES workflow_runs(id) ON DELETE CASCADE,
    state TEXT NOT NULL CHECK (state IN ('RUNNABLE', 'LEASED', 'PARKED')),
    available_at BIGINT NOT NULL,
    worker TEXT,
    lease_until BIGINT,
    claim_count BIGINT NOT NULL DEFAULT 0,
    wake_kind TEXT CHECK (wake_kind IS NULL OR wake_kind IN ('SIGNAL', 'HUMAN_STEP')),
    wake_key TEXT,
    wake_pending BOOLEAN NOT NULL DEFAULT FALSE,
    enqueued_at BIGINT NOT NULL
);
CREATE INDEX run_queue_runnable ON run_queue (available_at) WHERE state = 'RUNNABLE';
CREATE INDEX run_queue_leased ON run_queue (lease_until) WHERE state = 'LEASED';

CREATE TABLE workflow_steps (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES workflow_runs(id) ON DELETE CASCADE,
    recording_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    attempt BIGINT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('RUNNING', 'SUCCESS', 'FAILED', 'SKIPPED')),
    output TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    ended_at BIGINT
);
CREATE INDEX workflow_steps_run ON workflow_steps (run_id, started_at);

CREATE TABLE human_steps (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES workflow_runs(id) ON DELETE CASCADE,
    node_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('APPROVAL', 'DECISION', 'INPUT', 'REVIEW')),
    prompt TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('PENDING', 'ANSWERED', 'TIMED_OUT')),
    answer TEXT,
    answered_by TEXT,
    answered_at BIGINT,
    created_at BIGINT NOT NULL
);

CREATE TABLE signals (
    seq BIGSERIAL PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES workflow_runs(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    payload TEXT NOT NULL,
    received_at BIGINT NOT NULL
);
CREATE INDEX signals_run ON signals (run_id, name, seq);

CREATE TABLE artifacts (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES workflow_runs(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    content_type TEXT NOT NULL,
    size BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    body BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX artifacts_run ON artifacts (run_id);

CREATE TABLE agent_traces (
    seq BIGSERIAL PRIMARY KEY,
    run_id TEXT REFERENCES workflow_runs(id) ON DELETE CASCADE,
    workflow_id TEXT NOT NULL,
    node_id TEXT,
    recording_id TEXT,
    activity TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    spend_owner_org_id TEXT,
    model TEXT,
    cost_micros BIGINT NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX agent_traces_run ON agent_traces (run_id, seq);

CREATE TABLE provider_credentials (
    id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    scope TEXT NOT NULL CHECK (scope IN ('GLOBAL', 'ORGANIZATION', 'TEAM', 'CHANNEL',
        'WORKFLOW_TEMPLATE')),
    scope_id TEXT,
    label TEXT NOT NULL,
    key_envelope TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE agents (
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
    system_prompt TEXT NOT NULL,
    credential_id TEXT REFERENCES provider_credentials(id) ON DELETE SET NULL,
    tool_keys TEXT NOT NULL,
    skill_ids TEXT NOT NULL,
    runtime TEXT NOT NULL,
    reasoning TEXT CHECK (reasoning IS NULL OR reasoning IN ('off', 'low', 'medium', 'high')),
    created_at BIGINT NOT NULL,
    CHECK ((scope = 'GLOBAL') = (scope_id IS NULL)),
    UNIQUE (key, scope, scope_key, version)
);
CREATE UNIQUE INDEX agents_one_current ON agents (key, scope, scope_key) WHERE is_current;
CREATE UNIQUE INDEX agents_one_global ON agents (key) WHERE scope = 'GLOBAL' AND is_current;

CREATE TABLE skills (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    scope TEXT NOT NULL CHECK (scope IN ('GLOBAL', 'ORGANIZATION', 'TEAM', 'CHANNEL',
        'WORKFLOW_TEMPLATE')),
    scope_id TEXT,
    scope_key TEXT NOT NULL,
    is_active BOOLEAN NOT NULL,
    current_revision BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    CHECK ((scope = 'GLOBAL') = (scope_id IS NULL)),
    UNIQUE (name, scope, scope_key)
);

CREATE TABLE skill_revisions (
    skill_id TEXT NOT NULL REFERENCES skills(id) ON DELETE CASCADE,
    revision BIGINT NOT NULL,
    text TEXT NOT NULL,
    description TEXT NOT NULL,
    hash TEXT NOT NULL,
    author TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (skill_id, revision)
);

CREATE TABLE scanner_patterns (
    key TEXT PRIMARY KEY,
    category TEXT NOT NULL CHECK (category IN ('INJECTION', 'EXFILTRATION', 'SHELL_COMMAND',
        'CODE_SECURITY', 'SENSITIVE_FILE', 'CREDENTIAL')),
    pattern TEXT NOT NULL,
    severity TEXT NOT NULL,
    is_active BOOLEAN NOT NULL
);

CREATE TABLE outcome_ledger (
    run_id TEXT NOT NULL REFERENCES workflow_runs(id) ON DELETE CASCADE,
    effect_key TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('PENDING', 'DONE')),
    result TEXT,
    created_at BIGINT NOT NULL,
    done_at BIGINT,
    PRIMARY KEY (run_id, effect_key)
);

CREATE TABLE audit_log (
    seq BIGSERIAL PRIMARY KEY,
    at BIGINT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target_kind TEXT NOT NULL,
    target_id TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX audit_log_target ON audit_log (target_kind, target_id, seq);

CREATE TABLE memory_items (
    id TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    org_id TEXT NOT NULL,
    team_id TEXT,
    connection_id TEXT,
    content TEXT NOT NULL,
    metadata TEXT NOT NULL,
    skills_active TEXT NOT NULL,
    embedding vector(1536) NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX memory_items_owner ON memory_items (org_id, scope);
CREATE INDEX memory_items_embedding ON memory_items USING hnsw (embedding vector_cosine_ops);
