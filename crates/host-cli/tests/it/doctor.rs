//! `doctor`, `config show` and `completions` through the binary: every check passing and one
//! failing with its fix; the effective configuration with every secret masked, whichever way
//! it was given; completion scripts that name the subcommands.

use serde_json::Value;

use crate::{json, with_env};

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

/// The setting `key` of a `config show --format json` document.
fn setting(shown: &Value, key: &str) -> Value {
    shown["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == key)
        .cloned()
        .unwrap_or_default()
}

#[test]
fn doctor_runs_every_check_and_a_failing_one_names_its_fix() {
    let home = tempfile::tempdir().unwrap();
    let healthy = with_env(home.path(), &["doctor", "--format", "json"], &[], None);
    let report = json(&healthy);
    let names: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["configuration", "store", "sandbox", "engine", "model keys"]
    );
    assert_eq!(check(&report, "store")["verdict"], "ok");
    assert_eq!(check(&report, "engine")["verdict"], "ok");
    assert!(
        check(&report, "engine")["detail"]
            .as_str()
            .unwrap()
            .starts_with("embedded"),
        "{report}"
    );
    assert_eq!(check(&report, "configuration")["verdict"], "ok");
    // No key is a warning (the demo needs none), not a failure.
    assert_eq!(check(&report, "model keys")["verdict"], "warn");
    let sandbox_ok = check(&report, "sandbox")["verdict"] == "ok";
    assert_eq!(healthy.code, i32::from(!sandbox_ok), "{}", healthy.stdout);
    assert_eq!(report["ok"], sandbox_ok);

    // A store that cannot be opened fails its check, with the fix, and the exit code says so.
    let broken = with_env(
        home.path(),
        &["doctor", "--format", "json"],
        &[("AUTO_SWE_STORE_URL", "sqlite:///nonexistent-dir/store.db")],
        None,
    );
    assert_eq!(broken.code, 1, "{}\n{}", broken.stdout, broken.stderr);
    let report = json(&broken);
    assert_eq!(report["ok"], false);
    let store = check(&report, "store");
    assert_eq!(store["verdict"], "fail");
    assert!(
        store["detail"].as_str().unwrap().contains("STORE_"),
        "{store}"
    );
    assert!(
        store["fix"]
            .as_str()
            .unwrap()
            .contains("AUTO_SWE_STORE_URL"),
        "{store}"
    );

    // A misspelt configuration key, in text: FAIL with the fix; a model without its key too.
    std::fs::write(
        home.path().join("config.toml"),
        "[models]\nprivateNetworkHost = []\n",
    )
    .unwrap();
    let text = with_env(
        home.path(),
        &["doctor", "--model", "anthropic/claude-sonnet-4-5"],
        &[],
        None,
    );
    assert_eq!(text.code, 1, "{}", text.stdout);
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("FAIL configuration") && l.contains("privateNetworkHost")),
        "{}",
        text.stdout
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("FAIL model keys") && l.contains("ANTHROPIC_API_KEY")),
        "{}",
        text.stdout
    );
    assert!(text.stdout.matches("fix: ").count() >= 2, "{}", text.stdout);
}

#[test]
fn doctor_fails_the_engine_check_when_temporal_does_not_answer() {
    let home = tempfile::tempdir().unwrap();
    // Temporal configured but its frontend not answering: the engine check fails, naming the
    // address, with the fix.
    let unreachable = with_env(
        home.path(),
        &["doctor", "--format", "json"],
        &[
            ("AUTO_SWE_ENGINE", "temporal"),
            ("AUTO_SWE_TEMPORAL_ADDRESS", "127.0.0.1:1"),
        ],
        None,
    );
    assert_eq!(unreachable.code, 1, "{}", unreachable.stdout);
    let report = json(&unreachable);
    let engine = check(&report, "engine");
    assert_eq!(engine["verdict"], "fail", "{engine}");
    assert!(
        engine["detail"].as_str().unwrap().contains("127.0.0.1:1"),
        "{engine}"
    );
    assert!(
        engine["fix"]
            .as_str()
            .unwrap()
            .contains("AUTO_SWE_TEMPORAL_ADDRESS"),
        "{engine}"
    );
}

