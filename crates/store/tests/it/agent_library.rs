//! The agent library's storage seams (`auto_swe_agents::{AgentStore, SkillStore,
//! CredentialStore}`) on both backends: the contract every implementor owes, attacked with
//! stale and concurrent writes and refused values, and the agents crate's own library and
//! resolver running on the store.

use std::sync::Arc;

use auto_swe_agents::{
    Actor, AgentFields, AgentLibrary, AgentPatch, AgentRef, AgentVersion, CreateAgent,
    LibraryStoreError, ModelName, NewSkill, ReasoningLevel, ReferenceFile, ResolveCtx, Resolver,
    Runtime, ScopeRef, Skill, SkillProvenance, SkillRevision, SkillScope, StaticPatterns,
    name_conflicts,
};
use auto_swe_store::{SecretString, Store};

use crate::conformance;
use crate::support::TestDb;

conformance!(
    agent_lineages_append_by_compare_and_set,
    agent_activation_belongs_to_the_lineage,
    concurrent_agent_appends_have_one_winner,
    refused_agent_values_write_nothing,
    skills_are_created_and_revised_by_compare_and_set,
    concurrent_skill_creates_check_names_atomically,
    credentials_are_found_by_scope_and_must_open,
    the_agent_library_runs_on_the_store
);

fn full_version(key: &str, scope: ScopeRef) -> AgentVersion {
    let mut v = AgentVersion::new(key, scope).with_model("anthropic/claude-sonnet");
    v.system_prompt = Some("You implement.".to_owned());
    v.skill_refs = vec!["tdd".to_owned(), "small-commits".to_owned()];
    v.tool_keys = Some(Vec::new());
    v.mcp_connection_id = Some("mcp-1".to_owned());
    v.runtime = Some(Runtime::ClaudeCode);
    v.reasoning = ReasoningLevel::High;
    v.origin = Some("swe-starter".to_owned());
    v.is_verified = true;
    v.created_by = Some("alice".to_owned());
    v
}

async fn agent_lineages_append_by_compare_and_set(db: &TestDb) {
    let store = &db.store;
    let v1 = full_version("implementer", ScopeRef::Global);
    store.append(v1.clone(), None).await.unwrap();
    // Every field comes back as written, including "no opinion" next to "an empty list".
    assert_eq!(
        store
            .version("implementer", &ScopeRef::Global, 1)
            .await
            .unwrap(),
        Some(v1.clone())
    );
    let mut bare = AgentVersion::new("reviewer", ScopeRef::Team("t1".to_owned()));
    bare.inherits_model_from = Some("implementer".to_owned());
    store.append(bare.clone(), None).await.unwrap();
    assert_eq!(
        store
            .history("reviewer", &ScopeRef::Team("t1".to_owned()))
            .await
            .unwrap(),
        Some((true, vec![bare.clone()]))
    );

    // A second first version, a gap and a wrong expectation are conflicts.
    let again = store.append(v1.clone(), None).await.unwrap_err();
    assert_eq!(again, LibraryStoreError::Conflict);
    let gap = store
        .append(v1.clone().at_version(3), Some(1))
        .await
        .unwrap_err();
    assert_eq!(gap, LibraryStoreError::Conflict);
    let mut v2 = v1.clone().at_version(2);
    v2.system_prompt = None;
    v2.tool_keys = None;
    v2.runtime = None;
    v2.model_spec = Some(ModelName::new("openai/gpt-5"));
    assert_eq!(
        store.append(v2.clone(), Some(2)).await.unwrap_err(),
        LibraryStoreError::Conflict
    );
    store.append(v2.clone(), Some(1)).await.unwrap();
    // A stale writer who read version 1 loses, and wrote nothing.
    assert_eq!(
        store.append(v2.clone(), Some(1)).await.unwrap_err(),
        LibraryStoreError::Conflict
    );
    assert_eq!(
        store
            .history("implementer", &ScopeRef::Global)
            .await
            .unwrap(),
        Some((true, vec![v1.clone(), v2.clone()]))
    );

    // Lineages are per key and scope: the same key at two teams is two lineages.
    let t1 = ScopeRef::Team("t1".to_owned());
    let t2 = ScopeRef::Team("t2".to_owned());
    store
        .append(
            AgentVersion::new("implementer", t1.clone()).with_prompt("t1"),
            None,
        )
        .await
        .unwrap();
    store
        .append(
            AgentVersion::new("implementer", t2.clone()).with_prompt("t2"),
            None,
        )
        .await
        .unwrap();
    let mut heads = store
        .heads(
            "implementer",
            &[
                ScopeRef::Global,
                t1.clone(),
                ScopeRef::Organization("o".to_owned()),
            ],
        )
        .await
        .unwrap();
    heads.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(heads.len(), 2, "no lineage at the org, t2 not asked for");
    assert_eq!(heads[0].0, t1);
    assert_eq!(heads[0].1.latest.system_prompt.as_deref(), Some("t1"));
    assert_eq!(heads[1].0, ScopeRef::Global);
    assert_eq!(heads[1].1.latest, v2);
    assert_eq!(store.version("implementer", &t2, 2).await.unwrap(), None);
    assert_eq!(
        store.history("ghost", &ScopeRef::Global).await.unwrap(),
        None
    );
    assert_eq!(store.keys().await.unwrap(), vec!["implementer", "reviewer"]);
    // Every lineage's head, once, at whatever scope it lives.
    let mut lineages: Vec<(String, ScopeRef, u32)> = store
        .lineages()
        .await
        .unwrap()
        .into_iter()
        .map(|h| (h.latest.key, h.latest.scope, h.latest.version))
        .collect();
    lineages.sort();
    assert_eq!(
        lineages,
        vec![
            ("implementer".to_owned(), t1.clone(), 1),
            ("implementer".to_owned(), t2.clone(), 1),
            ("implementer".to_owned(), ScopeRef::Global, 2),
            ("reviewer".to_owned(), ScopeRef::Team("t1".to_owned()), 1),
        ]
    );
}

