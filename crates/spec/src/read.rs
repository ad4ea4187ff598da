//! Reading specs from JSON or YAML text, in two modes: *tolerant* for stored specs and bundles
//! (a bad presentation field is dropped) and *strict* for the save path (it is refused, with
//! where it is).

use std::path::Path;

use serde_json::Value;

use crate::model::{Node, WorkflowSpec};
use crate::presentation::{
    GROUP_MAX_CHARS, PresentationError, TITLE_MAX_CHARS, normalise_presentation,
};

/// Largest spec text accepted, in bytes.
pub const MAX_SPEC_BYTES: usize = 8 * 1024 * 1024;

/// Deepest `[`/`{` nesting accepted in YAML text. The YAML parser's time grows with the square
/// of flow nesting depth, so deeper text is refused before it is parsed (JSON has its own
/// linear-time limit of 128).
pub(crate) const MAX_YAML_FLOW_DEPTH: usize = 128;

/// Text format of a spec document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceFormat {
    /// JSON.
    Json,
    /// YAML (1.2, via `serde_yaml_ng`).
    Yaml,
}

impl SourceFormat {
    /// The format a file name implies: `.json` is JSON, `.yaml`/`.yml` YAML, anything else none.
    #[must_use]
    pub fn from_path(path: &Path) -> Option<Self> {
        let extension = path.extension()?.to_str()?.to_ascii_lowercase();
        match extension.as_str() {
            "json" => Some(Self::Json),
            "yaml" | "yml" => Some(Self::Yaml),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Json => "JSON",
            Self::Yaml => "YAML",
        }
    }
}

/// How a reader treats a bad presentation field (`group`, non-human `title`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadMode {
    /// Drop it: reading a stored spec never fails because of presentation.
    Tolerant,
    /// Refuse it with its location: the save path.
    Strict,
}

/// Why a spec could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The text is larger than [`MAX_SPEC_BYTES`].
    #[error("spec is {len} bytes; the limit is {max}")]
    TooLarge {
        /// Size of the text.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The text is not well-formed JSON or YAML.
    #[error("{format} syntax error at line {line}, column {column}: {message}")]
    Syntax {
        /// `JSON` or `YAML`.
        format: &'static str,
        /// 1-based line (0 when unknown).
        line: usize,
        /// 1-based column (0 when unknown).
        column: usize,
        /// What the parser said.
        message: String,
    },
    /// The document is well-formed but is not a workflow spec.
    #[error("not a workflow spec: {message}")]
    Shape {
        /// What does not fit.
        message: String,
    },
    /// A presentation field refused by the strict reader.
    #[error("{path}: {field} of node {node_id:?} {reason}")]
    Presentation {
        /// Where the field is, such as `nodes[3].group`.
        path: String,
        /// Id of the node (empty when the node has none).
        node_id: String,
        /// `group` or `title`.
        field: &'static str,
        /// What is wrong with it.
        reason: PresentationError,
    },
}

impl ReadError {
    /// Stable code of the error.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "SPEC_TOO_LARGE",
            Self::Syntax { .. } => "SPEC_SYNTAX",
            Self::Shape { .. } => "SPEC_SHAPE",
            Self::Presentation { .. } => "INVALID_PRESENTATION_FIELD",
        }
    }

    /// Whether trying again could succeed. Never: the text is what it is.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::TooLarge { .. }
            | Self::Syntax { .. }
            | Self::Shape { .. }
            | Self::Presentation { .. } => false,
        }
    }
}

/// Parses spec text into a JSON value without interpreting it.
pub fn parse_document(text: &str, format: SourceFormat) -> Result<Value, ReadError> {
    if text.len() > MAX_SPEC_BYTES {
        return Err(ReadError::TooLarge {
            len: text.len(),
            max: MAX_SPEC_BYTES,
        });
    }
    match format {
        SourceFormat::Json => serde_json::from_str(text).map_err(|error| ReadError::Syntax {
            format: format.name(),
            line: error.line(),
            column: error.column(),
            message: strip_location(&error.to_string()),
        }),
        SourceFormat::Yaml => {
            check_yaml_nesting(text)?;
            serde_yaml_ng::from_str(text).map_err(|error| {
                let (line, column) = error
                    .location()
                    .map_or((0, 0), |at| (at.line(), at.column()));
                ReadError::Syntax {
                    format: format.name(),
                    line,
                    column,
                    message: strip_location(&error.to_string()),
                }
            })
        }
    }
}

