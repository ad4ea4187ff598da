//! The real, pinned Codex CLI in a real workspace against the mock `OpenAI` Responses server.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use auto_swe_harnesses::{CODEX_LINUX_X64_SHA256, CodexAdapter, CodexConfig, PinnedCli};
use auto_swe_models::testing::{MockReply, MockServer, MockTurn};
use auto_swe_models::{Api, FinishReason, Part, Usage};
use auto_swe_runtime::{PolicyRequirement, Session, Tracer, TurnRuntime};
use tokio_util::sync::CancellationToken;

use crate::support::{CHECKOUT, cli, meter, recorder, workspace};

const DEFAULT_CLI: &str = "/opt/auto-swe/harness-clis/codex-0.171.0/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";
const KEY: &str = "sk-openai-test-harness";

fn call(id: &str, name: &str, arguments: &serde_json::Value, input: u64, output: u64) -> MockTurn {
    MockTurn::Reply(MockReply {
        parts: vec![Part::ToolCall(auto_swe_models::ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_string(),
            thought_signature: None,
            item_id: Some(format!("fc_{id}")),
        })],
        finish: FinishReason::ToolCalls,
        usage: Usage {
            input,
            output,
            ..Usage::default()
        },
        chunk: 16,
    })
}

/// The `function_call_output` for `id` in any request the mock received.
fn call_output(server: &MockServer, id: &str) -> Option<String> {
    server.requests().iter().find_map(|r| {
        r.body["input"].as_array()?.iter().find_map(|item| {
            (item["type"] == "function_call_output" && item["call_id"] == id)
                .then(|| item["output"].to_string())
        })
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

/// The vendor directory (`bin/codex` and its resources) is mounted at `/srv`.
fn mounted(path: &Path) -> (&Path, &'static str) {
    (path.parent().unwrap().parent().unwrap(), "/srv")
}

fn adapter(
    server: &MockServer,
    transcript: Option<auto_swe_harnesses::Transcript>,
) -> Arc<CodexAdapter> {
    let mut config = CodexConfig::new(
        PinnedCli {
            path: "/srv/bin/codex".to_owned(),
            sha256: CODEX_LINUX_X64_SHA256.to_owned(),
        },
        "gpt-5",
    );
    config.base_url = Some(format!("{}/v1", server.base_url()));
    config.api_key = Some(KEY.to_owned());
    config.transcript = transcript;
    Arc::new(CodexAdapter::new(config))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_is_refused_where_policy_is_required_and_metered_where_it_is_not() {
    let Some(path) = cli("AUTO_SWE_CODEX_CLI", DEFAULT_CLI) else {
        return;
    };
    let Some(ws) = workspace(&[mounted(&path)]).await else {
        return;
    };
    ws.write(&format!("{CHECKOUT}/notes.txt"), "hello\n").await;
    let script = vec![
        call(
            "call_read",
            "exec_command",
            &serde_json::json!({ "cmd": "cat notes.txt" }),
            500,
            10,
        ),
        call(
            "call_edit",
            "exec_command",
            &serde_json::json!({ "cmd": "sed -i 's/hello/hello world/' notes.txt" }),
            600,
            11,
        ),
        call(
            "call_test",
            "exec_command",
            &serde_json::json!({ "cmd": "grep -q 'hello world' notes.txt && echo PASS" }),
            700,
            12,
        ),
        call(
            "call_out",
            "exec_command",
            &serde_json::json!({ "cmd": "touch /usr/pwned" }),
            800,
            13,
        ),
        call(
            "call_esc",
            "exec_command",
            &serde_json::json!({
                "cmd": "touch /workspace/escalated.txt",
                "sandbox_permissions": "require_escalated",
                "justification": "needs it"
            }),
            850,
            14,
        ),
        answer("hi there", 900, 12),
    ];
    let server = MockServer::start(Api::OpenaiResponses, Some(KEY), script)
        .await
        .unwrap();
    let required = ws.runtime(
        adapter(&server, None),
        meter(),
        Arc::new(Tracer::in_memory().0),
        "openai/gpt-5",
        Duration::from_secs(120),
        PolicyRequirement::Required,
    );
    assert_eq!(required.unwrap_err().code(), "HARNESS_POLICY_UNENFORCEABLE");
    let meter = meter();
    let runtime = ws
        .runtime(
            adapter(&server, recorder("codex-0.171.0")),
            meter.clone(),
            Arc::new(Tracer::in_memory().0),
            "openai/gpt-5",
            Duration::from_secs(120),
            PolicyRequirement::NotRequired,
        )
        .unwrap();
    let outcome = runtime
        .run_turn(
            &mut Session::new("codex"),
            "say hi",
            &CancellationToken::new(),
        )
        .await;
    let outcome = outcome.unwrap();
    assert_eq!(outcome.text, "hi there");
    // `turn.completed` reports the turn's total: every model call the mock answered.
    assert_eq!((outcome.usage.input, outcome.usage.output), (4350, 72));
    let totals = meter.totals();
    assert_eq!((totals.raw_input, totals.output), (4350, 72));
    assert_eq!(server.requests().len(), 6);

    let output = |id: &str| call_output(&server, id).unwrap();
    assert!(output("call_read").contains("hello"));
    assert!(output("call_test").contains("PASS"));
    assert_eq!(
        ws.sh(&format!("cat {CHECKOUT}/notes.txt")).await,
        "hello world\n"
    );
    // What it cannot ask about, the sandbox stops: the root is read-only …
    assert!(output("call_out").contains("Read-only file system"));
    assert!(ws.absent("/usr/pwned").await);
    // … and an escalation is declined, never granted (approvals are `never`).
    assert!(
        output("call_esc").contains("reject"),
        "{}",
        output("call_esc")
    );
    assert!(ws.absent("/workspace/escalated.txt").await);
}