async fn agent_activation_belongs_to_the_lineage(db: &TestDb) {
    let store = &db.store;
    let team = ScopeRef::Team("t1".to_owned());
    store
        .append(
            AgentVersion::new("fixer", team.clone()).with_model("a/b"),
            None,
        )
        .await
        .unwrap();
    store.set_active("fixer", &team, false).await.unwrap();
    let heads = store
        .heads("fixer", std::slice::from_ref(&team))
        .await
        .unwrap();
    assert!(!heads[0].1.active);
    // A new head keeps the lineage switched off; switching on again reaches the new head.
    store
        .append(
            AgentVersion::new("fixer", team.clone())
                .with_model("a/c")
                .at_version(2),
            Some(1),
        )
        .await
        .unwrap();
    let (active, versions) = store.history("fixer", &team).await.unwrap().unwrap();
    assert!(!active);
    let lineages = store.lineages().await.unwrap();
    assert_eq!(lineages.len(), 1, "one lineage, whatever its versions");
    assert!(!lineages[0].active);
    assert_eq!(lineages[0].latest.version, 2);
    assert_eq!(versions.len(), 2);
    store.set_active("fixer", &team, true).await.unwrap();
    assert!(
        store
            .heads("fixer", std::slice::from_ref(&team))
            .await
            .unwrap()[0]
            .1
            .active
    );
    assert_eq!(
        store
            .set_active("fixer", &ScopeRef::Team("t2".to_owned()), false)
            .await
            .unwrap_err(),
        LibraryStoreError::NotFound
    );
}

