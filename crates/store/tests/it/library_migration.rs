//! Migration `0006_agent_library` on rows written before it: agent lineages, their activation
//! and skills with revisions come through whole on both backends and take new writes.

use auto_swe_agents::{AgentVersion, ReasoningLevel, Runtime, ScopeRef, SkillScope};

use crate::support::{BlankDb, Kind, keyring};

/// Rows in the shape migrations 0001–0005 left them.
const OLDER_ROWS: &str = "
INSERT INTO agents (id, key, scope, scope_id, scope_key, version, is_current, is_active, model,
    system_prompt, credential_id, tool_keys, skill_ids, runtime, reasoning, created_at) VALUES
    ('a1', 'implementer', 'GLOBAL', NULL, '', 1, FALSE, TRUE, 'anthropic/claude', 'p1', NULL,
        '[\"readFile\"]', '[\"tdd\"]', 'native', 'high', 1),
    ('a2', 'implementer', 'GLOBAL', NULL, '', 2, TRUE, TRUE, 'anthropic/claude', 'p2', NULL,
        '[\"readFile\", \"bash\"]', '[\"tdd\"]', 'native', NULL, 2),
    ('a3', 'implementer', 'TEAM', 't1', 't1', 1, TRUE, FALSE, NULL, '', NULL, '[]', '[]',
        'claude-code', 'low', 3);
INSERT INTO skills (id, name, scope, scope_id, scope_key, is_active, current_revision,
    created_at) VALUES ('s1', 'tdd', 'GLOBAL', NULL, '', TRUE, 2, 1);
INSERT INTO skill_revisions (skill_id, revision, text, description, hash, author, created_at)
    VALUES ('s1', 1, 'text one', 'desc one', 'h1', NULL, 1),
           ('s1', 2, 'text two', 'desc two', 'h2', 'alice', 2);
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn older_library_rows_survive_the_migration_on_sqlite() {
    if let Some(blank) = BlankDb::new(Kind::Sqlite).await {
        blank.written_before(6, OLDER_ROWS).await;
        check(blank).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn older_library_rows_survive_the_migration_on_postgres() {
    if let Some(blank) = BlankDb::new(Kind::Postgres).await {
        blank.written_before(6, OLDER_ROWS).await;
        check(blank).await;
    }
}

async fn check(blank: BlankDb) {
    let db = blank.open(keyring()).await;
    let store = &db.store;
    let (active, versions) = store
        .history("implementer", &ScopeRef::Global)
        .await
        .unwrap()
        .unwrap();
    assert!(active);
    assert_eq!(versions.len(), 2);
    let v1 = &versions[0];
    assert_eq!(
        (v1.version, v1.system_prompt.as_deref(), v1.reasoning),
        (1, Some("p1"), ReasoningLevel::High)
    );
    let v2 = &versions[1];
    assert_eq!(v2.version, 2);
    assert_eq!(
        v2.model_spec
            .as_ref()
            .map(auto_swe_agents::ModelName::as_str),
        Some("anthropic/claude")
    );
    assert_eq!(
        v2.tool_keys,
        Some(vec!["readFile".to_owned(), "bash".to_owned()])
    );
    assert_eq!(v2.skill_refs, vec!["tdd".to_owned()]);
    assert_eq!(v2.runtime, Some(Runtime::Native));
    assert_eq!(v2.reasoning, ReasoningLevel::None);
    assert_eq!(
        (v2.inherits_model_from.as_ref(), v2.is_verified),
        (None, false)
    );
    let team = ScopeRef::Team("t1".to_owned());
    let (team_active, team_versions) = store.history("implementer", &team).await.unwrap().unwrap();
    assert!(!team_active);
    assert_eq!(team_versions[0].runtime, Some(Runtime::ClaudeCode));
    assert_eq!(team_versions[0].tool_keys, Some(Vec::new()));

    // The skill's live copy is its current revision's text.
    let skill = store.get("s1").await.unwrap().unwrap();
    assert_eq!(
        (
            skill.name.as_str(),
            &skill.scope,
            skill.current_revision,
            skill.description.as_str(),
            skill.prompt_text.as_str()
        ),
        ("tdd", &SkillScope::Global, 2, "desc two", "text two")
    );
    let revisions = store.revisions("s1").await.unwrap();
    assert_eq!(revisions.len(), 2);
    assert_eq!(
        (
            revisions[1].author.as_deref(),
            revisions[1].content_hash.as_str()
        ),
        (Some("alice"), "h2")
    );
    assert!(revisions[0].scan_warnings.is_empty() && revisions[0].reference_files.is_empty());

    // The lineage takes a new version with the new fields.
    let mut v3 = AgentVersion::new("implementer", ScopeRef::Global)
        .inheriting("planner")
        .at_version(3);
    v3.is_verified = true;
    store.append(v3.clone(), Some(2)).await.unwrap();
    assert_eq!(
        store
            .version("implementer", &ScopeRef::Global, 3)
            .await
            .unwrap(),
        Some(v3)
    );
    db.finish().await;
}