#[test]
fn config_show_masks_every_secret() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[models]\nprivateNetworkHosts = [\"127.0.0.1:11434\"]\n\
         [models.apiBases]\nopenai-compatible = \"http://u:cfg-secret-1@127.0.0.1:11434/v1?api_key=cfg-secret-2\"\n",
    )
    .unwrap();
    let env = [
        (
            "AUTO_SWE_STORE_URL",
            "postgres://app:env-secret-3@db.internal:5432/auto?sslmode=require&password=env-secret-4",
        ),
        ("ANTHROPIC_API_KEY", "sk-ant-env-secret-5"),
        ("OPENAI_API_KEY", "sk-env-secret-6"),
    ];
    for format in ["text", "json"] {
        let shown = with_env(
            home.path(),
            &["config", "show", "--format", format],
            &env,
            None,
        );
        assert_eq!(shown.code, 0, "{}", shown.stderr);
        for secret in [
            "secret-1", "secret-2", "secret-3", "secret-4", "secret-5", "secret-6",
        ] {
            assert!(
                !shown.stdout.contains(secret) && !shown.stderr.contains(secret),
                "{secret} leaked:\n{}",
                shown.stdout
            );
        }
    }
    let shown = json(&with_env(
        home.path(),
        &["config", "show", "--format", "json"],
        &env,
        None,
    ));
    let find = |key: &str| setting(&shown, key);
    let store = find("store.url");
    assert_eq!(
        store["value"],
        "postgres://app:***@db.internal:5432/auto?sslmode=require&password=***"
    );
    assert_eq!(store["source"], "env AUTO_SWE_STORE_URL");
    assert_eq!(find("models.keys.anthropic")["value"], "set (hidden)");
    assert_eq!(find("models.keys.google")["value"], "unset");
    assert_eq!(
        find("models.privateNetworkHosts")["value"],
        "[127.0.0.1:11434]"
    );
    assert_eq!(find("models.privateNetworkHosts")["source"], "config file");
    assert_eq!(find("sandbox.pids")["source"], "default");
    assert_eq!(find("engine")["value"], "embedded");
    assert_eq!(find("engine")["source"], "default");

    // The engine and the cluster the configuration names, with where each came from.
    std::fs::write(
        home.path().join("config.toml"),
        "engine = \"temporal\"\n[temporal]\naddress = \"127.0.0.1:7233\"\nnamespace = \"team-a\"\n",
    )
    .unwrap();
    let shown = json(&with_env(
        home.path(),
        &["config", "show", "--format", "json"],
        &[],
        None,
    ));
    let find = |key: &str| setting(&shown, key);
    assert_eq!(find("engine")["value"], "temporal");
    assert_eq!(find("engine")["source"], "config file");
    assert_eq!(find("temporal.address")["value"], "127.0.0.1:7233");
    assert_eq!(find("temporal.namespace")["value"], "team-a");
    assert_eq!(find("temporal.namespace")["source"], "config file");
    assert_eq!(find("temporal.taskQueue")["source"], "default");

    // A configuration that cannot be read is one error line, exit 2.
    std::fs::write(home.path().join("config.toml"), "[models\n").unwrap();
    let bad = with_env(home.path(), &["config", "show"], &[], None);
    assert_eq!(bad.code, 2);
    assert_eq!(bad.stderr.trim().lines().count(), 1, "{}", bad.stderr);
    assert!(
        bad.stderr.starts_with("error: invalid configuration"),
        "{}",
        bad.stderr
    );
}

#[test]
fn completions_name_the_subcommands_in_every_shell() {
    let home = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let script = with_env(home.path(), &["completions", shell], &[], None);
        assert_eq!(script.code, 0, "{shell}: {}", script.stderr);
        for name in ["demo", "doctor", "runs", "request-changes", "completions"] {
            assert!(script.stdout.contains(name), "{shell} lacks {name}");
        }
    }
    let unknown = with_env(home.path(), &["completions", "tcsh"], &[], None);
    assert_eq!(unknown.code, 2);
    assert!(unknown.stdout.is_empty());
}
