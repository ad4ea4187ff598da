//! The five-scope cascade, inheritance chains and cycles, credentials and the cache.

use std::time::Duration;

use auto_swe_agents::{
    AgentRef, AgentVersion, CredentialRef, PromptSource, ReasoningLevel, ResolveCtx, Runtime,
    ScopeRef, builtin_agent,
};

use crate::support::{Lib, block, channel, full_ctx, org, team, template};

fn scopes() -> [ScopeRef; 5] {
    [template(), channel(), team(), org(), ScopeRef::Global]
}

/// Every combination of rows present at the five scopes, with every combination of the four
/// optional scope ids in the context: the most specific present row whose scope applies wins.
#[test]
fn every_scope_present_absent_combination() {
    for rows in 0u32..32 {
        for ids in 0u32..16 {
            let lib = Lib::new();
            for (i, scope) in scopes().iter().enumerate() {
                if rows & (1 << i) != 0 {
                    lib.row(
                        AgentVersion::new("implementer", scope.clone())
                            .with_model("anthropic/m")
                            .with_prompt(&format!("prompt at {scope}")),
                    );
                }
            }
            let mut ctx = ResolveCtx::global();
            if ids & 1 != 0 {
                ctx = ctx.template("tpl-1");
            }
            if ids & 2 != 0 {
                ctx = ctx.channel("chan-1");
            }
            if ids & 4 != 0 {
                ctx.team_id = Some("team-1".to_owned());
            }
            if ids & 8 != 0 {
                ctx.org_id = Some("org-1".to_owned());
            }
            // Scope i applies when its id is in the context (GLOBAL always).
            let expected = (0..5)
                .find(|&i| rows & (1 << i) != 0 && (i == 4 || ids & (1 << i) != 0))
                .map(|i| format!("prompt at {}", scopes()[i]));
            let got = block(
                lib.resolver
                    .resolve_agent(&AgentRef::key("implementer"), &ctx),
            );
            match expected {
                Some(prompt) => {
                    assert_eq!(
                        got.unwrap().system_prompt,
                        prompt,
                        "rows={rows:05b} ids={ids:04b}"
                    );
                }
                None => assert_eq!(
                    got.unwrap_err().code(),
                    "CONFIG_MISSING",
                    "rows={rows:05b} ids={ids:04b}"
                ),
            }
        }
    }
}

#[test]
fn an_inactive_override_falls_through_to_the_next_scope() {
    let lib = Lib::new();
    lib.row(
        AgentVersion::new("a", ScopeRef::Global)
            .with_model("anthropic/g")
            .with_prompt("global"),
    );
    lib.agents.seed(
        vec![
            AgentVersion::new("a", team())
                .with_model("anthropic/t")
                .with_prompt("team"),
        ],
        false,
    );
    let got = block(lib.resolver.resolve_agent(&AgentRef::key("a"), &full_ctx())).unwrap();
    assert_eq!(
        (got.system_prompt.as_str(), got.model.as_str()),
        ("global", "anthropic/g")
    );
}

#[test]
fn a_row_without_prompt_runs_the_builtin_prompt_not_a_broader_rows() {
    let lib = Lib::new();
    lib.row(
        AgentVersion::new("implementer", ScopeRef::Global)
            .with_model("anthropic/g")
            .with_prompt("custom global"),
    );
    lib.row(AgentVersion::new("implementer", team()).with_model("anthropic/t"));
    let got = block(
        lib.resolver
            .resolve_agent(&AgentRef::key("implementer"), &full_ctx()),
    )
    .unwrap();
    assert_eq!(got.prompt_source, PromptSource::BuiltIn);
    assert_eq!(
        got.system_prompt,
        builtin_agent("implementer").unwrap().prompt
    );
    // A blank prompt counts as none; an agent with no built-in gets an empty prompt.
    lib.row(
        AgentVersion::new("custom", ScopeRef::Global)
            .with_model("anthropic/g")
            .with_prompt("  "),
    );
    let got = block(
        lib.resolver
            .resolve_agent(&AgentRef::key("custom"), &full_ctx()),
    )
    .unwrap();
    assert_eq!(
        (got.system_prompt.as_str(), got.prompt_source),
        ("", PromptSource::Empty)
    );
}

