//! Resolving bindings against a run context: the one place the interpreter turns a
//! [`Binding`] into a value.

use serde_json::{Map, Value};

use crate::binding::Binding;
use crate::expr::{EvalError, Expr, ExprError, MAX_EXPR_BYTES};
use crate::path::{ContextPath, ContextRoot};

/// Resolves a binding against the run context root.
///
/// - a path selects its value; nothing selected (or `null`) gives the default, else `null`;
/// - an expression evaluates;
/// - a template replaces each `{{ … }}` placeholder (a path or any expression) with its value:
///   strings as they are, anything else as compact JSON;
/// - a literal is itself; objects and arrays resolve member by member.
pub fn resolve_binding(binding: &Binding, root: &dyn ContextRoot) -> Result<Value, EvalError> {
    match binding {
        Binding::Path { path, default } => {
            let selected = select_path(path, root)?.filter(|value| !value.is_null());
            Ok(selected.or_else(|| default.clone()).unwrap_or(Value::Null))
        }
        Binding::Expr(source) => Expr::parse(source)?.evaluate(root),
        Binding::Template(template) => render_template(template, root).map(Value::String),
        Binding::Literal(value) => Ok(value.clone()),
        Binding::Object(members) => members
            .iter()
            .map(|(key, member)| Ok((key.clone(), resolve_binding(member, root)?)))
            .collect::<Result<Map<_, _>, EvalError>>()
            .map(Value::Object),
        Binding::Array(items) => items
            .iter()
            .map(|item| resolve_binding(item, root))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
    }
}

/// Selects a `$` path from the run context root: `None` when it selects nothing, the value when
/// it selects one node, an array when it selects several.
pub fn select_path(path: &str, root: &dyn ContextRoot) -> Result<Option<Value>, EvalError> {
    Ok(parse_path(path)?.select(root))
}

pub(crate) fn parse_path(path: &str) -> Result<ContextPath, ExprError> {
    if path.len() > MAX_EXPR_BYTES {
        return Err(ExprError::TooLong {
            len: path.len(),
            max: MAX_EXPR_BYTES,
        });
    }
    ContextPath::parse(path).map_err(|error| ExprError::Path {
        offset: error.offset,
        message: error.message,
    })
}

/// One piece of a template: text as is, or a placeholder's expression.
pub(crate) enum TemplatePart<'a> {
    Text(&'a str),
    Placeholder { offset: usize, source: &'a str },
}

/// Splits a template into text and placeholders.
pub(crate) fn template_parts(template: &str) -> Result<Vec<TemplatePart<'_>>, EvalError> {
    let mut parts = Vec::new();
    let mut rest = template;
    let mut consumed = 0;
    while let Some(open) = rest.find("{{") {
        if open > 0 {
            parts.push(TemplatePart::Text(&rest[..open]));
        }
        let inner_start = open + 2;
        let Some(close) = rest[inner_start..].find("}}") else {
            return Err(EvalError::UnclosedPlaceholder {
                offset: consumed + open,
            });
        };
        parts.push(TemplatePart::Placeholder {
            offset: consumed + open,
            source: rest[inner_start..inner_start + close].trim(),
        });
        let next = inner_start + close + 2;
        consumed += next;
        rest = &rest[next..];
    }
    if !rest.is_empty() {
        parts.push(TemplatePart::Text(rest));
    }
    Ok(parts)
}

fn render_template(template: &str, root: &dyn ContextRoot) -> Result<String, EvalError> {
    let mut out = String::with_capacity(template.len());
    for part in template_parts(template)? {
        match part {
            TemplatePart::Text(text) => out.push_str(text),
            TemplatePart::Placeholder { source, .. } => {
                match Expr::parse(source)?.evaluate(root)? {
                    Value::String(text) => out.push_str(&text),
                    other => out.push_str(&other.to_string()),
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use indexmap::IndexMap;
    use serde_json::json;

    use super::*;

    fn root() -> Value {
        json!({
            "input": {"ticket": {"title": "Crash", "id": 12}},
            "context": {"n": null},
            "nodes": {"plan": {"output": {"steps": ["a", "b"]}}}
        })
    }

    #[test]
    fn resolves_every_shape() {
        let root = root();
        let resolve = |value: Value| resolve_binding(&Binding::from_value(value), &root).unwrap();
        assert_eq!(
            resolve(json!("$.nodes.plan.output.steps")),
            json!(["a", "b"])
        );
        assert_eq!(
            resolve(json!({"from": "$.input.nope", "default": 5})),
            json!(5)
        );
        assert_eq!(
            resolve(json!({"from": "$.context.n", "default": 5})),
            json!(5)
        );
        assert_eq!(resolve(json!("$.input.nope")), Value::Null);
        assert_eq!(
            resolve(json!({"expr": "len($.nodes.plan.output.steps) + 1"})),
            json!(3)
        );
        assert_eq!(
            resolve(
                json!({"template": "Fix {{ $.input.ticket.title }} (#{{$.input.ticket.id}}) {{ $.nodes.plan.output.steps }} {{ $.x ?? 'none' }}"})
            ),
            json!("Fix Crash (#12) [\"a\",\"b\"] none")
        );
        assert_eq!(resolve(json!({"literal": "$.input"})), json!("$.input"));
        assert_eq!(
            resolve(json!({"a": "$.input.ticket.id", "b": [1, "$.input.ticket.title"]})),
            json!({"a": 12, "b": [1, "Crash"]})
        );
        assert_eq!(
            resolve_binding(&Binding::Object(IndexMap::new()), &root).unwrap(),
            json!({})
        );
    }

    #[test]
    fn reports_bad_bindings() {
        let root = root();
        let err = |value: Value| {
            resolve_binding(&Binding::from_value(value), &root)
                .unwrap_err()
                .code()
        };
        assert_eq!(
            err(json!({"template": "a {{ $.x"})),
            "TEMPLATE_UNCLOSED_PLACEHOLDER"
        );
        assert_eq!(err(json!({"template": "a {{ }}"})), "EXPR_EMPTY");
        assert_eq!(err(json!({"expr": "1 +"})), "EXPR_SYNTAX");
        assert_eq!(err(json!({"from": "input.x"})), "EXPR_INVALID_PATH");
        assert_eq!(err(json!("$.a[")), "EXPR_INVALID_PATH");
    }

    #[test]
    fn select_path_distinguishes_missing() {
        let root = root();
        assert_eq!(
            select_path("$.context.n", &root).unwrap(),
            Some(Value::Null)
        );
        assert_eq!(select_path("$.context.m", &root).unwrap(), None);
    }
}
