//! `auto-swe-agents`: the agent library. Agents are versioned data at five scopes; the resolver
//! picks exactly one version per run and scope, chases `inheritsModelFrom` for the model, binds a
//! credential, skills at the run's pinned revisions and tool keys. Skills are versioned text with
//! provenance, rendered for prompts through one function.
//!
//! Storage sits behind traits (`AgentStore`, `SkillStore`, `CredentialStore`,
//! `RuntimePinStore`) that a host implements over its database; in-memory implementations ship
//! for tests and local mode.
//!
//! ```
//! use auto_swe_agents::{Capability, ToolGrant, builtin_agent, tool_capabilities};
//!
//! let implementer = builtin_agent("implementer").expect("a built-in agent");
//! assert!(!implementer.prompt.is_empty());
//! let granted = tool_capabilities(Some(&["readFile".to_owned()]), ToolGrant::Exact);
//! assert!(granted.contains(&Capability::Read));
//! assert!(!granted.contains(&Capability::Shell));
//! ```

mod builtin;
mod cache;
mod context;
mod error;
mod library;
mod local;
mod model;
mod persona;
mod required;
mod resolver;
mod scan;
mod skills;
mod store;
mod tools;

/// The reasoning level an agent version asks for, defined by the models crate.
pub use auto_swe_models::ReasoningLevel;
pub use builtin::{
    BUILTIN_ORIGIN, BuiltinAgent, BuiltinSkill, builtin_agent, builtin_agents, builtin_skill,
    builtin_skills,
};
pub use cache::{CONFIG_CACHE_MAX_ENTRIES, DEFAULT_CONFIG_CACHE_TTL};
pub use context::ResolveCtx;
pub use error::{ConfigNotReady, LibraryError, LibraryStoreError, ResolveError, SkillError};
pub use library::{Actor, AgentFields, AgentLibrary, AgentPatch, CreateAgent, SavedVersion};
pub use local::seed_builtins;
pub use model::{
    AgentLineageHead, AgentRef, AgentVersion, CredentialRef, ModelName, Runtime, Scope, ScopeRef,
};
pub use persona::{
    BoundedPersona, ReviewPersona, ReviewPromptInputs, ReviewPromptSource, bound_persona,
    choose_review_prompt,
};
pub use required::{
    Channels, RequiredAgents, StepAgents, assert_config_ready, required_agent_keys,
};
pub use resolver::{
    MAX_INHERITANCE_DEPTH, PromptSource, ResolveWarning, ResolvedAgent, Resolver, RuntimeChoice,
    RuntimeSource,
};
pub use scan::{PatternsProvider, SCAN_INCOMPLETE_WARNING, StaticPatterns, advisory_scan};
pub use skills::library::{
    NewSkill, SkillEdit, SkillLibrary, SkillSaved, fold_skill_name, name_conflicts,
    normalise_description, scopes_overlap, validate_prompt_text, validate_skill_name,
};
pub use skills::model::{
    PromptSkill, ReferenceFile, SKILL_DESCRIPTION_MAX_CHARS, SKILL_NAME_MAX_CHARS,
    SKILL_TEXT_MAX_BYTES, Skill, SkillProvenance, SkillRevision, SkillScope, skill_content_hash,
};
pub use skills::render::{
    LOAD_SKILL_TOOL, SKILL_MENU_HEADING, SkillPlacement, load_skill, render_skill, skills_inline,
    skills_menu,
};
pub use skills::skill_md::{
    FolderPlan, REFERENCE_MAX_BYTES, REFERENCE_MAX_FILES, SKILL_FILE, SOURCE_MAX_BYTES,
    SOURCE_MAX_SKILLS, ScriptMode, SkillMd, SkillMdError, SkippedFile, SourceRefusal, SourceSkill,
    TreeEntry, TreeEntryKind, parse_skill_md, plan_source, read_source,
};
pub use store::{
    AgentStore, CredentialStore, InMemoryAgentStore, InMemoryCredentialStore,
    InMemoryRuntimePinStore, InMemorySkillStore, RuntimePinStore, SkillStore,
};
pub use tools::{
    Capability, IMPLEMENTER_BOUNDED_PERSONAS, KNOWLEDGE_TOOL_IDS, MCP_TOOL_KEY, PersonaMcp,
    READ_TOOL_IDS, ToolGrant, WORKSPACE_TOOL_IDS, agent_run_workspace_tools,
    implementer_workspace_tools, is_known_tool_key, knowledge_tools, mcp_enabled,
    persona_mcp_binding, persona_tool_keys, tool_capabilities,
};
