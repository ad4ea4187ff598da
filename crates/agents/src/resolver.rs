//! `resolve_agent`: the five-scope cascade, `inheritsModelFrom` chasing, credentials, skills with
//! pinned revisions, and the run's runtime pins.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use auto_swe_models::ReasoningLevel;
use auto_swe_scanners::{Clock, SystemClock};
use serde::Serialize;

use crate::builtin::builtin_agent;
use crate::cache::{DEFAULT_CONFIG_CACHE_TTL, TtlCache};
use crate::context::ResolveCtx;
use crate::error::ResolveError;
use crate::model::{AgentRef, AgentVersion, CredentialRef, ModelName, Runtime, ScopeRef};
use crate::skills::model::PromptSkill;
use crate::store::{AgentStore, CredentialStore, RuntimePinStore, SkillStore};

/// Longest `inheritsModelFrom` chain followed before giving up as a cycle would.
pub const MAX_INHERITANCE_DEPTH: usize = 16;
/// How often a first-use runtime pin retries its compare-and-set.
const RUNTIME_PIN_ATTEMPTS: usize = 8;

/// Where the resolved system prompt came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum PromptSource {
    /// The resolved row's own prompt.
    Row,
    /// The row had none (or a blank one): the agent's built-in prompt.
    BuiltIn,
    /// Neither: an agent with no built-in prompt and none on its row.
    Empty,
}

/// Something the resolution noticed that does not stop it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[non_exhaustive]
pub enum ResolveWarning {
    /// The run pins a skill revision whose row is gone; the live text was used
    /// (`skill.pinned_revision_missing`).
    PinnedRevisionMissing {
        /// The skill.
        skill_id: String,
        /// The revision pinned.
        revision: u32,
    },
    /// A skill ref names no skill.
    SkillNotFound {
        /// The id named.
        skill_id: String,
    },
}

/// A fully resolved agent: everything a caller needs to run it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ResolvedAgent {
    /// The agent key.
    pub key: String,
    /// The row that won the cascade.
    pub row: AgentVersion,
    /// The system prompt to run on.
    pub system_prompt: String,
    /// Where it came from.
    pub prompt_source: PromptSource,
    /// The model.
    pub model: ModelName,
    /// The keys walked to find the model, the resolved key first and the model's owner last.
    pub model_chain: Vec<String>,
    /// The runtime the chain asks for (`None`: no opinion).
    pub runtime: Option<Runtime>,
    /// The reasoning level the chain asks for (`ReasoningLevel::None`: no opinion).
    pub reasoning: ReasoningLevel,
    /// The credential to call the model with.
    pub credential: CredentialRef,
    /// Active, visible skills in order, at the run's pinned revisions.
    pub skills: Vec<PromptSkill>,
    /// The row's tool keys, unchanged (`None`: no opinion).
    pub tool_keys: Option<Vec<String>>,
    /// The row's MCP connection.
    pub mcp_connection_id: Option<String>,
    /// What the resolution noticed.
    pub warnings: Vec<ResolveWarning>,
}

/// What chose an agent's runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum RuntimeSource {
    /// The caller's own pin (`ctx.agent_runtimes`).
    Caller,
    /// The run's `agentRuntimes` map.
    Run,
    /// The agent version's own runtime (resolved live: no run to pin it to).
    Agent,
    /// Nobody had an opinion: the caller's default.
    Default,
}

/// An agent's runtime and what chose it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RuntimeChoice {
    /// The runtime.
    pub runtime: Runtime,
    /// What chose it.
    pub source: RuntimeSource,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CacheKey {
    agent: AgentRef,
    template: Option<String>,
    channel: Option<String>,
    team: Option<String>,
    org: Option<String>,
    agent_versions: BTreeMap<String, u32>,
    skill_revisions: BTreeMap<String, u32>,
}

