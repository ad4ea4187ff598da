//! Run pins (agentVersions, key@version, skillRevisions, agentRuntimes), the review personas'
//! prompt order and the fix personas' implementer bound.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use auto_swe_agents::{
    AgentRef, AgentVersion, InMemoryRuntimePinStore, LibraryStoreError, PromptSource, ResolveCtx,
    ResolveWarning, ReviewPersona, ReviewPromptInputs, ReviewPromptSource, Runtime,
    RuntimePinStore, RuntimeSource, ScopeRef, SkillScope, builtin_agent, choose_review_prompt,
};
use auto_swe_agents::{NewSkill, SkillEdit, SkillLibrary, StaticPatterns};

use crate::support::{Lib, block, full_ctx, team};

fn global(key: &str, version: u32, prompt: &str) -> AgentVersion {
    AgentVersion::new(key, ScopeRef::Global)
        .with_model("anthropic/m")
        .with_prompt(prompt)
        .at_version(version)
}

#[test]
fn agent_versions_pin_the_global_lineage_only() {
    let lib = Lib::new();
    lib.agents
        .seed(vec![global("a", 1, "g1"), global("a", 2, "g2")], true);
    let mut ctx = ResolveCtx::global().team("team-1", None);
    ctx.agent_versions.insert("a".to_owned(), 1);
    let got = block(lib.resolver.resolve_agent(&AgentRef::key("a"), &ctx)).unwrap();
    assert_eq!((got.system_prompt.as_str(), got.row.version), ("g1", 1));
    // A team override still wins, at its latest version.
    lib.agents.seed(
        vec![
            AgentVersion::new("a", team())
                .with_model("anthropic/m")
                .with_prompt("t1"),
            AgentVersion::new("a", team())
                .with_model("anthropic/m")
                .with_prompt("t2")
                .at_version(2),
        ],
        true,
    );
    lib.resolver.invalidate();
    let got = block(lib.resolver.resolve_agent(&AgentRef::key("a"), &ctx)).unwrap();
    assert_eq!(got.system_prompt, "t2");
    // A pin naming a version that does not exist does not resolve.
    ctx.agent_versions.insert("a".to_owned(), 9);
    let mut no_team = ctx.clone();
    no_team.team_id = None;
    let got = block(lib.resolver.resolve_agent(&AgentRef::key("a"), &no_team));
    assert_eq!(got.unwrap_err().code(), "CONFIG_MISSING");
}

#[test]
fn a_key_at_version_ref_names_a_global_version_and_beats_the_run_pin() {
    let lib = Lib::new();
    lib.agents.seed(
        vec![
            global("a", 1, "g1"),
            global("a", 2, "g2"),
            global("a", 3, "g3"),
        ],
        true,
    );
    let mut ctx = ResolveCtx::global();
    ctx.agent_versions.insert("a".to_owned(), 3);
    let r = AgentRef::parse("a@2").unwrap();
    assert_eq!(
        block(lib.resolver.resolve_agent(&r, &ctx))
            .unwrap()
            .system_prompt,
        "g2"
    );
    assert_eq!(
        block(lib.resolver.resolve_agent(&AgentRef::key("a"), &ctx))
            .unwrap()
            .system_prompt,
        "g3"
    );
    for bad in ["", "@2", "a@", "a@0", "a@x", " a"] {
        assert_eq!(AgentRef::parse(bad), None, "{bad:?}");
    }
    assert_eq!(AgentRef::parse("a@12").unwrap().to_string(), "a@12");
}

#[test]
fn a_parents_pin_applies_when_chasing_its_model() {
    let lib = Lib::new();
    lib.agents.seed(
        vec![
            AgentVersion::new("parent", ScopeRef::Global).with_model("anthropic/old"),
            AgentVersion::new("parent", ScopeRef::Global)
                .with_model("anthropic/new")
                .at_version(2),
        ],
        true,
    );
    lib.row(AgentVersion::new("child", ScopeRef::Global).inheriting("parent"));
    let mut ctx = ResolveCtx::global();
    ctx.agent_versions.insert("parent".to_owned(), 1);
    let got = block(lib.resolver.resolve_agent(&AgentRef::key("child"), &ctx)).unwrap();
    assert_eq!(got.model.as_str(), "anthropic/old");
}