#[test]
fn inheritance_chains_carry_model_runtime_and_reasoning() {
    struct Case {
        name: &'static str,
        rows: Vec<AgentVersion>,
        key: &'static str,
        model: &'static str,
        chain: &'static [&'static str],
        runtime: Option<Runtime>,
        reasoning: ReasoningLevel,
    }
    let g = ScopeRef::Global;
    let mut parent = AgentVersion::new("parent", g.clone()).with_model("anthropic/p");
    parent.runtime = Some(Runtime::ClaudeCode);
    parent.reasoning = ReasoningLevel::High;
    let mut own_level = AgentVersion::new("child", g.clone()).inheriting("parent");
    own_level.reasoning = ReasoningLevel::Low;
    let mut own_model = AgentVersion::new("child", g.clone()).with_model("anthropic/c");
    own_model.inherits_model_from = Some("parent".to_owned());
    let mut mid = AgentVersion::new("mid", g.clone()).inheriting("parent");
    mid.runtime = Some(Runtime::Pi);
    let cases = vec![
        Case {
            name: "persona takes parent's model, runtime and level",
            rows: vec![
                parent.clone(),
                AgentVersion::new("child", g.clone()).inheriting("parent"),
            ],
            key: "child",
            model: "anthropic/p",
            chain: &["child", "parent"],
            runtime: Some(Runtime::ClaudeCode),
            reasoning: ReasoningLevel::High,
        },
        Case {
            name: "a persona's own level wins",
            rows: vec![parent.clone(), own_level],
            key: "child",
            model: "anthropic/p",
            chain: &["child", "parent"],
            runtime: Some(Runtime::ClaudeCode),
            reasoning: ReasoningLevel::Low,
        },
        Case {
            name: "a version naming its own model inherits no runtime",
            rows: vec![parent.clone(), own_model],
            key: "child",
            model: "anthropic/c",
            chain: &["child"],
            runtime: None,
            reasoning: ReasoningLevel::None,
        },
        Case {
            name: "three-level chain, first runtime on the way wins",
            rows: vec![
                parent.clone(),
                mid,
                AgentVersion::new("leaf", g.clone()).inheriting("mid"),
            ],
            key: "leaf",
            model: "anthropic/p",
            chain: &["leaf", "mid", "parent"],
            runtime: Some(Runtime::Pi),
            reasoning: ReasoningLevel::High,
        },
    ];
    for case in cases {
        let lib = Lib::new();
        for row in case.rows {
            lib.row(row);
        }
        let got = block(
            lib.resolver
                .resolve_agent(&AgentRef::key(case.key), &full_ctx()),
        )
        .unwrap();
        assert_eq!(got.model.as_str(), case.model, "{}", case.name);
        assert_eq!(got.model_chain, case.chain, "{}", case.name);
        assert_eq!(got.runtime, case.runtime, "{}", case.name);
        assert_eq!(got.reasoning, case.reasoning, "{}", case.name);
    }
}

#[test]
fn the_parent_resolves_through_the_cascade_in_the_runs_scope() {
    let lib = Lib::new();
    lib.row(AgentVersion::new("reviewer", ScopeRef::Global).with_model("anthropic/global"));
    lib.row(AgentVersion::new("reviewer", team()).with_model("anthropic/team"));
    lib.row(AgentVersion::new("securityReviewer", ScopeRef::Global).inheriting("reviewer"));
    let got = block(
        lib.resolver
            .resolve_agent(&AgentRef::key("securityReviewer"), &full_ctx()),
    )
    .unwrap();
    assert_eq!(got.model.as_str(), "anthropic/team");
    let got = block(
        lib.resolver
            .resolve_agent(&AgentRef::key("securityReviewer"), &ResolveCtx::global()),
    )
    .unwrap();
    assert_eq!(got.model.as_str(), "anthropic/global");
}

