//! The evaluator: a recursive walk over a depth-bounded tree. Total: every input gives a value
//! or a typed error, never a panic; nothing runs but the operators and functions listed here.

use std::cmp::Ordering;

use serde_json::{Number, Value};

use super::EvalError;
use super::ast::{Ast, AstKind, BinOp, Func};
use crate::path::ContextRoot;

/// Whether a value counts as true: `false`, `null`, `0`, `""`, `[]` and `{}` are false;
/// everything else is true.
#[must_use]
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
    }
}

/// Name of a value's JSON type, for messages.
pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

pub(super) fn eval(ast: &Ast, root: &dyn ContextRoot) -> Result<Value, EvalError> {
    match &ast.kind {
        AstKind::Literal(value) => Ok(value.clone()),
        AstKind::Path(path) => Ok(path.select(root).unwrap_or(Value::Null)),
        AstKind::Array(items) => items
            .iter()
            .map(|item| eval(item, root))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        AstKind::Not(inner) => Ok(Value::Bool(!truthy(&eval(inner, root)?))),
        AstKind::Neg(inner) => negate(&eval(inner, root)?, ast.offset),
        AstKind::Binary(op, left, right) => binary(*op, left, right, root, ast.offset),
        AstKind::Call(func, args) => call(*func, args, root, ast.offset),
    }
}

fn type_error(offset: usize, op: &'static str, expected: &'static str, found: &Value) -> EvalError {
    EvalError::Type {
        offset,
        op,
        expected,
        found: type_name(found),
    }
}

fn binary(
    op: BinOp,
    left: &Ast,
    right: &Ast,
    root: &dyn ContextRoot,
    offset: usize,
) -> Result<Value, EvalError> {
    let lhs = eval(left, root)?;
    match op {
        BinOp::Or if truthy(&lhs) => return Ok(Value::Bool(true)),
        BinOp::And if !truthy(&lhs) => return Ok(Value::Bool(false)),
        BinOp::Coalesce if !lhs.is_null() => return Ok(lhs),
        _ => {}
    }
    let rhs = eval(right, root)?;
    let symbol = op.symbol();
    Ok(match op {
        BinOp::Or | BinOp::And => Value::Bool(truthy(&rhs)),
        BinOp::Coalesce => rhs,
        BinOp::Eq => Value::Bool(json_eq(&lhs, &rhs)),
        BinOp::Ne => Value::Bool(!json_eq(&lhs, &rhs)),
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
            let ordering = order(&lhs, &rhs).ok_or_else(|| EvalError::Compare {
                offset,
                op: symbol,
                left: type_name(&lhs),
                right: type_name(&rhs),
            })?;
            Value::Bool(match op {
                BinOp::Lt => ordering == Ordering::Less,
                BinOp::Le => ordering != Ordering::Greater,
                BinOp::Gt => ordering == Ordering::Greater,
                _ => ordering != Ordering::Less,
            })
        }
        BinOp::In => Value::Bool(contains(&rhs, &lhs, offset, symbol)?),
        BinOp::Add => match (&lhs, &rhs) {
            (Value::String(a), Value::String(b)) => {
                let mut joined = String::with_capacity(a.len() + b.len());
                joined.push_str(a);
                joined.push_str(b);
                Value::String(joined)
            }
            (Value::Number(a), Value::Number(b)) => arithmetic(a, b, offset, Arith::Add)?,
            (Value::String(_) | Value::Number(_), other) | (other, _) => {
                return Err(type_error(
                    offset,
                    symbol,
                    "two numbers or two strings",
                    other,
                ));
            }
        },
        BinOp::Sub => match (&lhs, &rhs) {
            (Value::Number(a), Value::Number(b)) => arithmetic(a, b, offset, Arith::Sub)?,
            (Value::Number(_), other) | (other, _) => {
                return Err(type_error(offset, symbol, "numbers", other));
            }
        },
    })
}

#[derive(Clone, Copy)]
enum Arith {
    Add,
    Sub,
}

