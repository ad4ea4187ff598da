//! `auto-swe spec simulate` through the real binary, on the bundled fixtures.

use std::process::Output;

const FIXTURES: &str = "tests/fixtures/simulate";

#[expect(
    clippy::expect_used,
    reason = "a test helper: a failure to run is a test failure"
)]
fn auto_swe(args: &[&str]) -> Output {
    #[expect(
        clippy::disallowed_methods,
        reason = "end-to-end tests run the CLI binary itself"
    )]
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_auto-swe"));
    command
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

fn fixture(name: &str) -> String {
    format!("{FIXTURES}/{name}")
}

#[expect(
    clippy::expect_used,
    clippy::panic,
    reason = "a test helper: unexpected output is a test failure"
)]
fn json_run(spec: &str, script: &str, extra: &[&str]) -> (i32, serde_json::Value) {
    let spec = fixture(spec);
    let script = fixture(script);
    let mut args = vec![
        "spec",
        "simulate",
        spec.as_str(),
        "--script",
        script.as_str(),
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let output = auto_swe(&args);
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    let value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    (output.status.code().expect("exit code"), value)
}

#[test]
fn review_loop_runs_to_success() {
    let (code, out) = json_run(
        "review-loop.yaml",
        "review-loop.script.yaml",
        &["--input", r#"{"ticket": "T-1"}"#],
    );
    assert_eq!(code, 0);
    insta::assert_json_snapshot!(out);
}

#[test]
fn fan_out_records_branches_by_item_key() {
    let (code, out) = json_run("fan-out.json", "fan-out.script.json", &[]);
    assert_eq!(code, 0);
    insta::assert_json_snapshot!(out);
}

#[test]
fn a_failed_or_cancelled_run_still_exits_zero() {
    let (code, out) = json_run(
        "review-loop.yaml",
        "cancel.script.json",
        &["--input", r#"{"ticket": "T-1"}"#],
    );
    assert_eq!(code, 0);
    assert_eq!(out["status"], "CANCELLED");
    assert_eq!(out["error"]["code"], "CANCELLED");
    assert_eq!(
        out["steps"],
        serde_json::json!([
            {"nodeId": "implement", "recordingId": "implement", "status": "CANCELLED", "attempt": 1}
        ])
    );
    let (code, out) = json_run("fan-out.json", "cancel.script.json", &[]);
    assert_eq!(code, 0);
    assert_eq!(out["status"], "FAILED");
    assert_eq!(out["error"]["code"], "SIMULATION_UNSCRIPTED");
    assert_eq!(
        out["error"]["message"],
        "SIMULATION_UNSCRIPTED: no script entry for step plan (node plan) and no default"
    );
}

#[test]
fn an_invalid_spec_exits_one_with_its_errors() {
    let (code, out) = json_run("invalid.json", "fan-out.script.json", &[]);
    assert_eq!(code, 1);
    insta::assert_json_snapshot!(out);
}

#[test]
fn unreadable_input_exits_two() {
    for args in [
        vec![
            "spec",
            "simulate",
            "tests/fixtures/simulate/missing.json",
            "--script",
            "tests/fixtures/simulate/fan-out.script.json",
        ],
        vec![
            "spec",
            "simulate",
            "tests/fixtures/simulate/fan-out.json",
            "--script",
            "tests/fixtures/simulate/missing.json",
        ],
        vec![
            "spec",
            "simulate",
            "tests/fixtures/simulate/fan-out.json",
            "--script",
            "tests/fixtures/simulate/invalid.json",
        ],
        vec![
            "spec",
            "simulate",
            "tests/fixtures/simulate/fan-out.json",
            "--script",
            "tests/fixtures/simulate/fan-out.script.json",
            "--input",
            "{nope",
        ],
    ] {
        let output = auto_swe(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&output.stderr).starts_with("error: "),
            "{args:?}"
        );
    }
}

#[test]
fn text_output_lists_steps() {
    let output = auto_swe(&[
        "spec",
        "simulate",
        "tests/fixtures/simulate/fan-out.json",
        "--script",
        "tests/fixtures/simulate/fan-out.script.json",
    ]);
    assert_eq!(output.status.code(), Some(0));
    insta::assert_snapshot!(String::from_utf8(output.stdout).unwrap());
}

#[test]
fn every_bundled_spec_simulates_to_a_run_status() {
    let mut specs = Vec::new();
    for dir in ["../spec/tests/fixtures/valid", "../../examples/specs"] {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                specs.push(path);
            }
        }
    }
    assert!(specs.len() >= 4, "{specs:?}");
    for path in specs {
        let input = required_inputs(&path).to_string();
        let path = path.display().to_string();
        let output = auto_swe(&[
            "spec",
            "simulate",
            &path,
            "--script",
            "tests/fixtures/simulate/generic.script.json",
            "--input",
            &input,
            "--format",
            "json",
        ]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{path}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let out: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let status = out["status"].as_str().unwrap();
        assert!(
            ["SUCCESS", "FAILED", "CANCELLED", "TIMED_OUT"].contains(&status),
            "{path}: {out}"
        );
        assert!(
            out["steps"].is_array() && out["context"].is_object(),
            "{path}: {out}"
        );
        if status != "SUCCESS" {
            assert!(
                out["error"]["code"].is_string() || out["error"].is_null(),
                "{path}: {out}"
            );
        }
    }
}

#[test]
fn bundled_specs_run_to_success_with_their_scripts() {
    for (name, spec, script, input) in [
        (
            "every_node_type",
            "../spec/tests/fixtures/valid/every-node-type.json",
            "tests/fixtures/simulate/every-node-type.script.yaml",
            r#"{"ticket": {"title": "Fix Login", "files": ["src/a.rs"]}}"#,
        ),
        (
            "ci_gate",
            "../../examples/specs/ci-gate.yaml",
            "tests/fixtures/simulate/ci-gate.script.yaml",
            r#"{"branch": "feat/x", "files": ["a.txt", "b.txt"]}"#,
        ),
    ] {
        let output = auto_swe(&[
            "spec", "simulate", spec, "--script", script, "--input", input, "--format", "json",
        ]);
        assert_eq!(output.status.code(), Some(0), "{name}");
        let out: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(out["status"], "SUCCESS", "{name}: {out}");
        insta::assert_json_snapshot!(name, out);
    }
}

#[expect(
    clippy::expect_used,
    reason = "a test helper: a failure to run is a test failure"
)]
fn auto_swe_with_stdin(args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write as _;
    #[expect(
        clippy::disallowed_methods,
        reason = "end-to-end tests run the CLI binary itself"
    )]
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_auto-swe"));
    let mut child = command
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut pipe = child.stdin.take().expect("stdin");
    // The binary may refuse before reading everything; a closed pipe is not a test failure.
    let _ = pipe.write_all(stdin);
    drop(pipe);
    child.wait_with_output().expect("the binary ends")
}

