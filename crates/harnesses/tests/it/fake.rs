//! The Claude Code adapter against a fake CLI (`fake/claude.sh`) in a real workspace: every
//! failure mode ends in a refusal or a typed error, the turn's processes end with it, and
//! nothing outside the checkout changes.

use std::sync::Arc;
use std::time::Duration;

use auto_swe_harnesses::{ClaudeCodeAdapter, ClaudeCodeConfig, PinnedCli};
use auto_swe_runtime::{
    HarnessRuntime, PolicyRequirement, Session, TraceKind, Tracer, TurnError, TurnRuntime,
};
use tokio_util::sync::CancellationToken;

use crate::support::{Ws, meter, workspace};

const FAKE: &str = include_str!("fake/claude.sh");
const FAKE_PATH: &str = "/workspace/.fake/claude";

struct Fake {
    ws: Ws,
    runtime: HarnessRuntime,
    adapter: Arc<ClaudeCodeAdapter>,
    tracer: Arc<Tracer>,
}

async fn fake(scenario: &str, deadline: Duration) -> Option<Fake> {
    let ws = workspace(&[]).await?;
    ws.write(FAKE_PATH, FAKE).await;
    ws.write("/workspace/.fake/scenario", scenario).await;
    ws.write("/workspace/target-repo/notes.txt", "hello\n")
        .await;
    ws.sh(&format!("chmod 755 {FAKE_PATH}")).await;
    let sha256 = {
        use sha2::Digest as _;
        hex::encode(sha2::Sha256::digest(FAKE.as_bytes()))
    };
    let config = ClaudeCodeConfig::new(
        PinnedCli {
            path: FAKE_PATH.to_owned(),
            sha256,
        },
        "claude-sonnet-4-5",
    );
    let adapter = Arc::new(ClaudeCodeAdapter::new(config));
    let tracer = Arc::new(Tracer::in_memory().0);
    let runtime = ws
        .runtime(
            adapter.clone(),
            meter(),
            tracer.clone(),
            "anthropic/claude-sonnet-4-5",
            deadline,
            PolicyRequirement::Required,
        )
        .unwrap();
    Some(Fake {
        ws,
        runtime,
        adapter,
        tracer,
    })
}

impl Fake {
    async fn turn(&self) -> Result<auto_swe_runtime::TurnOutcome, TurnError> {
        self.runtime
            .run_turn(&mut Session::new("s"), "go", &CancellationToken::new())
            .await
    }

    /// Whether the fake's heartbeat has stopped: none of its processes is left.
    async fn stopped(&self) -> bool {
        let before = self.ws.sh("cat /workspace/.fake/beat").await;
        tokio::time::sleep(Duration::from_millis(1200)).await;
        before == self.ws.sh("cat /workspace/.fake/beat").await
    }

    async fn answers(&self) -> Vec<serde_json::Value> {
        self.ws
            .sh("cat /workspace/.fake/answers 2>/dev/null || true")
            .await
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

async fn failed_with(scenario: &str, needle: &str) {
    let Some(f) = fake(scenario, Duration::from_secs(60)).await else {
        return;
    };
    let err = f.turn().await.unwrap_err();
    assert_eq!(err.code(), "HARNESS_TURN_FAILED", "{err}");
    assert!(err.to_string().contains(needle), "{err}");
    assert!(f.stopped().await, "the turn's processes outlived it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_line_ends_the_turn_and_its_processes() {
    failed_with("malformed", "not a JSON object").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_event_type_ends_the_turn_and_its_processes() {
    failed_with("unknown-event", "unknown type \"telepathy\"").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cli_that_exits_mid_turn_is_a_typed_error_with_what_it_spent() {
    let Some(f) = fake("exit", Duration::from_secs(60)).await else {
        return;
    };
    let err = f.turn().await.unwrap_err();
    assert!(
        err.to_string().contains("exited mid-turn (status 3)"),
        "{err}"
    );
    assert_eq!(err.spent().input, 5, "the call it reported is debited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_cli_is_killed_at_the_turn_deadline() {
    let Some(f) = fake("hang", Duration::from_secs(4)).await else {
        return;
    };
    let err = f.turn().await.unwrap_err();
    assert!(err.to_string().contains("deadline"), "{err}");
    assert!(f.stopped().await, "the hung CLI outlived its turn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_control_subtype_is_refused_and_the_turn_goes_on() {
    let Some(f) = fake("unknown-subtype", Duration::from_secs(60)).await else {
        return;
    };
    assert_eq!(f.turn().await.unwrap().text, "done");
    let answers = f.answers().await;
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["response"]["subtype"], "error");
    assert_eq!(answers[0]["response"]["request_id"], "r1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_outside_the_checkout_unmapped_or_malformed_are_refused_and_change_nothing() {
    let Some(f) = fake("outside", Duration::from_secs(60)).await else {
        return;
    };
    assert_eq!(f.turn().await.unwrap().text, "done");
    let answers = f.answers().await;
    let verdicts: Vec<String> = answers
        .iter()
        .map(|a| {
            let r = &a["response"];
            if r["subtype"] == "error" {
                return "error".to_owned();
            }
            let inner = &r["response"];
            inner["behavior"]
                .as_str()
                .or(inner["hookSpecificOutput"]["permissionDecision"].as_str())
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(verdicts, ["deny", "deny", "deny", "error", "allow"]);
    assert_eq!(
        f.ws.sh("ls -A /workspace; ls -A /workspace/target-repo")
            .await,
        ".auto-swe\n.fake\ntarget-repo\nnotes.txt\nok.txt\n",
        "only the allowed write happened"
    );
    let refused = f
        .tracer
        .pending()
        .into_iter()
        .filter(|r| r.kind == TraceKind::ToolCall && r.error.is_some())
        .count();
    assert_eq!(refused, 3, "every decided refusal is traced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_after_cancellation_is_never_answered_or_run() {
    let Some(f) = fake("late", Duration::from_secs(60)).await else {
        return;
    };
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(800)).await;
        stop.cancel();
    });
    let err = f
        .runtime
        .run_turn(&mut Session::new("s"), "go", &cancel)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "TURN_CANCELLED", "{err}");
    // The fake would ask at 2 s: past it, nothing was asked, answered or written.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(f.stopped().await);
    assert!(f.answers().await.is_empty());
    assert_eq!(f.ws.sh("ls -A /workspace/target-repo").await, "notes.txt\n");
}

/// Per-call decision latency: from the control request's line being read to the answer being
/// queued, for reads (whose policy runs no content scanner). Printed for the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_call_decision_latency_stays_small() {
    let Some(f) = fake("many", Duration::from_secs(120)).await else {
        return;
    };
    assert_eq!(f.turn().await.unwrap().text, "done");
    let mut latencies = f.adapter.take_decision_latencies();
    assert_eq!(latencies.len(), 300);
    latencies.sort();
    let at = |percent: usize| latencies[(latencies.len() * percent / 100).min(latencies.len() - 1)];
    let (p50, p99, max) = (at(50), at(99), latencies[latencies.len() - 1]);
    eprintln!("decision latency over 300 reads: p50 {p50:?}, p99 {p99:?}, max {max:?}");
    assert!(p99 < Duration::from_millis(25), "p99 {p99:?}");
}