#[test]
fn skill_revisions_pin_text_but_activation_is_live() {
    let lib = Lib::new();
    let skills = SkillLibrary::new(
        lib.skills.clone(),
        std::sync::Arc::new(StaticPatterns::builtin()),
    );
    let saved = block(skills.create(NewSkill::new(
        "tdd",
        "Write tests first.",
        "old text",
        SkillScope::Global,
        "u1",
    )))
    .unwrap();
    let id = saved.skill.id.clone();
    let mut row = AgentVersion::new("a", ScopeRef::Global).with_model("anthropic/m");
    row.skill_refs = vec![id.clone()];
    lib.row(row);
    let mut ctx = ResolveCtx::global();
    ctx.skill_revisions = block(lib.resolver.snapshot_skill_revisions(&ctx)).unwrap();
    let edit = SkillEdit {
        prompt_text: Some("new text".to_owned()),
        ..SkillEdit::default()
    };
    block(skills.edit(&id, 1, edit, "u1")).unwrap();
    let pinned = block(lib.resolver.resolve_agent(&AgentRef::key("a"), &ctx)).unwrap();
    assert_eq!(
        (
            pinned.skills[0].prompt_text.as_str(),
            pinned.skills[0].revision
        ),
        ("old text", 1)
    );
    let live = block(
        lib.resolver
            .resolve_agent(&AgentRef::key("a"), &ResolveCtx::global()),
    )
    .unwrap();
    assert_eq!(live.skills[0].prompt_text, "new text");
    // A pinned revision whose row is gone resolves the live text with a warning.
    lib.skills.remove_revision(&id, 1);
    lib.resolver.invalidate();
    let got = block(lib.resolver.resolve_agent(&AgentRef::key("a"), &ctx)).unwrap();
    assert_eq!(got.skills[0].prompt_text, "new text");
    assert_eq!(
        got.warnings,
        vec![ResolveWarning::PinnedRevisionMissing {
            skill_id: id.clone(),
            revision: 1
        }]
    );
    // Deactivating a skill takes effect inside a pinned run.
    block(skills.edit(
        &id,
        2,
        SkillEdit {
            is_active: Some(false),
            ..SkillEdit::default()
        },
        "u1",
    ))
    .unwrap();
    lib.resolver.invalidate();
    assert!(
        block(lib.resolver.resolve_agent(&AgentRef::key("a"), &ctx))
            .unwrap()
            .skills
            .is_empty()
    );
}

#[test]
fn skills_follow_refs_order_and_tenant_visibility() {
    let lib = Lib::new();
    let skills = SkillLibrary::new(
        lib.skills.clone(),
        std::sync::Arc::new(StaticPatterns::builtin()),
    );
    let team_scope = SkillScope::Team {
        team_id: "team-1".to_owned(),
        org_id: None,
    };
    let a = block(skills.create(NewSkill::new(
        "alpha",
        "A.",
        "alpha text",
        SkillScope::Global,
        "u",
    )))
    .unwrap()
    .skill
    .id;
    let b = block(skills.create(NewSkill::new("beta", "B.", "beta text", team_scope, "u")))
        .unwrap()
        .skill
        .id;
    let mut row = AgentVersion::new("a", ScopeRef::Global).with_model("anthropic/m");
    row.skill_refs = vec![b.clone(), "missing".to_owned(), a.clone()];
    lib.row(row);
    let got = block(lib.resolver.resolve_agent(&AgentRef::key("a"), &full_ctx())).unwrap();
    let names: Vec<&str> = got.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["beta", "alpha"]);
    assert_eq!(
        got.warnings,
        vec![ResolveWarning::SkillNotFound {
            skill_id: "missing".to_owned()
        }]
    );
    let other_team = ResolveCtx::global().team("team-2", None);
    let got = block(lib.resolver.resolve_agent(&AgentRef::key("a"), &other_team)).unwrap();
    assert_eq!(
        got.skills
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["alpha"]
    );
}

fn runtime_row(key: &str, runtime: Option<Runtime>) -> AgentVersion {
    let mut row = AgentVersion::new(key, ScopeRef::Global).with_model("anthropic/m");
    row.runtime = runtime;
    row
}

