//! The one place the interpreter reaches into the spec crate's evaluator: expressions, bindings,
//! context paths and write paths. Everything returns its error as a message, which the caller
//! wraps into the node's `WORKFLOW_SPEC_FAILED` failure.

use auto_swe_spec::Binding;
use serde_json::Value;

use crate::context::is_reserved;

/// A parsed expression.
#[derive(Debug, Clone)]
pub(crate) struct CompiledExpr(fallback::Expr);

pub(crate) fn compile(text: &str) -> Result<CompiledExpr, String> {
    fallback::parse(text).map(CompiledExpr)
}

pub(crate) fn evaluate(expr: &CompiledExpr, root: &Value) -> Result<Value, String> {
    fallback::evaluate(&expr.0, root)
}

pub(crate) fn truthy(value: &Value) -> bool {
    fallback::truthy(value)
}

pub(crate) fn bind(binding: &Binding, root: &Value) -> Result<Value, String> {
    fallback::bind(binding, root)
}

/// Reads `path` (`$`-rooted, or relative to `value` when it does not start with `$`).
pub(crate) fn select(path: &str, value: &Value) -> Result<Option<Value>, String> {
    if path.starts_with('$') {
        fallback::select(path, value)
    } else {
        fallback::select(&format!("$.{path}"), value)
    }
}

/// Segments of a write path, always starting with `context`.
pub(crate) fn write_path(path: &str) -> Result<Vec<String>, String> {
    let segments: Vec<String> = path.split('.').map(str::to_owned).collect();
    if segments.first().map(String::as_str) != Some("context") || segments.len() < 2 {
        return Err("a write path starts with `context.`".into());
    }
    if let Some(bad) = segments.iter().find(|s| is_reserved(s)) {
        return Err(format!("reserved path segment {bad}"));
    }
    if segments.iter().any(String::is_empty) {
        return Err("empty path segment".into());
    }
    Ok(segments)
}

