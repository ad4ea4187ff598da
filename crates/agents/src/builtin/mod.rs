//! The built-in agents and skills: seed content for the software-engineering use case, tagged
//! with their origin. Nothing in the resolver privileges them; they are rows like any other once
//! seeded.

mod prompts;
mod skills;

use serde::Serialize;

use crate::model::{AgentVersion, ScopeRef};
use crate::skills::model::{Skill, SkillRevision, SkillScope, skill_content_hash};

pub use skills::{BuiltinSkill, builtin_skill, builtin_skills};

/// The origin tag every built-in agent carries.
pub const BUILTIN_ORIGIN: &str = "swe-starter";

const OPUS: &str = "anthropic/claude-opus-5-5";
const SONNET: &str = "anthropic/claude-sonnet-5-5";
const HAIKU: &str = "anthropic/claude-haiku-4-5-20251001";

const READ_TOOLS: &[&str] = &["readFile", "listDirectory"];

/// One built-in agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct BuiltinAgent {
    /// The agent key.
    pub key: &'static str,
    /// Its default model, for a model-backed agent.
    pub model_spec: Option<&'static str>,
    /// Its parent, for a sub-role persona.
    pub inherits_model_from: Option<&'static str>,
    /// What runs it.
    pub used_by: &'static str,
    /// Its built-in system prompt.
    pub prompt: &'static str,
    /// Its default skills, in order.
    pub skills: &'static [&'static str],
    /// Its default tool keys (`None`: no opinion).
    pub tool_keys: Option<&'static [&'static str]>,
}

impl BuiltinAgent {
    /// Whether the agent binds its own model.
    #[must_use]
    pub fn is_model_backed(&self) -> bool {
        self.model_spec.is_some()
    }

    /// The GLOBAL version 1 row this agent seeds.
    #[must_use]
    pub fn seed_row(&self) -> AgentVersion {
        let mut row = AgentVersion::new(self.key, ScopeRef::Global);
        row.model_spec = self.model_spec.map(crate::model::ModelName::new);
        row.inherits_model_from = self.inherits_model_from.map(str::to_owned);
        row.system_prompt = Some(self.prompt.to_owned());
        row.skill_refs = self.skills.iter().map(|s| (*s).to_owned()).collect();
        row.tool_keys = self
            .tool_keys
            .map(|keys| keys.iter().map(|k| (*k).to_owned()).collect());
        row.origin = Some(BUILTIN_ORIGIN.to_owned());
        row.is_verified = true;
        row
    }
}

const fn model_backed(
    key: &'static str,
    model: &'static str,
    used_by: &'static str,
    prompt: &'static str,
    skills: &'static [&'static str],
    tool_keys: Option<&'static [&'static str]>,
) -> BuiltinAgent {
    BuiltinAgent {
        key,
        model_spec: Some(model),
        inherits_model_from: None,
        used_by,
        prompt,
        skills,
        tool_keys,
    }
}

const fn persona(
    key: &'static str,
    parent: &'static str,
    used_by: &'static str,
    prompt: &'static str,
    skills: &'static [&'static str],
    tool_keys: Option<&'static [&'static str]>,
) -> BuiltinAgent {
    BuiltinAgent {
        key,
        model_spec: None,
        inherits_model_from: Some(parent),
        used_by,
        prompt,
        skills,
        tool_keys,
    }
}

const IMPLEMENTER_SKILLS: &[&str] = &[
    "scope-conservatism",
    "follow-existing-patterns",
    "test-first",
    "incremental-commits",
    "no-new-dependencies",
    "shell-command-safety",
    "security-aware-implementation",
    "error-path-coverage",
    "acceptance-criteria-first",
    "idempotency",
    "graceful-degradation",
    "async-safety",
    "observability-first",
    "minimal-surface-area",
    "configuration-over-hardcoding",
    "rollback-first-planning",
    "design-fidelity",
];

use prompts as p;

