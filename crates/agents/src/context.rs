//! What a resolution is asked in: the run's scope ids and its pins.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::{Runtime, ScopeRef};

/// The scope and pins one resolution runs under. Everything in here changes the answer, so all
/// of it is part of the resolver's cache key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ResolveCtx {
    /// The run's workflow template.
    pub template_id: Option<String>,
    /// The channel, for channel-resident runs only.
    pub channel_id: Option<String>,
    /// The run's team.
    pub team_id: Option<String>,
    /// The team's organization, when it belongs to one.
    pub org_id: Option<String>,
    /// `agentVersions`: the GLOBAL version of each key the run started with.
    pub agent_versions: BTreeMap<String, u32>,
    /// `skillRevisions`: the revision of each skill id the run started with.
    pub skill_revisions: BTreeMap<String, u32>,
    /// The run, whose `agentRuntimes` map first-use runtime pins are written to.
    pub run_id: Option<String>,
    /// A caller-supplied runtime pin that wins over everything and is never written back.
    pub agent_runtimes: Option<BTreeMap<String, Option<Runtime>>>,
}

impl ResolveCtx {
    /// A context with no scope ids: only GLOBAL rows apply.
    #[must_use]
    pub fn global() -> Self {
        Self::default()
    }

    /// With a team (and its organization, if any).
    #[must_use]
    pub fn team(mut self, team: &str, org: Option<&str>) -> Self {
        self.team_id = Some(team.to_owned());
        self.org_id = org.map(str::to_owned);
        self
    }

    /// With a workflow template.
    #[must_use]
    pub fn template(mut self, template: &str) -> Self {
        self.template_id = Some(template.to_owned());
        self
    }

    /// With a channel.
    #[must_use]
    pub fn channel(mut self, channel: &str) -> Self {
        self.channel_id = Some(channel.to_owned());
        self
    }

    /// With a run id for runtime pins.
    #[must_use]
    pub fn run(mut self, run: &str) -> Self {
        self.run_id = Some(run.to_owned());
        self
    }

    /// The scopes that apply, most specific first. ORGANIZATION applies only with an
    /// organization; GLOBAL always.
    #[must_use]
    pub fn scopes(&self) -> Vec<ScopeRef> {
        let mut out = Vec::with_capacity(5);
        if let Some(id) = &self.template_id {
            out.push(ScopeRef::WorkflowTemplate(id.clone()));
        }
        if let Some(id) = &self.channel_id {
            out.push(ScopeRef::Channel(id.clone()));
        }
        if let Some(id) = &self.team_id {
            out.push(ScopeRef::Team(id.clone()));
        }
        if let Some(id) = &self.org_id {
            out.push(ScopeRef::Organization(id.clone()));
        }
        out.push(ScopeRef::Global);
        out
    }

    /// The scopes credentials cascade through: TEAM → ORGANIZATION → GLOBAL.
    #[must_use]
    pub fn credential_scopes(&self) -> Vec<ScopeRef> {
        let mut out = Vec::with_capacity(3);
        if let Some(id) = &self.team_id {
            out.push(ScopeRef::Team(id.clone()));
        }
        if let Some(id) = &self.org_id {
            out.push(ScopeRef::Organization(id.clone()));
        }
        out.push(ScopeRef::Global);
        out
    }
}