async fn concurrent_agent_appends_have_one_winner(db: &TestDb) {
    let store = &db.store;
    store
        .append(
            AgentVersion::new("planner", ScopeRef::Global).with_model("a/b"),
            None,
        )
        .await
        .unwrap();
    // Eight editors who all read version 1: exactly one cuts version 2.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store: Store = store.clone();
        tasks.push(tokio::spawn(async move {
            let next = AgentVersion::new("planner", ScopeRef::Global)
                .with_model("a/b")
                .with_prompt(&format!("editor {i}"))
                .at_version(2);
            store.append(next, Some(1)).await
        }));
    }
    // Eight creators of one new lineage: exactly one creates it.
    for i in 0..8 {
        let store: Store = store.clone();
        tasks.push(tokio::spawn(async move {
            let first = AgentVersion::new("planner", ScopeRef::Team("t".to_owned()))
                .with_prompt(&format!("creator {i}"));
            store.append(first, None).await
        }));
    }
    let mut won = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(()) => won += 1,
            Err(e) => assert_eq!(e, LibraryStoreError::Conflict, "{e}"),
        }
    }
    assert_eq!(won, 2);
    let (_, global) = store
        .history("planner", &ScopeRef::Global)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(global.len(), 2);
    let (_, team) = store
        .history("planner", &ScopeRef::Team("t".to_owned()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(team.len(), 1);
    assert_eq!(
        db.raw_count("SELECT COUNT(*) FROM agents WHERE key = 'planner' AND is_current")
            .await,
        2
    );
}

async fn refused_agent_values_write_nothing(db: &TestDb) {
    let store = &db.store;
    let long_key = "k".repeat(600);
    let err = store
        .append(AgentVersion::new(&long_key, ScopeRef::Global), None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "STORE_INVALID");
    assert!(!err.is_retryable());
    // A credential pin must name a stored credential.
    let mut dangling = AgentVersion::new("implementer", ScopeRef::Global).with_model("a/b");
    dangling.credential_id = Some("no-such-credential".to_owned());
    let err = store.append(dangling, None).await.unwrap_err();
    assert_eq!(err.code(), "STORE_INVALID", "{err}");
    let mut huge = AgentVersion::new("implementer", ScopeRef::Global);
    huge.system_prompt = Some("x".repeat(2 * 1024 * 1024));
    assert_eq!(
        store.append(huge, None).await.unwrap_err().code(),
        "STORE_INVALID"
    );
    assert_eq!(store.keys().await.unwrap(), Vec::<String>::new());
    assert_eq!(db.raw_count("SELECT COUNT(*) FROM agents").await, 0);

    // A skill whose first revision is refused leaves neither row behind.
    let skill = Skill::new("big", "big", SkillScope::Global);
    let first = SkillRevision::new("big", 1, "d", &"x".repeat(2 * 1024 * 1024));
    let err = store.create(skill, first, &no_conflicts).await.unwrap_err();
    assert_eq!(err.code(), "STORE_INVALID", "{err}");
    assert_eq!(store.get("big").await.unwrap(), None);
    assert_eq!(db.raw_count("SELECT COUNT(*) FROM skills").await, 0);
}

fn no_conflicts(_: &[Skill]) -> Vec<String> {
    Vec::new()
}

async fn skills_are_created_and_revised_by_compare_and_set(db: &TestDb) {
    let store = &db.store;
    let scope = SkillScope::Team {
        team_id: "t1".to_owned(),
        org_id: Some("o1".to_owned()),
    };
    let mut skill = Skill::new("tdd-t1", "tdd", scope.clone());
    "Test first".clone_into(&mut skill.description);
    "Write the test first.".clone_into(&mut skill.prompt_text);
    skill.provenance = Some(SkillProvenance {
        repository: Some("acme/skills".to_owned()),
        source_sha: "0123456789abcdef".to_owned(),
        source_path: "skills/tdd".to_owned(),
    });
    let mut r1 = SkillRevision::new("tdd-t1", 1, "Test first", "Write the test first.");
    r1.scan_warnings = vec!["shell-command".to_owned()];
    r1.author = Some("alice".to_owned());
    r1.provenance.clone_from(&skill.provenance);
    r1.reference_files = vec![ReferenceFile {
        path: "examples.md".to_owned(),
        content: "# Examples".to_owned(),
    }];
    let written = store
        .create(skill.clone(), r1.clone(), &no_conflicts)
        .await
        .unwrap();
    assert!(written.is_empty());
    assert_eq!(store.get("tdd-t1").await.unwrap(), Some(skill.clone()));
    assert_eq!(store.revision("tdd-t1", 1).await.unwrap(), Some(r1.clone()));
    assert_eq!(store.list().await.unwrap(), vec![skill.clone()]);

    // The same id twice is a conflict; a name conflict found under the lock writes nothing.
    assert_eq!(
        store
            .create(skill.clone(), r1.clone(), &no_conflicts)
            .await
            .unwrap_err(),
        LibraryStoreError::Conflict
    );
    let clash = Skill::new(
        "tdd-org",
        "TDD",
        SkillScope::Organization {
            org_id: "o1".to_owned(),
        },
    );
    let clash_rev = SkillRevision::new("tdd-org", 1, "d", "t");
    let found = store
        .create(clash.clone(), clash_rev, &|all: &[Skill]| {
            name_conflicts(&clash.name, &clash.scope, all)
        })
        .await
        .unwrap();
    assert_eq!(found, vec!["tdd".to_owned()]);
    assert_eq!(store.get("tdd-org").await.unwrap(), None);

    // An edit names the revision it read; a stale one loses and writes nothing.
    let mut edited = skill.clone();
    "Write a failing test first.".clone_into(&mut edited.prompt_text);
    edited.current_revision = 2;
    edited.provenance = None;
    let r2 = SkillRevision::new("tdd-t1", 2, "Test first", "Write a failing test first.");
    store
        .update(edited.clone(), 1, Some(r2.clone()), &no_conflicts)
        .await
        .unwrap();
    assert_eq!(
        store
            .update(edited.clone(), 1, Some(r2.clone()), &no_conflicts)
            .await
            .unwrap_err(),
        LibraryStoreError::Conflict
    );
    assert_eq!(
        store.revisions("tdd-t1").await.unwrap(),
        vec![r1.clone(), r2]
    );
    assert_ne!(
        r1.content_hash,
        store
            .revision("tdd-t1", 2)
            .await
            .unwrap()
            .unwrap()
            .content_hash
    );
    // A flag change cuts no revision.
    let mut verified = edited.clone();
    verified.is_verified = true;
    store
        .update(verified.clone(), 2, None, &no_conflicts)
        .await
        .unwrap();
    assert_eq!(store.get("tdd-t1").await.unwrap(), Some(verified.clone()));
    assert_eq!(store.revisions("tdd-t1").await.unwrap().len(), 2);
    // A rename whose check finds a conflict writes nothing.
    let mut renamed = verified.clone();
    "taken".clone_into(&mut renamed.name);
    let found = store
        .update(renamed, 2, None, &|_: &[Skill]| vec!["taken".to_owned()])
        .await
        .unwrap();
    assert_eq!(found, vec!["taken".to_owned()]);
    assert_eq!(store.get("tdd-t1").await.unwrap(), Some(verified));
    assert_eq!(
        store
            .update(
                Skill::new("ghost", "ghost", SkillScope::Global),
                1,
                None,
                &no_conflicts
            )
            .await
            .unwrap_err(),
        LibraryStoreError::NotFound
    );
    assert_eq!(store.revision("tdd-t1", 3).await.unwrap(), None);
}

async fn concurrent_skill_creates_check_names_atomically(db: &TestDb) {
    // Eight authors create "lint" under different ids at once, at scopes that all overlap the
    // GLOBAL one: the name check and the write are one step, so exactly one is written.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store: Store = db.store.clone();
        tasks.push(tokio::spawn(async move {
            let scope = if i % 2 == 0 {
                SkillScope::Global
            } else {
                SkillScope::Team {
                    team_id: format!("t{i}"),
                    org_id: None,
                }
            };
            let skill = Skill::new(&format!("lint-{i}"), "Lint", scope.clone());
            let first = SkillRevision::new(&format!("lint-{i}"), 1, "d", "t");
            let overlapping = SkillScope::Global;
            store
                .create(skill, first, &move |all: &[Skill]| {
                    // Every author checks as if GLOBAL, so any stored "lint" is a conflict.
                    name_conflicts("lint", &overlapping, all)
                })
                .await
                .unwrap()
        }));
    }
    let mut written = 0;
    for task in tasks {
        if task.await.unwrap().is_empty() {
            written += 1;
        }
    }
    assert_eq!(written, 1);
    assert_eq!(db.store.list().await.unwrap().len(), 1);
    assert_eq!(
        db.raw_count("SELECT COUNT(*) FROM skill_revisions").await,
        1
    );
}

