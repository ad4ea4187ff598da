//! Parse + validate (and expression evaluation) return on every input; none of them panics.

use auto_swe_spec::{
    Expr, ReadMode, SourceFormat, ValidateOptions, WorkflowSpec, read_spec, resolve_binding,
    validate, validate_value,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::strategies::{binding, json_value, node, spec};

fn check_text(text: &str) {
    for format in [SourceFormat::Json, SourceFormat::Yaml] {
        for mode in [ReadMode::Tolerant, ReadMode::Strict] {
            if let Ok(spec) = read_spec(text, format, mode) {
                let _ = validate(&spec, &ValidateOptions::default());
            }
        }
        if let Ok(value) = auto_swe_spec::parse_document(text, format) {
            let _ = validate_value(&value, &ValidateOptions::default());
        }
    }
}

/// A spec-shaped document built around arbitrary values, so the typed read gets far.
fn spec_like() -> impl Strategy<Value = Value> {
    (
        json_value(),
        proptest::collection::vec(json_value(), 0..4),
        json_value(),
    )
        .prop_map(|(entry, nodes, extra)| {
            let nodes: Vec<Value> = nodes
                .into_iter()
                .enumerate()
                .map(|(index, value)| match value {
                    Value::Object(mut map) => {
                        map.entry("id").or_insert(json!(format!("n{index}")));
                        map.entry("type").or_insert(json!("step"));
                        Value::Object(map)
                    }
                    other => other,
                })
                .collect();
            json!({"entry": entry, "nodes": nodes, "metadata": extra})
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check_text(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn arbitrary_json(value in json_value()) {
        check_text(&value.to_string());
        let _ = validate_value(&value, &ValidateOptions::default());
    }

    #[test]
    fn spec_shaped_json(value in spec_like()) {
        let _ = validate_value(&value, &ValidateOptions::default());
        if let Ok(spec) = WorkflowSpec::from_value_tolerant(value) {
            let _ = validate(&spec, &ValidateOptions::default());
        }
    }

    #[test]
    fn arbitrary_specs_validate(spec in spec()) {
        let report = validate(&spec, &ValidateOptions::default());
        // Whatever is wrong, each diagnostic says where.
        for diagnostic in report.errors.iter().chain(&report.warnings) {
            prop_assert!(diagnostic.path.is_some() || diagnostic.node_id.is_none());
        }
    }

    #[test]
    fn arbitrary_nodes_in_a_spec(nodes in proptest::collection::vec(node(), 1..8)) {
        let entry = nodes[0].id.clone();
        let spec = WorkflowSpec { entry, nodes, ..serde_json::from_value(json!({"entry": "x", "nodes": []})).unwrap() };
        let _ = validate(&spec, &ValidateOptions::default());
    }

    #[test]
    fn expressions_parse_and_evaluate(source in "[ -~]{0,64}", root in json_value()) {
        if let Ok(expr) = Expr::parse(&source) {
            let _ = expr.evaluate(&root);
            let _ = expr.paths();
        }
    }

    #[test]
    fn expression_like_text(source in r"(\$(\.[a-z]{1,3}|\[[0-9*?@'a-z.<>=! ]{0,6}\]){0,3}|[0-9]{1,3}|'[a-z]{0,3}'|true|null|len\(|exists\(|[()\[\],!+-]|==|!=|<=|>=|&&|\|\||\?\?| in | ){0,24}", root in json_value()) {
        if let Ok(expr) = Expr::parse(&source) {
            let _ = expr.evaluate(&root);
        }
    }

    #[test]
    fn bindings_resolve(binding in binding(), root in json_value()) {
        let _ = resolve_binding(&binding, &root);
    }
}

#[test]
fn deeply_nested_input_is_refused_not_overflowed() {
    let deep_json = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    check_text(&deep_json);
    let deep_yaml = format!("{}{}", "{a: ".repeat(100_000), "}".repeat(100_000));
    check_text(&deep_yaml);
    let deep_expr = format!("{}1{}", "(".repeat(2000), ")".repeat(2000));
    assert!(Expr::parse(&deep_expr).is_err());
    let deep_path = format!("$[?{}@{}]", "(".repeat(1000), ")".repeat(1000));
    assert!(Expr::parse(&deep_path).is_err());
}
