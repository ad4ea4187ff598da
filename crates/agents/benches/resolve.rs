//! Resolution latency for a 5-scope, 1,000-row library: a warm cache against a cold one (cache
//! disabled, every call walks the cascade, the inheritance chain, the credential and skills).

use std::sync::Arc;
use std::time::Duration;

use auto_swe_agents::{
    AgentRef, AgentStore, AgentVersion, CredentialRef, CredentialStore, InMemoryAgentStore,
    InMemoryCredentialStore, InMemorySkillStore, ResolveCtx, Resolver, ScopeRef, SkillStore,
    builtin_skills,
};
use auto_swe_scanners::{Clock, SystemClock};
use criterion::{Criterion, criterion_group, criterion_main};

const KEYS: usize = 200;

fn library() -> (
    Arc<InMemoryAgentStore>,
    Arc<InMemoryCredentialStore>,
    Arc<InMemorySkillStore>,
) {
    let agents = Arc::new(InMemoryAgentStore::new());
    let skills = Arc::new(InMemorySkillStore::new());
    for skill in builtin_skills() {
        let (row, revision) = skill.seed();
        skills.seed(row, vec![revision]);
    }
    let scopes = [
        ScopeRef::WorkflowTemplate("tpl-1".into()),
        ScopeRef::Channel("chan-1".into()),
        ScopeRef::Team("team-1".into()),
        ScopeRef::Organization("org-1".into()),
        ScopeRef::Global,
    ];
    // 200 keys × 5 scopes = 1,000 lineages; every fourth key is a persona inheriting from the
    // key before it, and the template rows of odd keys are switched off.
    for k in 0..KEYS {
        for (s, scope) in scopes.iter().enumerate() {
            let mut row = AgentVersion::new(&format!("agent{k}"), scope.clone())
                .with_prompt(&format!("prompt {k} at {scope}"));
            if k % 4 == 3 {
                row.inherits_model_from = Some(format!("agent{}", k - 1));
            } else {
                row.model_spec = Some(auto_swe_agents::ModelName::new(
                    "anthropic/claude-sonnet-5-5",
                ));
            }
            row.skill_refs = builtin_skills()
                .iter()
                .skip((k + s) % 30)
                .take(3)
                .map(|s| s.name.to_owned())
                .collect();
            agents.seed(vec![row], !(s == 0 && k % 2 == 1));
        }
    }
    let credentials = Arc::new(InMemoryCredentialStore::new());
    credentials.insert(CredentialRef::new("global", "anthropic", ScopeRef::Global));
    (agents, credentials, skills)
}

fn resolver(ttl: Duration) -> Resolver {
    let (agents, credentials, skills) = library();
    Resolver::with_clock(
        agents as Arc<dyn AgentStore>,
        credentials as Arc<dyn CredentialStore>,
        skills as Arc<dyn SkillStore>,
        Arc::new(SystemClock) as Arc<dyn Clock>,
        ttl,
    )
}

fn bench(c: &mut Criterion) {
    let ctx = ResolveCtx::global()
        .template("tpl-1")
        .channel("chan-1")
        .team("team-1", Some("org-1"));
    // A persona whose template row is off: falls to CHANNEL, then chases its parent.
    let key = AgentRef::key("agent7");
    let warm = resolver(Duration::from_secs(3600));
    let cold = resolver(Duration::ZERO);
    assert!(futures_executor::block_on(warm.resolve_agent(&key, &ctx)).is_ok());
    let mut group = c.benchmark_group("resolve_agent_1000_rows");
    group.bench_function("warm_cache", |b| {
        b.iter(|| futures_executor::block_on(warm.resolve_agent(&key, &ctx)));
    });
    group.bench_function("cold_cache", |b| {
        b.iter(|| futures_executor::block_on(cold.resolve_agent(&key, &ctx)));
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
