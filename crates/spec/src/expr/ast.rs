//! The parsed form of an expression. Every node knows its depth so the tree (and therefore the
//! evaluator's recursion) stays bounded however the text was written.

use serde_json::Value;

use super::ExprError;
use crate::path::ContextPath;

/// Deepest expression tree accepted (long `a || b || …` chains grow the tree one level per
/// operator).
pub(super) const MAX_TREE_DEPTH: usize = 256;

#[derive(Debug, Clone)]
pub(super) struct Ast {
    pub(super) kind: AstKind,
    pub(super) offset: usize,
    depth: usize,
}

#[derive(Debug, Clone)]
pub(super) enum AstKind {
    Literal(Value),
    Path(Box<ContextPath>),
    Array(Vec<Ast>),
    Not(Box<Ast>),
    Neg(Box<Ast>),
    Binary(BinOp, Box<Ast>, Box<Ast>),
    Call(Func, Vec<Ast>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BinOp {
    Or,
    And,
    Coalesce,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    Add,
    Sub,
}

impl BinOp {
    pub(super) fn symbol(self) -> &'static str {
        match self {
            Self::Or => "||",
            Self::And => "&&",
            Self::Coalesce => "??",
            Self::Eq => "==",
            Self::Ne => "!=",
            Self::Lt => "<",
            Self::Le => "<=",
            Self::Gt => ">",
            Self::Ge => ">=",
            Self::In => "in",
            Self::Add => "+",
            Self::Sub => "-",
        }
    }
}

/// The built-in functions. All are pure and total over their argument types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Func {
    Len,
    Exists,
    Lower,
    Upper,
    Contains,
    StartsWith,
    EndsWith,
    Not,
}

impl Func {
    pub(super) fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "len" => Self::Len,
            "exists" => Self::Exists,
            "lower" => Self::Lower,
            "upper" => Self::Upper,
            "contains" => Self::Contains,
            "startsWith" => Self::StartsWith,
            "endsWith" => Self::EndsWith,
            "not" => Self::Not,
            _ => return None,
        })
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Len => "len",
            Self::Exists => "exists",
            Self::Lower => "lower",
            Self::Upper => "upper",
            Self::Contains => "contains",
            Self::StartsWith => "startsWith",
            Self::EndsWith => "endsWith",
            Self::Not => "not",
        }
    }

    pub(super) fn arity(self) -> usize {
        match self {
            Self::Len | Self::Exists | Self::Lower | Self::Upper | Self::Not => 1,
            Self::Contains | Self::StartsWith | Self::EndsWith => 2,
        }
    }
}

impl Ast {
    /// Builds a node, refusing a tree deeper than [`MAX_TREE_DEPTH`].
    pub(super) fn new(kind: AstKind, offset: usize) -> Result<Self, ExprError> {
        let depth = 1 + match &kind {
            AstKind::Literal(_) | AstKind::Path(_) => 0,
            AstKind::Not(inner) | AstKind::Neg(inner) => inner.depth,
            AstKind::Binary(_, left, right) => left.depth.max(right.depth),
            AstKind::Array(items) | AstKind::Call(_, items) => {
                items.iter().map(|item| item.depth).max().unwrap_or(0)
            }
        };
        if depth > MAX_TREE_DEPTH {
            return Err(ExprError::TooDeep {
                offset,
                max: MAX_TREE_DEPTH,
            });
        }
        Ok(Self {
            kind,
            offset,
            depth,
        })
    }

    pub(super) fn collect_paths<'a>(&'a self, out: &mut Vec<&'a ContextPath>) {
        match &self.kind {
            AstKind::Literal(_) => {}
            AstKind::Path(path) => out.push(path),
            AstKind::Not(inner) | AstKind::Neg(inner) => inner.collect_paths(out),
            AstKind::Binary(_, left, right) => {
                left.collect_paths(out);
                right.collect_paths(out);
            }
            AstKind::Array(items) | AstKind::Call(_, items) => {
                for item in items {
                    item.collect_paths(out);
                }
            }
        }
    }
}
