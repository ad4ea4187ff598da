//! Property test: the resolver agrees with a straightforward reference implementation on random
//! libraries of rows across scopes.

use std::collections::BTreeMap;

use auto_swe_agents::{AgentRef, AgentVersion, ReasoningLevel, ResolveCtx, Runtime, ScopeRef};
use proptest::prelude::*;

use crate::support::{Lib, block};

const KEYS: [&str; 4] = ["a", "b", "c", "d"];

fn scope_of(i: u8) -> ScopeRef {
    match i % 5 {
        0 => ScopeRef::WorkflowTemplate("tpl".into()),
        1 => ScopeRef::Channel("chan".into()),
        2 => ScopeRef::Team("team".into()),
        3 => ScopeRef::Organization("org".into()),
        _ => ScopeRef::Global,
    }
}

#[derive(Debug, Clone)]
struct RowSpec {
    key: usize,
    scope: u8,
    active: bool,
    versions: u8,
    model: Option<u8>,
    parent: Option<usize>,
    runtime: Option<u8>,
    reasoning: Option<u8>,
}

fn row_spec() -> impl Strategy<Value = RowSpec> {
    (
        0..4usize,
        0..5u8,
        prop::bool::weighted(0.8),
        1..4u8,
        prop::option::of(0..3u8),
        prop::option::of(0..4usize),
        prop::option::of(0..3u8),
        prop::option::of(0..4u8),
    )
        .prop_map(
            |(key, scope, active, versions, model, parent, runtime, reasoning)| RowSpec {
                key,
                scope,
                active,
                versions,
                model,
                parent,
                runtime,
                reasoning,
            },
        )
}

fn version_of(spec: &RowSpec, v: u8) -> AgentVersion {
    let mut row = AgentVersion::new(KEYS[spec.key], scope_of(spec.scope)).at_version(u32::from(v));
    // Each version differs in prompt so pins are observable.
    row.system_prompt = Some(format!("{} {} v{v}", KEYS[spec.key], scope_of(spec.scope)));
    row.model_spec = spec
        .model
        .map(|m| auto_swe_agents::ModelName::new(&format!("anthropic/m{m}")));
    row.inherits_model_from = spec.parent.map(|p| KEYS[p].to_owned());
    row.runtime = spec
        .runtime
        .map(|r| [Runtime::Native, Runtime::ClaudeCode, Runtime::Pi][r as usize]);
    row.reasoning = spec.reasoning.map_or(ReasoningLevel::None, |r| {
        [
            ReasoningLevel::Off,
            ReasoningLevel::Low,
            ReasoningLevel::Medium,
            ReasoningLevel::High,
        ][r as usize]
    });
    row
}

/// The reference: the obvious reading of the rules, over plain vectors.
fn reference(
    lineages: &BTreeMap<(usize, u8), (bool, Vec<AgentVersion>)>,
    key: usize,
    ctx_scopes: &[u8],
    pins: &BTreeMap<String, u32>,
) -> Result<(String, String, Option<Runtime>, ReasoningLevel), &'static str> {
    let winning = |k: usize| -> Option<AgentVersion> {
        for s in [0u8, 1, 2, 3, 4] {
            if s != 4 && !ctx_scopes.contains(&s) {
                continue;
            }
            if let Some((true, versions)) = lineages.get(&(k, s)) {
                if s == 4
                    && let Some(pin) = pins.get(KEYS[k])
                {
                    return versions.iter().find(|v| v.version == *pin).cloned();
                }
                return versions.last().cloned();
            }
        }
        None
    };
    let row = winning(key).ok_or("CONFIG_MISSING")?;
    let prompt = row.system_prompt.clone().unwrap_or_default();
    let mut seen = vec![key];
    let mut current = row;
    let (mut runtime, mut reasoning) = (None, ReasoningLevel::None);
    loop {
        runtime = runtime.or(current.runtime);
        reasoning = reasoning.or(current.reasoning);
        if let Some(m) = &current.model_spec {
            return Ok((prompt, m.0.clone(), runtime, reasoning));
        }
        let parent = current
            .inherits_model_from
            .as_deref()
            .ok_or("CONFIG_MISSING")?;
        let p = KEYS
            .iter()
            .position(|k| *k == parent)
            .ok_or("CONFIG_MISSING")?;
        if seen.contains(&p) {
            return Err("AGENT_INHERITANCE_CYCLE");
        }
        seen.push(p);
        current = winning(p).ok_or("CONFIG_MISSING")?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn resolver_agrees_with_the_reference(
        specs in prop::collection::vec(row_spec(), 0..14),
        ctx_bits in 0u8..16,
        pin_bits in prop::collection::vec(prop::option::of(1u32..4), 4),
    ) {
        let lib = Lib::new();
        let mut lineages: BTreeMap<(usize, u8), (bool, Vec<AgentVersion>)> = BTreeMap::new();
        for spec in &specs {
            let versions: Vec<AgentVersion> = (1..=spec.versions).map(|v| version_of(spec, v)).collect();
            lineages.insert((spec.key, spec.scope % 5), (spec.active, versions));
        }
        for (active, versions) in lineages.values() {
            lib.agents.seed(versions.clone(), *active);
        }
        let ctx_scopes: Vec<u8> = (0..4).filter(|i| ctx_bits & (1 << i) != 0).collect();
        let mut ctx = ResolveCtx::global();
        if ctx_bits & 1 != 0 { ctx.template_id = Some("tpl".into()); }
        if ctx_bits & 2 != 0 { ctx.channel_id = Some("chan".into()); }
        if ctx_bits & 4 != 0 { ctx.team_id = Some("team".into()); }
        if ctx_bits & 8 != 0 { ctx.org_id = Some("org".into()); }
        for (i, pin) in pin_bits.iter().enumerate() {
            if let Some(p) = pin { ctx.agent_versions.insert(KEYS[i].to_owned(), *p); }
        }
        for (key, name) in KEYS.iter().enumerate() {
            let expected = reference(&lineages, key, &ctx_scopes, &ctx.agent_versions);
            let got = block(lib.resolver.resolve_agent(&AgentRef::key(name), &ctx))
                .map(|r| (r.system_prompt, r.model.0, r.runtime, r.reasoning))
                .map_err(|e| e.code());
            prop_assert_eq!(got, expected, "key {}", name);
        }
    }
}