#[test]
fn agent_runtimes_pin_on_first_use_and_never_move() {
    let lib = Lib::new();
    let pins = InMemoryRuntimePinStore::new();
    lib.row(runtime_row("a", Some(Runtime::ClaudeCode)));
    lib.row(runtime_row("b", None));
    let ctx = ResolveCtx::global().run("run-1");
    let key_a = AgentRef::key("a");
    let first = block(
        lib.resolver
            .resolve_runtime(&key_a, &ctx, &pins, Runtime::Native),
    )
    .unwrap();
    assert_eq!(
        (first.runtime, first.source),
        (Runtime::ClaudeCode, RuntimeSource::Run)
    );
    // An edit after the pin does not move the run.
    lib.agents
        .seed(vec![runtime_row("a", Some(Runtime::Pi))], true);
    lib.resolver.invalidate();
    let again = block(
        lib.resolver
            .resolve_runtime(&key_a, &ctx, &pins, Runtime::Native),
    )
    .unwrap();
    assert_eq!(again.runtime, Runtime::ClaudeCode);
    // A null pin keeps a runtime added later out: the default decides.
    let key_b = AgentRef::key("b");
    let b = block(
        lib.resolver
            .resolve_runtime(&key_b, &ctx, &pins, Runtime::Native),
    )
    .unwrap();
    assert_eq!(
        (b.runtime, b.source),
        (Runtime::Native, RuntimeSource::Default)
    );
    lib.agents
        .seed(vec![runtime_row("b", Some(Runtime::ClaudeCode))], true);
    lib.resolver.invalidate();
    let b = block(
        lib.resolver
            .resolve_runtime(&key_b, &ctx, &pins, Runtime::Native),
    )
    .unwrap();
    assert_eq!(b.runtime, Runtime::Native);
    let map = block(pins.load("run-1")).unwrap();
    assert_eq!(
        map,
        BTreeMap::from([
            ("a".to_owned(), Some(Runtime::ClaudeCode)),
            ("b".to_owned(), None)
        ])
    );
    // Outside a run the value resolves live; a caller's pin wins over everything.
    let live =
        block(
            lib.resolver
                .resolve_runtime(&key_a, &ResolveCtx::global(), &pins, Runtime::Native),
        )
        .unwrap();
    assert_eq!(
        (live.runtime, live.source),
        (Runtime::Pi, RuntimeSource::Agent)
    );
    let mut caller = ctx.clone();
    caller.agent_runtimes = Some(BTreeMap::from([("a".to_owned(), Some(Runtime::Native))]));
    let got = block(
        lib.resolver
            .resolve_runtime(&key_a, &caller, &pins, Runtime::Pi),
    )
    .unwrap();
    assert_eq!(
        (got.runtime, got.source),
        (Runtime::Native, RuntimeSource::Caller)
    );
}

/// A pin store where another writer pins a different agent (or the same one) between this
/// resolver's load and its compare-and-set, once.
struct RacingPins {
    inner: InMemoryRuntimePinStore,
    race: Mutex<Option<(String, Option<Runtime>)>>,
}

#[async_trait]
impl RuntimePinStore for RacingPins {
    async fn load(
        &self,
        run: &str,
    ) -> Result<BTreeMap<String, Option<Runtime>>, LibraryStoreError> {
        self.inner.load(run).await
    }
    async fn compare_and_set(
        &self,
        run: &str,
        expected: &BTreeMap<String, Option<Runtime>>,
        next: BTreeMap<String, Option<Runtime>>,
    ) -> Result<bool, LibraryStoreError> {
        let race = self.race.lock().unwrap().take();
        if let Some((key, value)) = race {
            let mut theirs = expected.clone();
            theirs.insert(key, value);
            assert!(self.inner.compare_and_set(run, expected, theirs).await?);
        }
        self.inner.compare_and_set(run, expected, next).await
    }
}