static BUILTIN_AGENTS: [BuiltinAgent; 33] = [
    // Model-backed (19).
    model_backed(
        "implementer",
        OPUS,
        "implementation sessions",
        p::IMPLEMENTER,
        IMPLEMENTER_SKILLS,
        None,
    ),
    model_backed(
        "reviewer",
        OPUS,
        "the review network (parent of the three review personas)",
        p::DOMAIN_LOGIC_REVIEWER,
        &[
            "review-focus-security",
            "migration-safety-review",
            "api-contract-stability",
        ],
        Some(READ_TOOLS),
    ),
    model_backed(
        "planner",
        SONNET,
        "decomposition and epic planning",
        p::PLANNER,
        &["pr-description-quality"],
        Some(&[]),
    ),
    model_backed(
        "securityReview",
        SONNET,
        "the post-diff security gate",
        p::SECURITY_REVIEW_GATE,
        &[],
        Some(&[]),
    ),
    model_backed(
        "validateContext",
        SONNET,
        "context validation",
        p::VALIDATE_CONTEXT,
        &[
            "success-criteria-extraction",
            "context-ambiguity-resolution",
        ],
        Some(&[]),
    ),
    model_backed(
        "commitToMemory",
        OPUS,
        "lesson writing",
        p::COMMIT_TO_MEMORY,
        &["actionable-lessons"],
        Some(&[]),
    ),
    model_backed(
        "channelAssistant",
        OPUS,
        "channel turns and channel tasks",
        p::CHANNEL_ASSISTANT,
        &[],
        Some(READ_TOOLS),
    ),
    model_backed(
        "evalJudge",
        HAIKU,
        "the eval node's judge scorer",
        p::EVAL_JUDGE,
        &[],
        Some(&[]),
    ),
    model_backed(
        "workflowAuthor",
        OPUS,
        "natural-language workflow generation",
        p::WORKFLOW_AUTHOR,
        &[],
        Some(&[]),
    ),
    model_backed(
        "workflowExplainer",
        SONNET,
        "natural-language workflow explanation",
        p::WORKFLOW_EXPLAINER,
        &[],
        Some(&[]),
    ),
    model_backed(
        "repoDependencyInferrer",
        HAIKU,
        "repository dependency inference",
        p::REPO_DEPENDENCY_INFERRER,
        &[],
        Some(&[]),
    ),
    model_backed(
        "contentWriter",
        SONNET,
        "document drafting",
        p::CONTENT_WRITER,
        &[],
        Some(READ_TOOLS),
    ),
    model_backed(
        "brandReviewer",
        SONNET,
        "brand-voice and clarity review",
        p::BRAND_REVIEWER,
        &[],
        Some(READ_TOOLS),
    ),
    model_backed(
        "supportResponder",
        SONNET,
        "support ticket replies",
        p::SUPPORT_RESPONDER,
        &[
            "support-ticket-tone",
            "support-kb-retrieval",
            "support-escalation-policy",
            "support-response-templates",
        ],
        Some(READ_TOOLS),
    ),
    model_backed(
        "productAnalyst",
        SONNET,
        "product problem analysis",
        p::PRODUCT_ANALYST,
        &["prd-readiness"],
        Some(READ_TOOLS),
    ),
    model_backed(
        "prdWriter",
        SONNET,
        "PRD drafting",
        p::PRD_WRITER,
        &["product-acceptance-criteria"],
        Some(READ_TOOLS),
    ),
    model_backed(
        "issueDrafter",
        SONNET,
        "issue drafting from a brief",
        p::ISSUE_DRAFTER,
        &["product-acceptance-criteria"],
        Some(READ_TOOLS),
    ),
    model_backed(
        "appAssistant",
        SONNET,
        "the dashboard's in-app assistant",
        p::APP_ASSISTANT,
        &[],
        Some(&[]),
    ),
    model_backed(
        "assistantTitler",
        HAIKU,
        "naming assistant conversations",
        p::ASSISTANT_TITLER,
        &[],
        Some(&[]),
    ),
    // Sub-role personas (14).
    persona(
        "securityReviewer",
        "reviewer",
        "the review network",
        p::SECURITY_REVIEWER,
        &["security-review-depth"],
        Some(READ_TOOLS),
    ),
    persona(
        "domainLogicReviewer",
        "reviewer",
        "the review network",
        p::DOMAIN_LOGIC_REVIEWER,
        &["domain-logic-integrity"],
        Some(READ_TOOLS),
    ),
    persona(
        "performanceReviewer",
        "reviewer",
        "the review network",
        p::PERFORMANCE_REVIEWER,
        &["performance-impact-assessment"],
        Some(READ_TOOLS),
    ),
    persona(
        "decomposer",
        "planner",
        "decomposition",
        p::DECOMPOSER,
        &["subtask-decomposition"],
        Some(&[]),
    ),
    persona(
        "prdAnalyst",
        "planner",
        "PRD analysis",
        p::PRD_ANALYST,
        &["prd-readiness"],
        Some(&[]),
    ),
    persona(
        "prdDecomposer",
        "planner",
        "PRD decomposition",
        p::PRD_DECOMPOSER,
        &["story-decomposition"],
        Some(&[]),
    ),
    persona(
        "ciFixer",
        "implementer",
        "CI-fix sessions",
        p::CI_FIXER,
        &[],
        None,
    ),
    persona(
        "reviewFixer",
        "implementer",
        "review-fix sessions",
        p::REVIEW_FIXER,
        &[],
        None,
    ),
    persona(
        "gateFixer",
        "implementer",
        "gate-fix sessions",
        p::GATE_FIXER,
        &[],
        None,
    ),
    persona(
        "mergeConflictResolver",
        "implementer",
        "merge-conflict resolution",
        p::MERGE_CONFLICT_RESOLVER,
        &[],
        None,
    ),
    persona(
        "lessonConsolidator",
        "commitToMemory",
        "lesson consolidation",
        p::LESSON_CONSOLIDATOR,
        &[],
        Some(&[]),
    ),
    persona(
        "ciTriager",
        "planner",
        "CI failure triage",
        p::CI_TRIAGER,
        &[],
        Some(READ_TOOLS),
    ),
    persona(
        "prFeedbackResponder",
        "planner",
        "pull-request feedback",
        p::PR_FEEDBACK_RESPONDER,
        &[],
        Some(READ_TOOLS),
    ),
    persona(
        "ticketContextGatherer",
        "planner",
        "ticket context digests",
        p::TICKET_CONTEXT_GATHERER,
        &[],
        Some(&[]),
    ),
];