#[test]
fn cycles_and_broken_chains_are_errors() {
    let g = ScopeRef::Global;
    let cases: Vec<(&str, Vec<AgentVersion>, &str, &str)> = vec![
        (
            "self cycle",
            vec![AgentVersion::new("a", g.clone()).inheriting("a")],
            "a",
            "AGENT_INHERITANCE_CYCLE",
        ),
        (
            "two-step cycle",
            vec![
                AgentVersion::new("a", g.clone()).inheriting("b"),
                AgentVersion::new("b", g.clone()).inheriting("a"),
            ],
            "a",
            "AGENT_INHERITANCE_CYCLE",
        ),
        (
            "cycle beyond the first parent",
            vec![
                AgentVersion::new("a", g.clone()).inheriting("b"),
                AgentVersion::new("b", g.clone()).inheriting("c"),
                AgentVersion::new("c", g.clone()).inheriting("b"),
            ],
            "a",
            "AGENT_INHERITANCE_CYCLE",
        ),
        (
            "missing parent",
            vec![AgentVersion::new("a", g.clone()).inheriting("ghost")],
            "a",
            "CONFIG_MISSING",
        ),
        (
            "neither model nor parent",
            vec![AgentVersion::new("a", g.clone())],
            "a",
            "CONFIG_MISSING",
        ),
        ("no row at all", vec![], "a", "CONFIG_MISSING"),
    ];
    for (name, rows, key, code) in cases {
        let lib = Lib::new();
        for row in rows {
            lib.row(row);
        }
        let err = block(lib.resolver.resolve_agent(&AgentRef::key(key), &full_ctx())).unwrap_err();
        assert_eq!(err.code(), code, "{name}");
        assert!(!err.is_retryable(), "{name}");
    }
    // A cycle closed only by a team override is found in that team's scope.
    let lib = Lib::new();
    lib.row(AgentVersion::new("a", g.clone()).inheriting("b"));
    lib.row(AgentVersion::new("b", g.clone()).with_model("anthropic/b"));
    lib.row(AgentVersion::new("b", team()).inheriting("a"));
    assert!(
        block(
            lib.resolver
                .resolve_agent(&AgentRef::key("a"), &ResolveCtx::global())
        )
        .is_ok()
    );
    let err = block(lib.resolver.resolve_agent(&AgentRef::key("a"), &full_ctx())).unwrap_err();
    assert_eq!(err.code(), "AGENT_INHERITANCE_CYCLE");
}

#[test]
fn credentials_cascade_team_organization_global_unless_pinned() {
    // (team, org, global credential present, pin) -> expected credential id or error
    let cases: Vec<(bool, bool, bool, Option<&str>, Result<&str, &str>)> = vec![
        (true, true, true, None, Ok("cred-team")),
        (false, true, true, None, Ok("cred-org")),
        (false, false, true, None, Ok("cred-global")),
        (true, false, false, None, Ok("cred-team")),
        (false, false, false, None, Err("CONFIG_MISSING")),
        (true, true, true, Some("cred-pinned"), Ok("cred-pinned")),
        (true, true, true, Some("cred-gone"), Err("CONFIG_MISSING")),
    ];
    for (t, o, g, pin, expected) in cases {
        let lib = Lib::empty();
        if t {
            lib.credentials
                .insert(CredentialRef::new("cred-team", "anthropic", team()));
        }
        if o {
            lib.credentials
                .insert(CredentialRef::new("cred-org", "anthropic", org()));
        }
        if g {
            lib.credentials.insert(CredentialRef::new(
                "cred-global",
                "anthropic",
                ScopeRef::Global,
            ));
        }
        // Another provider's credentials never satisfy an anthropic model.
        lib.credentials
            .insert(CredentialRef::new("cred-openai", "openai", team()));
        // A pin finds its credential by id wherever it lives.
        lib.credentials.insert(CredentialRef::new(
            "cred-pinned",
            "anthropic",
            ScopeRef::Team("elsewhere".into()),
        ));
        let mut row = AgentVersion::new("a", ScopeRef::Global).with_model("anthropic/m");
        row.credential_id = pin.map(str::to_owned);
        lib.row(row);
        let got = block(lib.resolver.resolve_agent(&AgentRef::key("a"), &full_ctx()));
        match expected {
            Ok(id) => assert_eq!(got.unwrap().credential.id, id),
            Err(code) => assert_eq!(got.unwrap_err().code(), code),
        }
    }
}