/// A spec whose one step echoes the size of its input.
const ECHO_SPEC: &str = "tests/fixtures/simulate/echo-input.json";

#[test]
fn input_comes_from_a_file_or_standard_input_past_the_argument_limit() {
    // Larger than the 128 KiB one argument may hold.
    let big = serde_json::json!({"blob": "x".repeat(300 * 1024)});
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("input.json");
    std::fs::write(&path, big.to_string()).unwrap();
    let at_file = format!("@{}", path.display());
    let script = fixture("generic.script.json");
    let base = [
        "spec",
        "simulate",
        ECHO_SPEC,
        "--script",
        script.as_str(),
        "--format",
        "json",
    ];

    let mut args = base.to_vec();
    args.extend(["--input", at_file.as_str()]);
    let from_file = auto_swe(&args);
    assert_eq!(from_file.status.code(), Some(0), "{from_file:?}");
    let out: serde_json::Value = serde_json::from_slice(&from_file.stdout).unwrap();
    assert_eq!(out["result"], serde_json::json!(300 * 1024));

    let mut args = base.to_vec();
    args.extend(["--input", "-"]);
    let from_stdin = auto_swe_with_stdin(&args, big.to_string().as_bytes());
    assert_eq!(from_stdin.status.code(), Some(0), "{from_stdin:?}");
    assert_eq!(from_stdin.stdout, from_file.stdout);

    // The script can come from standard input too.
    let script_text = std::fs::read(env!("CARGO_MANIFEST_DIR").to_owned() + "/" + &script).unwrap();
    let args = [
        "spec", "simulate", ECHO_SPEC, "--script", "-", "--input", &at_file, "--format", "json",
    ];
    let script_from_stdin = auto_swe_with_stdin(&args, &script_text);
    assert_eq!(
        script_from_stdin.status.code(),
        Some(0),
        "{script_from_stdin:?}"
    );
    assert_eq!(script_from_stdin.stdout, from_file.stdout);
}

