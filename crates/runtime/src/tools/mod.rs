//! The canonical tools a model calls: `readFile`, `writeFile`, `listDirectory`, `bash`,
//! `loadSkill` when skills exist, and `searchLessons`/`explainLesson` when the session works on
//! a repository. Every call is bounded, checked by the scanners, audited with secrets masked,
//! offloaded when large, and traced as exactly what the model saw.

mod files;
pub(crate) mod lessons;
pub(crate) mod offload;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use auto_swe_agents::{LOAD_SKILL_TOOL, PromptSkill, load_skill};
use auto_swe_models::{ToolCall, ToolDefinition, ToolResult};
use auto_swe_scanners::{CompiledPatterns, HarnessConfig, mask_credential_shapes};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::trace::{TraceEntry, TraceKind, Tracer};
use crate::workspace::ToolWorkspace;
use lessons::LessonMemory;

/// Largest tool-call argument text accepted, in bytes.
pub const MAX_TOOL_ARGUMENT_BYTES: usize = 2 * 1024 * 1024;

/// Trace `error` tags of the security checks, defined once: the tools write them and readers
/// (security views, evaluation scorers) match on them.
pub mod security_tags {
    /// The sensitive path scanner refused a write.
    pub const SENSITIVE_FILE: &str = "blocked by sensitive file scanner";
    /// The pre-write content check refused a write.
    pub const CONTENT_BLOCK: &str = "blocked by content security check";
    /// The pre-write content check warned and the write went ahead.
    pub const CONTENT_WARNING: &str = "content security warning";
    /// The shell scanner refused a command.
    pub const SHELL_BLOCK: &str = "blocked by shell command scanner";
}

/// Prefix of a write the content check refused.
pub const SECURITY_CHECK_FAILED_PREFIX: &str = "SECURITY_CHECK_FAILED:";
/// Prefix of a write that went ahead with warnings.
pub const SECURITY_WARNINGS_PREFIX: &str = "SECURITY_WARNINGS:";

/// How the tools behave; read once per agent build.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolConfig {
    /// `workspace.maxToolOutputChars`.
    pub max_output_chars: usize,
    /// Timeout of one `bash` call.
    pub bash_timeout: Duration,
    /// Timeout of one file operation.
    pub file_timeout: Duration,
    /// Whether the harness's own configuration is protected from writes.
    pub harness: HarnessConfig,
}

impl Default for ToolConfig {
    fn default() -> Self {
        Self {
            max_output_chars: offload::DEFAULT_MAX_TOOL_OUTPUT_CHARS,
            bash_timeout: Duration::from_secs(600),
            file_timeout: Duration::from_secs(60),
            harness: HarnessConfig::NotLoaded,
        }
    }
}

/// Where audit lines go (`[bash:audit] command=…`), secrets already masked.
pub trait AuditSink: Send + Sync {
    /// One line.
    fn line(&self, line: &str);
}

/// Audit lines as `tracing` events on the `auto_swe::audit` target.
#[derive(Debug, Clone, Copy, Default)]
pub struct TracingAudit;

impl AuditSink for TracingAudit {
    fn line(&self, line: &str) {
        tracing::info!(target: "auto_swe::audit", "{line}");
    }
}

/// Audit lines kept in memory (tests).
#[derive(Debug, Default)]
pub struct MemoryAudit(std::sync::Mutex<Vec<String>>);

impl MemoryAudit {
    /// The lines so far.
    #[must_use]
    pub fn lines(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl AuditSink for MemoryAudit {
    fn line(&self, line: &str) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(line.to_owned());
    }
}

/// The memory tools' binding: the store and the one repository it answers for.
#[derive(Clone)]
pub struct LessonBinding {
    /// The memory.
    pub memory: Arc<dyn LessonMemory>,
    /// The session's repository.
    pub repository: String,
}

/// What a tool call produced, before it becomes a [`ToolResult`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outcome {
    pub(crate) text: String,
    pub(crate) is_error: bool,
    /// The trace's error tag (security tags, or the failure).
    pub(crate) tag: Option<String>,
    pub(crate) offload_path: Option<String>,
    pub(crate) original_chars: Option<usize>,
}

impl Outcome {
    pub(crate) fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: false,
            tag: None,
            offload_path: None,
            original_chars: None,
        }
    }

    pub(crate) fn refused(text: impl Into<String>, tag: &str) -> Self {
        Self {
            text: text.into(),
            is_error: true,
            tag: Some(tag.to_owned()),
            offload_path: None,
            original_chars: None,
        }
    }

    pub(crate) fn error(text: impl Into<String>) -> Self {
        let text = text.into();
        Self {
            tag: Some(text.clone()),
            text,
            is_error: true,
            offload_path: None,
            original_chars: None,
        }
    }
}