impl CacheKey {
    fn new(agent: &AgentRef, ctx: &ResolveCtx) -> Self {
        Self {
            agent: agent.clone(),
            template: ctx.template_id.clone(),
            channel: ctx.channel_id.clone(),
            team: ctx.team_id.clone(),
            org: ctx.org_id.clone(),
            agent_versions: ctx.agent_versions.clone(),
            skill_revisions: ctx.skill_revisions.clone(),
        }
    }
}

/// The agent resolver over the library's stores, with a short-TTL cache.
pub struct Resolver {
    agents: Arc<dyn AgentStore>,
    credentials: Arc<dyn CredentialStore>,
    skills: Arc<dyn SkillStore>,
    cache: TtlCache<CacheKey, ResolvedAgent>,
}

impl Resolver {
    /// A resolver with the default TTL and the process clock.
    pub fn new(
        agents: Arc<dyn AgentStore>,
        credentials: Arc<dyn CredentialStore>,
        skills: Arc<dyn SkillStore>,
    ) -> Self {
        Self::with_clock(
            agents,
            credentials,
            skills,
            Arc::new(SystemClock),
            DEFAULT_CONFIG_CACHE_TTL,
        )
    }

    /// A resolver with an explicit clock and TTL (a zero TTL disables the cache).
    pub fn with_clock(
        agents: Arc<dyn AgentStore>,
        credentials: Arc<dyn CredentialStore>,
        skills: Arc<dyn SkillStore>,
        clock: Arc<dyn Clock>,
        ttl: Duration,
    ) -> Self {
        Self {
            agents,
            credentials,
            skills,
            cache: TtlCache::new(clock, ttl),
        }
    }

    /// Drops every cached answer (call after any library write).
    pub fn invalidate(&self) {
        self.cache.clear();
    }

    /// Resolves `agent` in `ctx`, from the cache when a fresh answer is there.
    pub async fn resolve_agent(
        &self,
        agent: &AgentRef,
        ctx: &ResolveCtx,
    ) -> Result<ResolvedAgent, ResolveError> {
        let key = CacheKey::new(agent, ctx);
        if let Some(hit) = self.cache.get(&key) {
            return Ok(hit);
        }
        let resolved = self.resolve_uncached(agent, ctx).await?;
        self.cache.put(key, resolved.clone());
        Ok(resolved)
    }

    /// The most specific active row for `key`: GLOBAL at `global_pin` when given.
    pub async fn winning_row(
        &self,
        key: &str,
        global_pin: Option<u32>,
        ctx: &ResolveCtx,
    ) -> Result<AgentVersion, ResolveError> {
        let scopes = ctx.scopes();
        let heads = self.agents.heads(key, &scopes).await?;
        for scope in &scopes {
            let Some((_, head)) = heads.iter().find(|(s, _)| s == scope) else {
                continue;
            };
            if !head.active {
                continue;
            }
            if *scope == ScopeRef::Global
                && let Some(pin) = global_pin
            {
                return self.agents.version(key, scope, pin).await?.ok_or_else(|| {
                    ResolveError::missing(key, format!("pinned GLOBAL version {pin} not found"))
                });
            }
            return Ok(head.latest.clone());
        }
        Err(ResolveError::missing(key, "no active row at any scope"))
    }