async fn credentials_are_found_by_scope_and_must_open(db: &TestDb) {
    let store = &db.store;
    let key = SecretString::new("sk-test-123".to_owned());
    let global = store
        .create_provider_credential("anthropic", &ScopeRef::Global, "platform", &key)
        .await
        .unwrap();
    let team = store
        .create_provider_credential("anthropic", &ScopeRef::Team("t1".to_owned()), "team", &key)
        .await
        .unwrap();
    let found = store.by_id(&global.id).await.unwrap().unwrap();
    assert_eq!(
        (found.provider.as_str(), &found.scope),
        ("anthropic", &ScopeRef::Global)
    );
    let found = store
        .for_scope(&ScopeRef::Team("t1".to_owned()), "anthropic")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.id, team.id);
    assert_eq!(
        store
            .for_scope(&ScopeRef::Global, "anthropic")
            .await
            .unwrap()
            .unwrap()
            .id,
        global.id
    );
    assert_eq!(
        store
            .for_scope(&ScopeRef::Team("t2".to_owned()), "anthropic")
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store.for_scope(&ScopeRef::Global, "openai").await.unwrap(),
        None
    );
    assert_eq!(store.by_id("nope").await.unwrap(), None);
    // Under keys that cannot open them, the credentials are as good as absent.
    let other = db
        .reopen(auto_swe_store::Keyring::single(2, [0x22; 32]))
        .await;
    assert_eq!(other.by_id(&global.id).await.unwrap(), None);
    assert_eq!(
        other
            .for_scope(&ScopeRef::Global, "anthropic")
            .await
            .unwrap(),
        None
    );
}