/// Refuses YAML whose flow collections nest deeper than [`MAX_YAML_FLOW_DEPTH`]. Counts `[` and
/// `{` outside quoted scalars and comments; brackets inside plain scalars count too, which only
/// matters for text no spec contains (over a hundred unclosed brackets).
fn check_yaml_nesting(text: &str) -> Result<(), ReadError> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut previous = '\n';
    let mut chars = text.chars().peekable();
    let (mut line, mut column) = (1usize, 0usize);
    while let Some(ch) = chars.next() {
        column += 1;
        if ch == '\n' {
            line += 1;
            column = 0;
        }
        match quote {
            Some('"') if ch == '\\' => {
                chars.next();
                column += 1;
            }
            Some('\'') if ch == '\'' && chars.peek() == Some(&'\'') => {
                chars.next();
                column += 1;
            }
            Some(open) if ch == open => quote = None,
            Some(_) => {}
            None => match ch {
                '"' | '\'' => quote = Some(ch),
                '#' if previous.is_whitespace() => {
                    for next in chars.by_ref() {
                        if next == '\n' {
                            line += 1;
                            column = 0;
                            break;
                        }
                    }
                }
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_YAML_FLOW_DEPTH {
                        return Err(ReadError::Syntax {
                            format: SourceFormat::Yaml.name(),
                            line,
                            column,
                            message: format!("nested deeper than {MAX_YAML_FLOW_DEPTH} levels"),
                        });
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
        previous = ch;
    }
    Ok(())
}

/// Drops the parser's own " at line L column C" suffix; the error carries them as fields.
fn strip_location(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

/// Reads a spec from text.
pub fn read_spec(
    text: &str,
    format: SourceFormat,
    mode: ReadMode,
) -> Result<WorkflowSpec, ReadError> {
    let value = parse_document(text, format)?;
    match mode {
        ReadMode::Tolerant => WorkflowSpec::from_value_tolerant(value),
        ReadMode::Strict => WorkflowSpec::from_value_strict(value),
    }
}

impl WorkflowSpec {
    /// Reads a spec from a JSON value, dropping bad presentation fields.
    pub fn from_value_tolerant(value: Value) -> Result<Self, ReadError> {
        let shape = |error: serde_json::Error| ReadError::Shape {
            message: error.to_string(),
        };
        // Nodes are read one by one with `Node::from_value`, which moves their values; going
        // through serde would rebuild each node's value first.
        let Value::Object(mut map) = value else {
            return Err(ReadError::Shape {
                message: "a spec must be a JSON object".into(),
            });
        };
        let nodes = match map.remove("nodes") {
            Some(Value::Array(nodes)) => Some(nodes),
            Some(other) => {
                map.insert("nodes".into(), other);
                None
            }
            None => None,
        };
        if nodes.is_some() {
            map.insert("nodes".into(), Value::Array(Vec::new()));
        }
        let mut spec: Self = serde_json::from_value(Value::Object(map)).map_err(shape)?;
        if let Some(nodes) = nodes {
            spec.nodes = nodes
                .into_iter()
                .map(Node::from_value)
                .collect::<Result<_, _>>()
                .map_err(shape)?;
        }
        Ok(spec)
    }

    /// Reads a spec from a JSON value, refusing bad presentation fields with their location.
    pub fn from_value_strict(value: Value) -> Result<Self, ReadError> {
        if let Some(error) = collect_presentation_errors(&value).into_iter().next() {
            return Err(error);
        }
        Self::from_value_tolerant(value)
    }
}

const HUMAN_TYPES: [&str; 4] = [
    "humanApproval",
    "humanDecision",
    "humanInput",
    "humanReview",
];

/// Every presentation problem in a spec document, in document order.
pub(crate) fn collect_presentation_errors(value: &Value) -> Vec<ReadError> {
    let mut out = Vec::new();
    collect_in(value.get("nodes"), "nodes", 0, &mut out);
    out
}

/// Checks `group` and presentation `title` of every node in a node list, fan-out subgraphs
/// included (down to the fan-out nesting limit). Shapes that are not node lists are left for the
/// typed read to report.
fn collect_in(nodes: Option<&Value>, at: &str, depth: usize, out: &mut Vec<ReadError>) {
    let Some(Value::Array(nodes)) = nodes else {
        return;
    };
    if depth > crate::validate::MAX_FANOUT_DEPTH {
        return;
    }
    for (index, node) in nodes.iter().enumerate() {
        let Value::Object(map) = node else { continue };
        let here = || format!("{at}[{index}]");
        let node_id = || {
            map.get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let is_human = map
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|kind| HUMAN_TYPES.contains(&kind));
        let title_max = (!is_human).then_some(TITLE_MAX_CHARS);
        for (field, max) in [("group", Some(GROUP_MAX_CHARS)), ("title", title_max)] {
            let Some(max) = max else { continue };
            if let Some(raw) = map.get(field)
                && let Err(reason) = normalise_presentation(raw, max)
            {
                out.push(ReadError::Presentation {
                    path: format!("{}.{field}", here()),
                    node_id: node_id(),
                    field,
                    reason,
                });
            }
        }
        if let Some(subgraph) = map.get("subgraph") {
            collect_in(
                subgraph.get("nodes"),
                &format!("{}.subgraph.nodes", here()),
                depth + 1,
                out,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WITH_BAD_GROUP: &str = r#"{
        "entry": "a",
        "nodes": [
            {"id": "a", "type": "set", "values": {}, "next": "f", "group": "  Plan  ", "title": "   "},
            {"id": "f", "type": "fanOut", "over": "$.input.items",
             "subgraph": {"entry": "x", "nodes": [
                {"id": "x", "type": "terminate", "status": "SUCCESS", "group": 7}
             ]}}
        ]
    }"#;

    #[test]
    fn tolerant_drops_and_trims() {
        let spec = read_spec(WITH_BAD_GROUP, SourceFormat::Json, ReadMode::Tolerant).unwrap();
        assert_eq!(spec.nodes[0].group.as_deref(), Some("Plan"));
        assert_eq!(spec.nodes[0].title, None);
    }

    #[test]
    fn strict_refuses_with_location() {
        let error = read_spec(WITH_BAD_GROUP, SourceFormat::Json, ReadMode::Strict).unwrap_err();
        assert_eq!(
            error,
            ReadError::Presentation {
                path: "nodes[0].title".into(),
                node_id: "a".into(),
                field: "title",
                reason: PresentationError::Blank,
            }
        );
        let nested = WITH_BAD_GROUP.replace(r#""title": "   ""#, r#""title": "ok""#);
        let error = read_spec(&nested, SourceFormat::Json, ReadMode::Strict).unwrap_err();
        assert_eq!(
            error.to_string(),
            "nodes[1].subgraph.nodes[0].group: group of node \"x\" must be a string"
        );
        assert_eq!(error.code(), "INVALID_PRESENTATION_FIELD");
    }

    #[test]
    fn syntax_errors_are_located() {
        let error = read_spec(
            "{\n  \"entry\": ,\n}",
            SourceFormat::Json,
            ReadMode::Tolerant,
        )
        .unwrap_err();
        assert!(
            matches!(
                error,
                ReadError::Syntax {
                    format: "JSON",
                    line: 2,
                    ..
                }
            ),
            "{error:?}"
        );
        let error = read_spec("entry: [\n", SourceFormat::Yaml, ReadMode::Tolerant).unwrap_err();
        assert_eq!(error.code(), "SPEC_SYNTAX");
        let error = read_spec("[1]", SourceFormat::Json, ReadMode::Tolerant).unwrap_err();
        assert_eq!(error.code(), "SPEC_SHAPE");
    }

    #[test]
    fn deep_yaml_is_refused_before_parsing() {
        let deep = format!("{}{}", "{a: ".repeat(200), "}".repeat(200));
        let error = read_spec(&deep, SourceFormat::Yaml, ReadMode::Tolerant).unwrap_err();
        assert!(
            matches!(&error, ReadError::Syntax { line: 1, column: 513, message, .. } if message.contains("nested")),
            "{error:?}"
        );
        let quoted = format!(
            "entry: '{}'\nnodes: [] # {}",
            "[".repeat(500),
            "{".repeat(500)
        );
        assert_eq!(
            read_spec(&quoted, SourceFormat::Yaml, ReadMode::Tolerant)
                .unwrap()
                .entry,
            "[".repeat(500)
        );
    }

    #[test]
    fn formats_from_paths() {
        assert_eq!(
            SourceFormat::from_path(Path::new("a/b.JSON")),
            Some(SourceFormat::Json)
        );
        assert_eq!(
            SourceFormat::from_path(Path::new("b.yml")),
            Some(SourceFormat::Yaml)
        );
        assert_eq!(
            SourceFormat::from_path(Path::new("b.yaml")),
            Some(SourceFormat::Yaml)
        );
        assert_eq!(SourceFormat::from_path(Path::new("b.txt")), None);
    }
}