/// Writes `value` at `segments` (starting with `context`) below the run-context root.
pub(crate) fn write(root: &mut Value, segments: &[String], value: Value) -> Result<(), String> {
    if let Some(bad) = segments.iter().find(|s| is_reserved(s)) {
        return Err(format!("reserved path segment {bad}"));
    }
    let Some((last, parents)) = segments.split_last() else {
        return Err("empty write path".into());
    };
    let mut current = root;
    for segment in parents {
        if !current.is_object() {
            *current = Value::Object(serde_json::Map::new());
        }
        let Value::Object(map) = current else {
            return Err("not an object".into());
        };
        current = map
            .entry(segment.clone())
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
    }
    if !current.is_object() {
        *current = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(map) = current {
        map.insert(last.clone(), value);
    }
    Ok(())
}

/// A small evaluator used until the spec crate's expression module lands.
mod fallback {
    use auto_swe_spec::Binding;
    use serde_json::Value;

    #[derive(Debug, Clone)]
    pub(super) enum Expr {
        Lit(Value),
        Path(String),
        Not(Box<Expr>),
        Bin(Box<Expr>, &'static str, Box<Expr>),
    }

    pub(super) fn truthy(value: &Value) -> bool {
        match value {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
            Value::String(s) => !s.is_empty(),
            Value::Array(_) | Value::Object(_) => true,
        }
    }

    pub(super) fn select(path: &str, root: &Value) -> Result<Option<Value>, String> {
        let rest = path.strip_prefix('$').ok_or("a path starts with $")?;
        let mut current = root;
        let mut chars = rest.chars().peekable();
        while let Some(c) = chars.next() {
            let key: String = match c {
                '.' => {
                    let mut key = String::new();
                    while let Some(&c) = chars.peek() {
                        if c == '.' || c == '[' {
                            break;
                        }
                        key.push(c);
                        chars.next();
                    }
                    key
                }
                '[' => {
                    let mut key = String::new();
                    for c in chars.by_ref() {
                        if c == ']' {
                            break;
                        }
                        key.push(c);
                    }
                    key.trim_matches(|c| c == '\'' || c == '"').to_owned()
                }
                _ => return Err(format!("bad path {path}")),
            };
            let next = match current {
                Value::Object(map) => map.get(&key),
                Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            };
            match next {
                Some(next) => current = next,
                None => return Ok(None),
            }
        }
        Ok(Some(current.clone()))
    }

    pub(super) fn bind(binding: &Binding, root: &Value) -> Result<Value, String> {
        Ok(match binding {
            Binding::Path { path, default } => match select(path, root)? {
                Some(value) => value,
                None => default.clone().unwrap_or(Value::Null),
            },
            Binding::Expr(text) => evaluate(&parse(text)?, root)?,
            Binding::Template(text) => {
                let mut out = String::new();
                let mut rest = text.as_str();
                while let Some(start) = rest.find("{{") {
                    out.push_str(&rest[..start]);
                    let end = rest[start..].find("}}").ok_or("unclosed {{")? + start;
                    let value = select(rest[start + 2..end].trim(), root)?.unwrap_or(Value::Null);
                    match value {
                        Value::String(s) => out.push_str(&s),
                        Value::Null => {}
                        other => out.push_str(&other.to_string()),
                    }
                    rest = &rest[end + 2..];
                }
                out.push_str(rest);
                Value::String(out)
            }
            Binding::Literal(value) => value.clone(),
            Binding::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, b)| bind(b, root).map(|v| (k.clone(), v)))
                    .collect::<Result<_, _>>()?,
            ),
            Binding::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|b| bind(b, root))
                    .collect::<Result<_, _>>()?,
            ),
        })
    }

    const OPS: [(&str, u8); 8] = [
        ("||", 1),
        ("&&", 2),
        ("==", 3),
        ("!=", 3),
        ("<=", 4),
        (">=", 4),
        ("<", 4),
        (">", 4),
    ];

    pub(super) fn parse(text: &str) -> Result<Expr, String> {
        let tokens = tokenize(text)?;
        let mut pos = 0;
        let expr = parse_bin(&tokens, &mut pos, 1)?;
        if pos != tokens.len() {
            return Err(format!("unexpected token in {text:?}"));
        }
        Ok(expr)
    }

    fn tokenize(text: &str) -> Result<Vec<String>, String> {
        let mut tokens = Vec::new();
        let chars: Vec<char> = text.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c.is_whitespace() {
                i += 1;
            } else if c == '\'' || c == '"' {
                let start = i;
                i += 1;
                while i < chars.len() && chars[i] != c {
                    i += 1;
                }
                if i == chars.len() {
                    return Err("unclosed string".into());
                }
                i += 1;
                tokens.push(chars[start..i].iter().collect());
            } else if "()!<>=&|".contains(c) {
                let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
                if OPS.iter().any(|(op, _)| *op == two) {
                    tokens.push(two);
                    i += 2;
                } else {
                    tokens.push(c.to_string());
                    i += 1;
                }
            } else {
                let start = i;
                while i < chars.len()
                    && !chars[i].is_whitespace()
                    && !"()!<>=&|".contains(chars[i])
                {
                    i += 1;
                }
                tokens.push(chars[start..i].iter().collect());
            }
        }
        Ok(tokens)
    }

    fn parse_bin(tokens: &[String], pos: &mut usize, min: u8) -> Result<Expr, String> {
        let mut left = parse_unary(tokens, pos)?;
        while let Some(token) = tokens.get(*pos) {
            let Some(&(op, prec)) = OPS.iter().find(|(op, _)| op == token) else {
                break;
            };
            if prec < min {
                break;
            }
            *pos += 1;
            let right = parse_bin(tokens, pos, prec + 1)?;
            left = Expr::Bin(Box::new(left), op, Box::new(right));
        }
        Ok(left)
    }

    fn parse_unary(tokens: &[String], pos: &mut usize) -> Result<Expr, String> {
        let token = tokens.get(*pos).ok_or("unexpected end of expression")?;
        *pos += 1;
        match token.as_str() {
            "!" => Ok(Expr::Not(Box::new(parse_unary(tokens, pos)?))),
            "(" => {
                let inner = parse_bin(tokens, pos, 1)?;
                if tokens.get(*pos).map(String::as_str) != Some(")") {
                    return Err("missing )".into());
                }
                *pos += 1;
                Ok(inner)
            }
            t if t.starts_with('$') => Ok(Expr::Path(t.to_owned())),
            t if t.starts_with('\'') || t.starts_with('"') => {
                Ok(Expr::Lit(Value::String(t[1..t.len() - 1].to_owned())))
            }
            t => serde_json::from_str(t)
                .map(Expr::Lit)
                .map_err(|_| format!("unexpected token {t:?}")),
        }
    }

    pub(super) fn evaluate(expr: &Expr, root: &Value) -> Result<Value, String> {
        Ok(match expr {
            Expr::Lit(v) => v.clone(),
            Expr::Path(p) => select(p, root)?.unwrap_or(Value::Null),
            Expr::Not(e) => Value::Bool(!truthy(&evaluate(e, root)?)),
            Expr::Bin(l, op, r) => {
                let l = evaluate(l, root)?;
                if *op == "&&" {
                    return Ok(Value::Bool(truthy(&l) && truthy(&evaluate(r, root)?)));
                }
                if *op == "||" {
                    return Ok(Value::Bool(truthy(&l) || truthy(&evaluate(r, root)?)));
                }
                let r = evaluate(r, root)?;
                let ord = match (&l, &r) {
                    (Value::Number(a), Value::Number(b)) => a.as_f64().partial_cmp(&b.as_f64()),
                    (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
                    _ => None,
                };
                Value::Bool(match *op {
                    "==" => l == r,
                    "!=" => l != r,
                    "<" => ord.is_some_and(std::cmp::Ordering::is_lt),
                    ">" => ord.is_some_and(std::cmp::Ordering::is_gt),
                    "<=" => ord.is_some_and(std::cmp::Ordering::is_le),
                    _ => ord.is_some_and(std::cmp::Ordering::is_ge),
                })
            }
        })
    }
}
