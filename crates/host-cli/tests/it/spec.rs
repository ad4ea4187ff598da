//! `auto-swe spec validate` and `auto-swe spec schema` against the PLAN contract: exit codes,
//! the JSON shape, one diagnostic per problem, and readable text.

use serde_json::{Value, json};

use crate::{auto_swe, root};

/// The spec crate's fixtures, one per code. They name steps of their own, so the tests that
/// check one rule's output pass `--no-builtin-steps`.
const INVALID: &str = "crates/spec/tests/fixtures/invalid";

#[test]
fn bundled_examples_are_valid() {
    let run = auto_swe(&[
        "spec",
        "validate",
        "examples/specs/review-loop.json",
        "examples/specs/ci-gate.yaml",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    insta::assert_snapshot!(run.stdout, @r"
    examples/specs/review-loop.json: valid
    examples/specs/ci-gate.yaml: valid
    ");
}

#[test]
fn every_example_in_the_directory_is_valid() {
    let mut files: Vec<String> = std::fs::read_dir(root().join("examples/specs"))
        .unwrap()
        .map(|entry| {
            format!(
                "examples/specs/{}",
                entry.unwrap().file_name().to_string_lossy()
            )
        })
        .collect();
    files.sort();
    let mut args = vec!["spec", "validate", "--format", "json"];
    args.extend(files.iter().map(String::as_str));
    let run = auto_swe(&args);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let output: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(output["files"].as_array().unwrap().len(), files.len());
}

#[test]
fn errors_exit_one_with_the_json_contract() {
    let run = auto_swe(&[
        "spec",
        "validate",
        "--no-builtin-steps",
        "--format",
        "json",
        "examples/specs/review-loop.json",
        &format!("{INVALID}/UNKNOWN_TARGET.json"),
        &format!("{INVALID}/UNREACHABLE_NODE.json"),
    ]);
    assert_eq!(run.code, 1);
    let output: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        output,
        json!({"files": [
            {"file": "examples/specs/review-loop.json", "valid": true, "errors": [], "warnings": []},
            {"file": format!("{INVALID}/UNKNOWN_TARGET.json"), "valid": false,
             "errors": [
                {"code": "UNKNOWN_TARGET", "message": "`next` names \"nowhere\", which is not a node of this graph", "nodeId": "a", "path": "nodes[0].next"},
                {"code": "UNKNOWN_TARGET", "message": "`onFail` names \"missing\", which is not a node of this graph", "nodeId": "a", "path": "nodes[0].onFail"}
             ],
             "warnings": [
                {"code": "UNREACHABLE_NODE", "message": "no path from the entry reaches \"end\"", "nodeId": "end", "path": "nodes[1]"}
             ]},
            {"file": format!("{INVALID}/UNREACHABLE_NODE.json"), "valid": true, "errors": [],
             "warnings": [
                {"code": "UNREACHABLE_NODE", "message": "no path from the entry reaches \"orphan\"", "nodeId": "orphan", "path": "nodes[2]"}
             ]}
        ]})
    );
}

#[test]
fn warnings_alone_exit_zero() {
    let run = auto_swe(&[
        "spec",
        "validate",
        "--no-builtin-steps",
        &format!("{INVALID}/GROUP_NOT_CONTIGUOUS.json"),
    ]);
    assert_eq!(run.code, 0);
}

#[test]
fn text_output_is_readable() {
    let run = auto_swe(&[
        "spec",
        "validate",
        "--no-builtin-steps",
        &format!("{INVALID}/RESERVED_PATH_SEGMENT.json"),
        &format!("{INVALID}/UNBOUND_PATH.json"),
    ]);
    assert_eq!(run.code, 1);
    insta::assert_snapshot!(run.stdout);
}

#[test]
fn every_fixture_code_comes_through_the_cli() {
    for entry in std::fs::read_dir(root().join(INVALID)).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".catalog.json") || name.ends_with(".connections.json") {
            continue;
        }
        let code = name.trim_end_matches(".json");
        let file = format!("{INVALID}/{name}");
        let catalog = format!("{INVALID}/{code}.catalog.json");
        let mut args = vec!["spec", "validate", "--format", "json", file.as_str()];
        if root().join(&catalog).exists() {
            args.extend(["--step-catalog", catalog.as_str()]);
        }
        let connections = format!("{INVALID}/{code}.connections.json");
        if root().join(&connections).exists() {
            args.extend(["--connections", connections.as_str()]);
        }
        let run = auto_swe(&args);
        let output: Value = serde_json::from_str(&run.stdout).unwrap();
        let report = &output["files"][0];
        let has_errors = !report["errors"].as_array().unwrap().is_empty();
        assert_eq!(run.code, i32::from(has_errors), "{name}");
        let codes: Vec<&str> = report["errors"]
            .as_array()
            .unwrap()
            .iter()
            .chain(report["warnings"].as_array().unwrap())
            .map(|diagnostic| diagnostic["code"].as_str().unwrap())
            .collect();
        assert!(codes.contains(&code), "{name}: {codes:?}");
    }
}