#[test]
fn a_personas_credential_follows_its_parents_pin() {
    let lib = Lib::new();
    lib.credentials.insert(CredentialRef::new(
        "cred-pinned",
        "anthropic",
        ScopeRef::Global,
    ));
    let mut parent = AgentVersion::new("implementer", ScopeRef::Global).with_model("anthropic/m");
    parent.credential_id = Some("cred-pinned".to_owned());
    lib.row(parent);
    lib.row(AgentVersion::new("ciFixer", ScopeRef::Global).inheriting("implementer"));
    let got = block(
        lib.resolver
            .resolve_agent(&AgentRef::key("ciFixer"), &ResolveCtx::global()),
    )
    .unwrap();
    assert_eq!(got.credential.id, "cred-pinned");
}

#[test]
fn the_cache_serves_until_its_ttl_and_is_keyed_by_the_context() {
    let lib = Lib::new();
    lib.row(
        AgentVersion::new("a", ScopeRef::Global)
            .with_model("anthropic/m")
            .with_prompt("v1"),
    );
    let key = AgentRef::key("a");
    let ctx = ResolveCtx::global();
    assert_eq!(
        block(lib.resolver.resolve_agent(&key, &ctx))
            .unwrap()
            .system_prompt,
        "v1"
    );
    lib.row(
        AgentVersion::new("a", ScopeRef::Global)
            .with_model("anthropic/m")
            .with_prompt("v2"),
    );
    // Within the TTL the cached answer stands; another context is a different key.
    assert_eq!(
        block(lib.resolver.resolve_agent(&key, &ctx))
            .unwrap()
            .system_prompt,
        "v1"
    );
    let other = ResolveCtx::global().team("team-9", None);
    assert_eq!(
        block(lib.resolver.resolve_agent(&key, &other))
            .unwrap()
            .system_prompt,
        "v2"
    );
    let mut pinned = ResolveCtx::global();
    pinned.skill_revisions.insert("s".to_owned(), 1);
    assert_eq!(
        block(lib.resolver.resolve_agent(&key, &pinned))
            .unwrap()
            .system_prompt,
        "v2"
    );
    lib.clock.advance(Duration::from_secs(4));
    assert_eq!(
        block(lib.resolver.resolve_agent(&key, &ctx))
            .unwrap()
            .system_prompt,
        "v1"
    );
    lib.clock.advance(Duration::from_secs(1));
    assert_eq!(
        block(lib.resolver.resolve_agent(&key, &ctx))
            .unwrap()
            .system_prompt,
        "v2"
    );
    lib.row(
        AgentVersion::new("a", ScopeRef::Global)
            .with_model("anthropic/m")
            .with_prompt("v3"),
    );
    lib.resolver.invalidate();
    assert_eq!(
        block(lib.resolver.resolve_agent(&key, &ctx))
            .unwrap()
            .system_prompt,
        "v3"
    );
}

#[test]
fn errors_are_not_cached() {
    let lib = Lib::new();
    let key = AgentRef::key("late");
    assert!(block(lib.resolver.resolve_agent(&key, &ResolveCtx::global())).is_err());
    lib.row(AgentVersion::new("late", ScopeRef::Global).with_model("anthropic/m"));
    assert!(block(lib.resolver.resolve_agent(&key, &ResolveCtx::global())).is_ok());
}

#[test]
fn a_channel_row_applies_only_with_a_channel() {
    let lib = Lib::new();
    lib.row(
        AgentVersion::new("a", ScopeRef::Global)
            .with_model("anthropic/g")
            .with_prompt("global"),
    );
    lib.row(
        AgentVersion::new("a", channel())
            .with_model("anthropic/c")
            .with_prompt("channel"),
    );
    let ctx = ResolveCtx::global().team("team-1", None);
    assert_eq!(
        block(lib.resolver.resolve_agent(&AgentRef::key("a"), &ctx))
            .unwrap()
            .system_prompt,
        "global"
    );
    let ctx = ctx.channel("chan-1");
    assert_eq!(
        block(lib.resolver.resolve_agent(&AgentRef::key("a"), &ctx))
            .unwrap()
            .system_prompt,
        "channel"
    );
}
