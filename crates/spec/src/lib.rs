//! `auto-swe-spec`: the workflow spec every other auto-swe crate reads.
//!
//! A [`WorkflowSpec`] is a graph of [`Node`]s of fifteen kinds. This crate reads specs from JSON
//! and YAML (a *tolerant* reader for stored specs and a *strict* one for the save path), and is
//! pure: no I/O, no async runtime, no global state.
//!
//! ```
//! use auto_swe_spec::{ReadMode, SourceFormat, ValidateOptions, content_hash, read_spec, validate};
//!
//! let text = r#"{"entry": "end", "nodes": [{"id": "end", "type": "terminate", "status": "SUCCESS"}]}"#;
//! let spec = read_spec(text, SourceFormat::Json, ReadMode::Strict)?;
//! assert!(validate(&spec, &ValidateOptions::default()).is_valid());
//! assert_eq!(content_hash(&spec)?.len(), 64);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod binding;
mod canonical;
mod catalog;
mod diff;
mod duration;
mod expr;
mod input;
mod model;
mod node_serde;
mod path;
mod presentation;
mod read;
mod resolve;
mod schema;
mod validate;
mod write_path;

pub use binding::{Binding, BindingRef};
pub use canonical::{CanonicalError, canonical_json, canonical_value, content_hash};
pub use catalog::{FieldDescriptor, StepCatalog, StepDescriptor};
pub use diff::{FieldChange, NodeChange, SpecDiff, diff_specs};
pub use duration::{DurationError, Timeout, parse_duration};
pub use expr::{EvalError, Expr, ExprError, MAX_EXPR_BYTES, MAX_EXPR_NESTING, truthy};
pub use input::InputError;
pub use model::{
    AgentNode, BudgetPolicy, Command, CondNode, ContainerStepNode, DEFAULT_RAISE_PERCENT,
    DecisionOption, EvalNode, FanOutNode, FieldType, Flow, FormField, HumanApprovalNode,
    HumanCommon, HumanDecisionNode, HumanInputNode, HumanReviewNode, InputDecl, InputType, Join,
    MAX_TIMEOUT_MS, McpNode, NODE_TYPES, Node, NodeId, NodeKind, NodeRetry, OnBranchFail, OnError,
    OnFail, Scorer, ScorerKind, SetNode, ShellNetwork, ShellNode, Sidecar, SignalNode, StepNode,
    Subgraph, TerminalStatus, TerminateNode, Transport, WhenSpent, WorkflowSpec, WritePath,
};
pub use path::{ContextRoot, PathSegment};
pub use presentation::{
    GROUP_MAX_CHARS, HUMAN_TITLE_MAX_CHARS, PresentationError, TITLE_MAX_CHARS,
    normalise_presentation,
};
pub use read::{MAX_SPEC_BYTES, ReadError, ReadMode, SourceFormat, parse_document, read_spec};
pub use resolve::{resolve_binding, select_path};
pub use schema::spec_schema;
pub use validate::{
    Code, Diagnostic, DiagnosticSeverity, MAX_FANOUT_DEPTH, Report, ValidateOptions, validate,
    validate_value,
};
pub use write_path::{RESERVED_SEGMENTS, WritePathError, parse_write_path, write_at};
