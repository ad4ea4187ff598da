use serde_json::{Value, json};

use super::*;

fn root() -> Value {
    json!({
        "input": {"ticket": "T-1", "count": 3, "labels": ["bug", "ui"]},
        "context": {"attempts": 2, "title": "Fix Login", "empty": []},
        "nodes": {
            "review": {"output": {"approved": true, "score": 0.75}},
            "fan": {"output": {"results": [{"ok": true}, {"ok": false}]}},
            "my-node": {"output": 7}
        },
        "item": {"path": "src/a.rs"},
        "index": 1
    })
}

fn eval(source: &str) -> Value {
    Expr::parse(source)
        .unwrap_or_else(|error| panic!("{source}: {error}"))
        .evaluate(&root())
        .unwrap_or_else(|error| panic!("{source}: {error}"))
}

fn eval_err(source: &str) -> EvalError {
    Expr::parse(source).unwrap().evaluate(&root()).unwrap_err()
}

#[test]
fn evaluates_the_documented_operators() {
    let cases = [
        ("$.nodes.review.output.approved", json!(true)),
        ("$.nodes['fan'].output.results[0]", json!({"ok": true})),
        ("$.nodes['my-node'].output", json!(7)),
        ("$.nodes.fan.output.results[*].ok", json!([true, false])),
        ("$.nodes.missing.output", Value::Null),
        ("$.nodes.missing.output ?? 'none'", json!("none")),
        ("$.context.attempts ?? 9", json!(2)),
        (
            "$.context.attempts < 3 && $.nodes.review.output.approved",
            json!(true),
        ),
        (
            "$.context.attempts >= 3 || !$.nodes.review.output.approved",
            json!(false),
        ),
        ("$.input.count + 1 == 4", json!(true)),
        ("$.input.count - 5", json!(-2)),
        ("-$.input.count", json!(-3)),
        ("$.nodes.review.output.score + 0.25 == 1", json!(true)),
        ("'a' + \"b\"", json!("ab")),
        ("'bug' in $.input.labels", json!(true)),
        ("'Log' in $.context.title", json!(true)),
        ("'ticket' in $.input", json!(true)),
        (
            "[1, 'x', null, true, [2]]",
            json!([1, "x", null, true, [2]]),
        ),
        ("1 != 2", json!(true)),
        ("'abc' < 'abd'", json!(true)),
        ("2 <= 2.0", json!(true)),
        ("1e2 > 99", json!(true)),
        ("len($.input.labels) == 2", json!(true)),
        ("len($.context.title)", json!(9)),
        ("len($.nothing)", json!(0)),
        ("exists($.item.path) && !exists($.item.other)", json!(true)),
        ("lower($.context.title)", json!("fix login")),
        ("upper('x')", json!("X")),
        ("contains($.input.labels, 'ui')", json!(true)),
        ("startsWith($.item.path, 'src/')", json!(true)),
        ("endsWith($.item.path, '.py')", json!(false)),
        ("not($.context.empty)", json!(true)),
        ("$.index == 1", json!(true)),
        ("(1 + 2) ?? 0", json!(3)),
    ];
    for (source, expected) in cases {
        assert_eq!(eval(source), expected, "{source}");
    }
}

#[test]
fn coalesce_binds_tighter_than_comparison() {
    assert_eq!(eval("$.missing ?? 0 > 3"), json!(false));
    assert_eq!(eval("$.missing ?? 5 > 3"), json!(true));
    assert_eq!(eval("$.a ?? $.b ?? 'c'"), json!("c"));
}

#[test]
fn escapes_in_strings() {
    assert_eq!(eval(r"'a\'b\n\u00e9\ud83d\ude00'"), json!("a'b\né😀"));
    assert!(Expr::parse(r"'\ud83d'").is_err());
    assert!(Expr::parse(r"'\q'").is_err());
}

#[test]
fn truthiness() {
    for falsy in [
        json!(null),
        json!(false),
        json!(0),
        json!(""),
        json!([]),
        json!({}),
    ] {
        assert!(!truthy(&falsy), "{falsy}");
    }
    for truthy_value in [
        json!(true),
        json!(0.5),
        json!("x"),
        json!([0]),
        json!({"a": 1}),
    ] {
        assert!(truthy(&truthy_value), "{truthy_value}");
    }
}