#[test]
fn concurrent_first_use_pins_keep_both_entries_and_agree_on_one_agent() {
    let lib = Lib::new();
    lib.row(runtime_row("a", Some(Runtime::ClaudeCode)));
    let ctx = ResolveCtx::global().run("run-1");
    // Another activity pins agent `x` meanwhile: both entries survive.
    let pins = RacingPins {
        inner: InMemoryRuntimePinStore::new(),
        race: Mutex::new(Some(("x".to_owned(), Some(Runtime::Pi)))),
    };
    block(
        lib.resolver
            .resolve_runtime(&AgentRef::key("a"), &ctx, &pins, Runtime::Native),
    )
    .unwrap();
    let map = block(pins.load("run-1")).unwrap();
    assert_eq!(
        map,
        BTreeMap::from([
            ("a".to_owned(), Some(Runtime::ClaudeCode)),
            ("x".to_owned(), Some(Runtime::Pi))
        ])
    );
    // Another activity pins the same agent first: its pin wins, ours is not written over it.
    let pins = RacingPins {
        inner: InMemoryRuntimePinStore::new(),
        race: Mutex::new(Some(("a".to_owned(), None))),
    };
    let got =
        block(
            lib.resolver
                .resolve_runtime(&AgentRef::key("a"), &ctx, &pins, Runtime::Native),
        )
        .unwrap();
    assert_eq!(
        (got.runtime, got.source),
        (Runtime::Native, RuntimeSource::Default)
    );
    assert_eq!(
        block(pins.load("run-1")).unwrap(),
        BTreeMap::from([("a".to_owned(), None)])
    );
}