async fn the_agent_library_runs_on_the_store(db: &TestDb) {
    let store = &db.store;
    let credential = store
        .create_provider_credential(
            "anthropic",
            &auto_swe_agents::ScopeRef::Global,
            "platform",
            &SecretString::new("sk-test".to_owned()),
        )
        .await
        .unwrap();
    let patterns = Arc::new(StaticPatterns::builtin());
    let agents = AgentLibrary::new(store.agent_store(), patterns.clone());
    let skills = auto_swe_agents::SkillLibrary::new(store.skill_store(), patterns);
    let admin = Actor::PlatformAdmin {
        id: "root".to_owned(),
    };
    let saved = skills
        .create(NewSkill::new(
            "tdd",
            "Test first",
            "Write the failing test first.",
            SkillScope::Global,
            "root",
        ))
        .await
        .unwrap();
    let fields = AgentFields {
        model_spec: Some(ModelName::new("anthropic/claude-sonnet")),
        system_prompt: Some("You implement.".to_owned()),
        skill_refs: vec![saved.skill.id.clone()],
        reasoning: ReasoningLevel::Medium,
        ..AgentFields::default()
    };
    agents
        .create(
            CreateAgent::new("implementer", ScopeRef::Global, fields),
            &admin,
        )
        .await
        .unwrap();
    let patch = AgentPatch {
        system_prompt: Some(Some("You implement, test first.".to_owned())),
        ..AgentPatch::default()
    };
    agents
        .edit("implementer", &ScopeRef::Global, 1, patch.clone(), &admin)
        .await
        .unwrap();
    // A second editor who read version 1 is told the agent changed.
    let stale = agents
        .edit("implementer", &ScopeRef::Global, 1, patch, &admin)
        .await
        .unwrap_err();
    assert_eq!(stale.code(), "AGENT_CHANGED");

    let cascade = Resolver::new(
        store.agent_store(),
        store.credential_store(),
        store.skill_store(),
    );
    let resolved = cascade
        .resolve_agent(&AgentRef::key("implementer"), &ResolveCtx::global())
        .await
        .unwrap();
    assert_eq!(resolved.row.version, 2);
    assert_eq!(resolved.system_prompt, "You implement, test first.");
    assert_eq!(resolved.credential.id, credential.id);
    assert_eq!(resolved.reasoning, ReasoningLevel::Medium);
    assert_eq!(resolved.skills.len(), 1);
    assert_eq!(
        resolved.skills[0].prompt_text,
        "Write the failing test first."
    );
}