/// The tools one agent build carries.
pub struct ToolSet {
    pub(crate) workspace: ToolWorkspace,
    pub(crate) patterns: Arc<CompiledPatterns>,
    pub(crate) enabled: BTreeSet<String>,
    pub(crate) skills: Vec<PromptSkill>,
    pub(crate) lessons: Option<LessonBinding>,
    pub(crate) config: ToolConfig,
    pub(crate) audit: Arc<dyn AuditSink>,
    pub(crate) tracer: Arc<Tracer>,
    pub(crate) mcp: Option<Arc<crate::mcp::McpBinding>>,
    offloads: AtomicU64,
    session_tag: String,
}

impl std::fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSet")
            .field("workspace", &self.workspace)
            .field("enabled", &self.enabled)
            .field("skills", &self.skills.len())
            .finish_non_exhaustive()
    }
}

/// Everything a [`ToolSet`] is built from.
pub struct ToolSetConfig {
    /// The workspace.
    pub workspace: ToolWorkspace,
    /// Scanner patterns.
    pub patterns: Arc<CompiledPatterns>,
    /// Workspace tool ids granted (from `implementer_workspace_tools` or
    /// `agent_run_workspace_tools`); unknown ids are ignored.
    pub workspace_tools: Vec<String>,
    /// Skills (adds `loadSkill` when non-empty).
    pub skills: Vec<PromptSkill>,
    /// Memory tools' binding, for a session on a repository.
    pub lessons: Option<LessonBinding>,
    /// Limits.
    pub config: ToolConfig,
    /// Audit lines.
    pub audit: Arc<dyn AuditSink>,
    /// Trace rows.
    pub tracer: Arc<Tracer>,
}

impl ToolSet {
    /// Builds the tool set.
    #[must_use]
    pub fn new(config: ToolSetConfig) -> Self {
        let enabled = config
            .workspace_tools
            .into_iter()
            .filter(|t| auto_swe_agents::WORKSPACE_TOOL_IDS.contains(&t.as_str()))
            .collect();
        Self {
            workspace: config.workspace,
            patterns: config.patterns,
            enabled,
            skills: config.skills,
            lessons: config.lessons,
            config: config.config,
            audit: config.audit,
            tracer: config.tracer,
            mcp: None,
            offloads: AtomicU64::new(0),
            session_tag: random_tag(),
        }
    }

    /// Adds an MCP binding's tools after the built-in ones (whose names it never takes).
    #[must_use]
    pub fn with_mcp(mut self, binding: Arc<crate::mcp::McpBinding>) -> Self {
        self.mcp = Some(binding);
        self
    }