#[test]
fn run_start_snapshots() {
    let lib = Lib::builtin();
    let keys: Vec<String> = ["implementer", "ciFixer", "ghost"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let versions = block(lib.resolver.snapshot_agent_versions(&keys)).unwrap();
    assert_eq!(
        versions,
        BTreeMap::from([("ciFixer".to_owned(), 1), ("implementer".to_owned(), 1)])
    );
    let runtimes = block(lib.resolver.snapshot_runtimes(&keys, &ResolveCtx::global()));
    assert_eq!(
        runtimes,
        BTreeMap::from([
            ("ciFixer".to_owned(), None),
            ("implementer".to_owned(), None)
        ])
    );
    let skills = block(lib.resolver.snapshot_skill_revisions(&ResolveCtx::global())).unwrap();
    assert_eq!(skills.len(), 36);
}

#[test]
fn review_persona_prompt_order() {
    let security = builtin_agent("securityReviewer").unwrap().prompt;
    let domain = builtin_agent("domainLogicReviewer").unwrap().prompt;
    let reviewer = builtin_agent("reviewer").unwrap().prompt;
    let cases: Vec<(&str, ReviewPromptInputs<'_>, &str, ReviewPromptSource)> = vec![
        (
            "node prompt replaces all",
            ReviewPromptInputs {
                node_prompt: Some("node"),
                persona_row: Some("mine"),
                reviewer_row: Some("rev"),
                domain_logic_row: None,
            },
            "node",
            ReviewPromptSource::Node,
        ),
        (
            "customised persona",
            ReviewPromptInputs {
                node_prompt: None,
                persona_row: Some("mine"),
                reviewer_row: Some("rev"),
                domain_logic_row: None,
            },
            "mine",
            ReviewPromptSource::PersonaCustomised,
        ),
        (
            "customised reviewer",
            ReviewPromptInputs {
                node_prompt: None,
                persona_row: Some(security),
                reviewer_row: Some("rev"),
                domain_logic_row: Some(domain),
            },
            "rev",
            ReviewPromptSource::ReviewerCustomised,
        ),
        (
            "reviewer equal to its built-in is not customised",
            ReviewPromptInputs {
                node_prompt: None,
                persona_row: Some(security),
                reviewer_row: Some(reviewer),
                domain_logic_row: None,
            },
            security,
            ReviewPromptSource::PersonaSeeded,
        ),
        (
            "reviewer equal to the domain-logic row is not customised",
            ReviewPromptInputs {
                node_prompt: None,
                persona_row: None,
                reviewer_row: Some("old domain wording"),
                domain_logic_row: Some("old domain wording"),
            },
            security,
            ReviewPromptSource::BuiltIn,
        ),
        (
            "nothing at all",
            ReviewPromptInputs::default(),
            security,
            ReviewPromptSource::BuiltIn,
        ),
        (
            "blank node prompt is absent",
            ReviewPromptInputs {
                node_prompt: Some(" "),
                ..ReviewPromptInputs::default()
            },
            security,
            ReviewPromptSource::BuiltIn,
        ),
    ];
    for (name, inputs, text, source) in cases {
        assert_eq!(
            choose_review_prompt(ReviewPersona::Security, inputs),
            (text.to_owned(), source),
            "{name}"
        );
    }
}

#[test]
fn a_customised_reviewer_prompt_reaches_the_personas_through_the_resolver() {
    let lib = Lib::builtin();
    let mut reviewer = builtin_agent("reviewer").unwrap().seed_row();
    reviewer.system_prompt = Some("team review rules".to_owned());
    reviewer.scope = team();
    lib.row(reviewer);
    let (text, source) = block(lib.resolver.review_persona_prompt(
        ReviewPersona::Performance,
        None,
        &full_ctx(),
    ))
    .unwrap();
    assert_eq!(
        (text.as_str(), source),
        ("team review rules", ReviewPromptSource::ReviewerCustomised)
    );
    let (text, source) = block(lib.resolver.review_persona_prompt(
        ReviewPersona::Performance,
        None,
        &ResolveCtx::global(),
    ))
    .unwrap();
    assert_eq!(text, builtin_agent("performanceReviewer").unwrap().prompt);
    assert_eq!(source, ReviewPromptSource::PersonaSeeded);
}

#[test]
fn fix_personas_are_bounded_by_the_implementer() {
    let lib = Lib::builtin();
    let mut implementer = builtin_agent("implementer").unwrap().seed_row();
    implementer.scope = team();
    implementer.tool_keys = Some(vec!["readFile".into(), "writeFile".into(), "mcp".into()]);
    implementer.mcp_connection_id = Some("conn-impl".to_owned());
    lib.row(implementer);
    let mut fixer = builtin_agent("ciFixer").unwrap().seed_row();
    fixer.scope = team();
    fixer.tool_keys = Some(vec!["readFile".into(), "bash".into(), "mcp".into()]);
    lib.row(fixer);
    let got = block(
        lib.resolver
            .resolve_bounded_persona(&AgentRef::key("ciFixer"), &full_ctx()),
    )
    .unwrap();
    assert_eq!(
        got.tool_keys,
        Some(vec!["readFile".to_owned(), "mcp".to_owned()])
    );
    assert_eq!(
        got.mcp
            .as_ref()
            .map(|m| (m.connection_id.as_str(), m.from_implementer)),
        Some(("conn-impl", true))
    );
    // The seeded persona carries no skills: it is given the implementer's.
    assert_eq!(got.skills.len(), 17);
    assert_eq!(got.agent.prompt_source, PromptSource::Row);
    assert_eq!(got.agent.model.as_str(), "anthropic/claude-opus-5-5");
}

/// Every runtime round-trips its wire name, an unknown stored name is no opinion, and each
/// harness drives only its own provider's models.
#[test]
fn runtimes_read_back_their_wire_names_and_harnesses_keep_to_their_provider() {
    use auto_swe_agents::ModelName;

    for runtime in [
        Runtime::Native,
        Runtime::ClaudeCode,
        Runtime::Pi,
        Runtime::Codex,
    ] {
        assert_eq!(Runtime::parse_lenient(runtime.as_str()), Some(runtime));
        let json = serde_json::to_value(runtime).unwrap();
        assert_eq!(json, runtime.as_str());
        assert_eq!(serde_json::from_value::<Runtime>(json).unwrap(), runtime);
    }
    assert_eq!(Runtime::parse_lenient("mastra"), Some(Runtime::Native));
    assert_eq!(Runtime::parse_lenient("codex-cli"), None);
    let anthropic = ModelName::new("anthropic/claude-sonnet-4-5");
    let openai = ModelName::new("openai/gpt-5");
    assert!(Runtime::Codex.can_drive(&openai));
    assert!(!Runtime::Codex.can_drive(&anthropic));
    assert!(Runtime::ClaudeCode.can_drive(&anthropic));
    assert!(!Runtime::ClaudeCode.can_drive(&openai));
    assert!(Runtime::Native.can_drive(&openai) && Runtime::Pi.can_drive(&anthropic));
}