    async fn resolve_uncached(
        &self,
        agent: &AgentRef,
        ctx: &ResolveCtx,
    ) -> Result<ResolvedAgent, ResolveError> {
        let key = agent.key.as_str();
        let pin = agent
            .version
            .or_else(|| ctx.agent_versions.get(key).copied());
        let row = self.winning_row(key, pin, ctx).await?;

        let mut chain = vec![key.to_owned()];
        let mut runtime = None;
        let mut reasoning = ReasoningLevel::None;
        let mut credential_pin: Option<String> = None;
        let mut current = row.clone();
        let model = loop {
            runtime = runtime.or(current.runtime);
            reasoning = reasoning.or(current.reasoning);
            if credential_pin.is_none() {
                credential_pin.clone_from(&current.credential_id);
            }
            if let Some(spec) = &current.model_spec {
                break spec.clone();
            }
            let Some(parent) = current.inherits_model_from.clone() else {
                return Err(ResolveError::missing(
                    key,
                    format!(
                        "`{}` names no model and no agent to inherit one from",
                        current.key
                    ),
                ));
            };
            if chain.contains(&parent) || chain.len() > MAX_INHERITANCE_DEPTH {
                chain.push(parent);
                return Err(ResolveError::InheritanceCycle { chain });
            }
            chain.push(parent.clone());
            let parent_pin = ctx.agent_versions.get(&parent).copied();
            current = match self.winning_row(&parent, parent_pin, ctx).await {
                Ok(row) => row,
                Err(ResolveError::ConfigMissing { reason, .. }) => {
                    return Err(ResolveError::missing(
                        key,
                        format!("model parent `{parent}`: {reason}"),
                    ));
                }
                Err(other) => return Err(other),
            };
        };

        let credential = self
            .credential(key, &model, credential_pin.as_deref(), ctx)
            .await?;
        let (skills, warnings) = self.skills(&row.skill_refs, ctx).await?;
        let (system_prompt, prompt_source) = prompt_for(&row);

        Ok(ResolvedAgent {
            key: key.to_owned(),
            tool_keys: row.tool_keys.clone(),
            mcp_connection_id: row.mcp_connection_id.clone(),
            row,
            system_prompt,
            prompt_source,
            model,
            model_chain: chain,
            runtime,
            reasoning,
            credential,
            skills,
            warnings,
        })
    }

    async fn credential(
        &self,
        key: &str,
        model: &ModelName,
        pinned: Option<&str>,
        ctx: &ResolveCtx,
    ) -> Result<CredentialRef, ResolveError> {
        if let Some(id) = pinned {
            return self.credentials.by_id(id).await?.ok_or_else(|| {
                ResolveError::missing(key, format!("pinned credential `{id}` not found"))
            });
        }
        let provider = model.provider();
        for scope in ctx.credential_scopes() {
            if let Some(found) = self.credentials.for_scope(&scope, provider).await? {
                return Ok(found);
            }
        }
        Err(ResolveError::missing(
            key,
            format!("no credential for provider `{provider}`"),
        ))
    }

    async fn skills(
        &self,
        refs: &[String],
        ctx: &ResolveCtx,
    ) -> Result<(Vec<PromptSkill>, Vec<ResolveWarning>), ResolveError> {
        let mut skills = Vec::with_capacity(refs.len());
        let mut warnings = Vec::new();
        for id in refs {
            let Some(skill) = self.skills.get(id).await? else {
                warnings.push(ResolveWarning::SkillNotFound {
                    skill_id: id.clone(),
                });
                continue;
            };
            if !skill.is_active
                || !skill
                    .scope
                    .visible_to(ctx.team_id.as_deref(), ctx.org_id.as_deref())
            {
                continue;
            }
            let mut prompt = PromptSkill {
                id: skill.id.clone(),
                name: skill.name.clone(),
                description: skill.description.clone(),
                prompt_text: skill.prompt_text.clone(),
                revision: skill.current_revision,
                provenance: skill.provenance.clone(),
            };
            if let Some(&pinned) = ctx.skill_revisions.get(id)
                && pinned != skill.current_revision
            {
                match self.skills.revision(id, pinned).await? {
                    Some(rev) => {
                        prompt.description = rev.description;
                        prompt.prompt_text = rev.prompt_text;
                        prompt.revision = rev.revision;
                        prompt.provenance = rev.provenance;
                    }
                    None => warnings.push(ResolveWarning::PinnedRevisionMissing {
                        skill_id: id.clone(),
                        revision: pinned,
                    }),
                }
            }
            skills.push(prompt);
        }
        Ok((skills, warnings))
    }

