//! A turn's step budget holds across everything a harness does: relayed MCP calls spend steps
//! as native tool calls do, and calls decided at once never pass it together.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_models::Usage;
use auto_swe_runtime::{
    CanonicalCall, Decision, HarnessAdapter, HarnessCapabilities, HarnessError, HarnessReport,
    HarnessTurn, NativeCall, PolicyRequirement, Session, StepBudget, Tracer, TurnRuntime,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::{meter, workspace};

/// Spends the budget through relayed calls, then asks for a native call, and in a second turn
/// asks for many native calls at once; keeps every decision.
#[derive(Debug, Default)]
struct Spender {
    relayed: Mutex<Vec<Decision>>,
    native_after: Mutex<Option<Decision>>,
    concurrent: Mutex<Vec<Decision>>,
    turns: Mutex<u32>,
}

fn read() -> NativeCall {
    NativeCall {
        tool: "Read".to_owned(),
        input: json!({ "path": "README.md" }),
    }
}

#[async_trait]
impl HarnessAdapter for Spender {
    fn name(&self) -> &'static str {
        "spender"
    }
    fn capabilities(&self) -> HarnessCapabilities {
        HarnessCapabilities {
            enforces_per_call_policy_in_worker: true,
        }
    }
    async fn run_turn(&self, turn: &HarnessTurn) -> Result<HarnessReport, HarnessError> {
        let first = {
            let mut turns = self.turns.lock().unwrap();
            *turns += 1;
            *turns == 1
        };
        if first {
            for _ in 0..StepBudget::DEFAULT.get() + 3 {
                let decision = turn.admit_relayed("mcp__auto-swe__echo");
                self.relayed.lock().unwrap().push(decision);
            }
            let after = turn.decide(read()).await;
            *self.native_after.lock().unwrap() = Some(after);
        } else {
            let calls = (0..StepBudget::DEFAULT.get() + 20).map(|_| turn.decide(read()));
            let decisions = futures_util::future::join_all(calls).await;
            *self.concurrent.lock().unwrap() = decisions;
        }
        Ok(HarnessReport::default())
    }
    async fn decide(&self, call: &NativeCall) -> Result<CanonicalCall, String> {
        // Every call is a read: a few of them wait, so decisions interleave.
        if call.input["path"] == "README.md" {
            tokio::task::yield_now().await;
        }
        Ok(CanonicalCall::Read {
            path: call.input["path"].as_str().unwrap_or_default().to_owned(),
        })
    }
    fn usage(&self, _: &Value) -> Option<Usage> {
        None
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relayed_calls_spend_the_step_budget_and_concurrent_calls_never_pass_it() {
    let Some(ws) = workspace(&[]).await else {
        return;
    };
    let adapter = Arc::new(Spender::default());
    let runtime = ws
        .runtime(
            adapter.clone(),
            meter(),
            Arc::new(Tracer::in_memory().0),
            "anthropic/claude-sonnet-4-5",
            Duration::from_secs(60),
            PolicyRequirement::Required,
        )
        .unwrap();
    let max = usize::try_from(StepBudget::DEFAULT.get()).unwrap();
    runtime
        .run_turn(&mut Session::new("s"), "go", &CancellationToken::new())
        .await
        .unwrap();
    let relayed = adapter.relayed.lock().unwrap().clone();
    assert!(relayed[..max].iter().all(|d| *d == Decision::Allow));
    for refused in &relayed[max..] {
        assert!(
            matches!(refused, Decision::Deny { reason } if reason.contains("step budget")),
            "{refused:?}"
        );
    }
    assert!(
        matches!(
            &*adapter.native_after.lock().unwrap(),
            Some(Decision::Deny { .. })
        ),
        "a native call passed a budget the relayed calls had spent"
    );

    // A fresh turn, a fresh budget: of many calls decided at once, exactly the budget passes.
    runtime
        .run_turn(&mut Session::new("s"), "again", &CancellationToken::new())
        .await
        .unwrap();
    let concurrent = adapter.concurrent.lock().unwrap().clone();
    let allowed = concurrent.iter().filter(|d| **d == Decision::Allow).count();
    assert_eq!(allowed, max, "{concurrent:?}");
}