#[test]
fn reports_paths_in_reading_order() {
    let expr = Expr::parse("$.a.b == 1 || len($.c[*]) > $['d']").unwrap();
    assert_eq!(expr.paths(), ["$.a.b", "$.c[*]", "$['d']"]);
}

#[test]
fn parse_errors_are_typed_and_located() {
    let cases: [(&str, &str, Option<usize>); 14] = [
        ("", "EXPR_EMPTY", None),
        ("   ", "EXPR_EMPTY", None),
        ("1 +", "EXPR_SYNTAX", Some(3)),
        ("a == 1", "EXPR_UNKNOWN_NAME", Some(0)),
        ("len(1, 2)", "EXPR_ARITY", Some(0)),
        ("$.a = 1", "EXPR_SYNTAX", Some(4)),
        ("1 == 2 == 3", "EXPR_SYNTAX", Some(7)),
        ("'open", "EXPR_SYNTAX", Some(0)),
        ("$.a[", "EXPR_INVALID_PATH", Some(0)),
        ("$.a[01]", "EXPR_INVALID_PATH", None),
        ("(1", "EXPR_SYNTAX", Some(2)),
        ("1 2", "EXPR_SYNTAX", Some(2)),
        ("12abc", "EXPR_SYNTAX", Some(2)),
        ("x(1)", "EXPR_UNKNOWN_NAME", Some(0)),
    ];
    for (source, code, offset) in cases {
        let error = Expr::parse(source).unwrap_err();
        assert_eq!(error.code(), code, "{source}: {error}");
        if let Some(offset) = offset {
            let found = match &error {
                ExprError::Syntax { offset, .. }
                | ExprError::Path { offset, .. }
                | ExprError::UnknownName { offset, .. }
                | ExprError::Arity { offset, .. }
                | ExprError::TooDeep { offset, .. } => Some(*offset),
                _ => None,
            };
            assert_eq!(found, Some(offset), "{source}: {error}");
        }
    }
}

#[test]
fn bounds_length_and_nesting() {
    let long = "1".repeat(MAX_EXPR_BYTES + 1);
    assert_eq!(Expr::parse(&long).unwrap_err().code(), "EXPR_TOO_LONG");
    let nested = format!("{}1{}", "(".repeat(65), ")".repeat(65));
    assert_eq!(Expr::parse(&nested).unwrap_err().code(), "EXPR_TOO_DEEP");
    let ok = format!("{}1{}", "(".repeat(64), ")".repeat(64));
    assert_eq!(
        Expr::parse(&ok).unwrap().evaluate(&json!({})).unwrap(),
        json!(1)
    );
    let nots = "!".repeat(65) + "true";
    assert_eq!(Expr::parse(&nots).unwrap_err().code(), "EXPR_TOO_DEEP");
    let chain = vec!["1"; 300].join(" + ");
    assert_eq!(Expr::parse(&chain).unwrap_err().code(), "EXPR_TOO_DEEP");
    let chain = vec!["1"; 200].join(" + ");
    assert_eq!(eval(&chain), json!(200));
}

#[test]
fn evaluation_errors_are_typed() {
    assert_eq!(eval_err("$.missing > 3").code(), "EXPR_NOT_COMPARABLE");
    assert_eq!(eval_err("'a' + 1").code(), "EXPR_TYPE_ERROR");
    assert_eq!(eval_err("1 - 'a'").code(), "EXPR_TYPE_ERROR");
    assert_eq!(eval_err("-'a'").code(), "EXPR_TYPE_ERROR");
    assert_eq!(eval_err("1 in 2").code(), "EXPR_TYPE_ERROR");
    assert_eq!(eval_err("lower(1)").code(), "EXPR_TYPE_ERROR");
    assert_eq!(eval_err("len(true)").code(), "EXPR_TYPE_ERROR");
    assert_eq!(
        eval_err("1.7e308 + 1.7e308").code(),
        "EXPR_NUMBER_OUT_OF_RANGE"
    );
    assert_eq!(
        eval("9223372036854775807 + 1"),
        json!(9_223_372_036_854_775_808.0_f64)
    );
}

#[test]
fn short_circuits() {
    assert_eq!(eval("true || 'a' + 1"), json!(true));
    assert_eq!(eval("false && 'a' + 1"), json!(false));
    assert_eq!(eval("1 ?? 'a' + 1"), json!(1));
}