    /// The tool definitions, in a fixed order (part of the prompt's cached prefix).
    #[must_use]
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        let mut out = Vec::new();
        for id in auto_swe_agents::WORKSPACE_TOOL_IDS {
            if self.enabled.contains(id) {
                out.push(files::definition_for(id));
            }
        }
        if !self.skills.is_empty() {
            out.push(definition(
                LOAD_SKILL_TOOL,
                "Load the full guidance of one skill from the Available Skills menu.",
                json!({"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}),
            ));
        }
        if self.lessons.is_some() {
            out.push(definition(
                "searchLessons",
                "Search lessons learned on this repository (read only).",
                json!({"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":10}},"required":["query"],"additionalProperties":false}),
            ));
            out.push(definition(
                "explainLesson",
                "Read one lesson of this repository by its id (read only).",
                json!({"type":"object","properties":{"lessonId":{"type":"string"}},"required":["lessonId"],"additionalProperties":false}),
            ));
        }
        if let Some(binding) = &self.mcp {
            out.extend(binding.definitions());
        }
        out
    }

    /// Whether a tool of this name exists in the set.
    #[must_use]
    pub fn has(&self, name: &str) -> bool {
        self.definitions().iter().any(|d| d.name == name)
    }

    /// Runs one call. Never fails: every problem is a tool error the model reads.
    pub async fn call(&self, call: &ToolCall, cancel: &CancellationToken) -> ToolResult {
        let span = auto_swe_telemetry::spans::execute_tool(&call.name, Some(&call.id));
        let started = Instant::now();
        let outcome = tokio::select! {
            outcome = self.dispatch(call).instrument(span) => outcome,
            () = cancel.cancelled() => Outcome::error("the turn was cancelled; the call did not finish"),
        };
        let mut output = json!({ "content": outcome.text });
        if let Some(path) = &outcome.offload_path {
            output["offloadPath"] = json!(path);
        }
        if let Some(chars) = outcome.original_chars {
            output["originalChars"] = json!(chars);
        }
        self.tracer.record(TraceEntry {
            kind: TraceKind::ToolCall,
            tool_name: Some(call.name.clone()),
            input_json: Some(trace_input(call)),
            output_json: Some(output),
            duration_ms: elapsed_ms(started),
            error: outcome.tag.clone(),
            call: None,
        });
        ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: outcome.text,
            is_error: outcome.is_error,
        }
    }

    async fn dispatch(&self, call: &ToolCall) -> Outcome {
        if call.arguments.len() > MAX_TOOL_ARGUMENT_BYTES {
            return Outcome::error(format!(
                "the arguments are {} bytes, over the {MAX_TOOL_ARGUMENT_BYTES} byte limit; \
                 write large files in parts",
                call.arguments.len()
            ));
        }
        if !self.has(&call.name) {
            let known: Vec<String> = self.definitions().into_iter().map(|d| d.name).collect();
            return Outcome::error(format!(
                "unknown tool {:?}; the tools are: {}",
                crate::trace::cut_chars(&call.name, 64),
                known.join(", ")
            ));
        }
        let Some(Value::Object(args)) = call.arguments_json() else {
            return Outcome::error("malformed arguments: expected one JSON object");
        };
        match call.name.as_str() {
            "readFile" => self.read_file(&args).await,
            "writeFile" => self.write_file(&args).await,
            "listDirectory" => self.list_directory(&args).await,
            "bash" => self.bash(&args).await,
            LOAD_SKILL_TOOL => match string_arg(&args, "name") {
                Ok(name) => load_skill(&self.skills, name).map_or_else(
                    || Outcome::error(format!("no skill named {name:?}")),
                    Outcome::ok,
                ),
                Err(e) => e,
            },
            "searchLessons" | "explainLesson" => self.lessons(&call.name, &args).await,
            name => match &self.mcp {
                Some(binding) if binding.has(name) => {
                    let result = binding.call(&call.id, name, &Value::Object(args)).await;
                    Outcome {
                        tag: result.is_error.then(|| result.content.clone()),
                        text: result.content,
                        is_error: result.is_error,
                        offload_path: None,
                        original_chars: None,
                    }
                }
                _ => Outcome::error("unknown tool"),
            },
        }
    }

    async fn lessons(&self, name: &str, args: &serde_json::Map<String, Value>) -> Outcome {
        let Some(binding) = &self.lessons else {
            return Outcome::error("memory tools are not available");
        };
        if name == "searchLessons" {
            let query = match string_arg(args, "query") {
                Ok(q) => q,
                Err(e) => return e,
            };
            let limit = args
                .get("limit")
                .and_then(Value::as_u64)
                .map_or(5, |l| l.clamp(1, 10) as usize);
            match binding
                .memory
                .search(&binding.repository, query, limit)
                .await
            {
                Ok(hits) => Outcome::ok(json!({ "lessons": hits }).to_string()),
                Err(e) => Outcome::error(e.to_string()),
            }
        } else {
            let id = match string_arg(args, "lessonId") {
                Ok(id) => id,
                Err(e) => return e,
            };
            if !lessons::is_uuid(id) {
                return Outcome::ok(json!({ "found": false }).to_string());
            }
            match binding.memory.explain(&binding.repository, id).await {
                Ok(Some(lesson)) => {
                    Outcome::ok(json!({ "found": true, "lesson": lesson }).to_string())
                }
                Ok(None) => Outcome::ok(json!({ "found": false }).to_string()),
                Err(e) => Outcome::error(e.to_string()),
            }
        }
    }

    /// A file name for one offloaded output, unique within the workspace.
    pub(crate) fn offload_name(&self, tool: &str) -> String {
        let n = self.offloads.fetch_add(1, Ordering::Relaxed);
        format!("{tool}-{}-{n}.txt", self.session_tag)
    }

    pub(crate) fn audit(&self, line: &str) {
        self.audit.line(&mask_credential_shapes(line));
    }
}

/// What the trace records of a call's input: `writeFile` keeps only the path.
fn trace_input(call: &ToolCall) -> Value {
    match call.arguments_json() {
        Some(Value::Object(mut args)) => {
            if call.name == "writeFile" {
                args.retain(|k, _| k == "path");
            }
            Value::Object(args)
        }
        _ => json!({ "unparsed": crate::trace::cut_chars(&call.arguments, 2_000) }),
    }
}

pub(crate) fn string_arg<'a>(
    args: &'a serde_json::Map<String, Value>,
    name: &str,
) -> Result<&'a str, Outcome> {
    args.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| Outcome::error(format!("malformed arguments: {name:?} must be a string")))
}

pub(crate) fn definition(name: &str, description: &str, parameters: Value) -> ToolDefinition {
    ToolDefinition {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
    }
}

pub(crate) fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn random_tag() -> String {
    let mut bytes = [0u8; 6];
    if getrandom::getrandom(&mut bytes).is_err() {
        // A clock-derived tag still separates sessions; uniqueness within one comes from the
        // counter.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        return format!("{nanos:08x}");
    }
    hex::encode(bytes)
}
