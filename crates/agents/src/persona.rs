//! Persona rules that keep an edit to a parent row in force: the review personas' prompt
//! fallback order, and the fix personas' tools, MCP and skills bounded by the implementer's.

use serde::Serialize;

use crate::builtin::builtin_agent;
use crate::context::ResolveCtx;
use crate::error::ResolveError;
use crate::model::AgentRef;
use crate::resolver::{ResolvedAgent, Resolver};
use crate::skills::model::PromptSkill;
use crate::tools::{PersonaMcp, persona_mcp_binding, persona_tool_keys};

/// The three review personas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum ReviewPersona {
    /// `securityReviewer`.
    Security,
    /// `domainLogicReviewer`.
    DomainLogic,
    /// `performanceReviewer`.
    Performance,
}

impl ReviewPersona {
    /// The persona's agent key.
    #[must_use]
    pub fn key(self) -> &'static str {
        match self {
            ReviewPersona::Security => "securityReviewer",
            ReviewPersona::DomainLogic => "domainLogicReviewer",
            ReviewPersona::Performance => "performanceReviewer",
        }
    }
}

/// Which step of the fallback order supplied a review persona's prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ReviewPromptSource {
    /// The review node's own `systemPrompt` (replaces all three).
    Node,
    /// The persona row, customised.
    PersonaCustomised,
    /// The parent reviewer row, customised.
    ReviewerCustomised,
    /// The persona row's seeded text.
    PersonaSeeded,
    /// The built-in constant.
    BuiltIn,
}

/// Everything the review prompt order looks at.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReviewPromptInputs<'a> {
    /// The review node's `systemPrompt`.
    pub node_prompt: Option<&'a str>,
    /// The persona row's prompt.
    pub persona_row: Option<&'a str>,
    /// The reviewer row's prompt.
    pub reviewer_row: Option<&'a str>,
    /// The `domainLogicReviewer` row's prompt (the reviewer row is seeded with the domain-logic
    /// prompt, so matching it does not count as customised).
    pub domain_logic_row: Option<&'a str>,
}

fn present(text: Option<&str>) -> Option<&str> {
    text.filter(|t| !t.trim().is_empty())
}

/// The review personas' prompt order: the node's prompt; the persona row's when customised
/// (differs from its built-in); the reviewer row's when customised (differs from the reviewer
/// built-in and from the domain-logic row's text); the persona row's seeded text; the built-in.
#[must_use]
pub fn choose_review_prompt(
    persona: ReviewPersona,
    inputs: ReviewPromptInputs<'_>,
) -> (String, ReviewPromptSource) {
    let builtin = builtin_agent(persona.key()).map_or("", |a| a.prompt);
    let reviewer_builtin = builtin_agent("reviewer").map_or("", |a| a.prompt);
    if let Some(p) = present(inputs.node_prompt) {
        return (p.to_owned(), ReviewPromptSource::Node);
    }
    if let Some(p) = present(inputs.persona_row)
        && p != builtin
    {
        return (p.to_owned(), ReviewPromptSource::PersonaCustomised);
    }
    if let Some(p) = present(inputs.reviewer_row)
        && p != reviewer_builtin
        && Some(p) != present(inputs.domain_logic_row)
    {
        return (p.to_owned(), ReviewPromptSource::ReviewerCustomised);
    }
    if let Some(p) = present(inputs.persona_row) {
        return (p.to_owned(), ReviewPromptSource::PersonaSeeded);
    }
    (builtin.to_owned(), ReviewPromptSource::BuiltIn)
}

impl Resolver {
    /// A review persona's base prompt in `ctx`, reading the persona, reviewer and domain-logic
    /// rows through the cascade. A row that does not resolve counts as absent.
    pub async fn review_persona_prompt(
        &self,
        persona: ReviewPersona,
        node_prompt: Option<&str>,
        ctx: &ResolveCtx,
    ) -> Result<(String, ReviewPromptSource), ResolveError> {
        let row_prompt = async |key: &str| -> Result<Option<String>, ResolveError> {
            let pin = ctx.agent_versions.get(key).copied();
            match self.winning_row(key, pin, ctx).await {
                Ok(row) => Ok(row.system_prompt),
                Err(ResolveError::ConfigMissing { .. }) => Ok(None),
                Err(other) => Err(other),
            }
        };
        let persona_row = row_prompt(persona.key()).await?;
        let reviewer_row = row_prompt("reviewer").await?;
        let domain_row = row_prompt(ReviewPersona::DomainLogic.key()).await?;
        Ok(choose_review_prompt(
            persona,
            ReviewPromptInputs {
                node_prompt,
                persona_row: persona_row.as_deref(),
                reviewer_row: reviewer_row.as_deref(),
                domain_logic_row: domain_row.as_deref(),
            },
        ))
    }

    /// A fix or merge-resolver persona as its session runs it: its own row, with tool keys
    /// bounded by the implementer's, the implementer's MCP binding when it has none (and both
    /// allow `mcp`), and the implementer's skills when it has none of its own.
    pub async fn resolve_bounded_persona(
        &self,
        persona: &AgentRef,
        ctx: &ResolveCtx,
    ) -> Result<BoundedPersona, ResolveError> {
        let own = self.resolve_agent(persona, ctx).await?;
        let implementer = self
            .resolve_agent(&AgentRef::key("implementer"), ctx)
            .await?;
        Ok(bound_persona(own, &implementer))
    }
}

/// A fix persona after the implementer bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct BoundedPersona {
    /// The persona as resolved.
    pub agent: ResolvedAgent,
    /// Its tool keys after the bound (`None`: every tool).
    pub tool_keys: Option<Vec<String>>,
    /// Its MCP binding.
    pub mcp: Option<PersonaMcp>,
    /// Its skills (the implementer's when it has none).
    pub skills: Vec<PromptSkill>,
}

/// Applies the implementer bound to a resolved persona.
#[must_use]
pub fn bound_persona(own: ResolvedAgent, implementer: &ResolvedAgent) -> BoundedPersona {
    let tool_keys = persona_tool_keys(own.tool_keys.as_deref(), implementer.tool_keys.as_deref());
    let mcp = persona_mcp_binding(
        own.mcp_connection_id.as_deref(),
        own.tool_keys.as_deref(),
        implementer.mcp_connection_id.as_deref(),
        implementer.tool_keys.as_deref(),
    );
    let skills = if own.row.skill_refs.is_empty() {
        implementer.skills.clone()
    } else {
        own.skills.clone()
    };
    BoundedPersona {
        agent: own,
        tool_keys,
        mcp,
        skills,
    }
}
