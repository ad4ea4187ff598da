//! The expression language of `cond` nodes, `{expr}` bindings and template placeholders.
//!
//! A small, total language: literals, `$` context paths (RFC 9535 `JSONPath`), comparisons,
//! boolean operators, `??` defaults, `+`/`-` and a handful of pure functions. Parsing is bounded
//! in length and nesting; evaluation never panics and never runs anything else. The grammar is
//! documented in `docs/workflow-spec.md`.

mod ast;
mod eval;
mod lexer;
mod parser;

use serde_json::Value;

use self::ast::Ast;
pub use self::eval::truthy;

/// Longest expression text accepted, in bytes.
pub const MAX_EXPR_BYTES: usize = 4096;

/// Deepest nesting of parentheses, arrays, calls and unary operators accepted.
pub const MAX_EXPR_NESTING: usize = 64;

/// A parsed expression, ready to evaluate against run contexts.
#[derive(Debug, Clone)]
pub struct Expr {
    source: String,
    ast: Ast,
}

/// Why an expression does not parse. Offsets are byte offsets into the expression text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExprError {
    /// The text is empty or only whitespace.
    #[error("empty expression")]
    Empty,
    /// The text is longer than [`MAX_EXPR_BYTES`].
    #[error("expression is {len} bytes long; the limit is {max}")]
    TooLong {
        /// Length of the text.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The expression nests deeper than the parser accepts.
    #[error("at offset {offset}: expression nests deeper than {max} levels")]
    TooDeep {
        /// Where the limit was crossed.
        offset: usize,
        /// The limit.
        max: usize,
    },
    /// A token or construct that the grammar does not allow here.
    #[error("at offset {offset}: {message}")]
    Syntax {
        /// Where the problem starts.
        offset: usize,
        /// What is wrong.
        message: String,
    },
    /// A `$` path that is not valid `JSONPath`.
    #[error("at offset {offset}: invalid path: {message}")]
    Path {
        /// Where the problem is.
        offset: usize,
        /// What is wrong.
        message: String,
    },
    /// A name that is neither a function, `true`, `false`, `null` nor `in`.
    #[error(
        "at offset {offset}: unknown name `{name}` (context paths start with `$`; functions are len, exists, lower, upper, contains, startsWith, endsWith, not)"
    )]
    UnknownName {
        /// Where the name is.
        offset: usize,
        /// The name.
        name: String,
    },
    /// A function called with the wrong number of arguments.
    #[error("at offset {offset}: `{name}` takes {expected} argument(s), got {found}")]
    Arity {
        /// Where the call is.
        offset: usize,
        /// The function.
        name: &'static str,
        /// Arguments it takes.
        expected: usize,
        /// Arguments given.
        found: usize,
    },
}

impl ExprError {
    /// Stable code of the error.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Empty => "EXPR_EMPTY",
            Self::TooLong { .. } => "EXPR_TOO_LONG",
            Self::TooDeep { .. } => "EXPR_TOO_DEEP",
            Self::Syntax { .. } => "EXPR_SYNTAX",
            Self::Path { .. } => "EXPR_INVALID_PATH",
            Self::UnknownName { .. } => "EXPR_UNKNOWN_NAME",
            Self::Arity { .. } => "EXPR_ARITY",
        }
    }

    /// Whether trying again could succeed. Never: the text itself is wrong.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Empty
            | Self::TooLong { .. }
            | Self::TooDeep { .. }
            | Self::Syntax { .. }
            | Self::Path { .. }
            | Self::UnknownName { .. }
            | Self::Arity { .. } => false,
        }
    }
}

/// Why evaluating an expression or binding failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// The expression, path or template placeholder does not parse.
    #[error(transparent)]
    Parse(#[from] ExprError),
    /// An operator or function got a value of the wrong type.
    #[error("at offset {offset}: `{op}` expects {expected}, got {found}")]
    Type {
        /// Where the operator is.
        offset: usize,
        /// The operator or function.
        op: &'static str,
        /// What it accepts.
        expected: &'static str,
        /// JSON type it got.
        found: &'static str,
    },
    /// An ordering comparison between values that have no order.
    #[error(
        "at offset {offset}: cannot compare {left} {op} {right} (only two numbers or two strings)"
    )]
    Compare {
        /// Where the operator is.
        offset: usize,
        /// The operator.
        op: &'static str,
        /// JSON type of the left side.
        left: &'static str,
        /// JSON type of the right side.
        right: &'static str,
    },
    /// Arithmetic left the range of finite numbers.
    #[error("at offset {offset}: number out of range")]
    NumberOutOfRange {
        /// Where the operator is.
        offset: usize,
    },
    /// A template has a `{{` without a matching `}}`.
    #[error("template placeholder at offset {offset} is not closed with `}}}}`")]
    UnclosedPlaceholder {
        /// Byte offset of the `{{` in the template.
        offset: usize,
    },
}

impl EvalError {
    /// Stable code of the error.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Parse(error) => error.code(),
            Self::Type { .. } => "EXPR_TYPE_ERROR",
            Self::Compare { .. } => "EXPR_NOT_COMPARABLE",
            Self::NumberOutOfRange { .. } => "EXPR_NUMBER_OUT_OF_RANGE",
            Self::UnclosedPlaceholder { .. } => "TEMPLATE_UNCLOSED_PLACEHOLDER",
        }
    }

    /// Whether trying again could succeed. Never: the same context gives the same result.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Parse(_)
            | Self::Type { .. }
            | Self::Compare { .. }
            | Self::NumberOutOfRange { .. }
            | Self::UnclosedPlaceholder { .. } => false,
        }
    }
}

impl Expr {
    /// Parses an expression.
    pub fn parse(source: &str) -> Result<Self, ExprError> {
        if source.len() > MAX_EXPR_BYTES {
            return Err(ExprError::TooLong {
                len: source.len(),
                max: MAX_EXPR_BYTES,
            });
        }
        if source.trim().is_empty() {
            return Err(ExprError::Empty);
        }
        let tokens = lexer::tokenize(source)?;
        let ast = parser::parse(tokens)?;
        Ok(Self {
            source: source.to_owned(),
            ast,
        })
    }

    /// Evaluates against a run context root (`{input, context, nodes, item?, index?}`). A path
    /// that selects nothing evaluates to `null`.
    pub fn evaluate(&self, root: &dyn crate::path::ContextRoot) -> Result<Value, EvalError> {
        eval::eval(&self.ast, root)
    }

    /// The expression as written.
    #[must_use]
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The context paths the expression reads, in reading order, as written.
    #[must_use]
    pub fn paths(&self) -> Vec<&str> {
        self.context_paths()
            .into_iter()
            .map(crate::path::ContextPath::source)
            .collect()
    }

    pub(crate) fn context_paths(&self) -> Vec<&crate::path::ContextPath> {
        let mut out = Vec::new();
        self.ast.collect_paths(&mut out);
        out
    }
}

#[cfg(test)]
mod tests;
