//! The real, pinned Claude Code CLI in a real workspace against the mock Anthropic server: a
//! scripted session of reads, an edit, a test run, a refused write of a sensitive path and a
//! refused shell command, every call decided in the worker.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use auto_swe_harnesses::{
    CLAUDE_CODE_LINUX_X64_SHA256, CLAUDE_CODE_RUNTIME, ClaudeCodeAdapter, ClaudeCodeConfig,
    PinnedCli,
};
use auto_swe_models::testing::{MockReply, MockServer, MockTurn};
use auto_swe_models::{Api, FinishReason, Part, ToolCall, Usage};
use auto_swe_runtime::{PolicyRequirement, Session, TraceKind, Tracer, TurnRuntime};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::{CHECKOUT, cli, meter, recorder, workspace};

const DEFAULT_CLI: &str = "/opt/auto-swe/harness-clis/claude-code-2.1.332/node_modules/@anthropic-ai/claude-code/bin/claude.exe";
const KEY: &str = "sk-ant-test-harness";

fn call(id: &str, name: &str, input: &Value, input_tokens: u64, output: u64) -> MockTurn {
    MockTurn::Reply(MockReply {
        parts: vec![Part::ToolCall(ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: input.to_string(),
            thought_signature: None,
            item_id: None,
        })],
        finish: FinishReason::ToolCalls,
        usage: Usage {
            input: input_tokens,
            output,
            ..Usage::default()
        },
        chunk: 16,
    })
}

fn answer(text: &str, input: u64, output: u64) -> MockTurn {
    MockTurn::Reply(MockReply {
        parts: vec![Part::text(text)],
        finish: FinishReason::Stop,
        usage: Usage {
            input,
            output,
            ..Usage::default()
        },
        chunk: 16,
    })
}

/// The `tool_result` block for `id` in any request the mock received.
fn tool_result(server: &MockServer, id: &str) -> Option<Value> {
    server.requests().iter().find_map(|r| {
        r.body["messages"].as_array()?.iter().find_map(|m| {
            m["content"].as_array()?.iter().find_map(|c| {
                (c["type"] == "tool_result" && c["tool_use_id"] == id).then(|| c.clone())
            })
        })
    })
}

