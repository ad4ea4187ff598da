//! The one place the interpreter reaches into the spec crate's evaluator: expressions, bindings,
//! context paths and write paths. Everything returns its error as a message, which the caller
//! wraps into the node's `WORKFLOW_SPEC_FAILED` failure.

use auto_swe_spec::{Binding, ContextRoot, Expr};
use serde_json::Value;

/// A parsed expression.
pub(crate) type CompiledExpr = Expr;

pub(crate) fn compile(text: &str) -> Result<CompiledExpr, String> {
    Expr::parse(text).map_err(|e| e.to_string())
}

pub(crate) fn evaluate(expr: &CompiledExpr, root: &dyn ContextRoot) -> Result<Value, String> {
    expr.evaluate(root).map_err(|e| e.to_string())
}

pub(crate) fn truthy(value: &Value) -> bool {
    auto_swe_spec::truthy(value)
}

pub(crate) fn bind(binding: &Binding, root: &dyn ContextRoot) -> Result<Value, String> {
    auto_swe_spec::resolve_binding(binding, root).map_err(|e| e.to_string())
}

/// Reads `path` (`$`-rooted, or relative to `value` when it does not start with `$`).
pub(crate) fn select(path: &str, value: &Value) -> Result<Option<Value>, String> {
    let result = if path.starts_with('$') {
        auto_swe_spec::select_path(path, value)
    } else {
        auto_swe_spec::select_path(&format!("$.{path}"), value)
    };
    result.map_err(|e| e.to_string())
}

/// Segments of a write path, the first being `context`.
pub(crate) fn write_path(path: &str) -> Result<Vec<String>, String> {
    auto_swe_spec::parse_write_path(path).map_err(|e| e.to_string())
}

/// Writes `value` at `segments` below `root`, refusing reserved segments.
pub(crate) fn write(root: &mut Value, segments: &[String], value: Value) -> Result<(), String> {
    auto_swe_spec::write_at(root, segments, value).map_err(|e| e.to_string())
}
