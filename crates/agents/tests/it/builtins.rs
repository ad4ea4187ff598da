//! The built-in agents and skills load, validate and scan clean; the boot gate.

use std::collections::BTreeSet;

use auto_swe_agents::{
    AgentRef, BUILTIN_ORIGIN, Channels, CredentialRef, IMPLEMENTER_BOUNDED_PERSONAS, ResolveCtx,
    ScopeRef, StepAgents, assert_config_ready, builtin_agent, builtin_agents, builtin_skill,
    builtin_skills, required_agent_keys,
};
use auto_swe_scanners::{CompiledPatterns, Verdict, builtin_patterns, scan_skill_content};

use crate::support::{Lib, block};

#[test]
fn thirty_three_agents_nineteen_model_backed_fourteen_personas() {
    let agents = builtin_agents();
    assert_eq!(agents.len(), 33);
    assert_eq!(agents.iter().filter(|a| a.is_model_backed()).count(), 19);
    let keys: BTreeSet<&str> = agents.iter().map(|a| a.key).collect();
    assert_eq!(keys.len(), 33, "keys are unique");
    for agent in agents {
        assert!(
            agent.model_spec.is_some() != agent.inherits_model_from.is_some(),
            "{}",
            agent.key
        );
        if let Some(parent) = agent.inherits_model_from {
            let parent =
                builtin_agent(parent).unwrap_or_else(|| panic!("{}: parent missing", agent.key));
            assert!(
                parent.is_model_backed(),
                "{}: parent is itself a persona",
                agent.key
            );
        }
        for skill in agent.skills {
            assert!(
                builtin_skill(skill).is_some(),
                "{}: skill {skill} does not resolve",
                agent.key
            );
        }
        assert!(agent.prompt.len() > 80, "{}: prompt too short", agent.key);
        let row = agent.seed_row();
        assert_eq!(row.origin.as_deref(), Some(BUILTIN_ORIGIN));
        assert!(
            row.model_spec
                .as_ref()
                .is_none_or(|m| m.provider() == "anthropic")
        );
    }
    for key in IMPLEMENTER_BOUNDED_PERSONAS {
        assert_eq!(
            builtin_agent(key).unwrap().inherits_model_from,
            Some("implementer")
        );
    }
    let models: Vec<(&str, &str)> = agents
        .iter()
        .filter_map(|a| a.model_spec.map(|m| (a.key, m)))
        .collect();
    insta::assert_debug_snapshot!(models);
}

#[test]
fn thirty_six_skills_each_assigned_or_deliberately_not() {
    let skills = builtin_skills();
    assert_eq!(skills.len(), 36);
    let names: BTreeSet<&str> = skills.iter().map(|s| s.name).collect();
    assert_eq!(names.len(), 36);
    let assigned: BTreeSet<&str> = builtin_agents()
        .iter()
        .flat_map(|a| a.skills.iter().copied())
        .collect();
    let unassigned: Vec<&str> = names.difference(&assigned).copied().collect();
    assert_eq!(unassigned, ["qodo-context"]);
    for skill in skills {
        assert!(
            skill
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '-'),
            "{}",
            skill.name
        );
        assert!(!skill.description.is_empty() && !skill.text.is_empty());
        let (row, revision) = skill.seed();
        assert!(row.is_built_in && row.is_verified && row.current_revision == 1);
        assert_eq!(
            revision.content_hash,
            auto_swe_agents::skill_content_hash(skill.description, skill.text)
        );
    }
}

#[test]
fn every_builtin_prompt_and_skill_scans_clean() {
    let patterns = CompiledPatterns::compile(builtin_patterns());
    for agent in builtin_agents() {
        let result = scan_skill_content(&patterns, agent.prompt);
        assert_eq!(
            result.verdict,
            Verdict::Allow,
            "{}: {:?}",
            agent.key,
            result.findings
        );
        assert!(!result.incomplete);
    }
    for skill in builtin_skills() {
        let text = format!("{}\n\n{}", skill.description, skill.text);
        let result = scan_skill_content(&patterns, &text);
        assert_eq!(
            result.verdict,
            Verdict::Allow,
            "{}: {:?}",
            skill.name,
            result.findings
        );
    }
}

#[test]
fn every_builtin_agent_resolves_once_seeded() {
    let lib = Lib::builtin();
    for agent in builtin_agents() {
        let got = block(
            lib.resolver
                .resolve_agent(&AgentRef::key(agent.key), &ResolveCtx::global()),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", agent.key));
        assert_eq!(got.skills.len(), agent.skills.len(), "{}", agent.key);
        assert_eq!(got.credential.id, "cred-global");
    }
}

fn spec(json: serde_json::Value) -> auto_swe_spec::WorkflowSpec {
    serde_json::from_value(json).unwrap()
}

#[test]
fn required_agent_keys_walk_steps_fan_outs_judges_and_channels() {
    let main = spec(serde_json::json!({
        "entry": "impl",
        "nodes": [
            {"id": "impl", "type": "step", "step": "executeImplementation", "next": "review"},
            {"id": "review", "type": "step", "step": "runReviewNetwork", "next": "fan"},
            {"id": "fan", "type": "fanOut", "over": "$.input.items", "subgraph": {"entry": "ctx", "nodes": [
                {"id": "ctx", "type": "step", "step": "validateContext"}
            ]}, "next": "judge"},
            {"id": "judge", "type": "eval", "target": "$.nodes.impl.output", "scorers": [{"type": "judge", "rubric": "r"}], "next": "custom"},
            {"id": "custom", "type": "agent", "agentRef": "myAgent@3"}
        ]
    }));
    let got = required_agent_keys(&[&main], &StepAgents::builtin(), Channels::Present);
    insta::assert_json_snapshot!(got);
    let none = required_agent_keys(&[], &StepAgents::builtin(), Channels::Absent);
    assert!(none.required.is_empty() && none.agent_refs.is_empty());
}

#[test]
fn assert_config_ready_lists_every_unresolvable_required_agent() {
    let lib = Lib::builtin();
    let main = spec(serde_json::json!({
        "entry": "impl",
        "nodes": [{"id": "impl", "type": "step", "step": "executeCIFixImplementation"}]
    }));
    let required = required_agent_keys(&[&main], &StepAgents::builtin(), Channels::Absent);
    block(assert_config_ready(&lib.resolver, &required)).unwrap();
    // With no credential, every required agent fails, and the gate names them all.
    let bare = Lib::empty();
    auto_swe_agents::seed_builtins(&bare.agents, &bare.skills);
    let err = block(assert_config_ready(&bare.resolver, &required)).unwrap_err();
    assert_eq!(err.code(), "CONFIG_NOT_READY");
    let keys: Vec<&str> = err.missing.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["ciFixer", "implementer", "securityReview"]);
    // A credential at team scope does not satisfy a GLOBAL boot check.
    bare.credentials.insert(CredentialRef::new(
        "c",
        "anthropic",
        ScopeRef::Team("t".into()),
    ));
    assert!(block(assert_config_ready(&bare.resolver, &required)).is_err());
    // Nothing required: boot proceeds.
    block(assert_config_ready(
        &bare.resolver,
        &auto_swe_agents::RequiredAgents::default(),
    ))
    .unwrap();
}