fn result_text(block: &Value) -> String {
    match &block["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Where the CLI's directory is mounted in the workspace.
fn inside(path: &Path) -> String {
    format!("/opt/{}", path.file_name().unwrap().to_string_lossy())
}

fn adapter(
    path: &Path,
    server: &MockServer,
    transcript: Option<auto_swe_harnesses::Transcript>,
) -> Arc<ClaudeCodeAdapter> {
    let mut config = ClaudeCodeConfig::new(
        PinnedCli {
            path: inside(path),
            sha256: CLAUDE_CODE_LINUX_X64_SHA256.to_owned(),
        },
        "claude-sonnet-4-5",
    );
    config.base_url = Some(server.base_url());
    config.api_key = Some(KEY.to_owned());
    config.max_retries = 0;
    config.max_turns = 20;
    config.transcript = transcript;
    Arc::new(ClaudeCodeAdapter::new(config))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::too_many_lines,
    reason = "one scripted session, asserted end to end"
)]
async fn a_scripted_session_is_decided_call_by_call_and_metered_exactly() {
    let Some(path) = cli("AUTO_SWE_CLAUDE_CLI", DEFAULT_CLI) else {
        return;
    };
    let Some(ws) = workspace(&[(path.parent().unwrap(), "/opt")]).await else {
        return;
    };
    ws.write(&format!("{CHECKOUT}/notes.txt"), "hello\n").await;
    ws.write(
        &format!("{CHECKOUT}/check.sh"),
        "grep -q 'hello world' notes.txt && echo PASS || echo FAIL\n",
    )
    .await;
    let notes = format!("{CHECKOUT}/notes.txt");
    let script = vec![
        call(
            "toolu_read",
            "Read",
            &json!({ "file_path": notes }),
            1000,
            40,
        ),
        call(
            "toolu_edit",
            "Edit",
            &json!({ "file_path": notes, "old_string": "hello", "new_string": "hello world" }),
            1100,
            50,
        ),
        call(
            "toolu_test",
            "Bash",
            &json!({ "command": "sh check.sh", "description": "run the check" }),
            1200,
            30,
        ),
        call(
            "toolu_env",
            "Write",
            &json!({ "file_path": format!("{CHECKOUT}/.env"), "content": "TOKEN=x\n" }),
            1300,
            20,
        ),
        call(
            "toolu_pwn",
            "Bash",
            &json!({
                "command": "echo dG91Y2ggL3dvcmtzcGFjZS90YXJnZXQtcmVwby9wd25lZA== | base64 -d | sh",
                "description": "setup"
            }),
            1400,
            20,
        ),
        answer("done", 1500, 10),
    ];
    let server = MockServer::start(Api::AnthropicMessages, Some(KEY), script)
        .await
        .unwrap();
    let adapter = adapter(&path, &server, recorder("claude-code-2.1.332"));
    let (tracer, _) = Tracer::in_memory();
    let tracer = Arc::new(tracer);
    let meter = meter();
    let runtime = ws
        .runtime(
            adapter.clone(),
            meter.clone(),
            tracer.clone(),
            "anthropic/claude-sonnet-4-5",
            Duration::from_secs(180),
            PolicyRequirement::Required,
        )
        .unwrap();
    let mut session = Session::new("claude");
    let outcome = runtime
        .run_turn(&mut session, "fix the notes", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.text, "done");
    assert_eq!(outcome.model_calls, 6, "one debit per model call");
    assert_eq!((outcome.usage.input, outcome.usage.output), (7500, 170));
    let totals = meter.totals();
    assert_eq!(
        (totals.raw_input, totals.output),
        (7500, 170),
        "the meter holds what the mock reported, once"
    );

    // The allowed calls ran.
    assert!(result_text(&tool_result(&server, "toolu_read").unwrap()).contains("hello"));
    assert_eq!(ws.sh(&format!("cat {notes}")).await, "hello world\n");
    assert!(result_text(&tool_result(&server, "toolu_test").unwrap()).contains("PASS"));

    // The refused ones produced no result but our refusal, and changed nothing.
    let env = tool_result(&server, "toolu_env").unwrap();
    assert_eq!(env["is_error"], true);
    assert!(result_text(&env).contains("sensitive file"), "{env}");
    let pwn = tool_result(&server, "toolu_pwn").unwrap();
    assert_eq!(pwn["is_error"], true);
    assert!(
        result_text(&pwn).contains(auto_swe_runtime::security_tags::SHELL_BLOCK),
        "{pwn}"
    );
    assert_eq!(
        ws.sh(&format!("ls -A {CHECKOUT}")).await,
        "check.sh\nnotes.txt\n",
        "no .env, no pwned"
    );

    // Every call was decided in the worker, and the trace names the runtime that drove it.
    let decisions: Vec<_> = tracer
        .pending()
        .into_iter()
        .filter(|r| r.kind == TraceKind::ToolCall)
        .collect();
    assert_eq!(decisions.len(), 5);
    assert!(
        decisions
            .iter()
            .all(|r| { r.input_json.as_ref().unwrap()["runtime"] == CLAUDE_CODE_RUNTIME })
    );
    assert_eq!(decisions.iter().filter(|r| r.error.is_some()).count(), 2);
    // The key reached the provider, never a command line.
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.headers.get("x-api-key").map(String::as_str) == Some(KEY))
    );

    // The next turn resumes the CLI's session: the provider sees the earlier exchange.
    let before = server.requests().len();
    server.set_script(vec![answer("again", 2000, 5)]);
    let outcome = runtime
        .run_turn(&mut session, "anything else?", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.text, "again");
    let resumed = &server.requests()[before];
    let history = resumed.body["messages"].to_string();
    assert!(history.contains("toolu_edit"), "{history}");
    assert!(adapter.cli_session(&session.id).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binary_that_is_not_the_pinned_build_is_harness_unavailable() {
    let Some(path) = cli("AUTO_SWE_CLAUDE_CLI", DEFAULT_CLI) else {
        return;
    };
    let Some(ws) = workspace(&[(path.parent().unwrap(), "/opt")]).await else {
        return;
    };
    let server = MockServer::start(Api::AnthropicMessages, Some(KEY), vec![answer("x", 1, 1)])
        .await
        .unwrap();
    for pin in [
        PinnedCli {
            path: inside(&path),
            sha256: "0".repeat(64),
        },
        PinnedCli {
            path: "/opt/missing/claude".to_owned(),
            sha256: CLAUDE_CODE_LINUX_X64_SHA256.to_owned(),
        },
    ] {
        let mut config = ClaudeCodeConfig::new(pin, "claude-sonnet-4-5");
        config.base_url = Some(server.base_url());
        let runtime = ws
            .runtime(
                Arc::new(ClaudeCodeAdapter::new(config)),
                meter(),
                Arc::new(Tracer::in_memory().0),
                "anthropic/claude-sonnet-4-5",
                Duration::from_secs(60),
                PolicyRequirement::Required,
            )
            .unwrap();
        let err = runtime
            .run_turn(&mut Session::new("s"), "hi", &CancellationToken::new())
            .await
            .unwrap_err();
        assert_eq!(err.code(), "HARNESS_UNAVAILABLE", "{err}");
    }
    assert!(server.requests().is_empty(), "no turn started");
}

/// The step's MCP binding (the reference server's `echo`), or `None` when the server is not
/// running and `AUTO_SWE_REQUIRE_MCP` is unset.
async fn echo_binding() -> Option<Arc<auto_swe_runtime::mcp::McpBinding>> {
    use auto_swe_runtime::mcp::{McpContext, McpTarget, bind_mcp};
    let Ok(url) = std::env::var("AUTO_SWE_MCP_EVERYTHING_URL") else {
        assert!(
            std::env::var("AUTO_SWE_REQUIRE_MCP").as_deref() != Ok("1"),
            "AUTO_SWE_MCP_EVERYTHING_URL is required"
        );
        eprintln!("skipped: AUTO_SWE_MCP_EVERYTHING_URL is not set");
        return None;
    };
    let origin = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let mut policy = auto_swe_scanners::UrlPolicy::new();
    policy.allow_private_origin(&origin).unwrap();
    let tracer = Arc::new(Tracer::in_memory().0);
    let context = McpContext {
        policy,
        builtins: std::collections::BTreeSet::new(),
        patterns: auto_swe_agents::StaticPatterns::builtin().0,
        tracer: tracer.clone(),
        audit: Arc::new(auto_swe_runtime::MemoryAudit::default()),
    };
    let mut target = McpTarget::new("everything", &url);
    target.allowed_tools = Some(vec!["echo".to_owned()]);
    let binding = bind_mcp(&target, context).await;
    assert!(binding.is_some(), "bind failed: {:?}", tracer.pending());
    binding.map(Arc::new)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_mcp_tools_are_relayed_over_the_control_pipe() {
    let Some(path) = cli("AUTO_SWE_CLAUDE_CLI", DEFAULT_CLI) else {
        return;
    };
    let Some(binding) = echo_binding().await else {
        return;
    };
    let Some(ws) = workspace(&[(path.parent().unwrap(), "/opt")]).await else {
        return;
    };
    let script = vec![
        call(
            "toolu_echo",
            "mcp__auto-swe__mcp_echo",
            &json!({ "message": "relayed through the worker" }),
            100,
            5,
        ),
        call(
            "toolu_unbound",
            "mcp__auto-swe__mcp_get-env",
            &json!({}),
            110,
            5,
        ),
        answer("relayed", 120, 5),
    ];
    let server = MockServer::start(Api::AnthropicMessages, Some(KEY), script)
        .await
        .unwrap();
    let mut config = ClaudeCodeConfig::new(
        PinnedCli {
            path: inside(&path),
            sha256: CLAUDE_CODE_LINUX_X64_SHA256.to_owned(),
        },
        "claude-sonnet-4-5",
    );
    config.base_url = Some(server.base_url());
    config.api_key = Some(KEY.to_owned());
    config.max_retries = 0;
    config.mcp = Some(binding);
    let runtime = ws
        .runtime(
            Arc::new(ClaudeCodeAdapter::new(config)),
            meter(),
            Arc::new(Tracer::in_memory().0),
            "anthropic/claude-sonnet-4-5",
            Duration::from_secs(180),
            PolicyRequirement::Required,
        )
        .unwrap();
    let outcome = runtime
        .run_turn(
            &mut Session::new("mcp"),
            "echo it",
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.text, "relayed");
    let tools = server.requests()[0].body["tools"].to_string();
    assert!(tools.contains("mcp__auto-swe__mcp_echo"), "{tools}");
    let echoed = tool_result(&server, "toolu_echo").unwrap();
    assert!(
        result_text(&echoed).contains("relayed through the worker"),
        "{echoed}"
    );
    assert_ne!(echoed["is_error"], true);
    let unbound = tool_result(&server, "toolu_unbound").unwrap();
    assert_eq!(unbound["is_error"], true, "{unbound}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_key_is_harness_auth_failure() {
    let Some(path) = cli("AUTO_SWE_CLAUDE_CLI", DEFAULT_CLI) else {
        return;
    };
    let Some(ws) = workspace(&[(path.parent().unwrap(), "/opt")]).await else {
        return;
    };
    let server = MockServer::start(Api::AnthropicMessages, Some(KEY), vec![answer("x", 1, 1)])
        .await
        .unwrap();
    let mut config = ClaudeCodeConfig::new(
        PinnedCli {
            path: inside(&path),
            sha256: CLAUDE_CODE_LINUX_X64_SHA256.to_owned(),
        },
        "claude-sonnet-4-5",
    );
    config.base_url = Some(server.base_url());
    config.api_key = Some("sk-ant-wrong".to_owned());
    config.max_retries = 0;
    let runtime = ws
        .runtime(
            Arc::new(ClaudeCodeAdapter::new(config)),
            meter(),
            Arc::new(Tracer::in_memory().0),
            "anthropic/claude-sonnet-4-5",
            Duration::from_secs(120),
            PolicyRequirement::Required,
        )
        .unwrap();
    let err = runtime
        .run_turn(&mut Session::new("s"), "hi", &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "HARNESS_AUTH_FAILURE", "{err}");
    assert!(!err.is_retryable());
    assert!(
        !server.requests().is_empty(),
        "the CLI did call the provider"
    );
}