fn arithmetic(a: &Number, b: &Number, offset: usize, op: Arith) -> Result<Value, EvalError> {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        let exact = match op {
            Arith::Add => x.checked_add(y),
            Arith::Sub => x.checked_sub(y),
        };
        if let Some(result) = exact {
            return Ok(Value::Number(result.into()));
        }
    }
    let (x, y) = (
        a.as_f64().unwrap_or(f64::NAN),
        b.as_f64().unwrap_or(f64::NAN),
    );
    let result = match op {
        Arith::Add => x + y,
        Arith::Sub => x - y,
    };
    Number::from_f64(result)
        .map(Value::Number)
        .ok_or(EvalError::NumberOutOfRange { offset })
}

fn negate(value: &Value, offset: usize) -> Result<Value, EvalError> {
    let Value::Number(n) = value else {
        return Err(type_error(offset, "-", "a number", value));
    };
    if let Some(negated) = n.as_i64().and_then(i64::checked_neg) {
        return Ok(Value::Number(negated.into()));
    }
    n.as_f64()
        .and_then(|f| Number::from_f64(-f))
        .map(Value::Number)
        .ok_or(EvalError::NumberOutOfRange { offset })
}

/// Deep equality where numbers compare by value (`1 == 1.0`).
pub(super) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => number_cmp(x, y) == Some(Ordering::Equal),
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| json_eq(x, y))
        }
        (Value::Object(xs), Value::Object(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .all(|(key, x)| ys.get(key).is_some_and(|y| json_eq(x, y)))
        }
        _ => a == b,
    }
}

fn number_cmp(x: &Number, y: &Number) -> Option<Ordering> {
    if let (Some(a), Some(b)) = (x.as_i64(), y.as_i64()) {
        return Some(a.cmp(&b));
    }
    if let (Some(a), Some(b)) = (x.as_u64(), y.as_u64()) {
        return Some(a.cmp(&b));
    }
    x.as_f64()?.partial_cmp(&y.as_f64()?)
}

fn order(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => number_cmp(x, y),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// `needle in haystack`: an equal element of an array, a substring of a string, or a key of an
/// object.
fn contains(
    haystack: &Value,
    needle: &Value,
    offset: usize,
    op: &'static str,
) -> Result<bool, EvalError> {
    match (haystack, needle) {
        (Value::Array(items), _) => Ok(items.iter().any(|item| json_eq(item, needle))),
        (Value::String(text), Value::String(part)) => Ok(text.contains(part.as_str())),
        (Value::Object(map), Value::String(key)) => Ok(map.contains_key(key)),
        (Value::String(_) | Value::Object(_), other) => {
            Err(type_error(offset, op, "a string to look for", other))
        }
        (other, _) => Err(type_error(
            offset,
            op,
            "an array, string or object to look in",
            other,
        )),
    }
}

fn call(
    func: Func,
    args: &[Ast],
    root: &dyn ContextRoot,
    offset: usize,
) -> Result<Value, EvalError> {
    let values = args
        .iter()
        .map(|arg| eval(arg, root))
        .collect::<Result<Vec<_>, _>>()?;
    let name = func.name();
    let string_arg = |index: usize| match values.get(index) {
        Some(Value::String(text)) => Ok(text.as_str()),
        other => Err(type_error(
            offset,
            name,
            "a string",
            other.unwrap_or(&Value::Null),
        )),
    };
    Ok(match func {
        Func::Len => {
            let len = match values.first() {
                Some(Value::String(text)) => text.chars().count(),
                Some(Value::Array(items)) => items.len(),
                Some(Value::Object(map)) => map.len(),
                Some(Value::Null) | None => 0,
                Some(other) => {
                    return Err(type_error(
                        offset,
                        name,
                        "a string, array, object or null",
                        other,
                    ));
                }
            };
            Value::Number(Number::from(len as u64))
        }
        Func::Exists => Value::Bool(values.first().is_some_and(|value| !value.is_null())),
        Func::Not => Value::Bool(!values.first().is_some_and(truthy)),
        Func::Lower => Value::String(string_arg(0)?.to_lowercase()),
        Func::Upper => Value::String(string_arg(0)?.to_uppercase()),
        Func::Contains => {
            let haystack = values.first().unwrap_or(&Value::Null);
            let needle = values.get(1).unwrap_or(&Value::Null);
            Value::Bool(contains(haystack, needle, offset, name)?)
        }
        Func::StartsWith => Value::Bool(string_arg(0)?.starts_with(string_arg(1)?)),
        Func::EndsWith => Value::Bool(string_arg(0)?.ends_with(string_arg(1)?)),
    })
}
