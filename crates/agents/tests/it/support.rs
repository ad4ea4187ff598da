//! Shared fixtures: an in-memory library with a manual clock.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use auto_swe_agents::{
    AgentStore, AgentVersion, CredentialRef, CredentialStore, InMemoryAgentStore,
    InMemoryCredentialStore, InMemorySkillStore, Resolver, ScopeRef, SkillStore, seed_builtins,
};
use auto_swe_scanners::ManualClock;

pub(crate) fn block<F: Future>(future: F) -> F::Output {
    futures_executor::block_on(future)
}

pub(crate) const TTL: Duration = Duration::from_secs(5);

pub(crate) struct Lib {
    pub(crate) agents: Arc<InMemoryAgentStore>,
    pub(crate) credentials: Arc<InMemoryCredentialStore>,
    pub(crate) skills: Arc<InMemorySkillStore>,
    pub(crate) clock: Arc<ManualClock>,
    pub(crate) resolver: Resolver,
}

impl Lib {
    pub(crate) fn empty() -> Self {
        let agents = Arc::new(InMemoryAgentStore::new());
        let credentials = Arc::new(InMemoryCredentialStore::new());
        let skills = Arc::new(InMemorySkillStore::new());
        let clock = Arc::new(ManualClock::new(Instant::now()));
        let resolver = Resolver::with_clock(
            Arc::clone(&agents) as Arc<dyn AgentStore>,
            Arc::clone(&credentials) as Arc<dyn CredentialStore>,
            Arc::clone(&skills) as Arc<dyn SkillStore>,
            Arc::clone(&clock) as Arc<dyn auto_swe_scanners::Clock>,
            TTL,
        );
        Self {
            agents,
            credentials,
            skills,
            clock,
            resolver,
        }
    }

    /// Empty library with a GLOBAL anthropic credential.
    pub(crate) fn new() -> Self {
        let lib = Self::empty();
        lib.credentials.insert(CredentialRef::new(
            "cred-global",
            "anthropic",
            ScopeRef::Global,
        ));
        lib
    }

    /// The built-ins seeded, with a GLOBAL anthropic credential.
    pub(crate) fn builtin() -> Self {
        let lib = Self::new();
        seed_builtins(&lib.agents, &lib.skills);
        lib
    }

    pub(crate) fn row(&self, row: AgentVersion) {
        self.agents.seed(vec![row], true);
    }
}

pub(crate) fn team() -> ScopeRef {
    ScopeRef::Team("team-1".to_owned())
}
pub(crate) fn org() -> ScopeRef {
    ScopeRef::Organization("org-1".to_owned())
}
pub(crate) fn template() -> ScopeRef {
    ScopeRef::WorkflowTemplate("tpl-1".to_owned())
}
pub(crate) fn channel() -> ScopeRef {
    ScopeRef::Channel("chan-1".to_owned())
}

/// A context naming every scope id the fixtures use.
pub(crate) fn full_ctx() -> auto_swe_agents::ResolveCtx {
    auto_swe_agents::ResolveCtx::global()
        .template("tpl-1")
        .channel("chan-1")
        .team("team-1", Some("org-1"))
}
