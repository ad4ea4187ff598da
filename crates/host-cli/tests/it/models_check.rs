//! `auto-swe models check` through the real binary against each provider's loopback mock.

use std::process::Output;

use auto_swe_models::Api;
use auto_swe_models::testing::{MockError, MockReply, MockServer, MockTurn};
use serde_json::Value;

const KEY: &str = "sk-cli-test-0123456789abcdefghijKLMNOP";
const VARIABLES: [&str; 4] = [
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "OPENAI_COMPATIBLE_API_KEY",
];

/// Runs the binary off the async runtime (the mock serves on it meanwhile). Keys are given to
/// the child only; the test process's environment is never changed.
async fn run(args: Vec<String>, key_variable: Option<&'static str>) -> (i32, Value, String) {
    run_with_config(args, key_variable, None).await
}

/// Like [`run`], with `config` as the child's `config.toml` (in an auto-swe home of its own, so
/// the developer's own configuration never leaks into a test).
async fn run_with_config(
    args: Vec<String>,
    key_variable: Option<&'static str>,
    config: Option<String>,
) -> (i32, Value, String) {
    let home = tempfile::tempdir().unwrap();
    if let Some(text) = config {
        std::fs::write(home.path().join("config.toml"), text).unwrap();
    }
    let home_path = home.path().to_path_buf();
    let output: Output = tokio::task::spawn_blocking(move || {
        #[expect(clippy::disallowed_methods, reason = "the test runs the real binary")]
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_auto-swe"));
        command.env_remove("AUTO_SWE_CONFIG");
        command.env("AUTO_SWE_HOME", &home_path);
        for variable in VARIABLES {
            command.env_remove(variable);
        }
        if let Some(variable) = key_variable {
            command.env(variable, KEY);
        }
        command.args(&args).output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        !stdout.contains(KEY) && !stderr.contains(KEY),
        "the key was printed"
    );
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (output.status.code().unwrap_or(-1), json, stderr)
}

fn check_args(model: &str, server: &MockServer, base: &str, allow: bool) -> Vec<String> {
    let mut args = vec![
        "models".to_owned(),
        "check".to_owned(),
        model.to_owned(),
        "--api-base".to_owned(),
        format!("{}{base}", server.base_url()),
        "--format".to_owned(),
        "json".to_owned(),
        "--prompt".to_owned(),
        "ping".to_owned(),
    ];
    if allow {
        args.push("--allow-private-host".into());
        args.push(server.origin());
    }
    args
}

fn providers() -> Vec<(Api, &'static str, &'static str, &'static str)> {
    vec![
        (
            Api::AnthropicMessages,
            "anthropic/claude-haiku-4-5-20251001",
            "",
            "ANTHROPIC_API_KEY",
        ),
        (
            Api::OpenaiChat,
            "openai/gpt-4o-mini",
            "/v1",
            "OPENAI_API_KEY",
        ),
        (
            Api::GoogleGemini,
            "google/gemini-2.5-flash",
            "",
            "GEMINI_API_KEY",
        ),
        (
            Api::OpenaiChat,
            "openai-compatible/qwen3-coder",
            "/v1",
            "OPENAI_COMPATIBLE_API_KEY",
        ),
    ]
}

fn reply() -> MockReply {
    let mut reply = MockReply::text("ready");
    reply.usage = auto_swe_models::Usage {
        input: 1_000,
        output: 10,
        cache_read: 600,
        ..auto_swe_models::Usage::default()
    };
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_provider_answers_through_the_binary() {
    for (api, model, base, variable) in providers() {
        let server = MockServer::start(api, Some(KEY), vec![MockTurn::Reply(reply())])
            .await
            .unwrap();
        let (code, json, stderr) =
            run(check_args(model, &server, base, true), Some(variable)).await;
        assert_eq!(code, 0, "{model}: {json} {stderr}");
        insta::assert_json_snapshot!(format!("check_{}", model.replace(['/', '.'], "_")), json, {".latencyMs" => "[latency]"});
        let request = &server.requests()[0];
        assert!(
            request.body.to_string().contains("ping"),
            "{model}: the prompt was sent"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_key_is_an_auth_failure() {
    for (api, model, base, variable) in providers() {
        let server =
            MockServer::start(api, Some("a-different-key"), vec![MockTurn::Reply(reply())])
                .await
                .unwrap();
        let (code, json, _) = run(check_args(model, &server, base, true), Some(variable)).await;
        assert_eq!(code, 1, "{model}");
        assert_eq!(
            json["error"]["code"], "MODEL_AUTH_FAILED",
            "{model}: {json}"
        );
        assert_eq!(json["error"]["retryable"], false);
        assert_eq!(
            server.requests().len(),
            1,
            "{model}: an auth failure is not retried"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_then_success() {
    for (api, model, base, variable) in providers() {
        let server = MockServer::start(
            api,
            Some(KEY),
            vec![
                MockTurn::Error(MockError::RateLimited(Some(0))),
                MockTurn::Reply(reply()),
            ],
        )
        .await
        .unwrap();
        let (code, json, stderr) =
            run(check_args(model, &server, base, true), Some(variable)).await;
        assert_eq!(code, 0, "{model}: {json} {stderr}");
        assert_eq!(json["text"], "ready");
        assert_eq!(server.requests().len(), 2, "{model}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_is_refused_without_allow_private_host() {
    for (api, model, base, variable) in providers() {
        let server = MockServer::start(api, Some(KEY), vec![MockTurn::Reply(reply())])
            .await
            .unwrap();
        let (code, json, _) = run(check_args(model, &server, base, false), Some(variable)).await;
        assert_eq!(code, 1, "{model}");
        assert_eq!(
            json["error"]["code"], "MODEL_REFUSED_BY_POLICY",
            "{model}: {json}"
        );
        assert!(
            server.requests().is_empty(),
            "{model}: nothing may reach a refused endpoint"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_network_hosts_in_the_configuration_allow_exactly_that_origin() {
    for (api, model, base, variable) in providers() {
        let server = MockServer::start(api, Some(KEY), vec![MockTurn::Reply(reply())])
            .await
            .unwrap();
        let allowed = format!(
            "[models]\nprivateNetworkHosts = [\"{}\"]\n",
            server.origin()
        );
        let (code, json, stderr) = run_with_config(
            check_args(model, &server, base, false),
            Some(variable),
            Some(allowed),
        )
        .await;
        assert_eq!(code, 0, "{model}: {json} {stderr}");
        assert_eq!(json["text"], "ready", "{model}");
        assert_eq!(server.requests().len(), 1, "{model}");

        // Another port on the same loopback host is still refused.
        let (host, port) = server
            .origin()
            .rsplit_once(':')
            .map(|(h, p)| (h.to_owned(), p.parse::<u16>().unwrap()))
            .unwrap();
        let other = format!(
            "[models]\nprivateNetworkHosts = [\"{host}:{}\"]\n",
            port.wrapping_add(1).max(1)
        );
        let (code, json, _) = run_with_config(
            check_args(model, &server, base, false),
            Some(variable),
            Some(other),
        )
        .await;
        assert_eq!(code, 1, "{model}");
        assert_eq!(
            json["error"]["code"], "MODEL_REFUSED_BY_POLICY",
            "{model}: {json}"
        );
        assert_eq!(
            server.requests().len(),
            1,
            "{model}: nothing more reached the mock"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_configuration_file_is_a_clear_error_and_sends_nothing() {
    let server = MockServer::start(
        Api::AnthropicMessages,
        Some(KEY),
        vec![MockTurn::Reply(reply())],
    )
    .await
    .unwrap();
    for (text, expect) in [
        (
            "[models]\nprivateNetworkHost = [\"127.0.0.1:1\"]\n",
            "privateNetworkHost",
        ),
        (
            "[models]\nprivateNetworkHosts = \"127.0.0.1:1\"\n",
            "invalid configuration",
        ),
        (
            "[models]\nprivateNetworkHosts = [\"169.254.169.254:80\"]\n",
            "models.privateNetworkHosts",
        ),
    ] {
        let (code, json, _) = run_with_config(
            check_args("anthropic/claude-haiku-4-5", &server, "", false),
            Some("ANTHROPIC_API_KEY"),
            Some(text.to_owned()),
        )
        .await;
        assert_eq!(code, 1, "{text}");
        let message = json["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(expect), "{text}: {json}");
    }
    assert!(server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_come_from_the_environment_only() {
    let server = MockServer::start(
        Api::AnthropicMessages,
        Some(KEY),
        vec![MockTurn::Reply(reply())],
    )
    .await
    .unwrap();
    let (code, json, _) = run(
        check_args("anthropic/claude-haiku-4-5", &server, "", true),
        None,
    )
    .await;
    assert_eq!(code, 1);
    insta::assert_json_snapshot!("check_missing_key", json);
    assert!(server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_output_reads_as_a_sentence() {
    let server = MockServer::start(
        Api::AnthropicMessages,
        Some(KEY),
        vec![MockTurn::Reply(reply())],
    )
    .await
    .unwrap();
    let mut args = check_args("anthropic/claude-haiku-4-5", &server, "", true);
    let at = args.iter().position(|a| a == "json").unwrap();
    args[at] = "text".into();
    let output = tokio::task::spawn_blocking(move || {
        #[expect(clippy::disallowed_methods, reason = "the test runs the real binary")]
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_auto-swe"));
        command
            .env("ANTHROPIC_API_KEY", KEY)
            .env("AUTO_SWE_HOME", "/nonexistent/auto-swe-home")
            .env_remove("AUTO_SWE_CONFIG")
            .args(&args)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stable: String = stdout
        .lines()
        .map(|l| {
            if l.ends_with(" ms)") {
                "anthropic/claude-haiku-4-5 works ([latency] ms)"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!("check_text", stable);
}

#[tokio::test]
async fn a_server_that_accepts_and_never_answers_is_given_up_on_at_the_timeout() {
    // Accepts connections and reads nothing back: the request is sent and no byte comes.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let origin = listener.local_addr().unwrap().to_string();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    let args = vec![
        "models".to_owned(),
        "check".to_owned(),
        "anthropic/claude-haiku-4-5".to_owned(),
        "--api-base".to_owned(),
        format!("http://{origin}"),
        "--allow-private-host".to_owned(),
        origin,
        "--timeout".to_owned(),
        "1".to_owned(),
        "--format".to_owned(),
        "json".to_owned(),
    ];
    let started = std::time::Instant::now();
    let (status, json, _) = run(args, Some("ANTHROPIC_API_KEY")).await;
    // Bounded by the timeout (1 s) plus process start; far below the 300 s it once took.
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(status, 1, "{json}");
    assert_eq!(json["error"]["code"], "MODEL_NETWORK_ERROR");
    let message = json["error"]["message"].as_str().unwrap();
    assert!(message.contains("within 1 s"), "{message}");
    held.abort();
}

#[tokio::test]
async fn prices_prints_the_catalogue_and_a_host_file_replaces_entries() {
    let (status, json, _) = run(
        vec![
            "models".into(),
            "prices".into(),
            "--format".into(),
            "json".into(),
        ],
        None,
    )
    .await;
    assert_eq!(status, 0);
    let rows = json.as_array().unwrap();
    let opus = rows
        .iter()
        .find(|r| r["id"] == "anthropic/claude-opus-5-5")
        .unwrap();
    assert_eq!(opus["price"]["rates"]["input"], 4.0);
    assert_eq!(opus["origin"], "builtin");
    assert!(opus["checked"].as_str().unwrap().starts_with("20"));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prices.toml");
    std::fs::write(
        &path,
        "version = 1\nunit = \"usd-per-million-tokens\"\n[[model]]\nid = \"anthropic/claude-opus-5-5\"\n\
         input = 3.0\noutput = 15.0\ncacheRead = 0.3\ncacheWrite5m = 3.75\ncacheWrite1h = 6.0\n\
         checked = \"2026-12-01\"\n",
    )
    .unwrap();
    let file_args = |format: &str| {
        vec![
            "models".to_owned(),
            "prices".to_owned(),
            "--file".to_owned(),
            path.display().to_string(),
            "--format".to_owned(),
            format.to_owned(),
        ]
    };
    let (status, json, _) = run(file_args("json"), None).await;
    assert_eq!(status, 0);
    let rows: Vec<&Value> = json
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["id"] == "anthropic/claude-opus-5-5")
        .collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["price"]["rates"]["input"], 3.0);
    assert_eq!(rows[0]["origin"], "catalog");

    // A negative price is refused with its code, and nothing is printed as if it were valid.
    std::fs::write(
        &path,
        "version = 1\nunit = \"usd-per-million-tokens\"\n[[model]]\nid = \"openai/gpt-x\"\n\
         input = -3.0\noutput = 15.0\ncacheRead = 0.3\ncacheWrite5m = 3.75\ncacheWrite1h = 6.0\n\
         checked = \"2026-12-01\"\n",
    )
    .unwrap();
    let (status, json, stderr) = run(file_args("json"), None).await;
    assert_ne!(status, 0);
    assert_eq!(json, Value::Null);
    assert!(stderr.contains("PRICE_FILE_RATE"), "{stderr}");
}

#[tokio::test]
async fn the_configured_price_file_replaces_entries_and_a_missing_one_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host-prices.toml");
    std::fs::write(
        &path,
        "version = 1\nunit = \"usd-per-million-tokens\"\n[[model]]\nid = \"anthropic/claude-opus-5-5\"\n\
         input = 2.5\noutput = 15.0\ncacheRead = 0.3\ncacheWrite5m = 3.75\ncacheWrite1h = 6.0\n\
         checked = \"2026-12-01\"\n",
    )
    .unwrap();
    let args = || {
        ["models", "prices", "--format", "json"]
            .map(str::to_owned)
            .to_vec()
    };
    let config = format!("[models]\npricesFile = {:?}\n", path.display().to_string());
    let (status, json, _) = run_with_config(args(), None, Some(config)).await;
    assert_eq!(status, 0);
    let opus = json
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "anthropic/claude-opus-5-5")
        .unwrap();
    assert_eq!(opus["price"]["rates"]["input"], 2.5);
    assert_eq!(opus["origin"], "catalog");

    let missing = dir.path().join("gone.toml");
    let config = format!(
        "[models]\npricesFile = {:?}\n",
        missing.display().to_string()
    );
    let (status, json, stderr) = run_with_config(args(), None, Some(config)).await;
    assert_ne!(status, 0);
    assert_eq!(json, Value::Null);
    assert!(stderr.contains("gone.toml"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_prices_the_call_from_a_host_price_file() {
    let server = MockServer::start(Api::OpenaiChat, Some(KEY), vec![MockTurn::Reply(reply())])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prices.toml");
    // $1/M uncached input, $0.5/M cache reads, $10/M output: 400 + 300 + 100 millionths.
    std::fs::write(
        &path,
        "version = 1\nunit = \"usd-per-million-tokens\"\n[[model]]\nid = \"openai-compatible/qwen3-coder\"\n\
         input = 1.0\noutput = 10.0\ncacheRead = 0.5\ncacheWrite5m = 1.0\ncacheWrite1h = 1.0\n\
         checked = \"2026-12-01\"\n",
    )
    .unwrap();
    let mut args = check_args("openai-compatible/qwen3-coder", &server, "/v1", true);
    args.extend(["--prices".to_owned(), path.display().to_string()]);
    let (code, json, stderr) = run(args, Some("OPENAI_COMPATIBLE_API_KEY")).await;
    assert_eq!(code, 0, "{json} {stderr}");
    let cost = json["costUsd"].as_f64().unwrap();
    assert!((cost - 0.0008).abs() < 1e-12, "{cost}");

    // A bad file is refused before anything is sent.
    std::fs::write(&path, "version = 1\nunit = \"usd\"\n").unwrap();
    let before = server.requests().len();
    let mut args = check_args("openai-compatible/qwen3-coder", &server, "/v1", true);
    args.extend(["--prices".to_owned(), path.display().to_string()]);
    let (code, json, _) = run(args, Some("OPENAI_COMPATIBLE_API_KEY")).await;
    assert_eq!(code, 1);
    assert_eq!(json["error"]["code"], "MODEL_CONFIGURATION");
    assert!(
        json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("PRICE_FILE_UNIT")
    );
    assert_eq!(server.requests().len(), before);
}
