//! The public API end to end: reading, validating, hashing, diffing, the schema, and the
//! expression evaluator against a run context.

use auto_swe_spec::{
    Code, Expr, ReadError, ReadMode, SourceFormat, StepCatalog, StepDescriptor, ValidateOptions,
    content_hash, diff_specs, parse_write_path, read_spec, resolve_binding, spec_schema, validate,
    write_at,
};
use serde_json::json;

const YAML: &str = r"
entry: plan
nodes:
  - id: plan
    type: step
    step: makePlan
    group: '  Plan  '
    storeAs: context.plan
    next: done
  - id: done
    type: terminate
    status: SUCCESS
    result: $.context.plan
";

#[test]
fn yaml_and_json_read_the_same_spec() {
    let from_yaml = read_spec(YAML, SourceFormat::Yaml, ReadMode::Strict).unwrap();
    let json_text = serde_json::to_string_pretty(&from_yaml).unwrap();
    let from_json = read_spec(&json_text, SourceFormat::Json, ReadMode::Strict).unwrap();
    assert_eq!(from_yaml, from_json);
    assert_eq!(from_yaml.nodes[0].group.as_deref(), Some("Plan"));
    assert_eq!(
        content_hash(&from_yaml).unwrap(),
        content_hash(&from_json).unwrap()
    );
}

#[test]
fn strict_and_tolerant_disagree_only_on_presentation() {
    let bad = YAML.replace("'  Plan  '", "''");
    let tolerant = read_spec(&bad, SourceFormat::Yaml, ReadMode::Tolerant).unwrap();
    assert_eq!(tolerant.nodes[0].group, None);
    let strict = read_spec(&bad, SourceFormat::Yaml, ReadMode::Strict).unwrap_err();
    assert!(matches!(strict, ReadError::Presentation { ref path, .. } if path == "nodes[0].group"));
}

#[test]
fn the_catalog_checks_step_names() {
    let spec = read_spec(YAML, SourceFormat::Yaml, ReadMode::Strict).unwrap();
    assert!(validate(&spec, &ValidateOptions::default()).is_valid());
    let catalog = StepCatalog::new().with_step("other", StepDescriptor::default());
    let report = validate(&spec, &ValidateOptions::with_step_catalog(&catalog));
    assert_eq!(report.codes(), [Code::UnknownStep]);
    let catalog = catalog.with_step("makePlan", StepDescriptor::default());
    assert!(validate(&spec, &ValidateOptions::with_step_catalog(&catalog)).is_valid());
}

#[test]
fn diff_between_versions() {
    let before = read_spec(YAML, SourceFormat::Yaml, ReadMode::Strict).unwrap();
    let after = read_spec(
        &YAML.replace("makePlan", "makeBetterPlan"),
        SourceFormat::Yaml,
        ReadMode::Strict,
    )
    .unwrap();
    let diff = diff_specs(&before, &after).unwrap();
    assert_eq!(
        serde_json::to_value(diff).unwrap(),
        json!({"fields": [], "added": [], "removed": [], "changed": [
            {"nodeId": "plan", "changes": [{"path": "step", "before": "makePlan", "after": "makeBetterPlan"}]}
        ]})
    );
}

#[test]
fn schema_describes_nodes() {
    let schema = spec_schema();
    let node = &schema["$defs"]["Node"];
    assert_eq!(node["allOf"][0]["required"], json!(["id", "type"]));
    assert_eq!(
        node["allOf"][0]["properties"]["group"]["maxLength"],
        json!(40)
    );
    assert_eq!(
        node["allOf"][2]["else"]["properties"]["title"]["maxLength"],
        json!(80)
    );
    assert_eq!(
        node["allOf"][2]["then"]["properties"]["title"]["maxLength"],
        json!(200)
    );
    let kinds = schema["$defs"]["NodeKind"]["oneOf"].as_array().unwrap();
    assert_eq!(kinds.len(), 15);
    // `timeoutMs` of `shell` and `containerStep`: 1 ms to one hour, as the save path checks.
    for kind in ["ShellNode", "ContainerStepNode"] {
        let timeout = &schema["$defs"][kind]["properties"]["timeoutMs"];
        assert_eq!(timeout["minimum"], json!(1), "{kind}: {timeout}");
        assert_eq!(timeout["maximum"], json!(3_600_000), "{kind}: {timeout}");
    }
}

#[test]
fn a_run_context_walkthrough() {
    // What the interpreter does with one `set` node and one `cond`.
    let mut root = json!({
        "input": {"ticket": {"title": "Crash on save"}},
        "context": {},
        "nodes": {"review": {"output": {"approved": false, "notes": ["add a test"]}}}
    });
    let value = resolve_binding(
        &auto_swe_spec::Binding::from_value(
            json!({"template": "{{ $.input.ticket.title }}: {{ $.nodes.review.output.notes }}"}),
        ),
        &root,
    )
    .unwrap();
    let segments = parse_write_path("context.summary.text").unwrap();
    write_at(&mut root, &segments, value).unwrap();
    assert_eq!(
        root["context"],
        json!({"summary": {"text": "Crash on save: [\"add a test\"]"}})
    );
    let cond =
        Expr::parse("!$.nodes.review.output.approved && len($.context.summary.text) > 5").unwrap();
    assert_eq!(cond.evaluate(&root).unwrap(), json!(true));
    assert_eq!(
        cond.paths(),
        ["$.nodes.review.output.approved", "$.context.summary.text"]
    );
}

#[test]
fn every_node_type_reads_the_same_from_yaml() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/valid/every-node-type.json");
    let json_text = std::fs::read_to_string(path).unwrap();
    let from_json = read_spec(&json_text, SourceFormat::Json, ReadMode::Strict).unwrap();
    let value: serde_json::Value = serde_json::from_str(&json_text).unwrap();
    let yaml_text = serde_yaml_ng::to_string(&value).unwrap();
    let from_yaml = read_spec(&yaml_text, SourceFormat::Yaml, ReadMode::Strict).unwrap();
    assert_eq!(from_json, from_yaml);
}