    /// The runtime that drives `agent`: the caller's pin, else the run's pin (written on first
    /// use by compare-and-set on the whole map, never overwriting), else — outside a run — the
    /// agent's own, else `default`.
    pub async fn resolve_runtime(
        &self,
        agent: &AgentRef,
        ctx: &ResolveCtx,
        pins: &dyn RuntimePinStore,
        default: Runtime,
    ) -> Result<RuntimeChoice, ResolveError> {
        let pick = |value: Option<Runtime>, source| match value {
            Some(runtime) => RuntimeChoice { runtime, source },
            None => RuntimeChoice {
                runtime: default,
                source: RuntimeSource::Default,
            },
        };
        if let Some(value) = ctx.agent_runtimes.as_ref().and_then(|m| m.get(&agent.key)) {
            return Ok(pick(*value, RuntimeSource::Caller));
        }
        let Some(run) = ctx.run_id.as_deref() else {
            let resolved = self.resolve_agent(agent, ctx).await?;
            return Ok(pick(resolved.runtime, RuntimeSource::Agent));
        };
        let mut own: Option<Option<Runtime>> = None;
        for _ in 0..RUNTIME_PIN_ATTEMPTS {
            let current = pins.load(run).await?;
            if let Some(value) = current.get(&agent.key) {
                return Ok(pick(*value, RuntimeSource::Run));
            }
            let value = if let Some(v) = own {
                v
            } else {
                let v = self.resolve_agent(agent, ctx).await?.runtime;
                own = Some(v);
                v
            };
            let mut next = current.clone();
            next.insert(agent.key.clone(), value);
            if pins.compare_and_set(run, &current, next).await? {
                return Ok(pick(value, RuntimeSource::Run));
            }
        }
        Err(ResolveError::RuntimePinContended {
            key: agent.key.clone(),
        })
    }

    /// The run-start snapshot of runtimes: every key that resolves, with its runtime (`None`
    /// for no opinion). Keys that do not resolve are left out and pin on first use.
    pub async fn snapshot_runtimes(
        &self,
        keys: &[String],
        ctx: &ResolveCtx,
    ) -> BTreeMap<String, Option<Runtime>> {
        let mut out = BTreeMap::new();
        for key in keys {
            if let Ok(resolved) = self.resolve_agent(&AgentRef::key(key), ctx).await {
                out.insert(key.clone(), resolved.runtime);
            }
        }
        out
    }

    /// The run-start `agentVersions` snapshot: the newest version of each key's active GLOBAL
    /// lineage.
    pub async fn snapshot_agent_versions(
        &self,
        keys: &[String],
    ) -> Result<BTreeMap<String, u32>, ResolveError> {
        let mut out = BTreeMap::new();
        for key in keys {
            for (_, head) in self.agents.heads(key, &[ScopeRef::Global]).await? {
                if head.active {
                    out.insert(key.clone(), head.latest.version);
                }
            }
        }
        Ok(out)
    }

    /// The run-start `skillRevisions` snapshot: the current revision of every skill visible to
    /// the run's tenant.
    pub async fn snapshot_skill_revisions(
        &self,
        ctx: &ResolveCtx,
    ) -> Result<BTreeMap<String, u32>, ResolveError> {
        Ok(self
            .skills
            .list()
            .await?
            .into_iter()
            .filter(|s| {
                s.scope
                    .visible_to(ctx.team_id.as_deref(), ctx.org_id.as_deref())
            })
            .map(|s| (s.id, s.current_revision))
            .collect())
    }
}

fn prompt_for(row: &AgentVersion) -> (String, PromptSource) {
    match row.system_prompt.as_deref() {
        Some(p) if !p.trim().is_empty() => (p.to_owned(), PromptSource::Row),
        _ => match builtin_agent(&row.key) {
            Some(b) => (b.prompt.to_owned(), PromptSource::BuiltIn),
            None => (String::new(), PromptSource::Empty),
        },
    }
}