#[test]
fn unreadable_input_exits_two() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"entry\": ").unwrap();
    let missing = dir.path().join("missing.yaml");
    let run = auto_swe(&[
        "spec",
        "validate",
        "--format",
        "json",
        "examples/specs/review-loop.json",
        broken.to_str().unwrap(),
        missing.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2);
    // What could be read is still reported.
    let output: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(output["files"].as_array().unwrap().len(), 1);
    assert!(
        run.stderr
            .contains("broken.json: JSON syntax error at line 1"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("missing.yaml: cannot read file"),
        "{}",
        run.stderr
    );
}

#[test]
fn shape_problems_are_errors_not_unreadable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.txt");
    std::fs::write(&path, "entry: a\nnodes:\n  - id: a\n    type: nope\n").unwrap();
    let run = auto_swe(&[
        "spec",
        "validate",
        "--format",
        "json",
        path.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 1);
    let output: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(output["files"][0]["errors"][0]["code"], "SPEC_SHAPE");
    assert_eq!(output["files"][0]["errors"][0]["nodeId"], "a");
}

#[test]
fn bad_step_catalog_exits_two() {
    let run = auto_swe(&[
        "spec",
        "validate",
        "--step-catalog",
        "does/not/exist.json",
        "examples/specs/review-loop.json",
    ]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("cannot read step catalog"),
        "{}",
        run.stderr
    );
}

#[test]
fn schema_is_json_schema_of_the_spec() {
    let run = auto_swe(&["spec", "schema"]);
    assert_eq!(run.code, 0);
    let schema: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(schema["title"], "WorkflowSpec");
    assert_eq!(schema["required"], json!(["entry", "nodes"]));
    assert!(schema["$defs"]["Node"]["allOf"].is_array());
}

/// `spec validate --format json` with `extra` arguments.
fn with<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    [&["spec", "validate", "--format", "json"][..], extra].concat()
}

/// The built-in steps are known without a catalog file: a misspelt one is an error, a step
/// with an input it does not take is warned about, and `--no-builtin-steps` turns the check
/// off; a catalog file's steps come on top of the built-in ones.
#[test]
fn built_in_steps_are_checked_without_a_catalog_file() {
    let dir = tempfile::tempdir().unwrap();
    let spec = |step: &str| {
        json!({
            "specVersion": 1, "name": "s", "entry": "pr",
            "nodes": [
                { "id": "pr", "type": "step", "step": step, "inputs": { "title": "t" }, "next": "end" },
                { "id": "end", "type": "terminate", "status": "SUCCESS" }
            ]
        })
    };
    let write = |name: &str, value: &Value| {
        let path = dir.path().join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path.to_string_lossy().into_owned()
    };
    let misspelt = write("misspelt.json", &spec("createOrUpdatePullReqest"));
    let known = write("known.json", &spec("createOrUpdatePullRequest"));
    let custom = write("custom.json", &spec("deployPreview"));
    let catalog = write(
        "catalog.json",
        &json!({ "steps": { "deployPreview": { "inputs": { "title": { "type": "string" } } } } }),
    );
    let codes = |args: &[&str]| {
        let run = auto_swe(args);
        let output: Value = serde_json::from_str(&run.stdout).unwrap();
        let report = &output["files"][0];
        let codes: Vec<String> = report["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["code"].as_str().unwrap().to_owned())
            .collect();
        (run.code, codes)
    };
    assert_eq!(
        codes(&with(&[&misspelt])),
        (1, vec!["UNKNOWN_STEP".to_owned()])
    );
    assert_eq!(codes(&with(&[&known])), (0, vec![]));
    assert_eq!(
        codes(&with(&[&custom])),
        (1, vec!["UNKNOWN_STEP".to_owned()])
    );
    assert_eq!(
        codes(&with(&["--step-catalog", &catalog, &custom])),
        (0, vec![])
    );
    // The built-in steps still count beside the file's.
    assert_eq!(
        codes(&with(&["--step-catalog", &catalog, &known])),
        (0, vec![])
    );
    // Without them, only the file's steps are known; with neither, names are not checked.
    assert_eq!(
        codes(&with(&[
            "--no-builtin-steps",
            "--step-catalog",
            &catalog,
            &known
        ])),
        (1, vec!["UNKNOWN_STEP".to_owned()])
    );
    assert_eq!(
        codes(&with(&["--no-builtin-steps", &misspelt])),
        (0, vec![])
    );
}