/// Every built-in agent: 19 model-backed, then 14 personas.
#[must_use]
pub fn builtin_agents() -> &'static [BuiltinAgent] {
    &BUILTIN_AGENTS
}

/// One built-in agent by key.
#[must_use]
pub fn builtin_agent(key: &str) -> Option<&'static BuiltinAgent> {
    BUILTIN_AGENTS.iter().find(|a| a.key == key)
}

impl BuiltinSkill {
    /// The skill row this built-in seeds (GLOBAL, verified, revision 1).
    #[must_use]
    pub fn seed(&self) -> (Skill, SkillRevision) {
        let skill = Skill {
            id: self.name.to_owned(),
            name: self.name.to_owned(),
            description: self.description.to_owned(),
            prompt_text: self.text.to_owned(),
            scope: SkillScope::Global,
            is_built_in: true,
            is_verified: true,
            is_active: true,
            current_revision: 1,
            provenance: None,
        };
        let revision = SkillRevision {
            skill_id: self.name.to_owned(),
            revision: 1,
            description: self.description.to_owned(),
            prompt_text: self.text.to_owned(),
            content_hash: skill_content_hash(self.description, self.text),
            scan_warnings: Vec::new(),
            author: None,
            provenance: None,
            reference_files: Vec::new(),
        };
        (skill, revision)
    }
}