#[test]
fn a_bad_input_file_exits_two_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let not_json = dir.path().join("not.json");
    std::fs::write(&not_json, "{\"a\": ").unwrap();
    let deep = dir.path().join("deep.json");
    std::fs::write(&deep, format!("{}{}", "[".repeat(200), "]".repeat(200))).unwrap();
    let missing = dir.path().join("missing.json");
    let script = fixture("generic.script.json");
    for (input, stdin, reason) in [
        (format!("@{}", not_json.display()), "", "is not JSON"),
        (format!("@{}", deep.display()), "", "is not JSON"),
        (format!("@{}", missing.display()), "", "cannot read --input"),
        ("-".to_owned(), "nope", "is not JSON"),
    ] {
        let args = [
            "spec", "simulate", ECHO_SPEC, "--script", &script, "--input", &input,
        ];
        let output = auto_swe_with_stdin(&args, stdin.as_bytes());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{input}: {stderr}");
        assert!(output.stdout.is_empty(), "{input}");
        assert!(stderr.contains(reason), "{input}: {stderr}");
    }
    let args = [
        "spec", "simulate", ECHO_SPEC, "--script", "-", "--input", "-",
    ];
    let output = auto_swe_with_stdin(&args, b"{}");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot both read standard input"));
}

#[test]
fn an_input_file_over_the_limit_is_refused_without_reading_it_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.json");
    // Sparse: 65 MiB long, nothing written; the reader stops one byte past 64 MiB.
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(65 * 1024 * 1024).unwrap();
    let input = format!("@{}", path.display());
    let script = fixture("generic.script.json");
    let args = [
        "spec", "simulate", ECHO_SPEC, "--script", &script, "--input", &input,
    ];
    let output = auto_swe(&args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("larger than 64 MiB"), "{stderr}");
}

#[test]
fn a_bad_group_or_title_is_dropped_with_a_warning_unless_strict() {
    let spec = "tests/fixtures/simulate/bad-presentation.json";
    let script = fixture("generic.script.json");
    let args = [
        "spec", "simulate", spec, "--script", &script, "--format", "json",
    ];
    let output = auto_swe(&args);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let out: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(out["status"], "SUCCESS");
    let codes: Vec<&str> = out["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        ["INVALID_PRESENTATION_FIELD", "INVALID_PRESENTATION_FIELD"]
    );

    let mut strict = args.to_vec();
    strict.push("--strict");
    let output = auto_swe(&strict);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let out: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(out["valid"], false);
    assert_eq!(out["errors"][0]["code"], "INVALID_PRESENTATION_FIELD");
}

#[test]
fn declared_input_defaults_apply_and_a_missing_required_input_is_refused() {
    // `files` defaults to [] in ci-gate.yaml: a run given only the branch fans out over nothing.
    let output = auto_swe(&[
        "spec",
        "simulate",
        "../../examples/specs/ci-gate.yaml",
        "--script",
        "tests/fixtures/simulate/ci-gate.script.yaml",
        "--input",
        r#"{"branch": "feat/x"}"#,
        "--format",
        "json",
    ]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let out: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(out["status"], "SUCCESS", "{out}");
    let missing = auto_swe(&[
        "spec",
        "simulate",
        "../../examples/specs/ci-gate.yaml",
        "--script",
        "tests/fixtures/simulate/ci-gate.script.yaml",
        "--input",
        r#"{"files": []}"#,
    ]);
    assert_eq!(missing.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("INPUT_MISSING") && stderr.contains("branch"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

/// A value of the declared type for every required input of the spec at `path` (a run must
/// supply them).
fn required_inputs(path: &std::path::Path) -> serde_json::Value {
    use auto_swe_spec::{InputType, ReadMode, SourceFormat, read_spec};
    let text = std::fs::read_to_string(path).unwrap();
    let format = SourceFormat::from_path(path).unwrap_or(SourceFormat::Json);
    let Ok(spec) = read_spec(&text, format, ReadMode::Tolerant) else {
        return serde_json::json!({});
    };
    let mut input = serde_json::Map::new();
    for (name, declared) in spec.inputs.iter().filter(|(_, d)| d.required) {
        let value = match declared.kind {
            InputType::String | InputType::Connection => serde_json::json!("x"),
            InputType::Number | InputType::Integer => serde_json::json!(1),
            InputType::Boolean => serde_json::json!(true),
            InputType::Array => serde_json::json!([]),
            _ => serde_json::json!({}),
        };
        input.insert(name.clone(), value);
    }
    serde_json::Value::Object(input)
}
